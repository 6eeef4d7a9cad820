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

from torchatlas.errors import CodedError, RefusedByTorch, TorchRefusal
from torchatlas.i18n import translate
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

    def shown_params(self, lang: str) -> dict[str, Any]:
        """A ``view_dtype`` refusal names its conditions by code (data, in any language):
        each becomes its sentence in ``lang`` here (``strides.errors.view_dtype_parts``)."""
        params = dict(self.params)
        if self.code is ErrorCode.VIEW_DTYPE and "condition" in params:
            params.update(view_dtype_sentences(params, lang))
        return params


class OpParseError(StridesError):
    """Text typed in the room (an op, a chain, a write, an index, a quiz answer) that is
    malformed, too long or not on the allow list."""


class ShapeInputError(StridesError):
    """A start shape or dtype the room cannot build."""


@dataclass(frozen=True)
class StepError(RefusedByTorch):
    """Why an op (or a write) failed: a stable ``code`` and its ``params`` (which always hold
    ``text``, the op as typed), and what PyTorch refused when PyTorch raised."""

    code: ErrorCode
    text: str
    params: dict[str, Any] = field(default_factory=dict)
    refusal: TorchRefusal | None = None

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


def encode_conditions(conditions: list[tuple[str, int, int | None]]) -> str:
    """Failing conditions as one text parameter: ``condition:got[:dim]`` joined by ``;``."""
    return ";".join(
        f"{name}:{got}" + ("" if dim is None else f":{dim}") for name, got, dim in conditions
    )


def _condition_sentence(part: str, params: dict[str, Any], lang: str) -> str:
    name, got, *dim = part.split(":")
    return translate(
        f"strides.errors.view_dtype_parts.{name}",
        lang,
        **{**params, "got": got, "dim": dim[0] if dim else ""},
    )


def view_dtype_sentences(params: dict[str, Any], lang: str) -> dict[str, str]:
    """The sentences of a ``view_dtype`` refusal: the condition PyTorch names, the others
    that fail too, and the fix the room ran (or why there is none)."""
    first = _condition_sentence(str(params["condition"]), params, lang)
    others = [part for part in str(params.get("others") or "").split(";") if part]
    also = ""
    if others:
        listed = translate("strides.errors.view_dtype_parts.separator", lang).join(
            _condition_sentence(part, params, lang) for part in others
        )
        also = translate("strides.errors.view_dtype_parts.also", lang, conditions=listed)
    fix = str(params.get("fix") or "")
    whole = params.get("kept") == params.get("numel")
    key = "no_fix" if not fix else "fix" if whole else "fix_part"
    return {
        "condition": first,
        "also": also,
        "fix": translate(f"strides.errors.view_dtype_parts.{key}", lang, **{**params, "ops": fix}),
    }
