"""The room's refusals: a stable code and parameters, never a sentence.

Every error the strides engine raises or returns carries an :class:`ErrorCode` and the
parameters its text needs. The text itself lives only in
``assets/translations/{en,ko}/strides.json`` under ``strides.errors.<code>``: the page shows
it with the kit's error card in the reader's language (a :class:`StepError` travels in a
result as data and becomes a :class:`StridesError` there), and ``error.message`` (``str()``
of an exception) is the same table's English, for a notebook.

Turning an exception PyTorch raised into such an error is :mod:`torchatlas.strides.explain`'s
work (it reads the parsed op, so it sits above the parser).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from torchatlas.errors import CodedError
from torchatlas.strides.limits import MAX_ELEMENTS


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


class StridesError(CodedError, ValueError):
    """Text or arguments the room cannot use; ``code`` and ``params`` pick the text
    (``strides.errors.<code>``)."""

    room = "strides"
    codes = ErrorCode


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

    def as_error(self) -> StridesError:
        """The coded error the page shows for it (the same code and parameters)."""
        return StridesError(self.code, **self.params)

    @property
    def message(self) -> str:
        """The cause and the fix in English (the page shows :meth:`as_error`)."""
        return self.as_error().message

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def from_parse_error(error: StridesError, text: str) -> StepError:
    """A parse error of an op or a write, as the step (or the write) it stopped."""
    return StepError(error.code, text, dict(error.params))


def too_large(text: str, numel: int) -> StepError:
    return StepError(
        ErrorCode.TOO_LARGE, text, {"numel": f"{numel:,}", "limit": f"{MAX_ELEMENTS:,}"}
    )
