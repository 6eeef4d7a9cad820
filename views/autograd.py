"""Autograd: write a small program, see the graph autograd records, step backward through it.

The page's order only; everything else is in ``components.autograd``: ``panels`` (widgets
and output), ``state`` (session keys, the link, cached engine calls and pictures), ``draw``
(DOT, tables, chart), over the engine in ``torchatlas.autograd``.
"""

from __future__ import annotations

import streamlit as st

from components.autograd import panels
from components.i18n import t

st.title(t("app.rooms.autograd.title"))
panels.intro()
room = panels.program()
panels.predict(room)
panels.graph(room)
panels.lessons(room)
