"""Shapes as typed: ``2, 3`` or ``(2, 3, 5, 5)``; several as ``(2, 3, 5, 5) (3, 1, 1)`` or one
per line. Linear-time, bounded, no ``eval``."""

from __future__ import annotations

import math
import re

from torchatlas.basics.errors import BasicsValueError, ErrorCode
from torchatlas.basics.limits import MAX_DIM, MAX_RANK, MAX_SHAPE_TEXT, MAX_SHAPES, MAX_SHAPES_TEXT

_GROUP = re.compile(r"[(\[]([^()\[\]]*)[)\]]")


def parse_shape(text: str, *, max_elements: int | None = None) -> tuple[int, ...]:
    """``"2, 3"`` → ``(2, 3)``; ``""`` or ``"()"`` → ``()`` (a 0-dim tensor)."""
    if len(text) > MAX_SHAPE_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(text), limit=MAX_SHAPE_TEXT)
    body = text.strip().strip("()[]").strip()
    parts = [part.strip() for part in body.split(",")] if body else []
    if parts and parts[-1] == "":  # "(3,)"
        parts.pop()
    # ASCII digits only: "٣" is a decimal digit to Python's \d and int() alike, "²" is not
    if not all(re.fullmatch(r"-?[0-9]{1,7}", part) for part in parts):
        raise BasicsValueError(ErrorCode.SHAPE_NOT_INTS, text=text)
    shape = tuple(int(part) for part in parts)
    if len(shape) > MAX_RANK:
        raise BasicsValueError(ErrorCode.SHAPE_RANK, rank=len(shape), limit=MAX_RANK)
    if any(size < 0 or size > MAX_DIM for size in shape):
        raise BasicsValueError(ErrorCode.SHAPE_NEGATIVE, text=text, limit=MAX_DIM)
    if max_elements is not None and math.prod(shape) > max_elements:
        raise BasicsValueError(
            ErrorCode.TOO_MANY_ELEMENTS, numel=math.prod(shape), limit=max_elements
        )
    return shape


def check_shape(shape: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """A shape handed in as data (a job's parameters): whole numbers, rank and sizes within
    the room's bounds, as :func:`~torchatlas.basics.shapes.parse_shape` would have read them."""
    if not isinstance(shape, tuple | list) or len(shape) > MAX_RANK:
        raise BasicsValueError(ErrorCode.SHAPE_RANK, rank=len(shape), limit=MAX_RANK)
    if not all(type(size) is int and 0 <= size <= MAX_DIM for size in shape):
        raise BasicsValueError(ErrorCode.SHAPE_NEGATIVE, text=str(tuple(shape))[:80], limit=MAX_DIM)
    return tuple(shape)


def footprint(shape: tuple[int, ...]) -> int:
    """The product of the sizes with every 0 counted as 1: what a tensor of this shape costs
    once one op reduces or indexes away its empty dimension (``zeros(0, A, B).sum(0)`` is
    A×B). Every bound on a tensor the engine fills with numbers reads this, not ``numel``."""
    return math.prod(max(size, 1) for size in shape)


def check_footprint(shape: tuple[int, ...], limit: int) -> None:
    """Refuse a shape whose :func:`footprint` passes ``limit`` (even with no element)."""
    size = footprint(shape)
    if size > limit:
        raise BasicsValueError(ErrorCode.TOO_LARGE_FOOTPRINT, footprint=size, limit=limit)


def parse_shapes(text: str) -> list[tuple[int, ...]]:
    """Several shapes: each in brackets, or one per line / per ``;``."""
    if len(text) > MAX_SHAPES_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(text), limit=MAX_SHAPES_TEXT)
    groups = _GROUP.findall(text)
    if not groups:
        groups = [line for line in re.split(r"[\n;]", text) if line.strip()]
    if not groups:
        raise BasicsValueError(ErrorCode.EMPTY)
    if len(groups) > MAX_SHAPES:
        raise BasicsValueError(ErrorCode.TOO_MANY_SHAPES, count=len(groups), limit=MAX_SHAPES)
    return [parse_shape(group) for group in groups]


def shape_text(shape: tuple[int, ...]) -> str:
    """``(3,)`` and ``(2, 3)`` as Python writes them."""
    return str(tuple(shape))
