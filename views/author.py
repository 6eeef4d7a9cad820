"""Write a lesson: a teacher's own lesson from the rooms, with questions torch answers from a
fact, from the teacher's code, or by grading students' code (``components.author``)."""

from __future__ import annotations

import streamlit as st

from components.author import panels
from components.i18n import t

st.title(t("author.title"))
panels.page()
