"""Colours for hand-drawn components, so they stay readable in light and dark themes.

Pure data: drawing builders (``components/<room>/draw.py``, no Streamlit) import it; which of
the two a visitor's page uses is :func:`components.theme.palette`.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # The accent as the colour of text: 4.5:1 on the background (WCAG AA). The light accent
    # itself is 3.7:1 on white, enough for lines, bars and borders (3:1), not for text.
    accent_text: str


LIGHT = Palette(
    text="#1f2330",
    muted="#5b6170",
    background="#ffffff",
    surface="#f3f5f9",
    border="#c9ced8",
    accent="#ee4c2c",  # PyTorch orange
    highlight="#ffd54a",
    copy="#2f7fd8",
    accent_text="#bf3e1e",  # the light theme's primary colour (.streamlit/config.toml)
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
    accent_text="#ff7a52",
)
