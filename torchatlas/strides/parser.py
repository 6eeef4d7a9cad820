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


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _int64(value: int) -> int:
    """Sizes, strides, offsets, indices and dims are 64-bit in PyTorch: a whole number
    outside that range is refused here, in the room's words, before torch sees it."""
    if not INT64_MIN <= value <= INT64_MAX:
        digits = str(value) if abs(value) < 10**40 else f"{value:.3e}"
        raise _fail(ErrorCode.NUMBER_TOO_BIG, part=digits)
    return value


def literal(node: ast.AST, *, allow_slice: bool = False, allow_str: bool = False) -> Any:
    """The Python value of a literal node; anything else raises ``OpParseError``."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or value is Ellipsis:
            return value
        if isinstance(value, bool):
            raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))
        if isinstance(value, int):
            return _int64(value)
        if isinstance(value, float):
            return value
        if isinstance(value, str) and allow_str:
            return value
        raise _fail(ErrorCode.NOT_LITERAL, part=repr(value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = literal(node.operand)
        if not isinstance(inner, int | float):
            raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node))
        value = -inner if isinstance(node.op, ast.USub) else inner
        return _int64(value) if isinstance(value, int) else value
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
        if error.code not in (ErrorCode.NOT_LITERAL, ErrorCode.NUMBER_TOO_BIG):
            raise
        raise _fail(error.code, text=text, part=error.params.get("part", "")) from None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _fail(ErrorCode.SYNTAX, text=text) from None


def _parse_tree(node: ast.AST, text: str) -> ParsedOp:
    """One op on the placeholder tensor, by the node's kind: an index, an attribute, or a
    method call (a several-piece one followed by the piece it keeps)."""
    node, pick = _picked_piece(node, text)
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
        return _parse_attribute(node, text)
    if isinstance(node, ast.Call):
        return _parse_method(node, text, pick)
    if isinstance(node, ast.Name | ast.Constant):
        raise _fail(ErrorCode.SYNTAX, text=text)
    raise _unsupported(text, type(node).__name__)


def _picked_piece(node: ast.AST, text: str) -> tuple[ast.AST, int | None]:
    """``chunk(2)[1]``: a several-piece op followed by the chosen piece, as the op's call and
    the piece; any other node as it is, with no piece."""
    if not isinstance(node, ast.Subscript) or _is_placeholder(node.value):
        return node, None
    inner = node.value
    if not (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr in PIECE_METHODS
        and _is_placeholder(inner.func.value)
    ):
        raise _one_op(text)
    value = literal(node.slice)
    if not isinstance(value, int):
        raise _fail(ErrorCode.NOT_LITERAL, part=ast.unparse(node.slice))
    return inner, value


def _parse_attribute(node: ast.Attribute, text: str) -> ParsedOp:
    """``x.T``, ``x.mT`` …: an attribute of the placeholder (a method named without its call
    is refused with its own lesson)."""
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


def _parse_method(node: ast.Call, text: str, pick: int | None) -> ParsedOp:
    """A method of the placeholder on literal arguments and allowed keywords."""
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
        if error.code not in (ErrorCode.NOT_LITERAL, ErrorCode.NUMBER_TOO_BIG):
            raise _write_syntax(text) from None
        raise _fail(error.code, text=text, part=error.params.get("part", "")) from None
    except (RecursionError, MemoryError):  # a literal nested past Python's stack
        raise _write_syntax(text) from None
    raise _write_syntax(text)


def _write_syntax(text: str) -> OpParseError:
    return _fail(ErrorCode.WRITE_SYNTAX, text=text)


# --------------------------------------------------------------------------- ops as data
# A parsed op crosses into a sandbox child as JSON, so the child rebuilds it without reading
# any text as code (the sandbox refuses to compile text, and the server's parse is the one
# that gives the visitor's refusals). Literal values are tagged: {"t": [...]} a tuple,
# {"s": [start, stop, step]} a slice, {"e": 0} Ellipsis, {"d": name} a dtype, {"m": name} a
# memory format; ints, floats, strings, None and lists stand for themselves.
_MAX_LITERAL_ITEMS = 64


def literal_to_json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if value is Ellipsis:
        return {"e": 0}
    if isinstance(value, slice):
        return {"s": [value.start, value.stop, value.step]}
    if isinstance(value, tuple):
        return {"t": [literal_to_json(item) for item in value]}
    if isinstance(value, list):
        return [literal_to_json(item) for item in value]
    if isinstance(value, torch.dtype):
        return {"d": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        name = next(key for key, known in MEMORY_FORMATS.items() if known == value)
        return {"m": name}
    raise TypeError(f"{type(value).__name__} is not an op literal")


def literal_from_json(data: Any, depth: int = 0) -> Any:
    """The literal ``literal_to_json`` wrote; ValueError for anything the parser could not
    have produced (an int past 64 bits, an unknown dtype, deep or long nesting)."""
    if depth > 8:
        raise ValueError("an op literal nested too deeply")
    if data is None or isinstance(data, bool | float | str):
        return data
    if isinstance(data, int):
        return _int64(data)
    if isinstance(data, list):
        if len(data) > _MAX_LITERAL_ITEMS:
            raise ValueError("an op literal with too many items")
        return [literal_from_json(item, depth + 1) for item in data]
    if isinstance(data, dict) and len(data) == 1:
        ((tag, body),) = data.items()
        if tag == "e":
            return Ellipsis
        if tag == "s" and isinstance(body, list) and len(body) == 3:
            parts = [literal_from_json(part, depth + 1) for part in body]
            if all(part is None or isinstance(part, int) for part in parts):
                return slice(*parts)
        if tag == "t" and isinstance(body, list):
            return tuple(literal_from_json([*body], depth + 1))
        if tag == "d" and body in DTYPES:
            return DTYPES[body]
        if tag == "m" and body in MEMORY_FORMATS:
            return MEMORY_FORMATS[body]
    raise ValueError("not an op literal")


def op_to_json(op: ParsedOp) -> dict[str, Any]:
    """``op`` as JSON data for a sandbox job (:func:`op_from_json` rebuilds it)."""
    return {
        "text": op.text,
        "kind": op.kind.value,
        "name": op.name,
        "args": literal_to_json(op.args),
        "kwargs": {key: literal_to_json(value) for key, value in op.kwargs.items()},
        "pick": op.pick,
        "source": op.source,
    }


def op_from_json(data: Any) -> ParsedOp:
    """The op :func:`op_to_json` wrote, held to the parser's allow list again (methods,
    keywords, literal types); ValueError otherwise."""
    if not isinstance(data, dict) or set(data) != {
        "text", "kind", "name", "args", "kwargs", "pick", "source"
    }:  # fmt: skip
        raise ValueError("not an op")
    kind, name, text, source = OpKind(data["kind"]), data["name"], data["text"], data["source"]
    if not all(isinstance(part, str) and len(part) <= 4 * MAX_OP_TEXT for part in (text, source)):
        raise ValueError("an op's text is too long")
    args = literal_from_json(data["args"])
    kwargs_data = data["kwargs"]
    if not isinstance(args, tuple) or not isinstance(kwargs_data, dict):
        raise ValueError("an op's arguments are not a tuple and a mapping")
    kwargs = {str(key): literal_from_json(value) for key, value in kwargs_data.items()}
    pick = data["pick"]
    if pick is not None and not isinstance(pick, int):
        raise ValueError("an op's piece is not a whole number")
    known = {
        OpKind.INDEX: name == "getitem" and len(args) == 1 and not kwargs,
        OpKind.ATTRIBUTE: name in ATTRIBUTES and not args and not kwargs,
        OpKind.EINSUM: name == "einsum" and len(args) == 1 and isinstance(args[0], str),
        OpKind.METHOD: name in METHODS and set(kwargs) <= set(METHODS[name]),
        OpKind.WRITE: False,
    }[kind]
    if not known or (pick is not None and name not in PIECE_METHODS):
        raise ValueError("an op outside the allow list")
    try:
        if kind is OpKind.INDEX:
            _check_index(args[0])
        elif kind is OpKind.EINSUM:
            if not all(c.isalpha() or c in "->. " for c in args[0]):
                raise ValueError("an einsum equation outside the allow list")
        elif kind is OpKind.METHOD:
            _check_ints(name, text, args, kwargs)
    except OpParseError:
        raise ValueError("an op argument outside the allow list") from None
    return ParsedOp(text, kind, name, args, kwargs, pick, source)


def write_to_json(write: ParsedWrite) -> dict[str, Any]:
    return {
        "text": write.text,
        "name": write.name,
        "value": write.value,
        "index": literal_to_json(write.index),
    }


def write_from_json(data: Any) -> ParsedWrite:
    """The write :func:`write_to_json` wrote, held to the allow list; ValueError otherwise."""
    if not isinstance(data, dict) or set(data) != {"text", "name", "value", "index"}:
        raise ValueError("not a write")
    text, name, value = data["text"], data["name"], data["value"]
    if not isinstance(text, str) or len(text) > MAX_OP_TEXT:
        raise ValueError("a write's text is too long")
    if name not in (*WRITE_METHODS, "setitem"):
        raise ValueError("a write outside the allow list")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError("a write's value is not a number")
    if isinstance(value, int):
        _int64(value)
    index = literal_from_json(data["index"])
    if name == "setitem":
        try:
            _check_index(index)
        except OpParseError:
            raise ValueError("a write's index outside the allow list") from None
    elif index is not None:
        raise ValueError("only an assignment has an index")
    return ParsedWrite(text, name, value, index)
