"""Which palette a visitor's page uses: the theme the browser actually shows; and the few
colours of Streamlit's own elements that its theme settings cannot reach.

The colours themselves are pure data in :mod:`components.palette` (drawing builders import
them from there, never this module, which reads Streamlit's context).
"""

from __future__ import annotations

import streamlit as st

from components.kit.focus import readable_styles
from components.palette import DARK, LIGHT, Palette

__all__ = ["DARK", "LIGHT", "Palette", "contrast_styles", "is_dark", "palette"]


def is_dark() -> bool:
    """Streamlit reports the theme the browser actually shows (None before the first rerun)."""
    return st.context.theme.type == "dark"


def palette() -> Palette:
    return DARK if is_dark() else LIGHT


# WCAG AA (4.5:1 for text) where .streamlit/config.toml cannot get it: measured with
# `python -m tests.e2e.a11y_report`, held by tests/e2e/test_a11y.py. Selectors are Streamlit's
# test ids and its code blocks' Prism token classes, the hooks it keeps stable between releases.
#
# - Inline code in a caption: Streamlit draws captions at 60 % opacity, and its green code
#   colour faded that way falls to 3.0:1 (light) and 4.2:1 (dark). In a caption, code takes the
#   caption's own colour (4.7:1 and up): it still stands out by its font and background.
# - Syntax colours of st.code and of code blocks in markdown: Streamlit's palette for them is
#   fixed (no theme option) and reads at 2.2-3.8:1 on the light code background (numbers,
#   strings, operators, keywords, comments), and 2.3-4.2:1 for purple, comment grey and keyword
#   blue on the dark one. These keep each token's hue at 4.7:1 or more (specificity 0,3,1
#   beats Streamlit's 0,3,0, whatever order the style sheets load in).
_BOTH = """
[data-testid='stCaptionContainer'] code { color: inherit; }
"""
_LIGHT = """
.stCode pre .token.comment, .stCode pre .token.prolog, .stCode pre .token.doctype,
.stCode pre .token.cdata, .stCode pre .token.punctuation,
.stCode pre .token.unchanged.line { color: #5f6372; }
.stCode pre .token.attr-name, .stCode pre .token.property,
.stCode pre .token.variable { color: #00708f; }
.stCode pre .token.boolean, .stCode pre .token.constant, .stCode pre .token.symbol,
.stCode pre .token.inserted { color: #1b7a3a; }
.stCode pre .token.number, .stCode pre .token.regex { color: #127566; }
.stCode pre .token.string, .stCode pre .token.char,
.stCode pre .token.attr-value { color: #38761d; }
.stCode pre .token.operator, .stCode pre .token.entity, .stCode pre .token.decorator,
.stCode pre .token.atrule { color: #a84a0b; }
.stCode pre .token.keyword, .stCode pre .token.tag, .stCode pre .token.function,
.stCode pre .token.class-name, .stCode pre .token.selector { color: #1a6bc4; }
.stCode pre .token.important, .stCode pre .token.deleted { color: #c42b2b; }
"""
# - Dark: Streamlit labels a primary button in white whatever the primary colour, and no
#   orange carries white at 4.5:1 (luminance <= 0.18) while also reading at 4.5:1 as the text
#   of a selected pill, a tab or a slider's value on the dark background (>= 0.21). The primary
#   stays the bright orange, and a primary button's label turns near-black: 7.3:1 on it, 5.6:1
#   on its darker hover; so does a multiselect's chosen tag, drawn the same way. A disabled
#   button keeps Streamlit's own faded label.
_DARK = f"""
[data-testid='stBaseButton-primary']:not(:disabled),
[data-testid='stBaseButton-primaryFormSubmit']:not(:disabled),
[data-testid='stMultiSelectTagsContainer'] [data-tag] {{ color: {DARK.background}; }}
.stCode pre .token.comment, .stCode pre .token.prolog, .stCode pre .token.doctype,
.stCode pre .token.cdata, .stCode pre .token.punctuation,
.stCode pre .token.unchanged.line {{ color: #a3a7b5; }}
.stCode pre .token.keyword, .stCode pre .token.tag, .stCode pre .token.function,
.stCode pre .token.class-name, .stCode pre .token.selector {{ color: #5ca8f0; }}
.stCode pre .token.url {{ color: #b197f0; }}
.stCode pre .token.important, .stCode pre .token.deleted {{ color: #ff6b6b; }}
"""


def contrast_styles(lang: str) -> None:
    """The style sheet above for this visitor's theme, with the questions' phone-sized options
    and, in Korean, line breaks between words (:func:`components.kit.focus.readable_styles`).
    Call on every run of every page (a style only: it takes no room on the page). One element
    for all of it: each element is a message and server work in every run of every phone. Its
    first line names the theme the app drew the page for (tests/e2e/test_a11y.py waits for it
    after switching the browser's)."""
    dark = is_dark()
    theme = "dark" if dark else "light"
    rules = f"{_BOTH}{_DARK if dark else _LIGHT}{readable_styles(lang)}"
    st.html(f"<style>/* atlas-theme: {theme} */{rules}</style>")
