"""The current session's language, and ``t()`` for every string a page shows."""

from __future__ import annotations

import threading

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from torchatlas.i18n import DEFAULT_LANGUAGE, LANGUAGES, translate

LANGUAGE_KEY = "lang"

# A page calls t() about a hundred times a run, and each read of st.session_state takes
# locks and walks widget state, a visible share of a room's rerun.
# app.py's language switch remembers the choice for the script run in progress; the memo
# is thread-local and tagged with that run's context, so a fragment rerun, another thread
# or another session never sees it and reads session state instead.
_memo = threading.local()


def remember_language(lang: str) -> None:
    _memo.context, _memo.lang = get_script_run_ctx(), lang


def language() -> str:
    context = get_script_run_ctx()
    if context is not None and getattr(_memo, "context", None) is context:
        return _memo.lang
    lang = st.session_state.get(LANGUAGE_KEY, DEFAULT_LANGUAGE)
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def t(key: str, /, **params: object) -> str:
    return translate(key, language(), **params)
