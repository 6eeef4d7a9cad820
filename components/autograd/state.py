"""The autograd room's state: its session keys, its link, its cached engine calls and the
ready-to-show pieces the panels ask for.

The link is declared once in :data:`torchatlas.autograd.link.LINK` (``a_ex``, ``a_prog``,
``a_seed``, ``a_root``, ``a_step``) and read, written and told about by the kit
(:class:`components.kit.link_state.RoomLink`); every session key starts with ``autograd_``.
On a session's first run :func:`start` reads the link, then sets the program box from it (a
program in the link, else its example).

A program is text a visitor types or a link carries, so the server only *checks* it (the
parser: clear, translated refusals, nothing evaluated); running it, its backward and reading the
graph happen in a sandbox job (``autograd.run``: a confined child with a memory limit and a CPU
deadline, through the shared fair queue), whose reply is rebuilt against :class:`ProgramReply`'s
types and bounds before anything draws it. The freezing lesson (a fixed menu of six toggles),
the then-vs-now cases (no input) and the quiz's grading (booleans read from the validated
graph) take nothing from a visitor that could size or shape a computation: they stay here.

Results and drawings are kept in :data:`ROOM_CACHE`, one process-wide cache bounded by bytes:
its keys are programs visitors type or share. A class opening the same link runs one job
(``get_or_compute_once``); a transient failure (a full queue, a crash) is not kept. The panels
ask once per thing they show (:func:`graph_view`, :func:`details_view`, :func:`freeze_view`):
this module builds it with ``draw`` and keeps it, so a step click rebuilds only the new step's
picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from components.autograd.draw import (
    dot_colors,
    dot_text,
    freeze_bar_html,
    freeze_code,
    grads_table,
    optimizer_table,
    outcome_text,
    quiz_markdown,
    saved_lines,
    saved_text,
    scrolling,
    step_text,
    variables_table,
    version_note,
)
from components.i18n import language
from components.kit.predict_reveal import revealed
from components.kit.room_state import RoomState
from components.theme import DARK, LIGHT, is_dark, palette
from torchatlas.autograd import AutogradError, BackwardTrace, Graph, ProgramRefused, parse
from torchatlas.autograd.errors import ErrorCode, ProgramError
from torchatlas.autograd.examples import DEFAULT_EXAMPLE, EXAMPLES, Example
from torchatlas.autograd.freeze import BLOCKS, FreezeReport, freeze
from torchatlas.autograd.history import ThenNow, then_and_now
from torchatlas.autograd.jobs import ProgramRun, contained_run
from torchatlas.autograd.link import LINK as LINK_SPEC
from torchatlas.autograd.parser import MAX_SOURCE
from torchatlas.autograd.quiz import Question
from torchatlas.autograd.quiz import grade as grade_prediction
from torchatlas.clients import Visitor
from torchatlas.i18n import translate
from torchatlas.quiz import Grade
from torchatlas.sandboxed import JobFailure

JOB_TIMEOUT_S = 2.5  # CPU seconds for one program and its backward (honest ones take ms)
CACHE_BYTES = 32 << 20
ROOM = RoomState(LINK_SPEC, cache_bytes=CACHE_BYTES, link_values=lambda: link_values())
LINK = ROOM.link
ROOM_CACHE = ROOM.cache
EXAMPLE_KEY, PROGRAM_KEY = LINK.key("a_ex"), "autograd_program"
LINK_PROGRAM_KEY = LINK.key("a_prog")  # the link's program, read once into the box
SEED_KEY, STEP_KEY = LINK.key("a_seed"), LINK.key("a_step")
ROOT_REQUEST_KEY = LINK.key("a_root")  # the root the link (or the visitor) asked for
ROOT_KEY = "autograd_root"  # the root picker: the asked-for root when the graph has it
ROOT_TOLD_KEY = "autograd_root_told"  # a missing root is told once
NOTES_KEY = "autograd_notes"
TRAIN_PREFIX, QUIZ_PREFIX = "autograd_train_", "autograd_quiz_"
PANEL_KEY = "autograd_panel"
# the step control's buttons, the quiz's "try again", and the page's keyed boxes
RESET_KEY, PREV_KEY = "autograd_reset", "autograd_prev"
NEXT_KEY, ALL_KEY = "autograd_next", "autograd_all"
AGAIN_KEY, GRAPH_BOX, SHARE_BOX = "autograd_again", "autograd_graph", "autograd_share"
NEXT_QUESTION_KEY = "autograd_next_question"
CUSTOM = "custom"


@dataclass(frozen=True)
class Outcome:
    """One program, seed and root: refused (by the parser here, or the engine in the job),
    run in the sandbox (``run``), or without a result (``failure``: the sandbox's limits, its
    queue, a crash, a reply outside its declared types)."""

    refusal: AutogradError | None = None
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
    refusal: AutogradError | None
    graph: Graph | None
    root: str | None
    trace: BackwardTrace | None
    code: str | None  # the program as plain PyTorch
    failure: JobFailure | None = None  # the sandbox gave no result

    @property
    def total_steps(self) -> int:
        return 0 if self.trace is None else len(self.trace.steps)


# --------------------------------------------------------------------------- link


def start() -> None:
    """Every run, before the widgets: on a session's first run the link's values (the kit),
    then the program box from them: the link's program if it carries one, else its example's.
    A program a test or an earlier run already put in the box is kept."""
    if LINK.start() is None:
        return
    state = st.session_state
    shared = str(state.pop(LINK_PROGRAM_KEY, "") or "")
    if PROGRAM_KEY in state:
        state[EXAMPLE_KEY] = _example_of(str(state[PROGRAM_KEY]))
    elif shared:
        state[PROGRAM_KEY], state[EXAMPLE_KEY] = shared, CUSTOM
    else:
        state[PROGRAM_KEY] = EXAMPLES[str(state[EXAMPLE_KEY])].program


def _example_of(program: str) -> str:
    match = (k for k, e in EXAMPLES.items() if e.program.strip() == program.strip())
    return next(match, CUSTOM)


def link_values() -> dict[str, Any]:
    """The room's state in its link's terms (what :meth:`RoomLink.write` puts in the address
    bar): an example by its key, else the program's text."""
    state = st.session_state
    values = LINK.values()
    program = str(state.get(PROGRAM_KEY, ""))
    example = EXAMPLES.get(str(state.get(EXAMPLE_KEY)))
    if example is not None and example.program.strip() == program.strip():
        values["a_ex"], values["a_prog"] = example.key, ""
    else:
        values["a_ex"], values["a_prog"] = DEFAULT_EXAMPLE, program
    return values


write_link = ROOM.write_link  # the address bar in step with link_values (own names only)


def share_link() -> str:
    """An absolute link to this state when the browser told us the page's address."""
    base = ""
    try:
        url = st.context.url or ""
    except Exception:
        url = ""
    if url:
        base = url.split("?", 1)[0]
    return f"{base}?{urlencode({**LINK.query(link_values()), 'lang': language()}, doseq=True)}"


def notes() -> list[tuple[str, dict[str, Any]]]:
    """What the link asked for that this program cannot give (a root it does not have),
    each a text key under ``autograd.program`` and its values; told once."""
    return list(st.session_state.pop(NOTES_KEY, None) or ())


# --------------------------------------------------------------------------- callbacks


def load_example() -> None:
    """The example menu's callback: its program replaces the box's; the replay and the
    quiz start over."""
    key = st.session_state.get(EXAMPLE_KEY)
    if key in EXAMPLES:
        st.session_state[PROGRAM_KEY] = EXAMPLES[key].program
    _start_over()


def program_edited() -> None:
    st.session_state[EXAMPLE_KEY] = _example_of(str(st.session_state.get(PROGRAM_KEY, "")))
    _start_over()


def _start_over() -> None:
    for key in (ROOT_KEY, STEP_KEY, ROOT_REQUEST_KEY):
        st.session_state.pop(key, None)
    forget_quiz()


def set_step(value: int) -> None:
    st.session_state[STEP_KEY] = max(0, value)


def root_picked() -> None:
    """The root picker's callback: the visitor's root is the one asked for now."""
    st.session_state[ROOT_REQUEST_KEY] = str(st.session_state.get(ROOT_KEY) or "")
    set_step(0)


# --------------------------------------------------------------------------- the room


def _compute(program: str, seed: int, root: str | None, who: Visitor) -> Outcome:
    try:
        parsed = parse(program)  # the first wall, here: clear refusals, nothing evaluated
    except ProgramRefused as refused:
        return Outcome(refusal=refused)
    job = contained_run(parsed, seed, root, visitor=who, timeout_s=JOB_TIMEOUT_S)
    if job.refused is not None:
        code, params = job.refused
        if code not in {c.value for c in ErrorCode}:  # not one of the room's own codes
            return Outcome(failure=JobFailure("untrusted"))
        return Outcome(refusal=AutogradError(code, **params))
    if job.failure is not None:
        return Outcome(failure=job.failure)
    return Outcome(run=job.value)


def computed(program: str, seed: int, root: str | None) -> Outcome:
    """A program, seed and root run in the sandbox (or refused), cached: a class opening
    the same link runs one job; a transient failure is not kept."""
    return ROOM.job(
        ("run", program, seed, root),  # the visitor is only its place in line
        lambda who: _compute(program, seed, root, who),
    )


def _note(key: str, **params: Any) -> None:
    st.session_state.setdefault(NOTES_KEY, []).append((key, params))


def _pick_root(graph: Graph) -> str:
    """The root the visitor (or the link) asked for when the graph has it, else the graph's
    own choice (a link's root the graph lacks is told once)."""
    state = st.session_state
    requested = str(state.get(ROOT_REQUEST_KEY) or "")
    picked = state.get(ROOT_KEY)
    wanted = picked if picked in graph.roots else requested
    root = wanted if wanted in graph.roots else graph.default_root or graph.roots[0]
    if requested and requested not in graph.roots and state.get(ROOT_TOLD_KEY) != requested:
        state[ROOT_TOLD_KEY] = requested
        _note("root_missing", root=requested, used=root)
    state[ROOT_KEY] = root
    return root


def read_room() -> Room:
    program = str(st.session_state.get(PROGRAM_KEY, ""))[: MAX_SOURCE + 1]
    seed = int(st.session_state.get(SEED_KEY, 0) or 0)
    example = EXAMPLES.get(str(st.session_state.get(EXAMPLE_KEY)))
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
        root = _pick_root(graph)
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
    """The step shown: the one asked for, within the replay (a link's step past the end
    shows every step; the link keeps what it asked for)."""
    step = int(st.session_state.get(STEP_KEY, 0) or 0)
    return min(max(step, 0), room.total_steps)


# --------------------------------------------------------------------------- what panels show


@dataclass(frozen=True)
class ProgramStop:
    """Why the program (or its backward) stopped, ready to show: the room's coded error, the
    in-place trap's version note, and PyTorch's own words."""

    error: AutogradError
    note: str | None
    torch_said: str | None


def program_stop(room: Room) -> ProgramStop | None:
    """The stop of the program, else of its backward; None when neither stopped."""
    assert room.graph is not None
    stop: ProgramError | None = room.graph.error
    if stop is None and room.trace is not None:
        stop = room.trace.error
    if stop is None:
        return None
    note = version_note(room.graph, stop, language())
    return ProgramStop(stop.as_error(), note, stop.torch_message)


@dataclass(frozen=True)
class GraphView:
    """One step of the replay, ready to show: the DOT text in the theme's colours and the
    reader's words, what the step did, and the ``.grad`` table."""

    dot: str
    step_text: str | None
    grads: str | None


def graph_view(room: Room, step: int) -> GraphView:
    """The graph at ``step``, built once per program, root, step, theme and language."""
    assert room.graph is not None
    graph, trace = room.graph, room.trace
    colors = dot_colors(palette(), is_dark())

    def build(lang: str, dark: bool) -> GraphView:
        words = {w: translate(f"autograd.graph.dot_{w}", lang) for w in ("leaf", "saved")}
        dot = dot_text(graph, trace, step, colors, words)
        if trace is None:
            return GraphView(dot, None, None)
        grads = scrolling(grads_table(trace, step, lang), translate("autograd.a11y.grads", lang))
        return GraphView(dot, step_text(trace, step, lang), grads)

    return ROOM.ready(("graph", room.program, room.seed, room.root, step), build)


@dataclass(frozen=True)
class DetailsView:
    """The details tab, ready to show: the variables table and what each node saved."""

    variables: str | None
    saved: tuple[str, ...]


def details_view(room: Room) -> DetailsView:
    assert room.graph is not None
    graph = room.graph

    def build(lang: str, dark: bool) -> DetailsView:
        table = None
        if graph.variables:
            label = translate("autograd.a11y.variables", lang)
            table = scrolling(variables_table(graph, lang), label)
        return DetailsView(table, tuple(saved_lines(graph, lang)))

    return ROOM.ready(("details", room.program, room.seed, room.root), build)


# --------------------------------------------------------------------------- quiz


def quiz_variables(room: Room) -> tuple[str, ...]:
    if room.graph is None:
        return ()
    names = [v.name for v in room.graph.variables]
    chosen = [n for n in (room.example.quiz if room.example else ()) if n in names]
    return tuple(chosen or names[:3])


def quiz_questions(room: Room) -> tuple[tuple[str, Question], ...]:
    """The quiz's questions in order: each chosen variable's three flags (none when the
    program stopped before backward could be asked about)."""
    if room.graph is None or room.graph.error is not None:
        return ()
    return tuple((v, q) for v in quiz_variables(room) for q in Question)


def quiz_key(variable: str, question: Question) -> str:
    """One question's key for the kit's predict-then-reveal (the variable and the flag)."""
    return f"{QUIZ_PREFIX}{variable}_{question}"


def _grades(room: Room) -> list[Grade | None]:
    return [revealed(quiz_key(v, q)) for v, q in quiz_questions(room)]


def quiz_current(room: Room) -> tuple[int, str, Question] | None:
    """The question to ask now (its number from 1, variable and flag): the first not yet
    revealed; None when every one is."""
    for number, ((variable, question), grade) in enumerate(
        zip(quiz_questions(room), _grades(room), strict=True), start=1
    ):
        if grade is None:
            return number, variable, question
    return None


def grade(room: Room, variable: str, question: Question, given: str) -> Grade:
    """A prediction graded against what torch reported for this program and root."""
    assert room.graph is not None
    return grade_prediction(room.graph, room.trace, variable, question, given)


def quiz_table(room: Room) -> str | None:
    """The answers revealed so far, one row each (None before the first)."""
    rows = [
        (variable, question, grade)
        for (variable, question), grade in zip(quiz_questions(room), _grades(room), strict=True)
        if grade is not None
    ]
    return quiz_markdown(rows, language()) if rows else None


def quiz_score(room: Room) -> tuple[int, int] | None:
    """(right, asked) once every question of the quiz is revealed, else None."""
    grades = _grades(room)
    if not grades or any(g is None for g in grades):
        return None
    return sum(g.correct for g in grades if g is not None), len(grades)


def forget_quiz() -> None:
    """Every prediction of the quiz cleared (a new program, or "try again")."""
    for key in [k for k in st.session_state if str(k).startswith(QUIZ_PREFIX)]:
        st.session_state.pop(key, None)


# --------------------------------------------------------------------------- freezing


def trainable() -> tuple[str, ...]:
    for block in BLOCKS:
        st.session_state.setdefault(f"{TRAIN_PREFIX}{block}", block == "fc")
    return tuple(b for b in BLOCKS if st.session_state.get(f"{TRAIN_PREFIX}{b}"))


@dataclass(frozen=True)
class FreezeView:
    """The freezing panel, ready to show: the report, its bar (HTML), the optimiser table
    (markdown), the recipe as code, and the saved bytes as text."""

    report: FreezeReport
    bar: str
    table: str
    code: str
    saved: tuple[str, str]


def freeze_report(blocks: tuple[str, ...]) -> FreezeReport:
    """Cached per trainable set: each costs a real ResNet-18 forward and backward."""
    return ROOM.cached(("freeze", blocks), lambda: freeze(trainable=blocks))


def freeze_view(blocks: tuple[str, ...]) -> FreezeView:
    """The freezing panel for a trainable set, built once per set, theme and language."""

    def build(lang: str, dark: bool) -> FreezeView:
        report = freeze_report(blocks)
        bar = freeze_bar_html(report, DARK if dark else LIGHT, lang)
        table = scrolling(optimizer_table(report, lang), translate("autograd.a11y.optimizer", lang))
        return FreezeView(report, bar, table, freeze_code(report), saved_text(report))

    return ROOM.ready(("freeze_view", blocks), build)


@dataclass(frozen=True)
class HistoryCase:
    """One then-vs-now case, ready to show: its key, then each outcome's code and text (the
    old way first)."""

    key: str
    outcomes: tuple[tuple[str, str], ...]


def history_view() -> tuple[HistoryCase, ...]:
    """The then-vs-now cases (no input: the same for everyone), run once per process and
    worded once per language."""
    cases: tuple[ThenNow, ...] = ROOM.cached(("history",), then_and_now)

    def build(lang: str, dark: bool) -> tuple[HistoryCase, ...]:
        return tuple(
            HistoryCase(case.key, tuple((o.code, outcome_text(o, lang))
                                        for o in (case.then, *case.now)))
            for case in cases
        )  # fmt: skip

    return ROOM.ready(("history_view",), build)
