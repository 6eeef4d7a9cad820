"""Lessons' state: which lesson and step the URL names, the answers a session gave, and the
move to a step (the room opened in that step's state).

The URL holds ``lesson`` (a lesson's id) and ``step`` (1-based, read with
:func:`components.contained.link_int`), so a teacher can share "open step 5"; the lessons
page also takes ``end=1`` for a lesson's summary. Session keys start with ``lessons_``.

A room reads its shared link once, on a session's first visit. To open a step, the room's
own session keys are cleared (the kit's ``RoomLink.forget`` on the room's declaration,
``torchatlas/<room>/link.py``) and the page is switched with the step's link fields as the
query: the room then reads the link as a fresh visitor would. "Back to this step" does the
same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from components.contained import link_int
from components.i18n import language
from components.kit.link_state import RoomLink
from torchatlas.i18n import DEFAULT_LANGUAGE
from torchatlas.lessons import ROOMS, Lesson, Step, find, load_all
from torchatlas.links import encode_source
from torchatlas.rooms import link_of

URL_LESSON, URL_STEP, URL_END = "lesson", "step", "end"
ANSWERS_KEY = "lessons_answers"  # lesson id → {step number: option index picked}
LAST_KEY = "lessons_last"  # (lesson id, step number) this session last opened
PICK_PREFIX = "lessons_pick_"
# the page's buttons and containers (no state of their own)
BANNER_KEY, MOVES_KEY, SUMMARY_KEY = "lessons_banner", "lessons_moves", "lessons_summary"
PREVIOUS_KEY, BACK_KEY = "lessons_previous", "lessons_back"
NEXT_KEY, FINISH_KEY = "lessons_next", "lessons_finish"


def lesson_key(kind: str, lesson: Lesson, number: int | None = None) -> str:
    """A key of the lessons page that belongs to one lesson (and step): ``lessons_<kind>_<id>``
    (``_<number>``), e.g. its card, its Start button, a step's Reveal."""
    tail = "" if number is None else f"_{number}"
    return f"lessons_{kind}_{lesson.id}{tail}"


PAGE = "views/lessons.py"


@dataclass(frozen=True)
class Place:
    """Where the URL says the visitor is in a lesson."""

    lesson: Lesson
    step: Step | None  # None: the lesson's overview or summary
    end: bool = False


def lessons() -> tuple[Lesson, ...]:
    return load_all()


def current() -> Place | bool | None:
    """The lesson and step in the URL; None when it names none; False when it names one
    this app does not have (an unknown id, a step that is not a whole number in range)."""
    query = st.query_params
    if URL_LESSON not in query:
        return None
    lesson_id = query.get(URL_LESSON, "")
    lesson = find(lesson_id) if isinstance(lesson_id, str) and len(lesson_id) < 40 else None
    if lesson is None:
        return False
    if URL_STEP not in query:
        return Place(lesson, None, end=query.get(URL_END) == "1")
    number = link_int(query.get(URL_STEP), low=1, high=len(lesson.steps))
    if number is None:
        return False
    return Place(lesson, lesson.step(number))


def room_query(lesson: Lesson, step: Step) -> dict[str, Any]:
    """The step's link: the room's own fields (pasted source encoded as the room encodes
    it), the lesson and step, and the language when it is not the default."""
    spec = ROOMS[step.room]
    query: dict[str, Any] = dict(step.fields())
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    query[URL_LESSON] = lesson.id
    query[URL_STEP] = str(step.number)
    lang = language()
    if lang != DEFAULT_LANGUAGE:
        query["lang"] = lang
    return query


def forget_room(room: str) -> None:
    """Drop the room's session keys, so its next run reads the link like a first visit."""
    RoomLink(link_of(room)).forget()


def go(lesson: Lesson, number: int) -> None:
    """Open step ``number`` in its room, in its state (stops this run)."""
    step = lesson.step(number)
    st.session_state[LAST_KEY] = (lesson.id, number)
    forget_room(step.room)
    st.switch_page(link_of(step.room).script, query_params=room_query(lesson, step))


def go_summary(lesson: Lesson) -> None:
    query = {URL_LESSON: lesson.id, URL_END: "1"}
    if language() != DEFAULT_LANGUAGE:
        query["lang"] = language()
    st.switch_page(PAGE, query_params=query)


def answers(lesson: Lesson) -> dict[int, int]:
    """Step number → option index, for this session (a copy)."""
    return dict(st.session_state.get(ANSWERS_KEY, {}).get(lesson.id, {}))


def record(lesson: Lesson, number: int, picked: int) -> None:
    """Keep the first answer to a step's question: the prediction is what is scored."""
    book = st.session_state.setdefault(ANSWERS_KEY, {})
    book.setdefault(lesson.id, {}).setdefault(number, picked)


def forget_answers(lesson: Lesson) -> None:
    st.session_state.get(ANSWERS_KEY, {}).pop(lesson.id, None)
    for key in [k for k in st.session_state if str(k).startswith(f"{PICK_PREFIX}{lesson.id}_")]:
        del st.session_state[key]


def pick_key(lesson: Lesson, number: int) -> str:
    return f"{PICK_PREFIX}{lesson.id}_{number}"


def remember(lesson: Lesson, number: int) -> None:
    """The step shown (also one reached by a shared link): the Lessons page offers to
    continue there."""
    if st.session_state.get(LAST_KEY) != (lesson.id, number):
        st.session_state[LAST_KEY] = (lesson.id, number)


def last_opened() -> tuple[str, int] | None:
    return st.session_state.get(LAST_KEY)
