"""The strides room's sandbox jobs: a visitor's chain (start shape, dtype and ops, from the
boxes or a shared link) run with real torch in a confined child, and only its descriptions
sent back.

Everything the room derives from a chain with torch, or with sizes taken from it, happens
here: the steps (sizes, strides, offsets, storage cells, values, footprints), the code text,
a write-through, and the quiz (its shapes and ops come from the seed in the link). The live
tensors of a :class:`~torchatlas.strides.Chain` never leave the child; the server receives
frozen dataclasses as bounded JSON (:mod:`torchatlas.sandbox.codec`), rebuilds them against
these types, and :func:`checked_chain` / :func:`checked_write` / :func:`checked_quiz` check
that the numbers agree with each other before anything draws them. One job per chain gives
every step at once, so clicking through the steps starts no job.

The parsers also run in the server first (they give the clear, translated refusals); this
is the wall behind them.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torchatlas.sandbox.codec import COMPLEX, DEFAULT_LIMITS, FLOAT, Limits, job_reply
from torchatlas.sandbox.schema import SchemaError
from torchatlas.strides.dtypes import START_DTYPES
from torchatlas.strides.errors import ErrorCode, OpParseError, StridesError, from_parse_error
from torchatlas.strides.limits import FOOTPRINT_BINS, MAX_ELEMENTS, MAX_LISTED, MAX_OPS, MAX_RANK
from torchatlas.strides.parser import (
    ParsedOp,
    op_from_json,
    op_to_json,
    parse_op,
    write_from_json,
)
from torchatlas.strides.quiz import Question, expected, make_question
from torchatlas.strides.trace import (
    Step,
    chain_code,
    indices_of,
    listable,
    run_chain,
    storage_cells_of,
)
from torchatlas.strides.writes import WriteResult, write_through

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

CHAIN, WRITE, QUESTION = "strides.chain", "strides.write", "strides.question"
MAX_ELEMENT_SIZE = 16  # bytes: complex128, the widest dtype
# The largest storage (in bytes) a step can have: the start tensor's MAX_ELEMENTS elements
# in the widest dtype, or a copy of MAX_ELEMENTS elements (as wide).
MAX_STORAGE_BYTES = MAX_ELEMENTS * MAX_ELEMENT_SIZE
ERROR_CODES = frozenset(code.value for code in ErrorCode)


@dataclass(frozen=True)
class ChainRun:
    """What the room shows of one chain: every step (the failing op last, if one failed) and
    the chain as runnable PyTorch code."""

    steps: tuple[Step, ...]
    code: str


@dataclass(frozen=True)
class WireStep:
    """A step as it crosses the boundary: its numbers, and its per-element lists packed as
    bytes without repeats. ``step`` carries no lists; ``cells_read`` is every element's
    storage cell (row-major, little-endian, in :func:`cells_dtype`); ``storage_values``
    every storage cell's value (in :data:`WIRE_DTYPES`' exact numpy dtype for the step's
    dtype), unless an earlier step (``storage_same_as``) reads the same storage in the same
    dtype (a chain does not write, so the values are the same); ``values`` only where the
    storage is not listed (an element's value is otherwise the value of the cell it reads).
    Bytes travel as base64 text: one bounded string per list, checked and unpacked at numpy
    speed."""

    step: Step
    cells_read: str | None = None
    storage_values: str | None = None
    storage_same_as: int | None = None
    values: str | None = None


@dataclass(frozen=True)
class WireChain:
    steps: tuple[WireStep, ...]
    code: str


@dataclass(frozen=True)
class QuizItem:
    """A question drawn for a seed, and its chain as live torch ran it (the answer is read
    from these steps when the visitor checks)."""

    question: Question
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class WireQuiz:
    question: Question
    steps: tuple[WireStep, ...]


def _flatten(nested: Any) -> list[Any]:
    """Row-major leaves of nested lists (a 0-d tensor's single value becomes one item)."""
    if type(nested) is not list:
        return [nested]
    out: list[Any] = []
    stack = [nested]
    while stack:
        node = stack.pop()
        if type(node) is list:
            stack.extend(reversed(node))
        else:
            out.append(node)
    return out


# Each dtype's values as a numpy dtype that holds every one of them exactly (bfloat16 and the
# float8s widen to float32, complex32 to complex64), little-endian.
WIRE_DTYPES: dict[str, str] = {
    "float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<f4",
    "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1", "uint8": "u1",
    "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "bool": "?",
    "complex64": "<c8", "complex128": "<c16", "complex32": "<c8", "bcomplex32": "<c8",
    "float8_e4m3fn": "<f4", "float8_e4m3fnuz": "<f4", "float8_e5m2": "<f4",
    "float8_e5m2fnuz": "<f4", "float8_e8m0fnu": "<f4",
}  # fmt: skip


def cells_dtype(storage_cells: int) -> str:
    """The narrowest unsigned dtype that holds every cell number of a storage this large (a
    64×64 float tensor's cells fit two bytes each: a quarter of the reply that int64 made)."""
    for kind, top in (("u1", 1 << 8), ("<u2", 1 << 16), ("<u4", 1 << 32)):
        if storage_cells <= top:
            return kind
    return "<u8"


# Torch dtypes whose .numpy() works, and the torch dtype each wire dtype widens from.
_NUMPY_OK = frozenset(
    {torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16,
     torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128}
)  # fmt: skip
_WIDER = {"<f4": torch.float32, "<c8": torch.complex64}


def _pack(values: list[Any], dtype: str) -> str:
    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode("ascii")


def _unpack(text: str, dtype: str, count: int) -> np.ndarray:
    """``count`` values of ``dtype`` from base64 text; SchemaError for any other length."""
    item = np.dtype(dtype).itemsize
    if len(text) != 4 * -(-count * item // 3):
        raise SchemaError("packed values of the wrong length")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise SchemaError("packed values that are not base64") from None
    if len(raw) != count * item:
        raise SchemaError("packed values of the wrong length")
    return np.frombuffer(raw, dtype=dtype)


def wire_limits(listed_up_to: int) -> Limits:
    """The codec's bounds for a chain job's reply listing up to ``listed_up_to`` items."""
    longest = 4 * -(-max(listed_up_to, 1) * 16 // 3)  # base64 of the widest values
    return dataclasses.replace(DEFAULT_LIMITS, max_str=max(DEFAULT_LIMITS.max_str, longest))


def to_wire(steps: list[Step]) -> tuple[WireStep, ...]:
    """Steps as they cross the boundary (the child's side)."""
    wire: list[WireStep] = []
    seen: dict[tuple[str | None, str | None], int] = {}
    for step in steps:
        bare = dataclasses.replace(step, storage_indices=None, values=None, storage_values=None)
        if step.error is not None or step.dtype is None:
            wire.append(WireStep(bare))
            continue
        kind = WIRE_DTYPES[step.dtype]
        cells = None
        if step.storage_indices is not None:
            cells = _pack(_flatten(step.storage_indices), cells_dtype(step.storage_cells or 0))
        same_as = storage = values = None
        if step.storage_values is not None:
            key = (step.storage_id, step.dtype)
            same_as = seen.get(key)
            if same_as is None:
                seen[key] = step.index
                storage = _pack(step.storage_values, kind)
        elif step.values is not None:
            values = _pack(_flatten(step.values), kind)
        wire.append(WireStep(bare, cells, storage, same_as, values))
    return tuple(wire)


@dataclass(frozen=True)
class ChainPlan:
    """A chain as the server sends it to a job: the ops that parsed, as data (the child reads
    no text as code), and the step of the first op that did not parse (its refusal in the
    room's words, made by the server's parser), if one did not."""

    ops: tuple[dict[str, Any], ...]
    refused: Step | None = None


def plan_chain(ops: Sequence[str]) -> ChainPlan:
    """Parse ``ops`` in the server (the first wall: bounded text, the clear refusals); the
    chain stops at the first op that does not parse, as it does in :func:`run_chain`."""
    parsed: list[dict[str, Any]] = []
    for number, text in enumerate(list(ops)[:MAX_OPS], start=1):
        try:
            parsed.append(op_to_json(parse_op(text)))
        except OpParseError as error:
            shown = text.strip()
            refused = Step(index=number, op=shown, code="", name="",
                           error=from_parse_error(error, shown))  # fmt: skip
            return ChainPlan(tuple(parsed), refused)
    return ChainPlan(tuple(parsed))


def with_refused(run: ChainRun, plan: ChainPlan, shape: Sequence[int], dtype: str) -> ChainRun:
    """The job's run of the parsed ops, then the op that did not parse (unless torch stopped
    the chain before it), and the code for all of it."""
    if plan.refused is None or run.steps[-1].error is not None:
        return run
    steps = (*run.steps, plan.refused)
    return ChainRun(steps, chain_code(shape, dtype, steps))


def _chain_args(shape: Any, dtype: Any, ops: Any) -> tuple[tuple[int, ...], str, list[ParsedOp]]:
    """A job's parameters, checked again in the child (the ops held to the allow list)."""
    if not isinstance(dtype, str) or dtype not in START_DTYPES:
        raise StridesError(ErrorCode.DTYPE, dtype=str(dtype)[:40])
    if not isinstance(shape, list | tuple) or not all(type(n) is int for n in shape):
        raise StridesError(ErrorCode.SHAPE_NOT_INTS, text=str(shape)[:80])
    if not isinstance(ops, list | tuple) or len(ops) > MAX_OPS:
        raise StridesError(ErrorCode.SYNTAX, text="")
    return tuple(shape), dtype, [op_from_json(op) for op in ops]


def chain_run(
    shape: tuple[int, ...],
    dtype: str,
    ops: Sequence[str | ParsedOp],
    listed_up_to: int = MAX_LISTED,
) -> ChainRun:
    """Trace the chain (one run for every step) and write its code."""
    steps = tuple(run_chain(shape, dtype, ops, listed_up_to=listed_up_to).steps)
    return ChainRun(steps, chain_code(shape, dtype, steps))


def wire_chain(run: ChainRun) -> WireChain:
    return WireChain(to_wire(list(run.steps)), run.code)


def _pack_tensor(tensor: torch.Tensor, kind: str) -> str:
    """A tensor's values, row-major, as :func:`_pack` writes them, straight from its memory
    (no Python number per element). Dtypes numpy lacks widen exactly first."""
    flat = tensor.reshape(-1)
    try:
        if flat.dtype not in _NUMPY_OK:
            flat = flat.to(_WIDER[kind])
        data = flat.numpy().astype(kind, copy=False)
    except (TypeError, RuntimeError, KeyError):  # no such conversion: through Python numbers
        return _pack(flat.tolist(), kind)
    return base64.b64encode(data.tobytes()).decode("ascii")


def wire_chain_of(
    shape: tuple[int, ...], dtype: str, ops: Sequence[str | ParsedOp], listed_up_to: int
) -> WireChain:
    """The chain traced and packed for the boundary in one pass (the child's side): the
    steps carry no Python lists; each list is packed from the live tensor's memory."""
    chain = run_chain(shape, dtype, ops, listed_up_to=0)
    wire: list[WireStep] = []
    seen: dict[tuple[str | None, str | None], int] = {}
    for step, tensor in zip(chain.steps, [*chain.tensors, None], strict=False):
        if step.error is not None or tensor is None or step.dtype is None:
            wire.append(WireStep(step))
            continue
        kind = WIRE_DTYPES[step.dtype]
        step = dataclasses.replace(step, storage_indices=None, values=None, storage_values=None)
        cells = storage = values = same_as = None
        if listable(tuple(tensor.shape), listed_up_to):
            cells = _pack_tensor(indices_of(tensor), cells_dtype(step.storage_cells or 0))
        if (step.storage_cells or 0) <= listed_up_to:
            key = (step.storage_id, step.dtype)
            same_as = seen.get(key)
            if same_as is None:
                seen[key] = step.index
                storage = _pack_tensor(storage_cells_of(tensor), kind)
        elif cells is not None:
            values = _pack_tensor(tensor, kind)
        wire.append(WireStep(step, cells, storage, same_as, values))
    return WireChain(tuple(wire), chain_code(shape, dtype, chain.steps))


def _listed(listed_up_to: Any) -> int:
    return min(max(int(listed_up_to), 0), MAX_LISTED) if type(listed_up_to) is int else 0


def run_chain_job(
    namespace: dict[str, Any], *, shape: Any, dtype: Any, ops: Any, listed_up_to: Any
) -> dict[str, Any]:
    """The sandbox job: :func:`chain_run` as JSON (a shape or dtype the engine refuses comes
    back as its code and parameters)."""
    del namespace  # no pasted module: the chain is data for the room's own parser

    def compute() -> WireChain:
        return wire_chain_of(*_chain_args(shape, dtype, ops), _listed(listed_up_to))

    return job_reply(compute, refusals=(StridesError,))


def run_write_job(
    namespace: dict[str, Any],
    *,
    shape: Any,
    dtype: Any,
    ops: Any,
    step: Any,
    write: Any,
    listed_up_to: Any,
) -> dict[str, Any]:
    """The sandbox job: :func:`~torchatlas.strides.writes.write_through` as JSON."""
    del namespace

    def compute() -> WriteResult:
        chain = _chain_args(shape, dtype, ops)
        if type(step) is not int:
            raise StridesError(ErrorCode.WRITE_SYNTAX, text="")
        parsed = write_from_json(write)
        return write_through(*chain, step, parsed, listed_up_to=_listed(listed_up_to))

    return job_reply(compute, refusals=(StridesError,))


def quiz_item(seed: int, dtype: str) -> QuizItem | None:
    """The question for ``seed`` with its chain traced, or None when none can be drawn."""
    try:
        question = make_question(seed, dtype=dtype)
    except RuntimeError:
        return None
    steps = run_chain(question.shape, question.dtype, list(question.ops)).steps
    return QuizItem(question, tuple(steps))


def run_question_job(namespace: dict[str, Any], *, seed: Any, dtype: Any) -> dict[str, Any]:
    """The sandbox job: :func:`quiz_item` as JSON."""
    del namespace

    def compute() -> WireQuiz | None:
        if type(seed) is not int or not isinstance(dtype, str) or dtype not in START_DTYPES:
            raise StridesError(ErrorCode.DTYPE, dtype=str(dtype)[:40])
        item = quiz_item(seed, dtype)
        return None if item is None else WireQuiz(item.question, to_wire(list(item.steps)))

    return job_reply(compute, refusals=(StridesError,))


JOBS = {CHAIN: run_chain_job, WRITE: run_write_job, QUESTION: run_question_job}
# Runs in the zygote before it forks (so children find torch's view and copy kernels warm):
# a tiny chain with a view and a copy. Nothing here calls backward.
WARM_UP: list[dict[str, Any]] = [
    {
        "source": "",
        "job": CHAIN,
        "params": {"shape": [2, 3], "dtype": "float32", "listed_up_to": 16,
                   "ops": list(plan_chain([".t()", ".contiguous()", "[0]"]).ops)},
    }
]  # fmt: skip


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's jobs and warm-ups with ``pool`` (again: a no-op); returns it. Each
    spare child runs the same tiny chain while it waits: a forked child pays a page fault for
    every page it first touches, and this takes those of the chain's paths off a visitor's job."""
    return pool.register(JOBS, WARM_UP, WARM_UP[0])


# --------------------------------------------------------------------------- the server's side
def _number(data: Any) -> float:
    if type(data) in (int, float):
        return float(data)
    if type(data) is dict and set(data) == {FLOAT} and data[FLOAT] in ("nan", "inf", "-inf"):
        return float(data[FLOAT])
    raise SchemaError("expected a number")


def revive(data: Any) -> Any:
    """Element values as the codec marks them where JSON has no word (complex numbers,
    NaN and infinities), back to Python numbers; ``data`` is already decoded and bounded."""
    if type(data) is list:
        return [revive(item) for item in data]
    if type(data) is dict:
        if set(data) == {COMPLEX} and type(data[COMPLEX]) is list and len(data[COMPLEX]) == 2:
            return complex(_number(data[COMPLEX][0]), _number(data[COMPLEX][1]))
        return _number(data)
    if data is None or type(data) in (bool, int, float):
        return data
    raise SchemaError("an element value that is not a number")


def _check_numbers(step: Step) -> None:
    """SchemaError unless a decoded step's numbers agree with each other (the child's reply
    is hostile input: nothing draws a step before this)."""
    if step.error is not None:
        if step.error.code.value not in ERROR_CODES:
            raise SchemaError("an unknown error code")
        return
    size, stride = step.size, step.stride
    if size is None or stride is None or len(size) != len(stride) or len(size) > MAX_RANK:
        raise SchemaError("a step's size and stride disagree")
    if min((*size, *stride), default=0) < 0:
        raise SchemaError("a negative size or stride")
    element_size = step.element_size or 0
    if step.numel != math.prod(size) or step.numel > MAX_ELEMENTS:
        raise SchemaError("a step's element count disagrees with its size")
    if not 1 <= element_size <= MAX_ELEMENT_SIZE:
        raise SchemaError("an element size no dtype has")
    nbytes, cells = step.storage_nbytes, step.storage_cells
    if nbytes is None or cells is None or not 0 <= nbytes <= MAX_STORAGE_BYTES:
        raise SchemaError("a storage larger than any step can have")
    if cells != nbytes // element_size:
        raise SchemaError("a storage's cells disagree with its bytes")
    if step.footprint is None or len(step.footprint) != min(max(cells, 1), FOOTPRINT_BINS):
        raise SchemaError("a footprint of the wrong length")
    if step.storage_offset is None or step.storage_offset < 0:
        raise SchemaError("a negative storage offset")
    if step.storage_indices is not None or step.values is not None:
        raise SchemaError("lists travel beside the step, not in it")
    if step.storage_values is not None:
        raise SchemaError("lists travel beside the step, not in it")


def from_wire(wire: tuple[WireStep, ...]) -> tuple[Step, ...]:
    """The steps of a chain job's reply, checked, with their lists rebuilt (the server's
    side); SchemaError for a reply whose parts disagree."""
    if not wire or wire[0].step.error is not None or len(wire) > MAX_OPS + 1:
        raise SchemaError("a chain starts with its start tensor")
    if [item.step.index for item in wire] != list(range(len(wire))):
        raise SchemaError("steps out of order")
    if any(item.step.error is not None for item in wire[:-1]):
        raise SchemaError("a failing op that is not the last step")
    steps: list[Step] = []
    storages: dict[int, np.ndarray] = {}
    for item in wire:
        step = item.step
        _check_numbers(step)
        if step.error is not None:
            steps.append(step)
            continue
        size, numel, cells = step.size or (), step.numel or 0, step.storage_cells or 0
        kind = WIRE_DTYPES.get(step.dtype or "")
        if kind is None:
            raise SchemaError("a dtype the room does not have")
        changes: dict[str, Any] = {}
        read = None
        if item.cells_read is not None:
            if not listable(size, MAX_LISTED):
                raise SchemaError("storage cells listed for a step too large to list")
            read = _unpack(item.cells_read, cells_dtype(cells), numel)
            if numel and (int(read.min()) < 0 or int(read.max()) >= cells):
                raise SchemaError("a storage cell outside the storage")
            changes["storage_indices"] = read.reshape(size).tolist()
        storage: np.ndarray | None = None
        if item.storage_same_as is not None:
            index = item.storage_same_as
            earlier = steps[index] if 0 <= index < len(steps) else None
            if (
                earlier is None
                or index not in storages
                or (
                    (earlier.storage_id, earlier.dtype, earlier.storage_cells)
                    != (step.storage_id, step.dtype, cells)
                )
            ):
                raise SchemaError("storage values borrowed from a step with another storage")
            storage = storages[index]
            changes["storage_values"] = earlier.storage_values
        elif item.storage_values is not None:
            if cells > MAX_LISTED:
                raise SchemaError("storage values past the listing limit")
            storage = _unpack(item.storage_values, kind, cells)
            changes["storage_values"] = storage.tolist()
        if storage is not None:
            storages[step.index] = storage
        if item.values is not None:
            if storage is not None or read is None:
                raise SchemaError("element values that do not fit the step")
            changes["values"] = _unpack(item.values, kind, numel).reshape(size).tolist()
        elif storage is not None and read is not None:
            changes["values"] = storage[read].reshape(size).tolist()
        steps.append(dataclasses.replace(step, **changes))
    return tuple(steps)


def checked_chain(run: WireChain) -> ChainRun:
    """A chain job's reply as the room's :class:`ChainRun` (SchemaError otherwise)."""
    return ChainRun(from_wire(run.steps), run.code)


def checked_write(result: WriteResult, steps: int) -> WriteResult:
    """A write-through result for a chain of ``steps`` tensors, checked and revived."""
    if not 0 <= result.step_index < steps:
        raise SchemaError("a write on a step the chain does not have")
    if result.error is not None and result.error.code.value not in ERROR_CODES:
        raise SchemaError("an unknown error code")
    indices = {*result.changed_steps, *result.changed_elements, *result.changed_counts}
    if not all(0 <= index < steps for index in {*indices, *result.values_after}):
        raise SchemaError("a change on a step the chain does not have")
    after = {index: revive(values) for index, values in result.values_after.items()}
    return dataclasses.replace(result, values_after=after)


def checked_quiz(item: WireQuiz | None) -> QuizItem | None:
    """A question job's reply as a :class:`QuizItem` (SchemaError otherwise)."""
    if item is None:
        return None
    steps = from_wire(item.steps)
    if len(steps) != len(item.question.ops) + 1:
        raise SchemaError("a question whose chain has other steps")
    try:  # the answer must be readable from these steps (grading reads it the same way)
        expected(item.question, list(steps))
    except (IndexError, TypeError, RuntimeError):
        raise SchemaError("a question whose answer its steps do not hold") from None
    return QuizItem(item.question, steps)
