"""Class mode: a teacher leads a room full of phones through a lesson (or "follow me").

The page's order only: the title, then the Class page (start or join; the teacher's
projector view; the student's view). The class bar above every page (following, the open
question) is drawn by app.py; everything is in ``components.classmode``.
"""

from __future__ import annotations

import streamlit as st

from components.classmode import panels
from components.i18n import t

st.title(t("classmode.title"))
panels.page()
