"""Lessons: each curriculum note as a guided path through the rooms.

The page's order only: the list of lessons (and, from a link, a lesson's end summary). The
banner that walks a student through a lesson's steps sits above the rooms (app.py draws it);
everything is in ``components.lessons`` over ``torchatlas.lessons``.
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.lessons import panels

st.title(t("lessons.title"))
panels.page()
