"""The current session's language, and ``t()`` for every string a page shows."""

from __future__ import annotations

import streamlit as st

from torchatlas.i18n import DEFAULT_LANGUAGE, LANGUAGES, translate

LANGUAGE_KEY = "lang"


def language() -> str:
    lang = st.session_state.get(LANGUAGE_KEY, DEFAULT_LANGUAGE)
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def t(key: str, /, **params: object) -> str:
    return translate(key, language(), **params)
