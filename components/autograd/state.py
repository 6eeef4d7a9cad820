"""The autograd room's state: its session keys, its URL, and its cached engine calls.

Every session key starts with ``autograd_``; the URL keys are ``a_ex`` (an example's key) or
``a_prog`` (the program text, when it is not an example), ``a_seed``, ``a_root`` and
``a_step``. They are read on a session's first run and written when they change, so a link
restores the room; ``lang`` and other rooms' keys are never touched.

A program is text a visitor types or a link carries, so the server only *checks* it (the
parser: clear, translated refusals, nothing evaluated); running it, its backward and reading the
graph happen in a sandbox job (``autograd.run``: a confined child with a memory limit and a CPU
deadline, through the shared fair queue), whose reply is rebuilt against :class:`ProgramReply`'s
types and bounds before anything draws it. The freezing lesson (a fixed menu of six toggles),
the then-vs-now cases (no input) and the quiz's grading (booleans read from the validated
graph) take nothing from a visitor that could size or shape a computation: they stay here.

Results are kept in :data:`ROOM_CACHE`, one process-wide cache bounded by bytes: its keys are
programs visitors type or share. A class opening the same link runs one job
(``get_or_compute_once``); a transient failure (a full queue, a crash) is not kept. A rerun
while stepping through backward reads the traced graph and the replay from it and only
rebuilds the DOT text for the new step.
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
from components.contained import link_int, session_id
from components.theme import DARK, LIGHT
from torchatlas.autograd import BackwardTrace, ErrorCode, Graph, ProgramRefused, parse
from torchatlas.autograd.examples import DEFAULT_EXAMPLE, EXAMPLES, Example
from torchatlas.autograd.freeze import BLOCKS, FreezeReport, freeze
from torchatlas.autograd.history import ThenNow, then_and_now
from torchatlas.autograd.jobs import RUN, ProgramReply, ProgramRun
from torchatlas.autograd.parser import MAX_SOURCE
from torchatlas.autograd.quiz import Question, Score, grade
from torchatlas.cache import BoundedCache
from torchatlas.i18n import translate
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandboxed import JobFailure, run_room_job

EXAMPLE_KEY, PROGRAM_KEY, SEED_KEY = "autograd_example", "autograd_program", "autograd_seed"
ROOT_KEY, STEP_KEY = "autograd_root", "autograd_step"
REVEALED_KEY, SIGNATURE_KEY = "autograd_revealed", "autograd_signature"
LINK_BROKEN_KEY, TRAIN_PREFIX = "autograd_link_broken", "autograd_train_"
LINK_NOTES_KEY, LINK_ROOT_KEY = "autograd_link_notes", "autograd_link_root"
QUIZ_PREFIX, PANEL_KEY = "autograd_quiz_", "autograd_panel"
URL_EXAMPLE, URL_PROGRAM, URL_SEED = "a_ex", "a_prog", "a_seed"
URL_ROOT, URL_STEP = "a_root", "a_step"
CUSTOM = "custom"
MAX_SEED = 10**6
MAX_STEP = 10**4  # far above any replay's steps (a program runs at most 300 operations)
JOB_TIMEOUT_S = 2.5  # CPU seconds for one program and its backward (honest ones take ms)
CACHE_BYTES = 32 << 20
ROOM_CACHE: BoundedCache[tuple, Any] = BoundedCache(CACHE_BYTES)


@dataclass(frozen=True)
class Refusal:
    code: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """One program, seed and root: refused (by the parser here, or the engine in the job),
    run in the sandbox (``run``), or without a result (``failure``: the sandbox's limits, its
    queue, a crash, a reply outside its declared types)."""

    refusal: Refusal | None = None
    run: ProgramRun | None = None
    failure: JobFailure | None = None

    @property
    def worth_keeping(self) -> bool:
        return self.failure is None or not self.failure.transient


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
    failure: JobFailure | None = None  # the sandbox gave no result

    @property
    def total_steps(self) -> int:
        return 0 if self.trace is None else len(self.trace.steps)


# --------------------------------------------------------------------------- URL


def _link_number(key: str, low: int, high: int, default: int) -> int | None:
    """A whole number from the link's ``key`` (strict ASCII digits, within bounds); None
    when the link has none. A value that is not one is noted for the page and replaced by
    ``default``."""
    if key not in st.query_params:
        return None
    value = link_int(st.query_params.get(key), low=low, high=high)
    if value is None:
        note = ("link_bad_number", {"key": key, "low": low, "high": high, "value": default})
        st.session_state.setdefault(LINK_NOTES_KEY, []).append(note)
        return default
    return value


def _link_name(text: object) -> bool:
    return isinstance(text, str) and len(text) <= 40 and text.isascii() and text.isidentifier()


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
    seed = _link_number(URL_SEED, 0, MAX_SEED, 0)
    st.session_state.setdefault(SEED_KEY, seed or 0)
    if URL_ROOT in query:
        root = query.get(URL_ROOT)
        if _link_name(root):
            st.session_state.setdefault(ROOT_KEY, root)
            st.session_state[LINK_ROOT_KEY] = root  # told if the program has no such root
        else:
            st.session_state[LINK_BROKEN_KEY] = True
    step = _link_number(URL_STEP, 0, MAX_STEP, 0)
    if step is not None:
        st.session_state.setdefault(STEP_KEY, step)


def take_link_broken() -> bool:
    return bool(st.session_state.pop(LINK_BROKEN_KEY, False))


def take_link_notes() -> list[tuple[str, dict[str, Any]]]:
    """What the link carried that the room could not use, each a text key and its values."""
    return list(st.session_state.pop(LINK_NOTES_KEY, None) or ())


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


def _refusal(code: str, params: dict[str, Any]) -> Refusal | None:
    """The engine's coded refusal from the job, if it names one of the room's own codes
    (the page then shows the room's text for it); None for anything else."""
    return Refusal(code, params) if code in {c.value for c in ErrorCode} else None


def _compute(program: str, seed: int, root: str | None, visitor: str) -> Outcome:
    try:
        parse(program)  # the first wall, here: clear refusals, nothing evaluated
    except ProgramRefused as refused:
        return Outcome(refusal=Refusal(str(refused.code), dict(refused.params)))
    job = run_room_job(
        RUN,
        {"program": program, "seed": seed, "root": root},
        ProgramReply,
        session_id=visitor,
        timeout_s=JOB_TIMEOUT_S,
    )
    if job.refused is not None:
        refusal = _refusal(*job.refused)
        if refusal is None:
            return Outcome(failure=JobFailure("untrusted"))
        return Outcome(refusal=refusal)
    if job.failure is not None:
        return Outcome(failure=job.failure)
    try:
        return Outcome(run=job.value.to_run())
    except SchemaError:  # the child's reply is hostile input: it must hold together
        return Outcome(failure=JobFailure("untrusted"))


def computed(program: str, seed: int, root: str | None) -> Outcome:
    """A program, seed and root run in the sandbox (or refused), cached: a class opening
    the same link runs one job; a transient failure is not kept."""
    visitor = session_id()
    return ROOM_CACHE.get_or_compute_once(
        ("run", program, seed, root),
        lambda: _compute(program, seed, root, visitor),
        keep=lambda outcome: outcome.worth_keeping,
    )


def read_room() -> Room:
    program = str(st.session_state.get(PROGRAM_KEY, ""))[: MAX_SOURCE + 1]
    seed = int(st.session_state.get(SEED_KEY, 0) or 0)
    key = st.session_state.get(EXAMPLE_KEY)
    example = EXAMPLES.get(key) if key in EXAMPLES else None
    if example is not None and example.program.strip() != program.strip():
        example = None
    outcome = computed(program, seed, None)
    if outcome.run is None:
        return Room(
            program, seed, example, outcome.refusal, None, None, None, None, outcome.failure
        )
    graph, result, code = outcome.run.graph, outcome.run.trace, outcome.run.code
    root = None
    if graph.error is None and graph.roots:
        wanted = st.session_state.get(ROOT_KEY)
        root = wanted if wanted in graph.roots else graph.default_root or graph.roots[0]
        linked = st.session_state.pop(LINK_ROOT_KEY, None)
        if linked is not None and linked != root:
            note = ("root_missing", {"root": linked, "used": root})
            st.session_state.setdefault(LINK_NOTES_KEY, []).append(note)
        st.session_state[ROOT_KEY] = root
        if result is None or result.root != root:
            again = computed(program, seed, root)
            if again.run is None:
                failure = again.failure or JobFailure("untrusted")
                return Room(program, seed, example, None, graph, None, None, code, failure)
            result = again.run.trace
            graph = again.run.graph  # with a leaf root, its AccumulateGrad joins the graph
    else:
        result = None
    return Room(program, seed, example, None, graph, root, result, code)


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
