"""The strides room's state: its session keys, its URL, and its cached engine calls.

Every session key starts with ``strides_``; the URL keys are ``s_shape``, ``s_dtype``,
``s_ops`` (one per op) and ``s_seed``, read on a session's first run and written when they
change, so a link restores the room (``lang`` and other rooms' keys are never touched).

Everything the room keeps between reruns lives in :data:`ROOM_CACHE`, one process-wide cache
bounded by bytes (:mod:`torchatlas.cache`): its keys are what visitors type or share, so an
entry-count bound would let a few heavy chains take gigabytes. Each entry is measured when
it is stored. Lookups stay cheap on the hot path (one lock, one dict), unlike
``st.cache_data``, which hashes every argument and unpickles a copy on each call. Values are
shared read-only across sessions: nobody mutates them (the flat index arrays are read-only
to hold everyone to that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

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
from components.theme import DARK, LIGHT
from torchatlas.cache import BoundedCache
from torchatlas.strides import (
    MAX_CHAIN_TEXT,
    MAX_OP_TEXT,
    MAX_OPS,
    MAX_SHAPE_TEXT,
    START_DTYPES,
    OpParseError,
    Step,
    chain_code,
    parse_chain,
    parse_index,
    parse_shape,
    start_values_exact,
    trace,
)
from torchatlas.strides.dtypes import EXACT_UP_TO
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.quiz import Grade, Question, grade, make_question
from torchatlas.strides.writes import WriteResult, write_through

# --------------------------------------------------------------------------- keys

SHAPE_KEY, DTYPE_KEY, OPS_KEY = "strides_shape", "strides_dtype", "strides_ops"
STEP_KEY, SELECTION_KEY, SEED_KEY = "strides_step", "strides_selection", "strides_seed"
TENSOR_CHART, STORAGE_CHART = "strides_tensor_chart", "strides_storage_chart"
PANEL_KEY = "strides_panel"
EXAMPLE_KEY, ADD_OP_KEY = "strides_example", "strides_add_op"
LINK_BROKEN_KEY = "strides_link_broken"
SIGNATURE_KEY = "strides_signature"  # the chain the step picker was last set for
WRITE_RESULT_KEY = "strides_write_result"  # the write last applied, and to which chain
TYPED_ELEMENT_KEY, TYPED_CELL_KEY = "strides_typed_element", "strides_typed_cell"
TYPED_PROBLEM_KEY = "strides_typed_problem"
URL_SHAPE, URL_DTYPE, URL_OPS, URL_SEED = "s_shape", "s_dtype", "s_ops", "s_seed"
DEFAULT = EXAMPLES["transpose_contiguous"]

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


# --------------------------------------------------------------------------- URL and setup


def _link_values(query: Any) -> tuple[str, str, str] | None:
    """Shape, dtype and op chain text of a shared link, or None when it carries more than
    this room ever writes into a link (then none of it is used)."""
    shape = query.get(URL_SHAPE, "")
    ops = "\n".join(op for op in query.get_all(URL_OPS)[:MAX_OPS] if op.strip())
    if len(shape) > MAX_SHAPE_TEXT or len(ops) > MAX_CHAIN_TEXT:
        return None
    dtype = query.get(URL_DTYPE, DEFAULT.dtype)
    return shape, dtype if dtype in START_DTYPES else DEFAULT.dtype, ops


def initial_state() -> None:
    """First run of a session: a shared link's state, else the default example. Keys a test
    or an earlier run already set are kept."""
    query = st.query_params
    shape, dtype, ops = ", ".join(map(str, DEFAULT.shape)), DEFAULT.dtype, "\n".join(DEFAULT.ops)
    if URL_SHAPE in query and SHAPE_KEY not in st.session_state:
        shared = _link_values(query)
        if shared is None:
            st.session_state[LINK_BROKEN_KEY] = True
        else:
            shape, dtype, ops = shared
    st.session_state.setdefault(SHAPE_KEY, shape)
    st.session_state.setdefault(DTYPE_KEY, dtype)
    st.session_state.setdefault(OPS_KEY, ops)
    if SEED_KEY not in st.session_state:
        seed = query.get(URL_SEED, "1")
        st.session_state[SEED_KEY] = int(seed) if seed.isdigit() and len(seed) < 10 else 1


def take_link_broken() -> bool:
    """Whether this session's shared link was refused (told once)."""
    return bool(st.session_state.pop(LINK_BROKEN_KEY, False))


def write_url(shape_text: str, dtype: str, ops: list[str] | tuple[str, ...]) -> None:
    """Keep only this room's keys in sync; never touch the others (``lang``)."""
    query = st.query_params
    wanted: dict[str, Any] = {
        URL_SHAPE: shape_text.replace(" ", ""),
        URL_DTYPE: dtype,
        URL_SEED: str(st.session_state[SEED_KEY]),
    }
    for key, value in wanted.items():
        if query.get(key) != value:
            query[key] = value
    ops = list(ops)
    if query.get_all(URL_OPS) != ops:
        if ops:
            query[URL_OPS] = ops
        elif URL_OPS in query:
            del query[URL_OPS]


def read_room() -> Room:
    """The setup box, parsed and traced; the URL follows it. Raises
    :class:`~torchatlas.strides.StridesError` for a refused shape or chain (both parsers
    refuse over-long text at once, as links and scripts skip the boxes' max_chars)."""
    shape_text = str(st.session_state[SHAPE_KEY])
    dtype = str(st.session_state[DTYPE_KEY])
    shape = parse_shape(shape_text)
    all_ops = parse_chain(str(st.session_state[OPS_KEY]))
    ops = tuple(all_ops[:MAX_OPS])
    write_url(shape_text, dtype, ops)
    steps = cached_steps(shape, dtype, ops)
    return Room(shape_text, shape, dtype, ops, len(all_ops) > MAX_OPS, steps)


def shown_step(room: Room) -> int:
    """Set the step picker for this chain: its last step when the chain changed, or when the
    remembered step is no longer one of it. Forgets a write made on another chain."""
    last = len(room.ok_steps) - 1
    if st.session_state.get(SIGNATURE_KEY) != room.chain:
        st.session_state[SIGNATURE_KEY] = room.chain
        st.session_state[STEP_KEY] = last
        st.session_state.pop(WRITE_RESULT_KEY, None)
    if st.session_state.get(STEP_KEY) not in range(last + 1):
        st.session_state[STEP_KEY] = last
    return last


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


def last_write(room: Room) -> tuple[int, WriteResult] | None:
    """The write last applied to this chain (its step and result), if any."""
    key = st.session_state.get(WRITE_RESULT_KEY)
    if key is None or key[:3] != room.chain:
        return None
    try:
        return key[3], cached_write(*key)
    except IndexError:  # the step is no longer part of the chain
        return None


# --------------------------------------------------------------------------- quiz


def quiz_seed() -> int:
    return int(st.session_state[SEED_KEY])


def next_question(seed: int) -> None:
    st.session_state[SEED_KEY] = seed + 1


def quiz_dtype() -> str:
    """The quiz builds its start tensors in the room's dtype."""
    dtype = str(st.session_state.get(DTYPE_KEY, DEFAULT.dtype))
    return dtype if dtype in START_DTYPES else DEFAULT.dtype


def grade_answer(question: Question, answer: str) -> Grade:
    """Graded by live torch. Raises OpParseError (``answer_too_long``)."""
    return grade(question, answer)


# --------------------------------------------------------------------------- cached engine calls
CACHE_BYTES = 64 * 2**20
# The pictures draw steps of up to MAX_DRAWN elements, so steps keep per-element lists only
# up to that size: a 24-op chain then weighs at most a few megabytes, however large its
# tensors (their numbers, footprints and code stay exact at every size).
LISTED_UP_TO = MAX_DRAWN
ROOM_CACHE: BoundedCache[tuple, Any] = BoundedCache(CACHE_BYTES)


def cached_steps(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> tuple[Step, ...]:
    """Shared read-only across sessions: a 64×64 chain's nested lists would cost more to
    unpickle on every rerun (cache_data) than the page spends on everything else."""
    return ROOM_CACHE.get_or_compute(
        ("steps", shape, dtype, ops),
        lambda: tuple(trace(shape, dtype, list(ops), listed_up_to=LISTED_UP_TO)),
    )


def cached_code(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> str:
    return ROOM_CACHE.get_or_compute(
        ("code", shape, dtype, ops),
        lambda: chain_code(shape, dtype, trace(shape, dtype, list(ops), listed_up_to=0)),
    )


def cached_write(
    shape: tuple[int, ...], dtype: str, ops: tuple[str, ...], step: int, write: str
) -> WriteResult:
    return ROOM_CACHE.get_or_compute(
        ("write", shape, dtype, ops, step, write),
        lambda: write_through(shape, dtype, list(ops), step, write, listed_up_to=LISTED_UP_TO),
    )


def cached_history(
    chain: Chain, labels: tuple[tuple[str, str], ...], shown: int, dark: bool
) -> ReadyHtml:
    def build() -> ReadyHtml:
        steps = [step for step in cached_steps(*chain) if step.error is None]
        return ReadyHtml(history_html(steps, dict(labels), shown, DARK if dark else LIGHT, dark))

    return ROOM_CACHE.get_or_compute(("history", chain, labels, shown, dark), build)


def cached_question(seed: int, dtype: str = DEFAULT.dtype) -> Question:
    """Raises RuntimeError when no question can be drawn for this seed."""
    return ROOM_CACHE.get_or_compute(
        ("question", seed, dtype), lambda: make_question(seed, dtype=dtype)
    )


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

    return ROOM_CACHE.get_or_compute(("flat", chain, index), build)


def _serialised(figure: go.Figure) -> go.Figure:
    figure.to_dict()  # FrozenFigure keeps its JSON: measured with the figure, done once
    return figure


# Figures are cached as objects (never mutated): building and validating a
# 4,096-point Plotly figure costs more than the rest of a rerun, and most reruns (another
# widget, another tab) do not change what the figures show.
def cached_tensor_figure(
    chain: Chain, index: int, lit: frozenset[int], focus: int | None, dark: bool
) -> go.Figure:
    return ROOM_CACHE.get_or_compute(
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

    return ROOM_CACHE.get_or_compute(("storage_figure", chain, index, cell, dark), build)
