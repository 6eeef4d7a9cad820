"""Broadcasting, asked of torch: shapes aligned from the right, which dimensions stretch, the
result shape, and the strides ``expand`` really gives each operand (0 where it stretches); or
the exact error torch raises, the dimension that fails, and an ``unsqueeze`` that fixes it.

Everything runs on meta tensors: shapes of any size cost nothing, and no data is made.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode, refused, torch_words
from torchatlas.basics.limits import MAX_SHAPES
from torchatlas.basics.shapes import check_shape
from torchatlas.errors import RefusedByTorch, TorchRefusal


@dataclass(frozen=True)
class Operand:
    shape: tuple[int, ...]
    aligned: tuple[int | None, ...]  # one per result dimension: None where the shape is short
    stretched: tuple[bool, ...]  # per result dimension: a size 1 (or missing) made larger
    strides: tuple[int, ...]  # the strides of torch.empty(shape)
    expanded_strides: tuple[int, ...] | None  # of .expand(result) (None when it fails)


@dataclass(frozen=True)
class Fix:
    """Size-1 dimensions inserted into one operand so that it broadcasts: the new shape and
    the indexing that makes it (``b[:, None, None]``)."""

    operand: int
    new_shape: tuple[int, ...]
    index: str  # ``[:, None, None]``
    unsqueezes: tuple[int, ...]  # the dims to unsqueeze, in order
    result: tuple[int, ...]  # the result shape after the fix (checked with torch)


@dataclass(frozen=True)
class Broadcast(RefusedByTorch):
    shapes: tuple[tuple[int, ...], ...]
    rank: int  # the number of aligned columns
    operands: tuple[Operand, ...]
    result: tuple[int, ...] | None  # torch.broadcast_shapes, None on error
    refusal: TorchRefusal | None = None  # what the real op said (a + b on the CPU)
    failing_dim: int | None = None  # the first failing column, counted from the right (-1…)
    failing_sizes: tuple[int, ...] = ()  # the sizes that disagree there
    fix: Fix | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None

    @property
    def code(self) -> str:
        names = "abcd"
        lines = [f"{names[i]} = torch.ones{_args(s)}" for i, s in enumerate(self.shapes)]
        if len(self.shapes) == 2:
            lines.append("(a + b).shape")
        else:
            lines.append(f"torch.broadcast_shapes({', '.join(map(str, self.shapes))})")
        return "\n".join(lines)


def _args(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if shape else "(())"


def _meta(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.empty(shape, device="meta")


def _torch_error(shapes: list[tuple[int, ...]]) -> TorchRefusal | None:
    """What the real op says on the CPU: ``a + b`` for two shapes, torch.broadcast_tensors
    for more. (Meta tensors word it differently.) The operands are one element expanded to
    each shape, so no shape's size is ever allocated; torch checks the shapes first."""
    tensors = [torch.zeros(()).expand(shape) for shape in shapes]
    try:
        if len(tensors) == 2:
            _ = tensors[0] + tensors[1]
        else:
            torch.broadcast_tensors(*tensors)
    except RuntimeError as exc:
        return refused(exc)
    return None


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


def broadcast(shapes: list[tuple[int, ...]] | tuple[tuple[int, ...], ...]) -> Broadcast:
    """Align ``shapes`` from the right and broadcast them the way torch does."""
    if not isinstance(shapes, list | tuple) or len(shapes) > MAX_SHAPES:
        raise BasicsValueError(ErrorCode.TOO_MANY_SHAPES, count=len(shapes), limit=MAX_SHAPES)
    shapes = [check_shape(shape) for shape in shapes]
    if not shapes:
        raise BasicsValueError(ErrorCode.EMPTY)
    for shape in shapes:
        # torch refuses to describe a tensor whose byte size overflows 64 bits (six sizes of
        # a million), even on the meta device: its words, before anything else is asked
        try:
            _meta(shape)
        except RuntimeError as exc:
            raise BasicsValueError(
                ErrorCode.SHAPE_TORCH, shape=str(shape), torch_message=torch_words(exc)
            ) from None
    if len(shapes) > MAX_SHAPES:
        raise BasicsValueError(ErrorCode.TOO_MANY_SHAPES, count=len(shapes), limit=MAX_SHAPES)
    rank = max(len(shape) for shape in shapes)
    result = _broadcast_shape(shapes)
    operands = []
    for shape in shapes:
        aligned = (None,) * (rank - len(shape)) + shape
        tensor = _meta(shape)
        expanded = None
        stretched: tuple[bool, ...]
        if result is not None:
            expanded = tuple(tensor.expand(result).stride())
            # a new or size-1 dimension repeats its one element; one of size 1 stays as it is
            stretched = tuple(
                out != 1 and size in (None, 1) for size, out in zip(aligned, result, strict=True)
            )
        else:
            stretched = tuple(size is None for size in aligned)
        operands.append(Operand(shape, aligned, stretched, tuple(tensor.stride()), expanded))
    if result is not None:
        return Broadcast(tuple(shapes), rank, tuple(operands), result)
    failing, sizes = _first_failure(shapes, rank)
    return Broadcast(
        tuple(shapes),
        rank,
        tuple(operands),
        None,
        refusal=_torch_error(shapes),
        failing_dim=failing,
        failing_sizes=sizes,
        fix=_find_fix(shapes, failing),
    )


def _first_failure(shapes: list[tuple[int, ...]], rank: int) -> tuple[int, tuple[int, ...]]:
    """The first column from the right whose sizes (other than 1) disagree."""
    for dim in range(-1, -rank - 1, -1):
        sizes = tuple(shape[dim] for shape in shapes if len(shape) >= -dim)
        if len({size for size in sizes if size != 1}) > 1:
            return dim, sizes
    raise AssertionError("torch refused shapes that agree")  # pragma: no cover


def _find_fix(shapes: list[tuple[int, ...]], failing: int) -> Fix | None:
    """Insert size-1 dimensions into one operand so that it lines up with the others.

    Tries the operands from the shortest: the others must broadcast together to some shape
    ``R``; the operand's sizes are then placed on ``R``'s dimensions from the right, each on
    the rightmost dimension it fits (equal size, or 1), with 1s between. The fix is checked
    with torch before it is offered."""
    order = sorted(range(len(shapes)), key=lambda i: (len(shapes[i]), -i))
    for index in order:
        others = [shape for i, shape in enumerate(shapes) if i != index]
        target = _broadcast_shape(others) if others else None
        shape = shapes[index]
        if target is None or len(shape) >= len(target):
            continue
        placed = _place(shape, target)
        if placed is None:
            continue
        span = range(placed[0], len(target))
        new_shape = tuple(shape[placed.index(p)] if p in placed else 1 for p in span)
        if new_shape == shape:
            continue
        candidate = [new_shape if i == index else s for i, s in enumerate(shapes)]
        result = _broadcast_shape(candidate)
        if result is None:
            continue
        parts = [":" if p in placed else "None" for p in span]
        unsqueezes = tuple(i for i, part in enumerate(parts) if part == "None")
        return Fix(index, new_shape, "[" + ", ".join(parts) + "]", unsqueezes, result)
    return None


def _place(shape: tuple[int, ...], target: tuple[int, ...]) -> list[int] | None:
    """Positions in ``target`` for each of ``shape``'s dims, increasing, matched from the
    right greedily (each dim on the rightmost free position it fits)."""
    positions: list[int] = []
    limit = len(target) - 1
    for size in reversed(shape):
        while limit >= 0 and not (size == 1 or size == target[limit]):
            limit -= 1
        if limit < 0:
            return None
        positions.append(limit)
        limit -= 1
    return positions[::-1]
