"""The room's refusals and PyTorch's autograd errors: a stable code and parameters, never a
sentence.

The text of every code lives in ``assets/translations/{en,ko}/autograd.json`` under
``autograd.errors.<code>``; the page shows it in the reader's language and ``str()`` of an
exception (or ``ProgramError.message``) is the same table's English, for a notebook.

:func:`explain` turns an exception raised while a program ran into such a code, keeping
what PyTorch refused (:class:`~torchatlas.errors.TorchRefusal`); which lesson a refusal of
PyTorch's is was decided where it raised, from the condition
(:mod:`torchatlas.autograd.diagnose`), never from the words of its message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from torchatlas.errors import CodedError, RefusedByTorch, TorchRefusal, exception_words


class ErrorCode(StrEnum):
    # the parser's refusals
    EMPTY = "empty"
    TOO_LONG = "too_long"
    TOO_MANY_LINES = "too_many_lines"
    SYNTAX = "syntax"
    NOT_ALLOWED = "not_allowed"
    PRIVATE_NAME = "private_name"
    UNKNOWN_FUNCTION = "unknown_function"
    UNKNOWN_METHOD = "unknown_method"
    UNKNOWN_ATTRIBUTE = "unknown_attribute"
    BAD_KEYWORD = "bad_keyword"
    BAD_TARGET = "bad_target"
    RESERVED_NAME = "reserved_name"
    BAD_WITH = "bad_with"
    BAD_LOOP = "bad_loop"
    BAD_CONDITION = "bad_condition"
    BAD_LITERAL = "bad_literal"
    NUMBER_TOO_BIG = "number_too_big"
    TOO_DEEP = "too_deep"
    TOO_MANY_OPS = "too_many_ops"
    # while running
    UNKNOWN_NAME = "unknown_name"
    NOT_A_TENSOR = "not_a_tensor"
    BAD_SIZE = "bad_size"
    BOOL_NOT_NUMBER = "bool_not_number"
    INDEX_LIST = "index_list"
    TOO_BIG = "too_big"
    TOO_MUCH_MEMORY = "too_much_memory"
    NO_ROOT = "no_root"
    # PyTorch's autograd errors, explained (the teaching errors)
    NON_SCALAR_BACKWARD = "non_scalar_backward"
    BACKWARD_TWICE = "backward_twice"
    INPLACE_SAVED = "inplace_saved"
    INT_REQUIRES_GRAD = "int_requires_grad"
    NUMPY_REQUIRES_GRAD = "numpy_requires_grad"
    LEAF_INPLACE = "leaf_inplace"
    NO_GRAD_FN = "no_grad_fn"
    INFERENCE_TENSOR = "inference_tensor"
    INFERENCE_INPLACE = "inference_inplace"
    INFERENCE_REQUIRES_GRAD = "inference_requires_grad"
    AMBIGUOUS_CONDITION = "ambiguous_condition"
    SHAPE_MISMATCH = "shape_mismatch"
    TORCH_ERROR = "torch_error"


# The errors the room teaches: each has an example program and a test that makes PyTorch
# raise it.
TEACHING_CODES: tuple[ErrorCode, ...] = (
    ErrorCode.NON_SCALAR_BACKWARD,
    ErrorCode.BACKWARD_TWICE,
    ErrorCode.INPLACE_SAVED,
    ErrorCode.INT_REQUIRES_GRAD,
    ErrorCode.NUMPY_REQUIRES_GRAD,
    ErrorCode.LEAF_INPLACE,
)


class AutogradError(CodedError, ValueError):
    """A program the room will not run; ``code`` and ``params`` pick the text
    (``autograd.errors.<code>``)."""

    room = "autograd"
    codes = ErrorCode


class ProgramRefused(AutogradError):
    """The parser refused the program text (nothing of it ran)."""


@dataclass(frozen=True)
class ProgramError(RefusedByTorch):
    """Why a program (or its backward) stopped: the line, a stable code with its parameters,
    and PyTorch's own words when PyTorch raised."""

    code: ErrorCode
    line: int
    params: dict[str, Any] = field(default_factory=dict)
    refusal: TorchRefusal | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ErrorCode(self.code))
        object.__setattr__(self, "params", {"line": self.line, **self.params})

    def as_error(self) -> AutogradError:
        """The coded error the page shows for it (the same code and parameters)."""
        return AutogradError(self.code, **self.params)

    @property
    def message(self) -> str:
        """The English text, for a notebook (the page shows :meth:`as_error`)."""
        return self.as_error().message


class TorchRefused(Exception):
    """PyTorch refused an operation, and the room decided which lesson that is from the
    operands themselves (a dtype, a flag, a saved tensor's state, the mode: see
    :mod:`torchatlas.autograd.diagnose`), not from PyTorch's wording: ``code`` is the
    lesson, ``params`` its numbers, ``cause`` what PyTorch raised (its words are still
    shown)."""

    def __init__(
        self, code: ErrorCode, cause: BaseException, params: dict[str, Any] | None = None
    ) -> None:
        super().__init__(code)
        self.code, self.cause, self.params = code, cause, dict(params or {})


def exception_text(exc: BaseException, limit: int = 2000) -> str:
    """An exception's message without formatting anything a program built: ``str(exc)``
    formats every argument with ``repr()`` (a KeyError of a huge list would print it), so
    only a message that already is a string is read, and only its first ``limit``
    characters."""
    return exception_words(exc)[:limit]


def explain(exc: BaseException, line: int) -> ProgramError:
    """The code, parameters and what PyTorch refused for an exception raised at ``line``. The
    lesson was decided where PyTorch raised, from the condition (a :class:`TorchRefused`);
    anything else PyTorch raised is shown in its own words (``torch_error``): the words of
    a message never pick a lesson."""
    if isinstance(exc, AutogradError):
        return ProgramError(exc.code, line, dict(exc.params))
    cause = exc.cause if isinstance(exc, TorchRefused) else exc
    said = exception_text(cause).strip()
    first = (said.splitlines()[0] if said else type(cause).__name__).split(" Hint:")[0][:400]
    if isinstance(exc, TorchRefused):
        refusal = TorchRefusal.of(cause, first, condition=exc.code.value)
        return ProgramError(exc.code, line, dict(exc.params), refusal)
    return ProgramError(ErrorCode.TORCH_ERROR, line, {}, TorchRefusal.of(cause, first))
