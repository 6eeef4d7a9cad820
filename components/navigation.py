"""The app's navigation: its own pages, then every room of the registry, in this visitor's
language (app.py hands them to ``st.navigation`` on every run).

Built once per session and language, and kept in the session: an ``st.Page`` resolves its
script's path on the disk and reads its name and icon when it is made, which was a tenth of a
room's whole page run on the server (py-spy, 40 visitors rerunning the strides room), paid
again by every run of every visitor. A page is only ever used by its own session's runs, one
at a time, so ``st.navigation`` marking the one it picked is never seen by another visitor."""

from __future__ import annotations

import streamlit as st

from components.i18n import language, t
from components.rooms import built_rooms

KEPT = "atlas_navigation_pages"  # session state: language → the sections built in it


def _sections() -> dict[str, list[st.Page]]:
    home = st.Page("views/home.py", title=t("app.home.nav"), icon=":material/home:", default=True)
    lessons = st.Page(
        "views/lessons.py", title=t("lessons.nav"), icon=":material/school:", url_path="lessons"
    )
    classmode = st.Page(
        "views/classmode.py",
        title=t("classmode.nav"),
        icon=":material/co_present:",
        url_path="class",
    )
    author = st.Page(
        "views/author.py", title=t("author.nav"), icon=":material/edit_note:", url_path="author"
    )
    sections: dict[str, list[st.Page]] = {
        t("app.section.start"): [home, lessons, author, classmode]
    }
    for room in built_rooms():
        page = st.Page(
            room.script, title=t(f"app.rooms.{room.key}.title"), icon=room.icon, url_path=room.key
        )
        sections.setdefault(t(room.section), []).append(page)
    return sections


def navigation_sections() -> dict[str, list[st.Page]]:
    """Section title → pages, in this visitor's language (see the module's docstring)."""
    kept = st.session_state.setdefault(KEPT, {})
    lang = language()
    found = kept.get(lang)
    if found is None:
        found = kept[lang] = _sections()
    return found
