"""Widget values that outlive the part of a page that draws them.

Streamlit forgets the value of a widget that a full run does not draw: a room that draws only
its open tab or section (so a rerun costs only what is shown) would lose the inputs of the
others, and a student who leaves a tab and comes back finds it reset. Re-assigning a kept key
at the start of every full run makes the session own the value until the widget is drawn again.

>>> keep_values(("room_field",), prefixes=("room_quiz_",))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st


def keep_values(keys: Iterable[str] = (), *, prefixes: tuple[str, ...] = ()) -> None:
    """Re-own ``keys`` and every session key starting with one of ``prefixes`` for this run.
    Call it on every full run, before the widgets are drawn."""
    kept = [*keys]
    if prefixes:
        kept += [key for key in st.session_state if str(key).startswith(prefixes)]
    for key in kept:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
