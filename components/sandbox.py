"""The process-wide sandbox pool, as every room that runs pasted code reaches it."""

from __future__ import annotations

from typing import Any

import streamlit as st


@st.cache_resource(show_spinner=False)
def sandbox_pool() -> Any:
    """The process-wide pool of pre-warmed workers with every room's jobs (None when the
    sandbox cannot start)."""
    try:
        from torchatlas.sandboxed import shared_pool

        pool = shared_pool()  # every room's jobs, before it starts: the zygote imports them
        pool.warm_up(wait=False)  # the first job waits; the page does not
        return pool
    except Exception:  # a missing or broken sandbox is reported by the page that needs it
        return None
