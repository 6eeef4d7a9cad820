"""Streamlit Community Cloud's entry file: the app of the repository root, unchanged.

Community Cloud installs the dependency file beside the entry file first (this folder's
``requirements.txt``: the CPU wheels of the pinned torch and torchvision, every other pin as
the root's), then runs ``streamlit run deploy/cloud/streamlit_app.py`` from the repository root,
so the root's ``.streamlit/config.toml`` applies. Nothing here is to be edited for a deployment.

How this file serves ``app.py`` without copying it:

- ``streamlit run`` (1.67) looks for an ``st.App`` assigned in the entry file itself (it reads
  the file's source, ``streamlit.web.server.app_discovery``), then has uvicorn import this file
  as the module ``streamlit_app`` (its folder is put on ``sys.path``). That import builds the
  same ``st.App`` as app.py's server part, with app.py as its script: each visitor's script run
  executes the root's ``app.py`` as ``__main__``, so page paths (``st.Page("views/home.py")``,
  ``st.page_link``, ``st.switch_page``) resolve from the repository root as they do under
  ``streamlit run app.py``, and the lifespan warms the server before its first visitor.
  ``tests/unit/test_cloud_deploy.py`` checks that both server parts stay the same.
- Run as a script instead (AppTest, or a runner that does not look for an ``st.App``), this
  file runs app.py's page part itself. Streamlit then resolves page paths from this folder, so
  ``views`` here is a link to the root's ``views/``: every path resolves (Streamlit follows
  the link) to the same page files app.py registers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parents[2]
APP_SCRIPT = ROOT / "app.py"
if sys.path[:1] != [str(ROOT)]:
    # Before this folder, which holds only a link to views/: the root's packages win.
    sys.path.insert(0, str(ROOT))

# The root is on sys.path now.
from components.upkeep import cache_theme_messages, keep_tcp_peers  # noqa: E402
from components.warm import limit_malloc_arenas, server_lifespan  # noqa: E402

if __name__ != "__main__":  # imported by the server at start-up: app.py's server part
    limit_malloc_arenas()  # before the visitors' script threads exist
    keep_tcp_peers()  # every limit counts the real peer; only ATLAS_TRUSTED_PROXIES are believed
    cache_theme_messages()  # each run's theme message built once, not per run
    app = st.App(APP_SCRIPT, lifespan=server_lifespan)
else:  # a script run of this very file: app.py's page part
    source = APP_SCRIPT.read_text(encoding="utf-8")
    code = compile(source, str(APP_SCRIPT), "exec", dont_inherit=True)
    exec(code, {"__name__": "__main__", "__file__": str(APP_SCRIPT), "__builtins__": __builtins__})
