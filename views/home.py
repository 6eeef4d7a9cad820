"""Home: what Torch Atlas is, the way into the lessons, and a card per room."""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.rooms import built_rooms

st.title(t("app.home.title"))
st.markdown(t("app.home.intro"))

with st.container(border=True):
    st.header(t("app.home.lessons_title"), anchor=False)
    st.write(t("app.home.lessons_promise"))
    st.page_link("views/lessons.py", label=t("app.home.lessons_link"), icon=":material/school:")

rooms = built_rooms()
if not rooms:
    st.info(t("app.home.no_rooms"))
# Row by row, so cards keep the registry's order when columns stack on a phone.
for start in range(0, len(rooms), 2):
    for column, room in zip(st.columns(2), rooms[start : start + 2], strict=False):
        with column.container(border=True):
            st.header(t(f"app.rooms.{room.key}.title"), anchor=False)
            st.write(t(f"app.rooms.{room.key}.promise"))
            st.page_link(room.script, label=t("app.home.open_room"), icon=room.icon)

st.divider()
st.caption(t("app.home.footer"))
