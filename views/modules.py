"""nn.Module from the inside: parameters, buffers and plain tensors, one training step, modes,
saving and loading.

The page's order only; everything else is in ``components.modules``: ``panels`` (widgets and
output), ``state`` (session keys, URL, cached engine calls), ``draw`` (tables, figures, code),
over the engine in ``torchatlas.modules``.
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.modules import panels

st.title(t("app.rooms.modules.title"))
section = panels.intro()
panels.show(section)
