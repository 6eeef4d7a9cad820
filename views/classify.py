"""Image classification: photos in → a pretrained network → predictions, pipeline, heatmap.

The page's order only; everything else is in ``components.classify``: ``panels`` (widgets and
output), ``state`` (session keys, the model in the link, uploads, cached engine calls), ``draw``
(figures, tables, text), over the engine in ``torchatlas.classify``.
"""

from __future__ import annotations

import streamlit as st

from components.classify import panels
from components.i18n import t

st.title(t("app.rooms.classify.title"))
panels.intro()
chosen = panels.settings()
found = panels.photos()
if found is None:
    st.stop()
shown = panels.predictions(found, chosen)
if shown is None:
    st.stop()
panels.inspector(found, chosen, shown)
