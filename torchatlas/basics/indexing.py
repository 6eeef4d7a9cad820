"""Indexing, decided by storage identity: basic indexing (ints, slices, ``None``, ``...``)
gives a view, advanced indexing (integer lists, bool masks) a copy — and the engine does not
take the rule's word for it: it indexes a real tensor and compares
``untyped_storage().data_ptr()`` before and after.

The expression is read by an allow-list over Python's AST, never ``eval``: a subscript of the
name ``x`` holding ints, slices, ``None``, ``...``, lists of ints or bools, and masks such as
``x > 3`` or ``x % 2 == 0``. The text is bounded, so parsing is linear in it.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode, refused
from torchatlas.basics.limits import (
    MAX_DRAWN,
    MAX_GATHERED,
    MAX_INDEX_NODES,
    MAX_INDEX_TEXT,
    MAX_REAL_ELEMENTS,
)
from torchatlas.basics.shapes import check_footprint, check_shape, footprint
from torchatlas.errors import RefusedByTorch, TorchRefusal

NAME = "x"
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


class IndexKind(StrEnum):
    BASIC = "basic"  # ints, slices, None, ...: torch can describe the result with strides
    ADVANCED = "advanced"  # an integer list/tensor or a bool mask: the elements are gathered


class Part(StrEnum):
    INT = "int"
    SLICE = "slice"
    NONE = "none"
    ELLIPSIS = "ellipsis"
    INT_LIST = "int_list"
    BOOL_LIST = "bool_list"
    MASK = "mask"


@dataclass(frozen=True)
class ParsedIndex:
    """An index expression, read: its parts and what each one is."""

    text: str  # as typed, normalised: ``x[1:, None]``
    subscript: str  # the part after ``x``: ``[1:, None]``
    parts: tuple[Part, ...]
    _values: tuple[Any, ...]  # ints, slices, None, Ellipsis, lists, or a mask builder

    @property
    def kind(self) -> IndexKind:
        advanced = {Part.INT_LIST, Part.BOOL_LIST, Part.MASK}
        return IndexKind.ADVANCED if advanced & set(self.parts) else IndexKind.BASIC

    def key(self, x: torch.Tensor) -> Any:
        """The index to apply to ``x`` (masks are computed from ``x``'s values)."""
        items = []
        for part, value in zip(self.parts, self._values, strict=True):
            if part is Part.MASK:
                items.append(value(x))
            elif part is Part.INT_LIST:
                items.append(torch.tensor(value, dtype=torch.long))
            elif part is Part.BOOL_LIST:
                items.append(torch.tensor(value, dtype=torch.bool))
            else:
                items.append(value)
        return tuple(items)  # x[(a,)] is x[a] for torch

    @property
    def strides_op(self) -> str | None:
        """The same subscript as an op of the strides room (it takes no masks)."""
        if Part.MASK in self.parts or Part.BOOL_LIST in self.parts:
            return None
        return self.subscript


def parse_index_expression(text: str) -> ParsedIndex:
    """``x[1:, None, ..., [0, 2]]``, ``[::2]`` or ``x[x > 0]`` → :class:`ParsedIndex`.
    Raises :class:`BasicsValueError`."""
    if len(text) > MAX_INDEX_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(text), limit=MAX_INDEX_TEXT)
    stripped = text.strip()
    if not stripped:
        raise BasicsValueError(ErrorCode.EMPTY)
    source = NAME + stripped if stripped.startswith("[") else stripped
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise BasicsValueError(ErrorCode.INDEX_SYNTAX, text=stripped) from None
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_INDEX_NODES:
        raise BasicsValueError(ErrorCode.INDEX_TOO_COMPLEX, nodes=nodes, limit=MAX_INDEX_NODES)
    body = tree.body
    if not (isinstance(body, ast.Subscript) and _is_x(body.value)):
        raise BasicsValueError(ErrorCode.INDEX_SYNTAX, text=stripped)
    elements = body.slice.elts if isinstance(body.slice, ast.Tuple) else [body.slice]
    if not elements:
        raise BasicsValueError(ErrorCode.INDEX_SYNTAX, text=stripped)
    parts, values = [], []
    for element in elements:
        part, value = _element(element)
        parts.append(part)
        values.append(value)
    subscript = ast.unparse(body)[len(NAME) :]
    if isinstance(body.slice, ast.Tuple):
        # unparse writes a tuple of slices without brackets inside [], keep that
        subscript = "[" + ", ".join(ast.unparse(element) for element in elements) + "]"
        if len(elements) == 1:
            subscript = subscript[:-1] + ",]"
    return ParsedIndex(NAME + subscript, subscript, tuple(parts), tuple(values))


def _is_x(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == NAME


def _refuse(node: ast.AST) -> BasicsValueError:
    return BasicsValueError(ErrorCode.INDEX_NOT_ALLOWED, part=ast.unparse(node)[:40])


# torch reads every whole number of an index as int64; a Python int past that raises
# OverflowError (or, in a slice, a misleading "negative strides" error) inside torch
INDEX_INT_LIMIT = 2**63 - 1


def _in_range(value: int, node: ast.AST) -> int:
    if abs(value) > INDEX_INT_LIMIT:
        raise BasicsValueError(
            ErrorCode.INDEX_INT_RANGE, part=ast.unparse(node)[:40], limit=INDEX_INT_LIMIT
        )
    return value


def _int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _in_range(node.value, node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _int(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _number(node: ast.AST) -> int | float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _in_range(node.value, node) if type(node.value) is int else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def _element(node: ast.AST) -> tuple[Part, Any]:
    if isinstance(node, ast.Constant) and node.value is None:
        return Part.NONE, None
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return Part.ELLIPSIS, Ellipsis
    number = _int(node)
    if number is not None:
        return Part.INT, number
    if isinstance(node, ast.Slice):
        bounds = []
        for bound in (node.lower, node.upper, node.step):
            value = None if bound is None else _int(bound)
            if bound is not None and value is None:
                raise _refuse(node)
            bounds.append(value)
        return Part.SLICE, slice(*bounds)
    if isinstance(node, ast.List):
        return _list(node)
    if isinstance(node, ast.Compare):
        return Part.MASK, _mask(node)
    raise _refuse(node)


def _list(node: ast.List) -> tuple[Part, Any]:
    """``[0, 2]``, ``[[0, 1], [1, 2]]`` (integer indices) or ``[True, False]`` (a mask)."""
    if not node.elts:
        raise _refuse(node)
    if all(isinstance(item, ast.Constant) and type(item.value) is bool for item in node.elts):
        return Part.BOOL_LIST, [item.value for item in node.elts]  # type: ignore[attr-defined]
    values: list[Any] = []
    for item in node.elts:
        if isinstance(item, ast.List):
            inner = [_int(sub) for sub in item.elts]
            if not inner or any(value is None for value in inner):
                raise _refuse(node)
            values.append(inner)
        else:
            value = _int(item)
            if value is None:
                raise _refuse(node)
            values.append(value)
    if len({isinstance(value, list) for value in values}) > 1:
        raise _refuse(node)
    return Part.INT_LIST, values


def _mask(node: ast.Compare) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x > 3``, ``x % 2 == 0``: a comparison of ``x`` (or ``x % k``) with a number."""
    if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
        raise _refuse(node)
    compare = _COMPARE[type(node.ops[0])]
    right = _number(node.comparators[0])
    left = node.left
    modulus: int | None = None
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod) and _is_x(left.left):
        modulus = _int(left.right)
        if not modulus:
            raise _refuse(node)
    elif not _is_x(left):
        raise _refuse(node)
    if right is None:
        raise _refuse(node)

    def build(x: torch.Tensor) -> torch.Tensor:
        values = x % modulus if modulus is not None else x
        return compare(values, right)

    return build


@dataclass(frozen=True)
class IndexResult(RefusedByTorch):
    shape: tuple[int, ...]  # the source tensor's shape
    expression: str  # normalised: ``x[1:, None]``
    kind: IndexKind
    parts: tuple[Part, ...]
    refusal: TorchRefusal | None = None  # torch refused the index
    result_shape: tuple[int, ...] | None = None
    result_strides: tuple[int, ...] | None = None
    storage_offset: int | None = None
    is_view: bool | None = None  # the result shares x's storage (same data_ptr)
    source_ptr_same: bool | None = None  # the same thing, as the pointers compared
    picked: tuple[int, ...] = ()  # flat positions of x that the result reads (sorted)
    values: tuple[int, ...] | None = None  # the result's values (= x's flat positions), flat
    strides_op: str | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def code(self) -> str:
        numel = math.prod(self.shape)
        return (
            f"x = torch.arange({numel}).reshape{_shape_args(self.shape)}\n"
            f"y = {self.expression}\n"
            "y.shape, y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()"
        )


def _shape_args(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if len(shape) != 1 else f"({shape[0]},)"


def source_tensor(shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor every index reads: its values are their own flat positions."""
    return torch.arange(math.prod(shape)).reshape(shape)


def index(shape: tuple[int, ...], expression: str) -> IndexResult:
    """Apply ``expression`` to ``torch.arange(numel).reshape(shape)`` and report."""
    shape = check_shape(shape)
    numel = math.prod(shape)
    if numel > MAX_REAL_ELEMENTS:
        raise BasicsValueError(ErrorCode.TOO_MANY_ELEMENTS, numel=numel, limit=MAX_REAL_ELEMENTS)
    # x[..., None] or x[:, 0] of a (0, 10**6, 10**6) tensor has no element either, but its
    # shape is what the page draws: the sizes are bounded with every 0 counted as 1
    check_footprint(shape, MAX_REAL_ELEMENTS)
    parsed = parse_index_expression(expression)
    x = source_tensor(shape)
    key = parsed.key(x)
    # Integer lists broadcast against each other: two short lists can gather hundreds of
    # slices of x. The result's shape is found on the meta device first (no data), and a
    # result past the bound is refused before torch allocates it.
    if Part.INT_LIST in parsed.parts:
        try:
            planned = footprint(tuple(torch.empty(shape, device="meta")[key].shape))
        except (IndexError, RuntimeError, ValueError, TypeError, NotImplementedError,
                OverflowError):  # fmt: skip
            planned = 0  # the real index below raises torch's own words
        if planned > MAX_GATHERED:
            raise BasicsValueError(ErrorCode.TOO_MANY_ELEMENTS, numel=planned, limit=MAX_GATHERED)
    try:
        y = x[key]
    except (IndexError, RuntimeError, ValueError, TypeError, OverflowError) as exc:
        return IndexResult(shape, parsed.text, parsed.kind, parsed.parts, refusal=refused(exc))
    same = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    flat = y.reshape(-1)
    values = tuple(int(v) for v in flat.tolist()) if flat.numel() <= MAX_DRAWN else None
    picked = tuple(int(v) for v in torch.unique(flat).tolist())
    return IndexResult(
        shape,
        parsed.text,
        parsed.kind,
        parsed.parts,
        result_shape=tuple(y.shape),
        result_strides=tuple(y.stride()),
        storage_offset=int(y.storage_offset()),
        is_view=same,
        source_ptr_same=same,
        picked=picked,
        values=values,
        strides_op=parsed.strides_op,
    )
