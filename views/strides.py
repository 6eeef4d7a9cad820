"""Tensor storage & strides room: a start tensor and an op chain in → torchatlas.strides →
storage strip, logical tensor, op history, write-through, byte lens, code and quiz out.

The shape, dtype, chain, quiz seed and step live in the room's link (``s_shape``,
``s_dtype``, ``s_ops``, ``s_seed``, ``s_step``: torchatlas/strides/link.py), so a link
restores the room. Clicks on cells rerun only the explorer fragment. State and engine calls:
components/strides/state.py; panels: components/strides/panels.py.
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t
from components.strides import panels

st.title(t("app.rooms.strides.title"))
panels.intro()
room = panels.setup()
shown = panels.step_picker(room)
panels.explorer(room.chain, room.ok_steps, shown)
panels.facts_and_history(room, shown)
panels.tabs(room, shown)
