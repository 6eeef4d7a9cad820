"""Lessons' state: which lesson and step the URL names, the answers a session gave, and the
move to a step (the room opened in that step's state).

The URL holds ``lesson`` (a lesson's id) and ``step`` (1-based), so a teacher can share "open
step 5"; the lessons page also takes ``end=1`` for a lesson's summary. These fields are
declared once (``torchatlas/lessons/link.py``: :data:`PLACE`) and read and written through
that declaration, as a room's are. Session keys start with ``lessons_``.

A room reads its shared link once, on a session's first visit. To open a step, the room's
own session keys are cleared (the kit's ``RoomLink.forget`` on the room's declaration,
``torchatlas/<room>/link.py``) and the page is switched with the step's link fields as the
query: the room then reads the link as a fresh visitor would. "Back to this step" does the
same.

A step always opens in the step's state (:func:`open_as_written`): a link that names a
lesson and a step but carries other values in the room's own fields (a hand-edited or a
hostile link) has those fields replaced by the step's before the room reads them, and the
banner says the link's changes were set aside (a field the link leaves to the room, as the
room's own address bar does for "the preset's own code", is no change). Once the step is
open the student may explore: the room's writes are followed (:func:`after_room_write`,
through the kit's ``on_write``), and when the room no longer shows the step's state the
banner says so and offers "Back to this step" instead of torch's answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from components.i18n import language
from components.kit.link_state import RoomLink, current_query, on_write
from torchatlas.i18n import DEFAULT_LANGUAGE
from torchatlas.lessons import ROOMS, Lesson, Step, load_all
from torchatlas.lessons.link import PLACE, URL_END, URL_LESSON, URL_STEP
from torchatlas.links import LinkSpec, QueryValue, encode_source
from torchatlas.rooms import link_of

ANSWERS_KEY = "lessons_answers"  # lesson id → {step number: option index picked}
LAST_KEY = "lessons_last"  # (lesson id, step number) this session last opened
# A step's question: the kit's predict_option keys its widgets from this prefix, the lesson's
# id and the step (``lessons_q_<id>_<n>_given``, ``…_reveal``).
QUESTION_PREFIX = "lessons_q_"
# the page's buttons and containers (no state of their own)
BANNER_KEY, MOVES_KEY, SUMMARY_KEY = "lessons_banner", "lessons_moves", "lessons_summary"
PREVIOUS_KEY, BACK_KEY = "lessons_previous", "lessons_back"
NEXT_KEY, FINISH_KEY = "lessons_next", "lessons_finish"
CHANGED_BOX_KEY = "lessons_changed"
SHOWN_KEY = "lessons_shown"  # (lesson id, step, changed): what the banner last drew
RERUN_KEY, RERUNS_KEY = "lessons_rerun", "lessons_reruns"  # reruns asked to redraw the banner
OPENED_KEY = "lessons_opened"  # how many steps this session opened (each scrolled to once)
SUMMARY_OPENED_KEY = (
    "lessons_summary_opened"  # how often Finish opened a summary (scroll once each)
)
ROOM_HIDDEN_KEY = "lessons_room_hidden"  # the box that stands in for a room until the reveal
MAX_RERUNS = 3  # in a row: a room that never writes the same twice cannot loop the page


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


def find_lesson(lesson_id: str) -> Lesson | None:
    """A repository lesson, or a teacher's own (``u_<code>``, from the class database: its
    code questions answered in the sandbox in this visitor's turn, then kept per process)."""
    from components import visitor
    from torchatlas.classmode.authored import resolve_lesson

    return resolve_lesson(lesson_id, visitor=visitor.visitor())


def load_problem() -> Any:
    """Why the teacher's lesson the link names did not load (the author page's words)."""
    from torchatlas.classmode.authored import load_problem

    return load_problem(st.query_params.get(URL_LESSON))


def current() -> Place | bool | None:
    """The lesson and step in the URL; None when it names none; False when it names one
    this app does not have (an unknown id, a step that is not a whole number in range)."""
    query = current_query()
    if URL_LESSON not in query:
        return None
    read = PLACE.read(query)
    lesson = None if URL_LESSON in read.broken else find_lesson(read.values[URL_LESSON])
    if lesson is None:
        return False
    if URL_STEP not in query:
        return Place(lesson, None, end=read.values[URL_END])
    number = read.values[URL_STEP]
    if URL_STEP in read.broken or number > len(lesson.steps):
        return False
    return Place(lesson, lesson.step(number))


def place_query(lesson: Lesson, step: Step | None = None, *, end: bool = False) -> dict[str, Any]:
    """The lesson's own link fields for a step (or, ``end``, its summary) and the language
    when it is not the default."""
    values = {URL_LESSON: lesson.id, URL_STEP: 0 if step is None else step.number, URL_END: end}
    query: dict[str, Any] = dict(PLACE.to_query(values))
    lang = language()
    if lang != DEFAULT_LANGUAGE:
        query["lang"] = lang
    return query


def room_query(lesson: Lesson, step: Step) -> dict[str, Any]:
    """The step's link: the room's own fields (pasted source encoded as the room encodes
    it), the lesson and step, and the language when it is not the default."""
    spec = ROOMS[step.room]
    query: dict[str, Any] = dict(step.fields())
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    query.update(place_query(lesson, step))
    return query


def forget_room(room: str) -> None:
    """Drop the room's session keys, so its next run reads the link like a first visit."""
    RoomLink(link_of(room)).forget()


def go(lesson: Lesson, number: int) -> None:
    """Open step ``number`` in its room, in its state (stops this run)."""
    step = lesson.step(number)
    st.session_state[LAST_KEY] = (lesson.id, number)
    st.session_state[OPENED_KEY] = st.session_state.get(OPENED_KEY, 0) + 1
    forget_room(step.room)
    st.switch_page(link_of(step.room).script, query_params=room_query(lesson, step))


def go_summary(lesson: Lesson) -> None:
    st.session_state[SUMMARY_OPENED_KEY] = st.session_state.get(SUMMARY_OPENED_KEY, 0) + 1
    st.switch_page(PAGE, query_params=place_query(lesson, end=True))


def answers(lesson: Lesson) -> dict[int, int]:
    """Step number → option index, for this session (a copy)."""
    return dict(st.session_state.get(ANSWERS_KEY, {}).get(lesson.id, {}))


def revealed(lesson: Lesson, step: Step) -> bool:
    """Whether torch's answer to the step's question is on screen (the student answered it),
    or the step asks nothing: what a step hides until its reveal is shown from then on."""
    return step.question is None or step.number in answers(lesson)


def record(lesson: Lesson, number: int, picked: int) -> None:
    """Keep the first answer to a step's question: the prediction is what is scored."""
    book = st.session_state.setdefault(ANSWERS_KEY, {})
    book.setdefault(lesson.id, {}).setdefault(number, picked)


def forget_answers(lesson: Lesson) -> None:
    st.session_state.get(ANSWERS_KEY, {}).pop(lesson.id, None)
    for key in [k for k in st.session_state if str(k).startswith(f"{QUESTION_PREFIX}{lesson.id}_")]:
        del st.session_state[key]


def question_key(lesson: Lesson, number: int) -> str:
    """The key of step ``number``'s question (the kit derives its widgets' keys from it)."""
    return f"{QUESTION_PREFIX}{lesson.id}_{number}"


def remember(lesson: Lesson, number: int) -> None:
    """The step shown (also one reached by a shared link): the Lessons page offers to
    continue there."""
    if st.session_state.get(LAST_KEY) != (lesson.id, number):
        st.session_state[LAST_KEY] = (lesson.id, number)


def last_opened() -> tuple[str, int] | None:
    return st.session_state.get(LAST_KEY)


# --------------------------------------------------------------------------- the step's state


def _values(value: QueryValue | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def step_fields(lesson: Lesson, step: Step) -> dict[str, list[str]]:
    """The room's own fields of the step's link (its pasted source included)."""
    names = link_of(step.room).names
    return {n: _values(v) for n, v in room_query(lesson, step).items() if n in names}


def link_fields(spec: LinkSpec) -> dict[str, list[str]]:
    """The room's own fields in the address bar (every value of a repeated one, in order)."""
    query = st.query_params
    return {name: query.get_all(name) for name in spec.names if name in query}


def differing(
    spec: LinkSpec,
    link: dict[str, list[str]],
    step: dict[str, list[str]],
    left: dict[str, Any] | None = None,
) -> tuple[str, ...]:
    """The room's fields that open the room otherwise with ``link`` than with the step's
    link, read with the room's rules (a single field's last value counts; a repeated field's
    order matters); a value the room cannot use always differs. ``left``: what the room gives
    a field a link leaves to it (None); without it, a field ``link`` leaves to the room is
    taken as the step's (the room gets the step's value there)."""
    first, second = spec.read(link), spec.read(step)

    def resolved(value: Any, name: str) -> Any:
        return left.get(name) if value is None and left is not None else value

    return tuple(
        name
        for name in spec.names
        if name in first.broken
        or (
            resolved(first.values[name], name) != resolved(second.values[name], name)
            and (left is not None or first.values[name] is not None)
        )
    )


def open_as_written(lesson: Lesson, step: Step) -> tuple[str, ...]:
    """Before the step's room reads the address bar (its first run this session): the room's
    fields become the step's. Returns the fields the link asked otherwise (set aside)."""
    spec = link_of(step.room)
    asked, wanted = link_fields(spec), step_fields(lesson, step)
    if asked == wanted:
        return ()
    query = st.query_params
    for name in spec.names:
        if name not in wanted:
            if name in query:
                del query[name]
        elif query.get_all(name) != wanted[name]:
            values = wanted[name]
            query[name] = values[0] if len(values) == 1 else values
    return differing(spec, asked, wanted)


def changed_from_step(lesson: Lesson, step: Step, link: dict[str, list[str]]) -> bool:
    """Whether the room, whose link now holds ``link`` (its own fields), no longer shows the
    step's state (a field left to the room counts as what the room gave it)."""
    spec = link_of(step.room)
    left = RoomLink(spec).left_to_room()
    return bool(differing(spec, link, step_fields(lesson, step), left))


def follow_room(lesson: Lesson, step: Step, page: str) -> tuple[bool, tuple[str, ...]]:
    """The banner's part, each full run, before the room: on the room's first run the step
    opens as written (the fields set aside are returned, to be told); later, whether the room
    has been changed from the step (what the banner says)."""
    state = st.session_state
    if state.pop(RERUN_KEY, None) is None:
        state[RERUNS_KEY] = 0
    if step.room != page:
        return False, ()
    spec = link_of(step.room)
    if RoomLink(spec).started:
        changed, aside = changed_from_step(lesson, step, link_fields(spec)), ()
    else:
        changed, aside = False, open_as_written(lesson, step)
    state[SHOWN_KEY] = (lesson.id, step.number, changed)
    return changed, aside


def after_room_write(spec: LinkSpec, written: dict[str, QueryValue]) -> None:
    """The kit's listener (every room's write, a fragment's too): when the banner drawn no
    longer says whether the room shows the step's state, the page runs again (a fragment's
    run becomes the whole page's), so the banner never lags behind the room."""
    place = current()
    if not isinstance(place, Place) or place.step is None or place.step.room != spec.room:
        return
    lesson, step, state = place.lesson, place.step, st.session_state
    fields = {name: _values(value) for name, value in written.items()}
    changed = changed_from_step(lesson, step, fields)
    if state.get(SHOWN_KEY) == (lesson.id, step.number, changed):
        return
    if state.get(RERUNS_KEY, 0) >= MAX_RERUNS:
        return
    state[SHOWN_KEY] = (lesson.id, step.number, changed)
    state[RERUNS_KEY] = state.get(RERUNS_KEY, 0) + 1
    state[RERUN_KEY] = True
    st.rerun()


on_write(after_room_write)
