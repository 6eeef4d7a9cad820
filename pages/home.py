"""Home: what Torch Atlas is, and a card per room."""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.rooms import built_rooms

st.title(t("app.home.title"))
st.markdown(t("app.home.intro"))

rooms = built_rooms()
if not rooms:
    st.info(t("app.home.no_rooms"))
columns = st.columns(2)
for index, room in enumerate(rooms):
    with columns[index % 2].container(border=True):
        st.subheader(t(f"app.rooms.{room.key}.title"), anchor=False)
        st.write(t(f"app.rooms.{room.key}.promise"))
        st.page_link(room.script, label=t("app.home.open_room"), icon=room.icon)

st.divider()
st.caption(t("app.home.footer"))
