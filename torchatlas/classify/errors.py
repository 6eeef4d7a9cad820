"""The classification room's errors: a stable code and parameters, never a sentence.

Their text lives only in ``assets/translations/{en,ko}/classify.json`` under
``classify.errors.<code>``; both classes are coded errors (:class:`~torchatlas.errors.CodedError`:
``error.text(lang)``; the page shows them with ``components.kit.error_card``, ``str(error)``
is English for a notebook). A parameter named ``variant`` is itself a code, a way of storing a
file (:class:`Variant`), shown from ``classify.variants.<variant>`` so that a Korean message
does not carry an English phrase.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from torchatlas.errors import CodedError
from torchatlas.i18n import translate


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
    # what the page says around them
    OFFLINE_SECOND = "offline_second"  # offline, for the model compared with (not the page's)
    UPLOAD_AGAIN = "upload_again"  # a file whose bytes are gone (the session was restarted)
    UNEXPECTED = "unexpected"  # torch or Pillow failed where it should not: ``kind`` names it


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


class _ClassifyCoded(CodedError):
    """The room's coded error: a ``variant`` parameter is shown in the reader's language."""

    room = "classify"
    codes = ErrorCode

    def shown_params(self, lang: str) -> dict[str, Any]:
        shown = dict(self.params)
        variant = shown.get("variant")
        if variant is not None:
            shown["variant"] = translate(f"classify.variants.{variant}", lang, **self.params)
        return shown


class ImageError(_ClassifyCoded, ValueError):
    """A file that cannot be turned into an RGB photo."""


class ClassifyError(_ClassifyCoded, RuntimeError):
    """A model that cannot be used here, or a request it cannot answer."""
