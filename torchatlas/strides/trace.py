"""Run a chain of ops on a real tensor and record, per step, how it views its storage.

The start tensor's value at each storage cell is that cell's index, so the numbers a student
sees *are* the addresses. Every op runs for real in torch; whether it made a view or a copy is
read from the tensors' untyped storages and byte ranges, never from a table of op names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

import torch

from torchatlas.strides.dtypes import DTYPES, EXACT_UP_TO, START_DTYPES, dtype_name
from torchatlas.strides.errors import (
    ErrorCode,
    OpParseError,
    ShapeInputError,
    StepError,
    from_parse_error,
    too_large,
)
from torchatlas.strides.explain import explain_safely
from torchatlas.strides.limits import (
    FOOTPRINT_BINS,
    MAX_CHAIN_TEXT,
    MAX_ELEMENTS,
    MAX_LISTED,
    MAX_OPS,
    MAX_RANK,
    MAX_SHAPE_TEXT,
)
from torchatlas.strides.parser import ParsedOp, parse_op

__all__ = [
    "EXACT_UP_TO",
    "START_DTYPES",
    "Chain",
    "ShapeInputError",
    "Step",
    "StepError",
    "StorageKind",
    "chain_code",
    "listable",
    "parse_chain",
    "parse_shape",
    "run_chain",
    "storage_index",
    "trace",
]


class StorageKind(StrEnum):
    """What a step did to memory."""

    START = "start"  # the start tensor allocates the first storage
    SAME = "same"  # the op handed back its input itself
    VIEW = "view"  # a new tensor over its input's storage
    COPY = "copy"  # a new storage


@dataclass(frozen=True)
class Step:
    """One tensor of the chain (step 0 is the start tensor), or the failing op (``error``)."""

    index: int
    op: str
    code: str
    name: str
    dtype: str | None = None
    size: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    stride_bytes: tuple[int, ...] | None = None
    storage_offset: int | None = None
    element_size: int | None = None
    numel: int | None = None
    is_contiguous: bool | None = None
    is_channels_last: bool | None = None  # None unless 4-D
    storage_id: str | None = None
    storage_nbytes: int | None = None
    storage_cells: int | None = None  # storage length in this step's elements
    byte_range: tuple[int, int] | None = None  # [first byte, end byte) this step reads
    # Shares its input's storage: a new view, or the input itself (``returned_input``). What
    # the step did is :attr:`storage_kind`, the one word every label and quiz uses.
    is_view: bool | None = None
    returned_input: bool | None = None  # the op handed back its input itself (``out is inp``)
    parent_storage_id: str | None = None
    storage_indices: Any = None  # nested lists shaped like size; None past MAX_LISTED
    values: Any = None
    storage_values: list[Any] | None = None  # every storage cell, read in this step's dtype
    # min(storage_cells, FOOTPRINT_BINS) bins over the storage: does the step read any cell
    # in the bin? Exact at every size, listed or not.
    footprint: tuple[bool, ...] | None = None
    error: StepError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def storage_kind(self) -> StorageKind | None:
        """What the step did, decided by identity (``out is inp``: SAME), then storage (the
        input's untyped storage: VIEW; another: COPY); None for the failing op's step."""
        if self.error is not None:
            return None
        if self.index == 0:
            return StorageKind.START
        if self.returned_input:
            return StorageKind.SAME
        return StorageKind.VIEW if self.is_view else StorageKind.COPY

    def to_dict(self) -> dict[str, Any]:
        """The step as plain data (JSON for real and integer dtypes), for a notebook or a
        file; the page reads the dataclass itself. Shallow on purpose: the nested lists are
        already plain data and may hold thousands of elements."""
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        data["error"] = self.error.to_dict() if self.error else None
        for key in ("size", "stride", "stride_bytes", "byte_range", "footprint"):
            if data[key] is not None:
                data[key] = list(data[key])
        return data


def parse_shape(text: str, *, max_chars: int | None = MAX_SHAPE_TEXT) -> tuple[int, ...]:
    """``"2, 3, 4"`` or ``"(2, 3, 4)"`` → ``(2, 3, 4)``; rank 1–6, sizes ≥ 1, bounded total.

    Linear in the text; text longer than ``max_chars`` is refused (``shape_too_long``)."""
    if max_chars is not None and len(text) > max_chars:
        raise ShapeInputError(ErrorCode.SHAPE_TOO_LONG, length=f"{len(text):,}", limit=max_chars)
    # "2x3" and "2×3" read as "2, 3"; a stray letter elsewhere is still an error
    cleaned = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", ",", text.strip().strip("()[]"))
    parts = [part.strip() for part in cleaned.split(",") if part.strip()]
    if not parts:
        raise ShapeInputError(ErrorCode.SHAPE_EMPTY)
    if not all(re.fullmatch(r"\d{1,7}", part) for part in parts):
        raise ShapeInputError(ErrorCode.SHAPE_NOT_INTS, text=text)
    shape = tuple(int(part) for part in parts)
    if len(shape) > MAX_RANK:
        raise ShapeInputError(ErrorCode.SHAPE_RANK, rank=len(shape), max_rank=MAX_RANK)
    if min(shape) < 1:
        raise ShapeInputError(ErrorCode.SHAPE_ZERO)
    if math.prod(shape) > MAX_ELEMENTS:
        raise ShapeInputError(
            ErrorCode.SHAPE_TOO_BIG, numel=f"{math.prod(shape):,}", limit=f"{MAX_ELEMENTS:,}"
        )
    return shape


def parse_chain(text: str, *, max_chars: int | None = MAX_CHAIN_TEXT) -> list[str]:
    """The op chain box → one op text per non-empty line (each is parsed by ``parse_op`` when
    the chain runs). Text longer than ``max_chars`` is refused (``chain_too_long``)."""
    if max_chars is not None and len(text) > max_chars:
        raise OpParseError(
            ErrorCode.CHAIN_TOO_LONG,
            length=f"{len(text):,}",
            limit=f"{max_chars:,}",
            ops=MAX_OPS,
        )
    return [line.strip() for line in text.splitlines() if line.strip()]


def start_tensor(shape: Sequence[int], dtype: str) -> torch.Tensor:
    """A tensor whose value at each storage cell is that cell's index."""
    return torch.arange(math.prod(shape)).to(DTYPES[dtype]).reshape(tuple(shape))


def storage_index(step: Step, index: Sequence[int]) -> int:
    """The storage cell element ``index`` of ``step`` reads: offset + Σ index·stride."""
    assert step.stride is not None and step.storage_offset is not None
    return step.storage_offset + sum(i * s for i, s in zip(index, step.stride, strict=True))


def _reach(tensor: torch.Tensor) -> tuple[int, int]:
    """[first, end) element positions the tensor reads in its storage (strides are ≥ 0).

    Python ints, O(rank): a zero-element view reads nothing at its offset, whatever the
    offset (torch checks no storage bounds for it, so it may sit near 2**63)."""
    offset = tensor.storage_offset()
    if tensor.numel() == 0:
        return offset, offset
    last = offset + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    return offset, last + 1


def list_nodes(size: Sequence[int]) -> int:
    """How many Python objects ``tolist()`` of a tensor of ``size`` builds (its nested lists
    and leaves). A zero-element tensor of size (2**40, 0) has no element but would still
    build 2**40 empty lists, so listing is bounded by this count, not by the element count."""
    total, count = 1, 1
    for n in size:
        count *= n
        total += count
        if count == 0:
            break
    return total


def listable(size: Sequence[int], listed_up_to: int) -> bool:
    """Whether a step of ``size`` lists its elements one by one (values, storage cells)."""
    return math.prod(size) <= listed_up_to and list_nodes(size) <= 2 * listed_up_to + 8


def storage_cells_of(tensor: torch.Tensor) -> torch.Tensor:
    """Every storage cell, flat, read in the tensor's own dtype (callers bound the size)."""
    storage = tensor.untyped_storage()
    cells = storage.nbytes() // tensor.element_size()
    return torch.empty(0, dtype=tensor.dtype).set_(storage, 0, (cells,), (1,))


def _distinct_axes(tensor: torch.Tensor) -> tuple[list[int], list[int]]:
    """Sizes and strides of the dimensions that move through the storage (stride ≠ 0 and
    size > 1): an expanded dimension repeats cells and adds none."""
    sizes, strides = [], []
    for n, s in zip(tensor.shape, tensor.stride(), strict=True):
        if n > 1 and s != 0:
            sizes.append(int(n))
            strides.append(int(s))
    return sizes, strides


def _dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether dimensions of ``sizes``/``strides`` (none of them expanded) read every cell of
    their extent exactly once, in some order: a permuted contiguous layout."""
    expected = 1
    for n, s in sorted(zip(sizes, strides, strict=True), key=lambda pair: pair[1]):
        if s != expected:
            return False
        expected *= n
    return True


def _cells_read(sizes: Sequence[int], strides: Sequence[int], offset: int) -> torch.Tensor:
    """offset + Σ index·stride for every index of ``sizes``, as a flat int64 tensor of
    prod(sizes) entries: the work is the element count, never the offset or the storage."""
    cells = torch.full((1,), offset, dtype=torch.int64)
    for n, s in zip(sizes, strides, strict=True):
        cells = (cells[:, None] + torch.arange(n, dtype=torch.int64)[None, :] * s).reshape(-1)
    return cells


def indices_of(tensor: torch.Tensor) -> torch.Tensor:
    """For every element, the storage cell it reads, as an int64 tensor shaped like it.
    Built from its sizes and strides (work and memory: its element count)."""
    if tensor.numel() == 0:
        return torch.zeros(tuple(tensor.shape), dtype=torch.int64)
    cells = torch.full((), tensor.storage_offset(), dtype=torch.int64)
    for dim, (n, s) in enumerate(zip(tensor.shape, tensor.stride(), strict=True)):
        axis = torch.arange(n, dtype=torch.int64) * s
        cells = cells + axis.reshape([n if d == dim else 1 for d in range(tensor.dim())])
    return cells.expand(tuple(tensor.shape)).contiguous()


def footprint_of(tensor: torch.Tensor) -> tuple[bool, ...]:
    """Bins over the storage (min(cells, FOOTPRINT_BINS) of them): True where the tensor
    reads at least one cell of the bin. Sized from the view's extent, never the storage: a
    contiguous run lights its bins by arithmetic, any other view enumerates the cells its
    moving dimensions reach (at most its element count, which the room bounds)."""
    cells = max(tensor.untyped_storage().nbytes() // tensor.element_size(), 1)
    bins = min(cells, FOOTPRINT_BINS)
    lit = [False] * bins
    first, end = _reach(tensor)
    if tensor.numel() == 0 or first >= cells or end <= 0:
        return tuple(lit)
    sizes, strides = _distinct_axes(tensor)
    if _dense(sizes, strides):  # every cell of [first, end) is read: bins by arithmetic
        for b in range(first * bins // cells, min(end - 1, cells - 1) * bins // cells + 1):
            lit[b] = True
        return tuple(lit)
    read = _cells_read(sizes, strides, first)
    marked = torch.zeros(bins, dtype=torch.bool)
    marked[(read.clamp(0, cells - 1) * bins) // cells] = True
    return tuple(marked.tolist())


class _Storages:
    """Stable ids (S0, S1, …) for the distinct storages a chain touches. The tensors are kept
    alive by the chain, so a freed block cannot be reused and mistaken for an old storage."""

    def __init__(self) -> None:
        self._ids: dict[object, str] = {}

    def identify(self, tensor: torch.Tensor, same_as: str | None = None) -> str:
        pointer = tensor.untyped_storage().data_ptr()
        key: object = pointer if pointer else ("empty", len(self._ids))
        if not pointer and same_as is not None:
            return same_as
        if key not in self._ids:
            self._ids[key] = f"S{len(self._ids)}"
        return self._ids[key]


def _shares_storage(result: torch.Tensor, source: torch.Tensor) -> bool:
    """A view: the result lives in the source's storage and reads only bytes inside it."""
    if result is source:
        return True
    result_storage, source_storage = result.untyped_storage(), source.untyped_storage()
    if result_storage.data_ptr() == 0 or source_storage.data_ptr() == 0:
        return result_storage.data_ptr() == source_storage.data_ptr() == 0 and (
            result._base is not None and result._base is (source._base or source)
        )
    if result_storage.data_ptr() != source_storage.data_ptr():
        return False
    first, end = _reach(result)
    size = result.element_size()
    return first >= 0 and end * size <= source_storage.nbytes()


def _describe(
    index: int,
    op: str,
    code: str,
    name: str,
    tensor: torch.Tensor,
    storage_id: str,
    is_view: bool,
    returned_input: bool,
    parent_storage_id: str | None,
    listed_up_to: int = MAX_LISTED,
) -> Step:
    element_size = tensor.element_size()
    first, end = _reach(tensor)
    channels_last = None
    if tensor.dim() == 4:
        channels_last = tensor.is_contiguous(memory_format=torch.channels_last)
    listed = listable(tuple(tensor.shape), listed_up_to)
    cells = tensor.untyped_storage().nbytes() // element_size
    return Step(
        index=index,
        op=op,
        code=code,
        name=name,
        dtype=dtype_name(tensor.dtype),
        size=tuple(tensor.shape),
        stride=tuple(tensor.stride()),
        stride_bytes=tuple(s * element_size for s in tensor.stride()),
        storage_offset=tensor.storage_offset(),
        element_size=element_size,
        numel=tensor.numel(),
        is_contiguous=tensor.is_contiguous(),
        is_channels_last=channels_last,
        storage_id=storage_id,
        storage_nbytes=tensor.untyped_storage().nbytes(),
        storage_cells=cells,
        byte_range=(first * element_size, end * element_size),
        is_view=is_view,
        returned_input=returned_input,
        parent_storage_id=parent_storage_id,
        storage_indices=indices_of(tensor).tolist() if listed else None,
        values=tensor.tolist() if listed else None,
        storage_values=storage_cells_of(tensor).tolist() if cells <= listed_up_to else None,
        footprint=footprint_of(tensor),
    )


@dataclass(frozen=True)
class Chain:
    """The live tensors of a traced chain (for write-through and tests) and its steps."""

    tensors: list[torch.Tensor]
    steps: list[Step]
    ops: list[ParsedOp]


def _error_step(index: int, text: str, error: StepError) -> Step:
    return Step(index=index, op=text, code="", name="", error=error)


def _dry_run_numel(op: ParsedOp, tensor: torch.Tensor) -> int | None:
    """The result's element count from a meta-device twin, so nothing big is allocated."""
    cells = tensor.untyped_storage().nbytes() // tensor.element_size()
    twin = torch.empty(cells, dtype=tensor.dtype, device="meta").as_strided(
        tensor.shape, tensor.stride(), tensor.storage_offset()
    )
    try:
        return op.apply(twin).numel()
    except Exception:
        return None  # the real run reports the error in PyTorch's words


def run_chain(
    shape: Sequence[int],
    dtype: str = "float32",
    ops: Sequence[str | ParsedOp] = (),
    *,
    listed_up_to: int = MAX_LISTED,
) -> Chain:
    """Build the start tensor and apply each op (its text, or the op parsed) for real; stops
    at the first failing op, which becomes a final step carrying ``error``. Steps of up to
    ``listed_up_to`` elements (storage cells for ``storage_values``) list them one by one; a
    caller that draws only small steps passes its own, smaller limit and keeps far less."""
    if dtype not in START_DTYPES:
        raise ShapeInputError(ErrorCode.DTYPE, dtype=dtype)
    shape = tuple(int(n) for n in shape)
    if not 1 <= len(shape) <= MAX_RANK or min(shape) < 1 or math.prod(shape) > MAX_ELEMENTS:
        parse_shape(",".join(map(str, shape)))  # raises the matching message
    storages = _Storages()
    tensor = start_tensor(shape, dtype)
    start_code = (
        f"x = torch.arange({math.prod(shape)}).to(torch.{dtype}).reshape"
        f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"
    )
    first = _describe(
        0, "x", start_code, "x", tensor, storages.identify(tensor), False, False, None,
        listed_up_to,
    )  # fmt: skip
    chain = Chain(tensors=[tensor], steps=[first], ops=[])
    for number, item in enumerate(list(ops)[:MAX_OPS], start=1):
        try:  # an op parsed already (a sandbox child gets ops as data, never as text)
            op = item if isinstance(item, ParsedOp) else parse_op(item)
        except OpParseError as error:
            refused = from_parse_error(error, item.strip())
            chain.steps.append(_error_step(number, item.strip(), refused))
            break
        numel = _dry_run_numel(op, tensor)
        if numel is not None and numel > MAX_ELEMENTS:
            chain.steps.append(_error_step(number, op.text, too_large(op.text, numel)))
            break
        try:
            result = op.apply(tensor)
        except Exception as exc:  # PyTorch's refusal is the lesson: explain it
            chain.steps.append(_error_step(number, op.text, explain_safely(exc, op, tensor)))
            break
        # The element count as Python ints: a dry run that failed (an overflowing shape on
        # the meta device) must not let a free view of a huge shape through.
        numel = math.prod(result.shape)
        if numel > MAX_ELEMENTS:
            chain.steps.append(_error_step(number, op.text, too_large(op.text, numel)))
            break
        parent = chain.steps[-1]
        is_view = _shares_storage(result, tensor)
        storage_id = storages.identify(result, same_as=parent.storage_id if is_view else None)
        name = f"y{number}"
        previous_name = chain.steps[-1].name
        chain.steps.append(
            _describe(
                number,
                op.text,
                f"{name} = {op.code(previous_name)}",
                name,
                result,
                storage_id,
                is_view,
                result is tensor,
                parent.storage_id,
                listed_up_to,
            )
        )
        chain.tensors.append(result)
        chain.ops.append(op)
        tensor = result
    return chain


def trace(
    shape: Sequence[int],
    dtype: str = "float32",
    ops: Sequence[str] = (),
    *,
    listed_up_to: int = MAX_LISTED,
) -> list[Step]:
    """Every step of ``ops`` applied to a ``shape``/``dtype`` tensor whose values are its
    storage indices; see :class:`Step` (and :func:`run_chain` for ``listed_up_to``)."""
    return run_chain(shape, dtype, ops, listed_up_to=listed_up_to).steps


def chain_code(shape: Sequence[int], dtype: str, steps: Sequence[Step]) -> str:
    """Runnable PyTorch code for the traced chain, printing what this room shows."""
    lines = ["import torch", ""]
    names = []
    for step in steps:
        if step.error is None:
            lines.append(step.code)
            names.append(step.name)
    lines += [
        "",
        "base = x.untyped_storage().data_ptr()",
        f"for name, t in [{', '.join(f'({n!r}, {n})' for n in names)}]:",
        "    shared = t.untyped_storage().data_ptr() == base",
        "    print(name, tuple(t.shape), t.stride(), t.storage_offset(), t.is_contiguous(),",
        '          "shares x\'s storage" if shared else "own storage")',
    ]
    failed = [step for step in steps if step.error is not None]
    if failed:
        last = names[-1] if names else "x"
        lines += ["", f"# The next op fails in PyTorch: {last}{_as_suffix(failed[0].op)}"]
    return "\n".join(lines) + "\n"


def _as_suffix(text: str) -> str:
    text = text.strip()
    return text if text.startswith(("[", ".")) else f".{text}"
