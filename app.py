"""Torch Atlas entry point: page config, navigation, and the shared sidebar.

``st.navigation`` with explicitly registered ``st.Page`` files is used beside the
``pages/`` folder; in Streamlit 1.67 this gives deep links (``/strides``) with no
warning about the folder (tests/e2e checks every deep link).
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.rooms import built_rooms
from components.sidebar import language_switch, torch_box

st.set_page_config(
    page_title="Torch Atlas",
    page_icon=":material/explore:",
    layout="wide",
    menu_items={"About": "Torch Atlas — see what PyTorch does."},
)

language_switch()

home = st.Page("pages/home.py", title=t("app.home.nav"), icon=":material/home:", default=True)
sections: dict[str, list[st.Page]] = {t("app.section.start"): [home]}
for room in built_rooms():
    page = st.Page(
        room.script, title=t(f"app.rooms.{room.key}.title"), icon=room.icon, url_path=room.key
    )
    sections.setdefault(t(room.section), []).append(page)

current = st.navigation(sections)
torch_box()
current.run()
