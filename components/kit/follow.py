"""A room as a student following a class first sees it: the teacher's example, folded.

While a session follows a class on the class's own room page, class mode's bar names the
class's place for that run (:func:`set_followed_place`). A room that asks :func:`folded`
(the basics room, whose steps open with their room; the classify and strides rooms, which
open at the reveal) then draws the step as the teacher set it, the example and torch's
answer, and folds what is there to change it (inputs, pickers, reference tables, other tabs)
behind one button (:func:`unfold_button`): a phone gets the step without scrolling past a
form, and a move or a reveal, which runs every phone's page at once on one interpreter, costs
each phone a tenth to a quarter less (bench/classmode_load.py measures both). The student
who presses the button has the whole room, inputs and all, for the rest of that step; the
next step opens folded again. A teacher, a visitor outside a class and a student who wandered
to another room always get the whole room.

>>> if not folded():  # doctest: +SKIP
...     st.text_input("Shape", key="room_shape")
"""

from __future__ import annotations

import streamlit as st

from components.i18n import t

# The class's place this session follows, as the bar saw it in this run (None: not following).
PLACE_KEY = "atlas_followed_place"
# The place where the student asked for the whole room.
UNFOLDED_KEY = "atlas_unfolded_place"


def set_followed_place(place: str | None) -> None:
    """From class mode's bar, every run: the class's place (its code and step) when this
    session follows it on the class's room page, else None."""
    if place is None:
        if PLACE_KEY in st.session_state:
            del st.session_state[PLACE_KEY]
    elif st.session_state.get(PLACE_KEY) != place:
        st.session_state[PLACE_KEY] = place


def folded() -> bool:
    """Whether the room draws only the teacher's example in this run."""
    place = st.session_state.get(PLACE_KEY)
    return place is not None and st.session_state.get(UNFOLDED_KEY) != place


def _unfold(place: str) -> None:
    st.session_state[UNFOLDED_KEY] = place


def unfold_button(key: str) -> None:
    """The button that gives the student the whole room for this step; nothing when the room
    is not folded. Draw it outside the room's fragments: unfolding reruns the whole page."""
    if not folded():
        return
    st.button(
        t("kit.follow.unfold"),
        key=key,
        icon=":material/tune:",
        help=t("kit.follow.unfold_help"),
        on_click=_unfold,
        args=(st.session_state[PLACE_KEY],),
    )
