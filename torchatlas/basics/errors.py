"""The basics room's refusals: a stable code and parameters, never a sentence.

The text lives only in ``assets/translations/{en,ko}/basics.json`` under
``basics.errors.<code>``: the page shows it with ``components.kit.error_card`` and
``str(error)`` is the same table's English, for a notebook. Parameters are kept as text.
Where PyTorch itself refused, its exact words travel along as the parameter
``torch_message``; a result that holds torch's refusal as its answer (a broadcast, an einsum,
an index, a promotion that raised) carries it as the one refusal shape,
:class:`torchatlas.errors.TorchRefusal` (:func:`refused`).
"""

from __future__ import annotations

from enum import StrEnum

from torchatlas.errors import CodedError, TorchRefusal


class ErrorCode(StrEnum):
    # typed text
    TEXT_TOO_LONG = "text_too_long"
    EMPTY = "empty"
    SHAPE_NOT_INTS = "shape_not_ints"
    SHAPE_RANK = "shape_rank"
    SHAPE_NEGATIVE = "shape_negative"
    TOO_MANY_ELEMENTS = "too_many_elements"
    TOO_MANY_SHAPES = "too_many_shapes"
    UNKNOWN_DTYPE = "unknown_dtype"
    UNKNOWN_OPERAND = "unknown_operand"
    NOT_A_NUMBER = "not_a_number"
    VALUE_DOES_NOT_FIT = "value_does_not_fit"
    INDEX_SYNTAX = "index_syntax"
    INDEX_NOT_ALLOWED = "index_not_allowed"
    INDEX_TOO_COMPLEX = "index_too_complex"
    EINSUM_OPERANDS = "einsum_operands"
    SAVE_NEEDS_RANK = "save_needs_rank"
    NOT_A_CHOICE = "not_a_choice"
    INT_TOO_LARGE = "int_too_large"
    INDEX_INT_RANGE = "index_int_range"
    TOO_LARGE_FOOTPRINT = "too_large_footprint"
    # PyTorch's refusals, with its own message (broadcast and einsum refusals travel as a
    # TorchRefusal on their results: torch's words are the answer there)
    INDEX_TORCH = "index_torch"
    SHAPE_TORCH = "shape_torch"
    NO_NUMPY_DTYPE = "no_numpy_dtype"


class BasicsError(CodedError):
    """Base of the room's errors; ``code`` and ``params`` are what a page translates."""

    room = "basics"
    codes = ErrorCode

    def __init__(self, code: ErrorCode | str, **params: object) -> None:
        super().__init__(code, **{name: str(value) for name, value in params.items()})


class BasicsValueError(BasicsError, ValueError):
    """Input the engine refuses before running anything (a ``ValueError``)."""


MAX_TORCH_WORDS = 1000  # torch's messages quote shapes and values: a page shows a bounded part


def refused(exc: BaseException) -> TorchRefusal:
    """What torch refused, in the one refusal shape every room's results carry: its words as
    :func:`torch_words` trims them, and the exception's type."""
    return TorchRefusal.of(exc, torch_words(exc))


def torch_words(exc: BaseException) -> str:
    """PyTorch's own message, first paragraph only (C++ frames and hints follow it), at most
    :data:`MAX_TORCH_WORDS` characters (a message that quotes a visitor's value stays short)."""
    text = str(exc).strip() or type(exc).__name__
    first = text.split("\n\n")[0].strip()
    return first if len(first) <= MAX_TORCH_WORDS else first[: MAX_TORCH_WORDS - 1] + "…"
