"""The strides room's state: its session keys, its link, its cached engine calls and the
ready-to-show pictures the panels ask for.

Every session key starts with ``strides_``. The link is declared once in
:data:`torchatlas.strides.link.LINK` (``s_shape``, ``s_dtype``, ``s_ops`` one value per line
of the chain box, ``s_seed``, ``s_step``) and read, written and told about by the kit
(:class:`components.kit.link_state.RoomLink`): a field that does not parse keeps its default
and the page names it; ``lang`` and other rooms' names are never touched.

The chain itself (and every description of it, a write-through, a quiz question) runs in a
sandbox job (:mod:`torchatlas.strides.jobs`): one job per chain gives every step, so clicking
through steps starts none; its checked result is kept in :data:`ROOM_CACHE`.

Everything the room keeps between reruns (results, figures, HTML) lives in
:data:`ROOM_CACHE`, one process-wide cache bounded by bytes (:mod:`torchatlas.cache`): its
keys are what visitors type or share, so an entry-count bound would let a few heavy chains
take gigabytes. Each entry is measured when it is stored. Lookups stay cheap on the hot
path (one lock, one dict), unlike ``st.cache_data``, which hashes every argument and
unpickles a copy on each call. Values are shared read-only across sessions: nobody mutates
them (the flat index arrays are read-only to hold everyone to that). The panels ask once
per picture (:func:`explorer_view`, :func:`history_view`); this module builds it with
``draw`` in the reader's theme and language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from components.kit.room_state import RoomState
from components.strides.draw import (
    MAX_DRAWN,
    ReadyHtml,
    flatten,
    history_html,
    ravel,
    storage_figure,
    tensor_figure,
    unravel,
)
from components.theme import DARK, LIGHT, is_dark
from torchatlas.clients import Visitor
from torchatlas.i18n import translate
from torchatlas.quiz import Grade
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandboxed import JobFailure, RoomJob, run_room_job
from torchatlas.strides import (
    MAX_OP_TEXT,
    MAX_OPS,
    START_DTYPES,
    OpParseError,
    Step,
    parse_chain,
    parse_index,
    parse_shape,
    start_values_exact,
)
from torchatlas.strides.dtypes import EXACT_UP_TO
from torchatlas.strides.errors import from_parse_error
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.jobs import (
    CHAIN,
    ERROR_CODES,
    QUESTION,
    WRITE,
    ChainRun,
    QuizItem,
    WireChain,
    WireQuiz,
    checked_chain,
    checked_quiz,
    checked_write,
    plan_chain,
    wire_limits,
    with_refused,
)
from torchatlas.strides.link import DEFAULT, LAST_STEP
from torchatlas.strides.link import LINK as LINK_SPEC
from torchatlas.strides.parser import parse_write, write_to_json
from torchatlas.strides.quiz import grade_steps
from torchatlas.strides.writes import WriteResult

# --------------------------------------------------------------------------- keys

CACHE_BYTES = 64 * 2**20  # the chains' steps, their figures and views (see cached engine calls)
ROOM = RoomState(LINK_SPEC, cache_bytes=CACHE_BYTES, link_values=lambda: link_values())
LINK = ROOM.link
ROOM_CACHE = ROOM.cache
SHAPE_KEY, DTYPE_KEY = LINK.key("s_shape"), LINK.key("s_dtype")
OPS_KEY = LINK.key("s_ops")  # the chain box's text (the link's ops, one per line)
SEED_KEY = LINK.key("s_seed")
LINK_STEP_KEY = LINK.key("s_step")  # the step asked for (the link's, or the visitor's pick)
STEP_KEY, SELECTION_KEY = "strides_step", "strides_selection"  # the picker; a selection
TENSOR_CHART, STORAGE_CHART = "strides_tensor_chart", "strides_storage_chart"
PANEL_KEY = "strides_panel"
EXAMPLE_KEY, ADD_OP_KEY = "strides_example", "strides_add_op"
SIGNATURE_KEY = "strides_signature"  # the chain the step picker was last set for
WRITE_RESULT_KEY = "strides_write_result"  # the write last applied, and to which chain
TYPED_ELEMENT_KEY, TYPED_CELL_KEY = "strides_typed_element", "strides_typed_cell"
TYPED_PROBLEM_KEY = "strides_typed_problem"
QUIZ_PREFIX = "strides_quiz_"
NEXT_QUESTION_PREFIX = "strides_next_question_"  # the quiz's "next" button, per seed
WRITE_TEXT_KEY, WRITE_STEP_KEY = "strides_write_text", "strides_write_step"
WRITE_FORM, DEFAULT_WRITE = "strides_write_form", "fill_(-1)"
TYPING_KEY, CLEAR_KEY = "strides_typing", "strides_clear"  # select by typing; clear it
BYTES_EXAMPLE_KEY = "strides_bytes_example"  # the byte lens's "try the example"
UNFOLD_KEY = "strides_unfold"  # a following student's "change the values yourself" button

Chain = tuple[tuple[int, ...], str, tuple[str, ...]]  # (shape, dtype, ops): a cache key


@dataclass(frozen=True)
class Room:
    """This run's chain: the setup box as typed and parsed, and its traced steps."""

    shape_text: str
    shape: tuple[int, ...]
    dtype: str
    ops: tuple[str, ...]
    too_many_ops: bool  # the box holds more than MAX_OPS ops: only the first are used
    steps: tuple[Step, ...]

    @property
    def chain(self) -> Chain:
        return self.shape, self.dtype, self.ops

    @property
    def ok_steps(self) -> list[Step]:
        return [step for step in self.steps if step.error is None]

    @property
    def failed(self) -> Step | None:
        return next((step for step in self.steps if step.error is not None), None)

    @property
    def start_note(self) -> tuple[str, dict[str, Any]] | None:
        """The setup caption's key and parameters when the start values are not the storage
        indices exactly (the dtype rounds, wraps or turns them True), else None."""
        if start_values_exact(self.steps[0].numel or 0, self.dtype):
            return None
        if self.dtype == "bool":
            return "strides.setup.inexact_bool", {}
        limit = EXACT_UP_TO[self.dtype]
        if limit < 0:
            return "strides.setup.inexact_none", {"dtype": self.dtype}
        return "strides.setup.inexact", {"dtype": self.dtype, "limit": limit}


# --------------------------------------------------------------------------- link and setup


def start() -> None:
    """Every run, before the widgets: on a session's first run the link's values (the kit);
    its ops become the chain box's lines. Values a test or an earlier run set are kept."""
    if LINK.start() is None:
        return
    ops = st.session_state.get(OPS_KEY)
    if isinstance(ops, tuple | list):
        st.session_state[OPS_KEY] = "\n".join(ops)


def ops_of(text: str) -> tuple[str, ...]:
    """The chain box's lines as the link carries them: every non-empty line as typed (the
    parser strips and reads them when the chain runs), the first :data:`MAX_OPS`."""
    return tuple(line for line in text.split("\n") if line)[:MAX_OPS]


def link_values() -> dict[str, Any]:
    """The room's state in its link's terms (what :meth:`RoomLink.write` puts in the address
    bar): the boxes as typed, the seed, and the step asked for."""
    values = LINK.values()
    values["s_ops"] = ops_of(str(st.session_state.get(OPS_KEY, "")))
    return values


write_link = ROOM.write_link  # the address bar in step with link_values (own names only)


class ChainUnavailable(Exception):
    """The chain's job has no result: the sandbox's ``failure`` or the engine's ``refused``
    (code and parameters), in ``outcome``."""

    def __init__(self, outcome: RoomJob[Any]) -> None:
        super().__init__(outcome.failure.kind if outcome.failure else "refused")
        self.outcome = outcome


def read_room() -> Room:
    """The setup box, parsed and traced; the URL follows it. Raises
    :class:`~torchatlas.strides.StridesError` for a refused shape or chain (both parsers
    refuse over-long text at once, as links and scripts skip the boxes' max_chars), and
    :class:`ChainUnavailable` when the chain's job has no result."""
    shape_text = str(st.session_state[SHAPE_KEY])
    dtype = str(st.session_state[DTYPE_KEY])
    shape = parse_shape(shape_text)
    all_ops = parse_chain(str(st.session_state[OPS_KEY]))
    ops = tuple(all_ops[:MAX_OPS])
    outcome = chain_job(shape, dtype, ops)
    if outcome.value is None:
        raise ChainUnavailable(outcome)
    return Room(shape_text, shape, dtype, ops, len(all_ops) > MAX_OPS, outcome.value.steps)


def shown_step(room: Room) -> int:
    """Set the step picker for this chain: on the session's first chain, the step asked for
    (a link's; past the end: the last); on a changed chain, its last step; and the last one
    when the remembered step is no longer one of it. Forgets a write made on another chain.
    Returns the chain's last step."""
    state = st.session_state
    last = len(room.ok_steps) - 1
    if state.get(SIGNATURE_KEY) != room.chain:
        if SIGNATURE_KEY in state:  # another chain than the one the link asked about
            state[LINK_STEP_KEY] = LAST_STEP
        state[SIGNATURE_KEY] = room.chain
        asked = state.get(LINK_STEP_KEY, LAST_STEP)
        state[STEP_KEY] = min(asked if isinstance(asked, int) else LAST_STEP, last)
        state.pop(WRITE_RESULT_KEY, None)
    if state.get(STEP_KEY) not in range(last + 1):
        state[STEP_KEY] = last
    return last


def step_picked(last: int) -> None:
    """The step picker's callback: the step picked is the one the link asks for (the last
    step as the link's "last", so a longer chain later still opens on its end)."""
    picked = st.session_state.get(STEP_KEY)
    st.session_state[LINK_STEP_KEY] = (
        picked if isinstance(picked, int) and picked < last else (LAST_STEP)
    )


def load_example(key: str | None = None) -> None:
    """The example menu's callback (or a button's, naming the example): its chain replaces
    the box's."""
    if key is not None:
        st.session_state[EXAMPLE_KEY] = key
    key = st.session_state.get(EXAMPLE_KEY)
    if key in EXAMPLES:
        example = EXAMPLES[key]
        st.session_state[SHAPE_KEY] = ", ".join(map(str, example.shape))
        st.session_state[DTYPE_KEY] = example.dtype
        st.session_state[OPS_KEY] = "\n".join(example.ops)
        st.session_state.pop(STEP_KEY, None)
        st.session_state.pop(SELECTION_KEY, None)


def add_op() -> None:
    """Append the op just picked (or typed) to the chain, and empty the picker for the next."""
    op = st.session_state.get(ADD_OP_KEY)
    if op:
        # A typed op reaches here without a length limit: one character past the op limit
        # is enough for the op to be refused as too long, and keeps the box bounded.
        lines = parse_chain(str(st.session_state[OPS_KEY]), max_chars=None)[: MAX_OPS - 1]
        st.session_state[OPS_KEY] = "\n".join([*lines, str(op).strip()[: MAX_OP_TEXT + 1]])
        st.session_state.pop(STEP_KEY, None)
    st.session_state[ADD_OP_KEY] = None


# --------------------------------------------------------------------------- selection
# A selection is (step index, "element" or "cell", flat element number or cell number).


def chart_clicked(chart_key: str, kind: str, step_index: int) -> None:
    event = st.session_state.get(chart_key) or {}
    points = (event.get("selection") or {}).get("points") or []
    if points:
        custom = points[0].get("customdata")
        # Every trace carries the element/cell id as customdata; lit cells are drawn twice.
        if isinstance(custom, list):
            custom = custom[0] if custom else None
        value = custom if isinstance(custom, int | float) else points[0]["point_index"]
        st.session_state[SELECTION_KEY] = (step_index, kind, int(value))


def typed_element(step: Step) -> None:
    """The typed index box's callback: select that element, or remember why not."""
    text = str(st.session_state.get(TYPED_ELEMENT_KEY, ""))
    assert step.size is not None
    try:
        index = parse_index(text, step.size)
    except OpParseError as problem:
        st.session_state[TYPED_PROBLEM_KEY] = (problem.code, problem.params)
        return
    st.session_state.pop(TYPED_PROBLEM_KEY, None)
    st.session_state[SELECTION_KEY] = (step.index, "element", ravel(index, step.size))


def typed_problem() -> tuple[str, dict[str, Any]] | None:
    """The typed index's refusal (error code and parameters), if the last one was refused."""
    return st.session_state.get(TYPED_PROBLEM_KEY)


def typed_cell(step: Step) -> None:
    cell = st.session_state.get(TYPED_CELL_KEY)
    if cell is not None:
        st.session_state[SELECTION_KEY] = (step.index, "cell", int(cell))


def clear_selection() -> None:
    st.session_state.pop(SELECTION_KEY, None)


def resolve_selection(step: Step, steps: list[Step]) -> tuple[int | None, int | None]:
    """(focused element, lit cell) on ``step``; a selection made on another step carries over
    through the storage cell when both steps share a storage."""
    selection = st.session_state.get(SELECTION_KEY)
    if not selection:
        return None, None
    origin_index, kind, value = selection
    origin = next((s for s in steps if s.index == origin_index and s.error is None), None)
    if origin is None:
        return None, None
    if kind == "element":
        if not 0 <= value < (origin.numel or 0):
            return None, None
        assert origin.size is not None and origin.stride is not None
        # offset + Σ index·stride: exact at any size, with no per-element list
        index = unravel(value, origin.size)
        cell = (origin.storage_offset or 0) + sum(
            i * s for i, s in zip(index, origin.stride, strict=True)
        )
        element = value if origin_index == step.index else None
    else:
        cell, element = value, None
    if origin.storage_id != step.storage_id or origin.dtype != step.dtype:
        return None, None
    if step.storage_cells is not None and cell >= step.storage_cells:
        return None, None
    return element, cell


# --------------------------------------------------------------------------- write-through


def remember_write(room: Room, step_index: int, write: str) -> None:
    st.session_state[WRITE_RESULT_KEY] = (*room.chain, int(step_index), write)


def last_write(room: Room) -> tuple[int, RoomJob[WriteResult]] | None:
    """The write last applied to this chain (its step and the job's outcome), if any."""
    key = st.session_state.get(WRITE_RESULT_KEY)
    if key is None or key[:3] != room.chain:
        return None
    if not 0 <= key[3] < len(room.ok_steps):  # the step is no longer part of the chain
        return None
    return key[3], cached_write(*key, steps=len(room.ok_steps))


# --------------------------------------------------------------------------- quiz


def quiz_seed() -> int:
    return int(st.session_state[SEED_KEY])


def next_question(seed: int) -> None:
    st.session_state[SEED_KEY] = seed + 1


def quiz_dtype() -> str:
    """The quiz builds its start tensors in the room's dtype."""
    dtype = str(st.session_state.get(DTYPE_KEY, DEFAULT.dtype))
    return dtype if dtype in START_DTYPES else DEFAULT.dtype


def quiz_key(seed: int, dtype: str) -> str:
    """The kit's predict-then-reveal key of the question for ``seed`` in ``dtype``."""
    return f"{QUIZ_PREFIX}{seed}_{dtype}"


def grade_answer(item: QuizItem, answer: str, shown: dict[str, str] | None = None) -> Grade:
    """Graded against the question's chain as live torch ran it (in the question's job).
    ``shown`` maps the choices' words to the page's (the reader's language): the answer comes
    in those, and the grade is told in them. Raises OpParseError (``answer_too_long``)."""
    shown = shown or {}
    words = {text: word for word, text in shown.items()}
    grade = grade_steps(item.question, item.steps, words.get(answer, answer))
    return Grade(grade.correct, shown.get(grade.expected, grade.expected),
                 shown.get(grade.given, grade.given))  # fmt: skip


# --------------------------------------------------------------------------- cached engine calls
# The pictures draw steps of up to MAX_DRAWN elements, so steps keep per-element lists only
# up to that size: a 24-op chain then weighs at most a few megabytes, however large its
# tensors (their numbers, footprints and code stay exact at every size).
LISTED_UP_TO = MAX_DRAWN
LIMITS = wire_limits(LISTED_UP_TO)  # a reply's bounds: its packed lists are one string each


def _checked(outcome: RoomJob[Any], check: Any) -> RoomJob[Any]:
    """A job's outcome with its value checked by ``check`` (the room's own agreement rules,
    past the codec's types and bounds) and its refusal's code one the room knows: anything
    else is an untrusted reply."""
    try:
        if outcome.value is not None:
            return RoomJob(check(outcome.value), None, None, outcome.usage)
        if outcome.refused is not None and outcome.refused[0] not in ERROR_CODES:
            raise SchemaError("a refusal the room does not know")
        if outcome.ok:  # a value that is None (the quiz's "no question for this seed")
            return RoomJob(check(None), None, None, outcome.usage)
    except (SchemaError, TypeError, ValueError, IndexError, KeyError, ArithmeticError):
        # a reply that passed the codec's types but not the room's rules: never drawn
        return RoomJob(failure=JobFailure("untrusted"), usage=outcome.usage)
    return outcome


def chain_job(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> RoomJob[ChainRun]:
    """The chain's job (every step and the code at once), shared read-only across sessions:
    a class opening the same link runs one job, and reruns and step clicks run none."""

    def compute(who: Visitor) -> RoomJob[ChainRun]:
        plan = plan_chain(ops)  # the ops are parsed here and travel as data
        params = {"shape": list(shape), "dtype": dtype, "ops": list(plan.ops),
                  "listed_up_to": LISTED_UP_TO}  # fmt: skip
        outcome = run_room_job(CHAIN, params, WireChain, visitor=who, limits=LIMITS)
        return _checked(outcome, lambda run: with_refused(checked_chain(run), plan, shape, dtype))

    return ROOM.job(("steps", shape, dtype, ops), compute)


def cached_steps(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> tuple[Step, ...]:
    """The chain's steps (its job ran when the room was read: a cache hit here)."""
    run = chain_job(shape, dtype, ops).value
    return run.steps if run is not None else ()


def cached_code(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> str:
    run = chain_job(shape, dtype, ops).value
    return run.code if run is not None else ""


def cached_write(
    shape: tuple[int, ...], dtype: str, ops: tuple[str, ...], step: int, write: str, *, steps: int
) -> RoomJob[WriteResult]:
    def compute(who: Visitor) -> RoomJob[WriteResult]:
        text = write.strip()
        try:  # an unreadable write costs nothing: refused here, before any job
            parsed = parse_write(text)
        except OpParseError as error:
            shown = str(error.params.get("text", text))
            refused = from_parse_error(error, shown)
            return RoomJob(WriteResult(text[:MAX_OP_TEXT], step, error=refused))
        params = {"shape": list(shape), "dtype": dtype, "ops": list(plan_chain(ops).ops),
                  "step": step, "write": write_to_json(parsed),
                  "listed_up_to": LISTED_UP_TO}  # fmt: skip
        outcome = run_room_job(WRITE, params, WriteResult, visitor=who)
        return _checked(outcome, lambda result: checked_write(result, steps))

    return ROOM.job(("write", shape, dtype, ops, step, write), compute)


def history_view(room: Room, shown: int) -> ReadyHtml:
    """The op history's HTML for this chain and step, in the reader's language and theme,
    built once and kept."""
    chain = room.chain

    def build(lang: str, dark: bool) -> ReadyHtml:
        labels = {name: translate(f"strides.{key}", lang) for name, key in HISTORY_LABELS.items()}
        steps = [step for step in cached_steps(*chain) if step.error is None]
        return ReadyHtml(history_html(steps, labels, shown, DARK if dark else LIGHT, dark))

    return ROOM.ready(("history", chain, shown), build)


HISTORY_LABELS = {
    "start": "kind.start", "same": "kind.same", "view": "kind.view", "copy": "kind.copy",
    "op": "history.op", "size": "facts.size", "stride": "facts.stride",
    "offset": "facts.offset", "storage": "facts.storage", "footprint": "history.footprint",
    "caption": "history.caption", "title": "history.title",
}  # fmt: skip


def cached_question(seed: int, dtype: str = DEFAULT.dtype) -> RoomJob[QuizItem | None]:
    """The question for ``seed`` and its chain, from a job (the seed may come from a link,
    and the question's shapes and ops from the seed); a value of None: no question can be
    drawn for this seed."""

    def compute(who: Visitor) -> RoomJob[QuizItem | None]:
        params = {"seed": int(seed), "dtype": dtype}
        outcome = run_room_job(QUESTION, params, WireQuiz | None, visitor=who, limits=LIMITS)
        return _checked(outcome, checked_quiz)

    return ROOM.job(("question", seed, dtype), compute)


def _ok_step(chain: Chain, index: int) -> Step:
    return next(s for s in cached_steps(*chain) if s.index == index and s.error is None)


def flat_indices(chain: Chain, index: int) -> np.ndarray | None:
    """The storage cell of every element of a step, flat (row-major); read-only."""

    def build() -> np.ndarray | None:
        indices = _ok_step(chain, index).storage_indices
        if indices is None:
            return None
        flat = np.asarray(flatten(indices), dtype=np.int64)
        flat.flags.writeable = False
        return flat

    return ROOM.cached(("flat", chain, index), build)


def _serialised(figure: go.Figure) -> go.Figure:
    figure.to_dict()  # FrozenFigure keeps its JSON: measured with the figure, done once
    return figure


# Figures are cached as objects (never mutated): building and validating a
# 4,096-point Plotly figure costs more than the rest of a rerun, and most reruns (another
# widget, another tab) do not change what the figures show.
def cached_tensor_figure(
    chain: Chain, index: int, lit: frozenset[int], focus: int | None, dark: bool
) -> go.Figure:
    return ROOM.cached(
        ("tensor_figure", chain, index, lit, focus, dark),
        lambda: _serialised(
            tensor_figure(_ok_step(chain, index), lit, focus, DARK if dark else LIGHT, dark)
        ),
    )


def cached_storage_figure(chain: Chain, index: int, cell: int | None, dark: bool) -> go.Figure:
    def build() -> go.Figure:
        lit = {cell} if cell is not None else set()
        step = _ok_step(chain, index)
        return _serialised(storage_figure(step, lit, cell, DARK if dark else LIGHT, dark))

    return ROOM.cached(("storage_figure", chain, index, cell, dark), build)


@dataclass(frozen=True)
class ExplorerView:
    """The explorer for one step, ready to show: the selection resolved on it (the focused
    element, the lit cell and every element reading that cell) and the two figures (None
    when the step is too large to draw cell by cell)."""

    focus: int | None
    cell: int | None
    lit: frozenset[int]
    storage: go.Figure | None
    tensor: go.Figure | None

    @property
    def drawable(self) -> bool:
        return self.storage is not None


def drawable(step: Step) -> bool:
    """Whether ``step`` is drawn cell by cell (its lists travelled, and it is small)."""
    return (
        step.storage_indices is not None
        and step.storage_values is not None
        and (step.numel or 0) <= MAX_DRAWN
        and (step.storage_cells or 0) <= MAX_DRAWN
    )


def explorer_view(chain: Chain, steps: list[Step], shown: int) -> ExplorerView:
    """The explorer of step ``shown``: the selection carried onto it, and its figures in the
    page's theme (each figure built once per step, selection and theme, and kept)."""
    step = steps[shown]
    focus, cell = resolve_selection(step, steps)
    if not drawable(step):
        return ExplorerView(focus, cell, frozenset(), None, None)
    lit: frozenset[int] = frozenset()
    if cell is not None:
        indices = flat_indices(chain, step.index)
        assert indices is not None
        lit = frozenset(np.flatnonzero(indices == cell).tolist())
    dark = is_dark()
    return ExplorerView(
        focus,
        cell,
        lit,
        cached_storage_figure(chain, step.index, cell, dark),
        cached_tensor_figure(chain, step.index, lit, focus, dark),
    )
