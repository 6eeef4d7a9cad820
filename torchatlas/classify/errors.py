"""The classification room's errors: a stable code and parameters, never a sentence.

Their text lives only in ``assets/translations/{en,ko}/classify.json`` under
``classify.errors.<code>``; :func:`describe` renders one in a language (the page passes the
reader's, ``str(error)`` is English for a notebook). A parameter named ``variant`` is itself a
code, a way of storing a file (:class:`Variant`), rendered from ``classify.variants.<variant>``
so that a Korean message does not carry an English phrase.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from torchatlas.i18n import DEFAULT_LANGUAGE, translate


class ErrorCode(StrEnum):
    # a file that cannot become a photo (images.py)
    EMPTY = "empty"
    NOT_IMAGE = "not_image"
    SVG = "svg"
    HEIC = "heic"
    UNSUPPORTED_FORMAT = "unsupported_format"
    UNSUPPORTED_VARIANT = "unsupported_variant"
    TOO_MANY_PIXELS = "too_many_pixels"
    BOMB = "bomb"
    EXTREME_ASPECT = "extreme_aspect"
    TRUNCATED = "truncated"
    UNSUPPORTED_MODE = "unsupported_mode"
    SLOW_FORMAT = "slow_format"
    SLOW_JPEG = "slow_jpeg"
    TOO_MUCH_METADATA = "too_much_metadata"
    # a model that cannot be used here (models.py, explain.py)
    UNKNOWN_MODEL = "unknown_model"
    OFFLINE = "offline"
    DOWNLOAD_FAILED = "download_failed"
    BAD_CHECKSUM = "bad_checksum"
    CANNOT_SAVE = "cannot_save"
    BAD_WEIGHTS = "bad_weights"
    BAD_CLASS = "bad_class"


class Variant(StrEnum):
    """A way of storing pixels inside a known format that this room does not decode."""

    LOSSLESS = "lossless"
    HIERARCHICAL = "hierarchical"
    ARITHMETIC = "arithmetic"
    RUN_LENGTH = "run_length"
    OLD_JPEG = "old_jpeg"
    JPEG = "jpeg"
    THUNDERSCAN = "thunderscan"
    LOGLUV = "logluv"
    LZMA = "lzma"
    ZSTANDARD = "zstandard"
    WEBP = "webp"
    COMPRESSION = "compression"  # a numbered compression scheme: params carry ``number``


def describe(code: str, params: Mapping[str, object], lang: str = DEFAULT_LANGUAGE) -> str:
    """The text of error ``code`` with ``params`` in ``lang``, from the translation tables."""
    shown = dict(params)
    variant = shown.get("variant")
    if variant is not None:
        shown["variant"] = translate(f"classify.variants.{variant}", lang, **params)
    return translate(f"classify.errors.{code}", lang, **shown)


class _CodedError(Exception):
    """``code`` and ``params`` are what a page translates; ``str()`` is the English text."""

    def __init__(self, code: ErrorCode, **params: object) -> None:
        self.code = code
        self.params = params
        super().__init__(describe(code, params))

    @property
    def message(self) -> str:
        return str(self)

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle their message as the only argument; these rebuild from the code.
        return _rebuild, (type(self), self.code, self.params)


def _rebuild(kind: type[_CodedError], code: ErrorCode, params: dict[str, object]) -> _CodedError:
    return kind(code, **params)


class ImageError(_CodedError, ValueError):
    """A file that cannot be turned into an RGB photo."""


class ClassifyError(_CodedError, RuntimeError):
    """A model that cannot be used here, or a request it cannot answer."""
