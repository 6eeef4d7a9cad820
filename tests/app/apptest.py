"""Run one page of the real app (through app.py's navigation) under AppTest."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")

# The first run imports torch (seconds on a 2-core machine); keep a wide margin.
TIMEOUT_S = 180


def open_page(script: str, lang: str = "en", **session: object) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = lang
    for key, value in session.items():
        at.session_state[key] = value
    at.run()
    if script != "views/home.py":
        at.switch_page(script).run()
    return at


def rendered_text(at: AppTest) -> str:
    """Every markdown/caption/title/header string the page rendered, joined."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning"):
        parts.extend(str(element.value) for element in getattr(at, kind))
    return "\n".join(parts)
