"""Devices: what .to() really does, and what moving data costs.

The page's order only; everything else is in ``components.devices``: ``panels`` (widgets and
output), ``state`` (session keys, cached engine calls, the benchmark's job), ``draw`` (text,
tables and the chart), over the engine in ``torchatlas.devices``.
"""

from __future__ import annotations

import streamlit as st

from components.devices import panels
from components.i18n import t

st.title(t("app.rooms.devices.title"))
panels.intro()
found = panels.inventory()
panels.demonstrations(found)
panels.benchmark(found)
