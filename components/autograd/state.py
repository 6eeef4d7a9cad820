"""The autograd room's state: its session keys, its URL, and its cached engine calls.

Every session key starts with ``autograd_``; the URL keys are ``a_ex`` (an example's key) or
``a_prog`` (the program text, when it is not an example), ``a_seed``, ``a_root`` and
``a_step``. They are read on a session's first run and written when they change, so a link
restores the room; ``lang`` and other rooms' keys are never touched.

Results are kept in :data:`ROOM_CACHE`, one process-wide cache bounded by bytes: its keys are
programs visitors type or share. A rerun while stepping through backward reads the traced
graph and the replay from it and only rebuilds the DOT text for the new step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from components.autograd.draw import (
    freeze_bar_html,
    grads_table,
    optimizer_table,
    scrolling,
    variables_table,
)
from components.theme import DARK, LIGHT
from torchatlas.autograd import (
    BackwardTrace,
    Graph,
    ProgramRefused,
    parse,
    python_code,
    trace_and_backward,
)
from torchatlas.autograd.examples import DEFAULT_EXAMPLE, EXAMPLES, Example
from torchatlas.autograd.freeze import BLOCKS, FreezeReport, freeze
from torchatlas.autograd.history import ThenNow, then_and_now
from torchatlas.autograd.parser import MAX_SOURCE
from torchatlas.autograd.quiz import Question, Score, grade
from torchatlas.cache import BoundedCache
from torchatlas.i18n import translate

EXAMPLE_KEY, PROGRAM_KEY, SEED_KEY = "autograd_example", "autograd_program", "autograd_seed"
ROOT_KEY, STEP_KEY = "autograd_root", "autograd_step"
REVEALED_KEY, SIGNATURE_KEY = "autograd_revealed", "autograd_signature"
LINK_BROKEN_KEY, TRAIN_PREFIX = "autograd_link_broken", "autograd_train_"
QUIZ_PREFIX, PANEL_KEY = "autograd_quiz_", "autograd_panel"
URL_EXAMPLE, URL_PROGRAM, URL_SEED = "a_ex", "a_prog", "a_seed"
URL_ROOT, URL_STEP = "a_root", "a_step"
CUSTOM = "custom"
MAX_SEED = 10**6
CACHE_BYTES = 32 << 20
ROOM_CACHE: BoundedCache[tuple, Any] = BoundedCache(CACHE_BYTES)


@dataclass(frozen=True)
class Refusal:
    code: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Room:
    """This run's program: as typed, refused or traced, and backward from the chosen root."""

    program: str
    seed: int
    example: Example | None
    refusal: Refusal | None
    graph: Graph | None
    root: str | None
    trace: BackwardTrace | None
    code: str | None  # the program as plain PyTorch

    @property
    def total_steps(self) -> int:
        return 0 if self.trace is None else len(self.trace.steps)


# --------------------------------------------------------------------------- URL


def _seed(text: str) -> int:
    return int(text) if text.isdigit() and int(text) <= MAX_SEED else 0


def initial_state() -> None:
    """First run of a session: a shared link's program, else the default example. Keys a
    test or an earlier run already set are kept."""
    if PROGRAM_KEY in st.session_state:
        return
    query = st.query_params
    key, program = DEFAULT_EXAMPLE, EXAMPLES[DEFAULT_EXAMPLE].program
    if query.get(URL_EXAMPLE) in EXAMPLES:
        key = query[URL_EXAMPLE]
        program = EXAMPLES[key].program
    elif URL_PROGRAM in query:
        shared = query.get(URL_PROGRAM, "")
        if 0 < len(shared) <= MAX_SOURCE:
            key, program = CUSTOM, shared
        else:
            st.session_state[LINK_BROKEN_KEY] = True
    elif URL_EXAMPLE in query:
        st.session_state[LINK_BROKEN_KEY] = True
    st.session_state[EXAMPLE_KEY] = key
    st.session_state[PROGRAM_KEY] = program
    st.session_state.setdefault(SEED_KEY, _seed(query.get(URL_SEED, "0")))
    root = query.get(URL_ROOT, "")
    if root.isidentifier() and len(root) <= 40:
        st.session_state.setdefault(ROOT_KEY, root)
    step = query.get(URL_STEP, "")
    if step.isdigit() and len(step) < 5:
        st.session_state.setdefault(STEP_KEY, int(step))


def take_link_broken() -> bool:
    return bool(st.session_state.pop(LINK_BROKEN_KEY, False))


def link_query(room: Room, step: int) -> dict[str, str]:
    """The room's own URL keys for this state: an example by its key, else the text."""
    query = {URL_SEED: str(room.seed)}
    if room.example is not None:
        query[URL_EXAMPLE] = room.example.key
    else:
        query[URL_PROGRAM] = room.program
    if room.root is not None:
        query[URL_ROOT] = room.root
    query[URL_STEP] = str(step)
    return query


def write_url(room: Room, step: int) -> None:
    """Keep only this room's keys in sync; never touch the others (``lang``)."""
    query = st.query_params
    wanted = link_query(room, step)
    for key in (URL_EXAMPLE, URL_PROGRAM, URL_ROOT):
        if key not in wanted and key in query:
            del query[key]
    for key, value in wanted.items():
        if query.get(key) != value:
            query[key] = value


def share_link(room: Room, step: int, lang: str) -> str:
    """An absolute link to this state when the browser told us the page's address."""
    base = ""
    try:
        url = st.context.url or ""
    except Exception:
        url = ""
    if url:
        base = url.split("?", 1)[0]
    return f"{base}?{urlencode({**link_query(room, step), 'lang': lang})}"


# --------------------------------------------------------------------------- callbacks


def load_example() -> None:
    """The example menu's callback: its program replaces the box's; the replay and the
    quiz start over."""
    key = st.session_state.get(EXAMPLE_KEY)
    if key in EXAMPLES:
        st.session_state[PROGRAM_KEY] = EXAMPLES[key].program
    _start_over()


def program_edited() -> None:
    text = str(st.session_state.get(PROGRAM_KEY, ""))
    match = next((k for k, e in EXAMPLES.items() if e.program.strip() == text.strip()), None)
    st.session_state[EXAMPLE_KEY] = match or CUSTOM
    _start_over()


def _start_over() -> None:
    for key in (ROOT_KEY, STEP_KEY, REVEALED_KEY):
        st.session_state.pop(key, None)
    for key in [k for k in st.session_state if str(k).startswith(QUIZ_PREFIX)]:
        del st.session_state[key]


def set_step(value: int) -> None:
    st.session_state[STEP_KEY] = max(0, value)


def reveal() -> None:
    st.session_state[REVEALED_KEY] = True


def hide() -> None:
    st.session_state.pop(REVEALED_KEY, None)
    for key in [k for k in st.session_state if str(k).startswith(QUIZ_PREFIX)]:
        del st.session_state[key]


# --------------------------------------------------------------------------- the room


def _compute(program: str, seed: int, root: str | None) -> tuple[Any, ...]:
    try:
        parsed = parse(program)
    except ProgramRefused as refused:
        return Refusal(str(refused.code), dict(refused.params)), None, None, None
    graph, result = trace_and_backward(program, root, seed=seed)
    return None, graph, result, python_code(parsed, seed)


def computed(program: str, seed: int, root: str | None) -> tuple[Any, ...]:
    """(refusal, graph, backward trace, code) for a program, seed and root, cached."""
    return ROOM_CACHE.get_or_compute(
        ("run", program, seed, root), lambda: _compute(program, seed, root)
    )


def read_room() -> Room:
    program = str(st.session_state.get(PROGRAM_KEY, ""))[: MAX_SOURCE + 1]
    seed = int(st.session_state.get(SEED_KEY, 0) or 0)
    key = st.session_state.get(EXAMPLE_KEY)
    example = EXAMPLES.get(key) if key in EXAMPLES else None
    if example is not None and example.program.strip() != program.strip():
        example = None
    refusal, graph, result, code = computed(program, seed, None)
    root = None
    if graph is not None and graph.error is None and graph.roots:
        wanted = st.session_state.get(ROOT_KEY)
        root = wanted if wanted in graph.roots else graph.default_root
        st.session_state[ROOT_KEY] = root
        if result is None or result.root != root:
            _, _, result, _ = computed(program, seed, root)
    else:
        result = None
    return Room(program, seed, example, refusal, graph, root, result, code)


def shown_step(room: Room) -> int:
    step = int(st.session_state.get(STEP_KEY, 0) or 0)
    step = min(max(step, 0), room.total_steps)
    st.session_state[STEP_KEY] = step
    return step


def dot(room: Room, step: int, dark: bool, colors: dict[str, str], lang: str) -> str:
    assert room.graph is not None
    key = ("dot", room.program, room.seed, room.root, step, dark, lang)
    words = {word: translate(f"autograd.graph.dot_{word}", lang) for word in ("leaf", "saved")}
    return ROOM_CACHE.get_or_compute(
        key, lambda: room.graph.to_dot(room.trace, step, colors, words)
    )


def grads_markdown(room: Room, step: int, lang: str) -> str:
    assert room.trace is not None
    key = ("grads", room.program, room.seed, room.root, step, lang)
    return ROOM_CACHE.get_or_compute(key, lambda: scrolling(grads_table(room.trace, step, lang)))


def variables_markdown(room: Room, lang: str) -> str:
    assert room.graph is not None
    key = ("variables", room.program, room.seed, lang)
    return ROOM_CACHE.get_or_compute(key, lambda: scrolling(variables_table(room.graph, lang)))


# --------------------------------------------------------------------------- quiz


def quiz_variables(room: Room) -> tuple[str, ...]:
    if room.graph is None:
        return ()
    names = [v.name for v in room.graph.variables]
    chosen = [n for n in (room.example.quiz if room.example else ()) if n in names]
    return tuple(chosen or names[:3])


def quiz_key(variable: str) -> str:
    return f"{QUIZ_PREFIX}{variable}"


def revealed() -> bool:
    return bool(st.session_state.get(REVEALED_KEY))


def score(room: Room) -> Score | None:
    """The predictions graded against torch: a chip picked predicts True, one left out
    predicts False."""
    if room.graph is None or not revealed():
        return None
    predictions: dict[tuple[str, Question], bool | None] = {}
    for variable in quiz_variables(room):
        picked = set(st.session_state.get(quiz_key(variable)) or ())
        for question in Question:
            predictions[(variable, question)] = question in picked
    return grade(room.graph, room.trace, quiz_variables(room), predictions)


# --------------------------------------------------------------------------- freezing


def trainable() -> tuple[str, ...]:
    for block in BLOCKS:
        st.session_state.setdefault(f"{TRAIN_PREFIX}{block}", block == "fc")
    return tuple(b for b in BLOCKS if st.session_state.get(f"{TRAIN_PREFIX}{b}"))


def freeze_report(blocks: tuple[str, ...]) -> FreezeReport:
    """Cached per trainable set: each costs a real ResNet-18 forward and backward."""
    return ROOM_CACHE.get_or_compute(("freeze", blocks), lambda: freeze(trainable=blocks))


def freeze_texts(report: FreezeReport, dark: bool, lang: str) -> tuple[str, str]:
    """The freezing panel's bar (HTML) and optimiser table (markdown), built once per
    trainable set, theme and language."""
    key = ("freeze_texts", report.trainable, dark, lang)
    return ROOM_CACHE.get_or_compute(
        key,
        lambda: (
            freeze_bar_html(report, DARK if dark else LIGHT, lang),
            scrolling(optimizer_table(report, lang)),
        ),
    )


@st.cache_resource(max_entries=1)
def history() -> tuple[ThenNow, ...]:
    return then_and_now()
