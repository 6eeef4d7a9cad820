"""Tensor basics: dtypes and promotion, broadcasting, einsum, indexing, saving — each answer
computed by the running torch.

The page's order only; everything else is in ``components.basics``: ``state`` (session keys,
URL, cached engine calls), ``panels`` (widgets and output), ``draw`` (pictures and tables),
over the engine in ``torchatlas.basics``.
"""

from __future__ import annotations

import streamlit as st

from components.basics import panels
from components.i18n import t

st.title(t("app.rooms.basics.title"))
section = panels.setup()
panels.show(section)
