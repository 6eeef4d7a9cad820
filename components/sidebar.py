"""The sidebar every page shares: language, theme hint, and the "your PyTorch" box."""

from __future__ import annotations

import streamlit as st

from components.i18n import LANGUAGE_KEY, remember_language, t
from torchatlas.i18n import DEFAULT_LANGUAGE, LANGUAGES
from torchatlas.runtime import TorchSummary, torch_summary


def language_switch() -> str:
    """Language radio; ``?lang=ko`` in a shared link picks the language on first load."""
    if LANGUAGE_KEY not in st.session_state:
        requested = st.query_params.get(LANGUAGE_KEY, DEFAULT_LANGUAGE)
        st.session_state[LANGUAGE_KEY] = requested if requested in LANGUAGES else DEFAULT_LANGUAGE
    lang = st.sidebar.radio(
        "Language · 언어",
        options=list(LANGUAGES),
        format_func=LANGUAGES.__getitem__,
        key=LANGUAGE_KEY,
        horizontal=True,
    )
    remember_language(lang if lang in LANGUAGES else DEFAULT_LANGUAGE)
    if lang != DEFAULT_LANGUAGE:
        st.query_params[LANGUAGE_KEY] = lang
    elif LANGUAGE_KEY in st.query_params:
        del st.query_params[LANGUAGE_KEY]
    return lang


@st.cache_resource(show_spinner=False)
def _cached_torch_summary() -> TorchSummary:
    return torch_summary()


def torch_box() -> None:
    info = _cached_torch_summary()

    def flag(available: bool) -> str:
        return "✅" if available else "—"

    # One caption, title included: every element of the sidebar is sent again in every run of
    # every page, a cost each phone of a class pays at every move.
    with st.sidebar.container(border=True):
        st.caption(
            "  \n".join(
                [
                    f"**{t('app.sidebar.your_pytorch')}**",
                    t("app.sidebar.torch_version", version=info.torch_version),
                    t("app.sidebar.cpu_threads", threads=info.cpu_threads),
                    f"CUDA {flag(info.cuda_available)} · MPS {flag(info.mps_available)}",
                    t("app.sidebar.cuda_built", cuda=info.cuda_built)
                    if info.cuda_built
                    else t("app.sidebar.cpu_build"),
                ]
            )
        )
    st.sidebar.caption(t("app.sidebar.theme_hint"))
