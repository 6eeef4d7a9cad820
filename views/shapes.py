"""Shape explorer: paste a model, see every layer's shape on the meta device.

The page's order only; what each part does is in ``components.shapes.panels`` (widgets and
output), ``components.shapes.state`` (session, URL ``m_*``, the sandboxed analysis) and
``torchatlas.shapes`` (the engine, whose pasted code runs only in the sandbox's worker).
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.shapes import panels

st.title(t("app.rooms.shapes.title"))
panels.intro()
health = panels.health_slot()
panels.link_warning()
submitted, listing = panels.editor()
panels.analysis(submitted)
panels.listing(listing)
panels.health_line(health)
panels.how_it_works()
panels.results()
