"""The room's refusals and PyTorch's autograd errors: a stable code and parameters, never a
sentence.

The text of every code lives in ``assets/translations/{en,ko}/autograd.json`` under
``autograd.errors.<code>``; the page shows it in the reader's language and ``str()`` of an
exception (or ``ProgramError.message``) is the same table's English, for a notebook.

:func:`explain` maps an exception PyTorch raised while a program ran to such a code, keeping
PyTorch's own words as ``torch_message`` and the numbers it reported (the ``_version``
counter of the in-place trap) as parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from torchatlas.errors import CodedError


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
class ProgramError:
    """Why a program (or its backward) stopped: the line, a stable code with its parameters,
    and PyTorch's own words when PyTorch raised."""

    code: ErrorCode
    line: int
    params: dict[str, Any] = field(default_factory=dict)
    torch_message: str | None = None

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


_VERSION = re.compile(
    r"modified by an inplace operation: \[(?P<tensor>[^\]]*\]?)\], which is output (?P<output>\d+)"
    r" of (?P<op>\w+), is at version (?P<version>\d+); expected version (?P<expected>\d+)"
)


class TorchRefused(Exception):
    """PyTorch refused an operation, and the room decided which lesson that is from the
    operands themselves (a dtype, a flag), not from PyTorch's wording: ``code`` is the
    lesson, ``cause`` what PyTorch raised (its words are still shown)."""

    def __init__(self, code: ErrorCode, cause: BaseException) -> None:
        super().__init__(code)
        self.code, self.cause = code, cause


def exception_text(exc: BaseException, limit: int = 2000) -> str:
    """An exception's message without formatting anything a program built: ``str(exc)``
    formats every argument with ``repr()`` (a KeyError of a huge list would print it), so
    only a message that already is a string is read, and only its first ``limit``
    characters."""
    args = getattr(exc, "args", ())
    if len(args) >= 1 and isinstance(args[0], str):
        return args[0][:limit]
    return type(exc).__name__


def explain(exc: BaseException, line: int) -> ProgramError:
    """The code, parameters and PyTorch's words for an exception raised at ``line``."""
    if isinstance(exc, AutogradError):
        return ProgramError(exc.code, line, dict(exc.params))
    if isinstance(exc, TorchRefused):
        said = exception_text(exc.cause).strip()
        first = (said.splitlines()[0] if said else type(exc.cause).__name__)[:400]
        return ProgramError(exc.code, line, {}, first.split(" Hint:")[0])
    text = exception_text(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    first = first.split(" Hint:")[0][:400]

    def error(code: ErrorCode, **params: Any) -> ProgramError:
        return ProgramError(code, line, params, first)

    if "implicitly created only for scalar outputs" in text:
        return error(ErrorCode.NON_SCALAR_BACKWARD)
    if "backward through the graph a second time" in text:
        return error(ErrorCode.BACKWARD_TWICE)
    if match := _VERSION.search(text):
        return error(
            ErrorCode.INPLACE_SAVED,
            op=match["op"],
            version=int(match["version"]),
            expected=int(match["expected"]),
        )
    if "Only Tensors of floating point and complex dtype can require gradients" in text:
        return error(ErrorCode.INT_REQUIRES_GRAD)
    if "Can't call numpy() on Tensor that requires grad" in text:
        return error(ErrorCode.NUMPY_REQUIRES_GRAD)
    if "leaf Variable that requires grad is being used in an in-place operation" in text:
        return error(ErrorCode.LEAF_INPLACE)
    if "does not require grad and does not have a grad_fn" in text:
        return error(ErrorCode.NO_GRAD_FN)
    if "Inference tensors cannot be saved for backward" in text or "inference tensor" in text:
        return error(ErrorCode.INFERENCE_TENSOR)
    if "Boolean value of Tensor with more than one value is ambiguous" in text:
        return error(ErrorCode.AMBIGUOUS_CONDITION)
    if (
        "must match the size" in text
        or "cannot be multiplied" in text
        or "size mismatch" in text
        or "is invalid for input of size" in text
        or "Dimension out of range" in text
        or "both arguments to matmul need to be at least 1D" in text
        or "inconsistent tensor size" in text
    ):
        return error(ErrorCode.SHAPE_MISMATCH)
    return error(ErrorCode.TORCH_ERROR)
