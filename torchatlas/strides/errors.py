"""The room's refusals: a stable code and parameters, never a sentence.

Every error the strides engine raises or returns carries an :class:`ErrorCode` and the
parameters its text needs. The text itself lives only in
``assets/translations/{en,ko}/strides.json`` under ``strides.errors.<code>``: the page shows
``t(f"strides.errors.{error.code}", **error.params)`` in the reader's language, and
``error.message`` (``str()`` of an exception) is the same table's English, for a notebook.

:func:`explain` turns an exception PyTorch raised while applying an op into such an error,
the cause and the fix; PyTorch's own words always travel along as ``torch_message``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import torch

from torchatlas.i18n import translate
from torchatlas.strides.dtypes import dtype_name
from torchatlas.strides.limits import MAX_ELEMENTS

if TYPE_CHECKING:
    from torchatlas.strides.parser import ParsedOp


class ErrorCode(StrEnum):
    # the start shape and dtype
    SHAPE_TOO_LONG = "shape_too_long"
    SHAPE_EMPTY = "shape_empty"
    SHAPE_NOT_INTS = "shape_not_ints"
    SHAPE_RANK = "shape_rank"
    SHAPE_ZERO = "shape_zero"
    SHAPE_TOO_BIG = "shape_too_big"
    DTYPE = "dtype"
    # typed text: the chain, one op, a write, an element index, a quiz answer
    CHAIN_TOO_LONG = "chain_too_long"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    SYNTAX = "syntax"
    NOT_LITERAL = "not_literal"
    NUMBER_TOO_BIG = "number_too_big"
    BAD_ARGUMENT = "bad_argument"
    NOT_CALLED = "not_called"
    UNSUPPORTED = "unsupported"
    PICK_PIECE = "pick_piece"
    BAD_KEYWORD = "bad_keyword"
    EINSUM_ONE_OPERAND = "einsum_one_operand"
    ONE_OP = "one_op"
    WRITE_TOO_LONG = "write_too_long"
    WRITE_EMPTY = "write_empty"
    WRITE_SYNTAX = "write_syntax"
    INDEX_TOO_LONG = "index_too_long"
    NOT_AN_INDEX = "not_an_index"
    ANSWER_TOO_LONG = "answer_too_long"
    # PyTorch's refusals, explained
    PIECE_OUT_OF_RANGE = "piece_out_of_range"
    VIEW_INCOMPATIBLE = "view_incompatible"
    NEGATIVE_STEP = "negative_step"
    NEGATIVE_STRIDE = "negative_stride"
    AS_STRIDED_OUT_OF_BOUNDS = "as_strided_out_of_bounds"
    DIM_OUT_OF_RANGE = "dim_out_of_range"
    INDEX_OUT_OF_RANGE = "index_out_of_range"
    EXPAND_MISMATCH = "expand_mismatch"
    SHAPE_INVALID = "shape_invalid"
    VIEW_DTYPE = "view_dtype"
    CHANNELS_LAST_RANK = "channels_last_rank"
    OVERLAP_WRITE = "overlap_write"
    WRITE_CAST = "write_cast"
    WRITE_OVERFLOW = "write_overflow"
    DTYPE_UNSUPPORTED = "dtype_unsupported"
    TOO_LARGE = "too_large"
    WRONG_TYPE = "wrong_type"
    TORCH_ERROR = "torch_error"


def message(code: ErrorCode, params: dict[str, Any], lang: str = "en") -> str:
    """The text of an error in ``lang``, from the room's translation table."""
    return translate(f"strides.errors.{code}", lang, **params)


class StridesError(ValueError):
    """Text or arguments the room cannot use; ``code`` and ``params`` pick the message."""

    def __init__(self, code: ErrorCode | str, **params: Any) -> None:
        super().__init__(code)
        self.code = ErrorCode(code)
        self.params = params

    @property
    def message(self) -> str:
        return message(self.code, self.params)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.code, self.params)


def _rebuild(kind: type[StridesError], code: ErrorCode, params: dict[str, Any]) -> StridesError:
    return kind(code, **params)


class OpParseError(StridesError):
    """Text typed in the room (an op, a chain, a write, an index, a quiz answer) that is
    malformed, too long or not on the allow list."""


class ShapeInputError(StridesError):
    """A start shape or dtype the room cannot build."""


@dataclass(frozen=True)
class StepError:
    """Why an op (or a write) failed: a stable ``code`` and its ``params`` (which always hold
    ``text``, the op as typed), and PyTorch's own words when PyTorch raised."""

    code: ErrorCode
    text: str
    params: dict[str, Any] = field(default_factory=dict)
    torch_message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ErrorCode(self.code))
        object.__setattr__(self, "params", {"text": self.text, **self.params})

    @property
    def message(self) -> str:
        """The cause and the fix in English (the page translates ``code`` itself)."""
        return message(self.code, self.params)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_parse_error(error: StridesError, text: str) -> StepError:
    """A parse error of an op or a write, as the step (or the write) it stopped."""
    return StepError(error.code, text, dict(error.params))


def too_large(text: str, numel: int) -> StepError:
    return StepError(
        ErrorCode.TOO_LARGE, text, {"numel": f"{numel:,}", "limit": f"{MAX_ELEMENTS:,}"}
    )


def _first_outside(op: ParsedOp, tensor: torch.Tensor) -> dict[str, Any] | None:
    """For an out-of-bounds as_strided: the first element (row-major) outside the storage."""
    named = dict(zip(("size", "stride", "storage_offset"), op.args, strict=False))
    named.update(op.kwargs)
    size, stride = tuple(named.get("size", ())), tuple(named.get("stride", ()))
    offset = named.get("storage_offset", tensor.storage_offset())
    if len(size) != len(stride) or any(s < 0 for s in stride) or any(n <= 0 for n in size):
        return None
    cells = tensor.untyped_storage().nbytes() // tensor.element_size()
    total = 1
    for n in size:
        total *= n
    element: tuple[int, ...]
    farthest = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if total <= MAX_ELEMENTS and farthest < 2**63:  # int64 arithmetic cannot overflow
        reads = offset + sum(
            torch.arange(n).reshape([-1 if d == i else 1 for d in range(len(size))]) * s
            for i, (n, s) in enumerate(zip(size, stride, strict=True))
        )
        reads = torch.as_tensor(reads).reshape(-1)
        outside = (reads >= cells).nonzero()
        if outside.numel() == 0:
            return None
        flat = int(outside[0])
        element = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), size))
        cell = int(reads[flat])
    else:
        element = tuple(n - 1 if s > 0 else 0 for n, s in zip(size, stride, strict=True))
        cell = offset + sum(i * s for i, s in zip(element, stride, strict=True))
        if cell < cells:
            return None
    return {
        "element": "(" + ", ".join(map(str, element)) + ("," if len(element) == 1 else "") + ")",
        "cell": cell,
        "cells": cells,
        "last_cell": cells - 1,
    }


# PyTorch's messages name dtypes by their C++ scalar type; the room names them as torch does.
_SCALAR_TYPES = {
    "Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32",
    "Long": "int64", "Half": "float16", "Float": "float32", "Double": "float64",
    "BFloat16": "bfloat16", "ComplexHalf": "complex32", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
}  # fmt: skip


def _value_range(dtype: torch.dtype) -> tuple[str, str]:
    """The lowest and highest number ``dtype`` holds, as the error shows them."""
    if dtype == torch.bool:
        return "0", "1"
    info = torch.finfo(dtype) if dtype.is_floating_point or dtype.is_complex else None
    if info is None:
        integer = torch.iinfo(dtype)
        return f"{integer.min:,}", f"{integer.max:,}"
    return f"{info.min:g}", f"{info.max:g}"


def explain_safely(exc: BaseException, op: ParsedOp, tensor: torch.Tensor) -> StepError:
    """:func:`explain`, which never raises: an exception while explaining (an argument too
    large for the arithmetic that locates the problem) keeps PyTorch's own words."""
    try:
        return explain(exc, op, tensor)
    except Exception:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return StepError(ErrorCode.TORCH_ERROR, op.text, {}, first_line[:300])


def explain(exc: BaseException, op: ParsedOp, tensor: torch.Tensor) -> StepError:
    """The cause and fix for an exception PyTorch raised while applying ``op`` to ``tensor``
    (an op of the chain, or an in-place write)."""
    text = op.text
    if isinstance(exc, OpParseError):
        params = {k: v for k, v in exc.params.items() if k != "text"}
        if exc.code == ErrorCode.PIECE_OUT_OF_RANGE:
            params["last"] = int(params["pieces"]) - 1
        return StepError(exc.code, text, params)
    message_text = str(exc).strip()[:4000]
    first_line = message_text.splitlines()[0][:500] if message_text else type(exc).__name__

    def error(code: ErrorCode, **params: Any) -> StepError:
        return StepError(code, text, params, first_line)

    if "view size is not compatible" in message_text:
        return error(ErrorCode.VIEW_INCOMPATIBLE)
    if "step must be greater than zero" in message_text:
        return error(ErrorCode.NEGATIVE_STEP)
    if "Negative strides are not supported" in message_text:
        return error(ErrorCode.NEGATIVE_STRIDE)
    if "out of bounds for storage" in message_text and op.name == "as_strided":
        where = _first_outside(op, tensor)
        if where is not None:
            return error(ErrorCode.AS_STRIDED_OUT_OF_BOUNDS, **where)
    if match := re.search(r"Dimension out of range \(expected to be in range of "
                          r"\[(-?\d+), (-?\d+)\], but got (-?\d+)\)", message_text):  # fmt: skip
        low, high, dim = (int(g) for g in match.groups())
        return error(ErrorCode.DIM_OUT_OF_RANGE, dim=dim, rank=high + 1, low=low, high=high)
    if match := re.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)",
                          message_text):  # fmt: skip
        index, dim, size = (int(g) for g in match.groups())
        return error(ErrorCode.INDEX_OUT_OF_RANGE, index=index, dim=dim, size=size, last=size - 1)
    if match := re.search(r"expanded size of the tensor \((-?\d+)\) must match the existing "
                          r"size \((\d+)\) at non-singleton dimension (\d+)",
                          message_text):  # fmt: skip
        _, size, dim = (int(g) for g in match.groups())
        return error(ErrorCode.EXPAND_MISMATCH, dim=dim, size=size)
    if match := re.search(r"shape '(\[[^\]]*\])' is invalid for input of size (\d+)",
                          message_text):  # fmt: skip
        return error(ErrorCode.SHAPE_INVALID, shape=match.group(1), numel=int(match.group(2)))
    if "different element sizes" in message_text:
        return error(ErrorCode.VIEW_DTYPE)
    if "channels_last format" in message_text:
        return error(ErrorCode.CHANNELS_LAST_RANK, rank=tensor.dim())
    if "refers to a single memory location" in message_text:
        return error(ErrorCode.OVERLAP_WRITE)
    if match := re.search(r"result type (\w+) can't be cast to the desired output type (\w+)",
                          message_text):  # fmt: skip
        result = _SCALAR_TYPES.get(match.group(1), match.group(1))
        return error(ErrorCode.WRITE_CAST, result=result, dtype=dtype_name(tensor.dtype))
    if "without overflow" in message_text:
        low, high = _value_range(tensor.dtype)
        return error(ErrorCode.WRITE_OVERFLOW, dtype=dtype_name(tensor.dtype), low=low, high=high)
    if "not implemented for" in message_text:
        return error(ErrorCode.DTYPE_UNSUPPORTED, dtype=dtype_name(tensor.dtype))
    if isinstance(exc, TypeError):
        detail = first_line.split(" (Triggered internally")[0]
        return error(ErrorCode.WRONG_TYPE, detail=detail[:160])
    return error(ErrorCode.TORCH_ERROR)
