"""Colours for hand-drawn components, so they stay readable in light and dark themes."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True)
class Palette:
    text: str
    muted: str
    background: str
    surface: str
    border: str
    accent: str
    highlight: str
    copy: str


LIGHT = Palette(
    text="#1f2330",
    muted="#5b6170",
    background="#ffffff",
    surface="#f3f5f9",
    border="#c9ced8",
    accent="#ee4c2c",  # PyTorch orange
    highlight="#ffd54a",
    copy="#2f7fd8",
)
DARK = Palette(
    text="#e8eaf0",
    muted="#a3a9b7",
    background="#0e1117",
    surface="#1b1f2a",
    border="#3a4050",
    accent="#ff7a52",
    highlight="#d9a400",
    copy="#5aa3f0",
)


def is_dark() -> bool:
    """Streamlit reports the theme the browser actually shows (None before the first rerun)."""
    return st.context.theme.type == "dark"


def palette() -> Palette:
    return DARK if is_dark() else LIGHT
