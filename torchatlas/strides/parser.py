"""An allow-listed parser for the ops a student types after a tensor (``.t()``, ``[1:, ::2]``).

Each op text is parsed with :mod:`ast` on a placeholder name and walked node by node: only the
listed methods and attributes, and only literal arguments (ints, tuples, lists, slices,
Ellipsis, None, ``torch.<dtype>``, ``torch.channels_last`` and, for einsum, a string) pass.
Nothing the user typed is ever handed to Python to execute; :meth:`ParsedOp.apply` calls the
real tensor method by its allow-listed name with the literal values.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch

from torchatlas.strides.dtypes import DTYPE_ALIASES, DTYPES
from torchatlas.strides.errors import ErrorCode, OpParseError
from torchatlas.strides.limits import MAX_INDEX_TEXT, MAX_OP_TEXT

__all__ = [
    "ATTRIBUTES",
    "DTYPES",
    "MAX_INDEX_TEXT",
    "MAX_OP_TEXT",
    "METHODS",
    "OpKind",
    "OpParseError",
    "ParsedOp",
    "ParsedWrite",
    "parse_index",
    "parse_op",
    "parse_write",
]

PLACEHOLDER = "x"
MEMORY_FORMATS: dict[str, torch.memory_format] = {
    "channels_last": torch.channels_last,
    "contiguous_format": torch.contiguous_format,
    "preserve_format": torch.preserve_format,
}

# Allowed methods and the keyword arguments each accepts.
METHODS: dict[str, tuple[str, ...]] = {
    "select": ("dim", "index"),
    "narrow": ("dim", "start", "length"),
    "t": (),
    "transpose": ("dim0", "dim1"),
    "swapaxes": ("axis0", "axis1"),
    "swapdims": ("dim0", "dim1"),
    "permute": ("dims",),
    "movedim": ("source", "destination"),
    "moveaxis": ("source", "destination"),
    "view": ("dtype", "size"),
    "reshape": ("shape",),
    "flatten": ("start_dim", "end_dim"),
    "unflatten": ("dim", "sizes"),
    "squeeze": ("dim",),
    "unsqueeze": ("dim",),
    "expand": ("size",),
    "as_strided": ("size", "stride", "storage_offset"),
    "diagonal": ("offset", "dim1", "dim2"),
    "unfold": ("dimension", "size", "step"),
    "chunk": ("chunks", "dim"),
    "split": ("split_size", "dim"),
    "unbind": ("dim",),
    "contiguous": ("memory_format",),
    "clone": ("memory_format",),
    "flip": ("dims",),
    "to": ("dtype", "memory_format"),
    "detach": (),
    "einsum": (),
}
ATTRIBUTES = ("T", "mT")
# These return several tensors; the op must pick one with ``[i]``.
PIECE_METHODS = ("chunk", "split", "unbind")
# In-place writes for the write-through panel.
WRITE_METHODS: dict[str, int] = {"fill_": 1, "add_": 1, "mul_": 1, "zero_": 0}


class OpKind(StrEnum):
    INDEX = "index"  # x[1:, ::2]
    METHOD = "method"  # x.t(), x.chunk(2)[1]
    ATTRIBUTE = "attribute"  # x.T
    EINSUM = "einsum"  # torch.einsum('ij->ji', x)
    WRITE = "write"  # an in-place write, when PyTorch refuses it


@dataclass(frozen=True)
class ParsedOp:
    """One op, with literal arguments only."""

    text: str
    kind: OpKind
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    pick: int | None = None
    source: str = ""  # the op as Python source on the placeholder name

    def apply(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.kind is OpKind.INDEX:
            return tensor[self.args[0]]
        if self.kind is OpKind.ATTRIBUTE:
            return getattr(tensor, self.name)
        if self.kind is OpKind.EINSUM:
            return torch.einsum(self.args[0], tensor)
        result = getattr(tensor, self.name)(*self.args, **self.kwargs)
        if self.pick is not None:
            pieces = result
            if not -len(pieces) <= self.pick < len(pieces):
                raise OpParseError(
                    ErrorCode.PIECE_OUT_OF_RANGE,
                    text=self.text,
                    pieces=len(pieces),
                    pick=self.pick,
                )
            return pieces[self.pick]
        return result

    def code(self, name: str) -> str:
        """The op as Python source applied to the variable ``name``."""
        return self.source.replace("__x__", name)


def _fail(code: ErrorCode, **params: object) -> OpParseError:
    return OpParseError(code, **params)


def parse_index(
    text: str, size: Sequence[int], *, max_chars: int | None = MAX_INDEX_TEXT
) -> tuple[int, ...]:
    """A typed element index (``"1, 2"``, ``"(1, 2)"``, ``"[1, 2]"``) → ``(1, 2)``, one
    whole number per dimension of ``size``, each inside it. Raises :class:`OpParseError`:
    ``index_too_long`` past ``max_chars`` (before reading), else ``not_an_index``."""
    if max_chars is not None and len(text) > max_chars:
        raise _fail(
            ErrorCode.INDEX_TOO_LONG,
            length=f"{len(text):,}",
            limit=max_chars,
        )
    numbers = [part.strip() for part in text.strip("()[] ").split(",") if part.strip()]
    problem = _fail(ErrorCode.NOT_AN_INDEX, text=text, size=str(tuple(size)))
    try:
        index = tuple(int(number) for number in numbers)
    except ValueError:
        raise problem from None
    if len(index) != len(size) or any(not 0 <= i < n for i, n in zip(index, size, strict=True)):
        raise problem
    return index


def _dtype_name(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "torch"
    ):
        return node.attr
    return None


def literal(node: ast.AST, *, allow_slice: bool = False, allow_str: bool = False) -> Any:
    """The Python value of a literal node; anything else raises ``OpParseError``."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or value is Ellipsis:
            return value
        if isinstance(value, bool):
            raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return value
        if isinstance(value, str) and allow_str:
            return value
        raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = literal(node.operand)
        if not isinstance(inner, int | float):
            raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node))
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Tuple | ast.List):
        values = [literal(item, allow_slice=allow_slice) for item in node.elts]
        return tuple(values) if isinstance(node, ast.Tuple) else values
    if isinstance(node, ast.Slice) and allow_slice:
        parts = []
        for part in (node.lower, node.upper, node.step):
            value = None if part is None else literal(part)
            if value is not None and not isinstance(value, int):
                raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node))
            parts.append(value)
        return slice(*parts)
    name = _dtype_name(node)
    if name is not None:
        name = DTYPE_ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
        if name in MEMORY_FORMATS:
            return MEMORY_FORMATS[name]
    raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node))


def _index_value(node: ast.AST) -> Any:
    value = literal(node, allow_slice=True)
    _check_index(value)
    return value


def _check_index(value: Any) -> None:
    """Indices: ints, slices, None, Ellipsis, lists of ints (advanced indexing), tuples."""
    if isinstance(value, tuple):
        for item in value:
            if isinstance(item, tuple):
                raise _fail(ErrorCode.NOT_LITERAL, part=repr(item))
            _check_index(item)
    elif isinstance(value, list):
        if not value or not all(isinstance(item, int) for item in value):
            raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))
    elif not (value is None or value is Ellipsis or isinstance(value, int | slice)):
        raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))


def _is_placeholder(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == PLACEHOLDER


def _to_source(text: str) -> tuple[str, int]:
    """Python source on the placeholder, and how many characters were prepended."""
    stripped = text.strip()
    if stripped.startswith(PLACEHOLDER) and stripped[1:2] in (".", "["):
        return stripped, 0
    if stripped.startswith(("[", ".")):
        return PLACEHOLDER + stripped, 1
    return f"{PLACEHOLDER}.{stripped}", 2


def _check_ints(name: str, text: str, values: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Literal types each op accepts, so a wrong type reads as our message, not a torch one."""
    allowed_values: list[Any] = list(values) + list(kwargs.values())
    for value in allowed_values:
        items = value if isinstance(value, tuple | list) else (value,)
        for item in items:
            ok = isinstance(item, int) or (
                name in ("view", "to", "contiguous", "clone")
                and isinstance(item, torch.dtype | torch.memory_format)
            )
            if not ok:
                raise _fail(
                    ErrorCode.BAD_ARGUMENT,
                    text=text,
                    part=repr(item),
                    op=name,
                )


def parse_op(text: str, *, max_chars: int | None = MAX_OP_TEXT) -> ParsedOp:
    """Parse one op as typed after a tensor: ``.t()``, ``t()``, ``[1:, ::2]``, ``.T``,
    ``chunk(2)[1]``, ``einsum('ij->ji')``. Raises :class:`OpParseError` (``too_long`` past
    ``max_chars``, before any parsing)."""
    text = text.strip()
    if not text:
        raise _fail(ErrorCode.EMPTY, text=text)
    if max_chars is not None and len(text) > max_chars:
        raise _fail(
            ErrorCode.TOO_LONG,
            text=text[:40] + "…",
            limit=max_chars,
        )
    source, _ = _to_source(text)
    try:
        # Deep nesting makes Python's parser (or the walk below) give up with RecursionError
        # or MemoryError (a parser stack, not the process's memory): malformed like any other.
        return _parse_tree(ast.parse(source, mode="eval").body, text)
    except OpParseError as error:
        if error.code is not ErrorCode.NOT_LITERAL:
            raise
        raise _fail(ErrorCode.NOT_LITERAL, text=text, part=error.params.get("part", "")) from None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _fail(ErrorCode.SYNTAX, text=text) from None


def _parse_tree(node: ast.AST, text: str) -> ParsedOp:
    pick: int | None = None
    if isinstance(node, ast.Subscript) and not _is_placeholder(node.value):
        # ``chunk(2)[1]``: a several-piece op followed by the chosen piece.
        inner = node.value
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr in PIECE_METHODS
            and _is_placeholder(inner.func.value)
        ):
            value = literal(node.slice)
            if not isinstance(value, int):
                raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node.slice))
            pick = value
            node = inner
        else:
            raise _one_op(text)

    if isinstance(node, ast.Subscript):
        index = _index_value(node.slice)
        return ParsedOp(
            text=text,
            kind=OpKind.INDEX,
            name="getitem",
            args=(index,),
            # unparse the whole subscript: a tuple slice alone unparses as "(1:, ::2)"
            source="__x__" + ast.unparse(node).removeprefix(PLACEHOLDER),
        )
    if isinstance(node, ast.Attribute):
        if not _is_placeholder(node.value):
            raise _nested(node.value, node.attr, text)
        if node.attr in ATTRIBUTES:
            return ParsedOp(
                text=text, kind=OpKind.ATTRIBUTE, name=node.attr, source=f"__x__.{node.attr}"
            )
        if node.attr in METHODS:
            raise _fail(
                ErrorCode.NOT_CALLED,
                text=text,
                name=node.attr,
            )
        raise _unsupported(text, node.attr)
    if isinstance(node, ast.Call):
        func = node.func
        if not isinstance(func, ast.Attribute):
            raise _unsupported(text, ast.unparse(func))
        if not _is_placeholder(func.value):
            raise _nested(func.value, func.attr, text)
        name = func.attr
        if name not in METHODS:
            raise _unsupported(text, name)
        if name in PIECE_METHODS and pick is None:
            raise _fail(ErrorCode.PICK_PIECE, text=text)
        if name == "einsum":
            return _parse_einsum(node, text)
        args = tuple(literal(arg) for arg in node.args)
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg not in METHODS[name]:
                raise _fail(
                    ErrorCode.BAD_KEYWORD,
                    text=text,
                    keyword=str(keyword.arg),
                    allowed=", ".join(METHODS[name]) or "—",
                )
            kwargs[keyword.arg] = literal(keyword.value)
        _check_ints(name, text, args, kwargs)
        if name in ("to", "view") and any(isinstance(a, torch.memory_format) for a in args):
            raise _fail(
                ErrorCode.BAD_ARGUMENT,
                text=text,
                part="memory_format",
                op=name,
            )
        call = ast.unparse(node).replace(f"{PLACEHOLDER}.", "__x__.", 1)
        if pick is not None:
            call += f"[{pick}]"
        return ParsedOp(
            text=text,
            kind=OpKind.METHOD,
            name=name,
            args=args,
            kwargs=kwargs,
            pick=pick,
            source=call,
        )
    if isinstance(node, ast.Name | ast.Constant):
        raise _fail(ErrorCode.SYNTAX, text=text)
    raise _unsupported(text, type(node).__name__)


def _parse_einsum(node: ast.Call, text: str) -> ParsedOp:
    if node.keywords or len(node.args) != 1:
        raise _fail(ErrorCode.EINSUM_ONE_OPERAND, text=text)
    equation = literal(node.args[0], allow_str=True)
    if not isinstance(equation, str) or not all(c.isalpha() or c in "->. " for c in equation):
        raise _fail(ErrorCode.EINSUM_ONE_OPERAND, text=text)
    return ParsedOp(
        text=text,
        kind=OpKind.EINSUM,
        name="einsum",
        args=(equation,),
        source=f"torch.einsum({equation!r}, __x__)",
    )


def _nested(inner: ast.AST, name: str, text: str) -> OpParseError:
    """``.t().contiguous()`` is two valid ops on one line; ``os.system(...)`` is not an op."""
    try:
        _parse_tree(inner, text)
    except OpParseError as error:
        return error if error.code is not ErrorCode.ONE_OP else _one_op(text)
    return _one_op(text) if name in METHODS or name in ATTRIBUTES else _unsupported(text, name)


def _one_op(text: str) -> OpParseError:
    return _fail(ErrorCode.ONE_OP, text=text)


def _unsupported(text: str, name: str) -> OpParseError:
    allowed = ", ".join([*METHODS, *ATTRIBUTES])
    return _fail(
        ErrorCode.UNSUPPORTED,
        text=text,
        name=name,
        allowed=allowed,
    )


@dataclass(frozen=True)
class ParsedWrite:
    """An in-place write: ``fill_(v)``, ``add_(v)``, ``mul_(v)``, ``zero_()`` or ``[i] = v``."""

    text: str
    name: str
    value: float | int | None = None
    index: Any = None

    def apply(self, tensor: torch.Tensor) -> None:
        if self.name == "setitem":
            tensor[self.index] = self.value
        elif self.name == "zero_":
            tensor.zero_()
        else:
            getattr(tensor, self.name)(self.value)

    def code(self, name: str) -> str:
        if self.name == "setitem":
            return f"{name}[{_index_source(self.index)}] = {self.value!r}"
        if self.name == "zero_":
            return f"{name}.zero_()"
        return f"{name}.{self.name}({self.value!r})"


def _index_source(index: Any) -> str:
    def one(item: Any) -> str:
        if item is Ellipsis:
            return "..."
        if isinstance(item, slice):
            parts = ["" if p is None else str(p) for p in (item.start, item.stop, item.step)]
            return ":".join(parts[:2]) + (f":{parts[2]}" if item.step is not None else "")
        return repr(item)

    if isinstance(index, tuple):
        return ", ".join(one(item) for item in index)
    return one(index)


def parse_write(text: str, *, max_chars: int | None = MAX_OP_TEXT) -> ParsedWrite:
    """Parse an in-place write typed after a tensor. Raises :class:`OpParseError`
    (``write_too_long`` past ``max_chars``, before any parsing)."""
    text = text.strip()
    if max_chars is not None and len(text) > max_chars:
        raise _fail(
            ErrorCode.WRITE_TOO_LONG,
            text=text[:40] + "…",
            limit=max_chars,
        )
    if not text:
        raise _fail(ErrorCode.WRITE_EMPTY, text=text)
    source, _ = _to_source(text)
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _write_syntax(text) from None
    if len(tree.body) != 1:
        raise _write_syntax(text)
    statement = tree.body[0]
    try:
        if isinstance(statement, ast.Assign):
            target = statement.targets[0]
            if (
                len(statement.targets) != 1
                or not isinstance(target, ast.Subscript)
                or not _is_placeholder(target.value)
            ):
                raise _write_syntax(text)
            value = literal(statement.value)
            if not isinstance(value, int | float):
                raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(statement.value))
            return ParsedWrite(text, "setitem", value=value, index=_index_value(target.slice))
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and _is_placeholder(func.value)
                and func.attr in WRITE_METHODS
                and not call.keywords
                and len(call.args) == WRITE_METHODS[func.attr]
            ):
                value = literal(call.args[0]) if call.args else None
                if value is not None and not isinstance(value, int | float):
                    raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(call.args[0]))
                return ParsedWrite(text, func.attr, value=value)
    except OpParseError as error:
        if error.code is not ErrorCode.NOT_LITERAL:
            raise _write_syntax(text) from None
        raise _fail(ErrorCode.NOT_LITERAL, text=text, part=error.params.get("part", "")) from None
    except (RecursionError, MemoryError):  # a literal nested past Python's stack
        raise _write_syntax(text) from None
    raise _write_syntax(text)


def _write_syntax(text: str) -> OpParseError:
    return _fail(ErrorCode.WRITE_SYNTAX, text=text)
