"""Which palette a visitor's page uses: the theme the browser actually shows.

The colours themselves are pure data in :mod:`components.palette` (drawing builders import
them from there, never this module, which reads Streamlit's context).
"""

from __future__ import annotations

import streamlit as st

from components.palette import DARK, LIGHT, Palette

__all__ = ["DARK", "LIGHT", "Palette", "is_dark", "palette"]


def is_dark() -> bool:
    """Streamlit reports the theme the browser actually shows (None before the first rerun)."""
    return st.context.theme.type == "dark"


def palette() -> Palette:
    return DARK if is_dark() else LIGHT
