"""The errors the devices engine raises: a stable code and parameters, never a sentence.

Their text lives only in ``assets/translations/{en,ko}/devices.json`` under
``devices.errors.<code>``: the page shows ``t(f"devices.errors.{error.code}", **error.params)``
in the reader's language, and ``str(error)`` is the same table's English, for a notebook.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from torchatlas.i18n import translate


class ErrorCode(StrEnum):
    BUSY = "busy"
    QUEUE_FULL = "queue_full"
    MAX_BYTES_TOO_SMALL = "max_bytes_too_small"
    TIME_BUDGET_OUT_OF_RANGE = "time_budget_out_of_range"
    REPEATS_OUT_OF_RANGE = "repeats_out_of_range"
    UNKNOWN_PATHS = "unknown_paths"
    UNKNOWN_DEMONSTRATION = "unknown_demonstration"
    UNKNOWN_VARIANT = "unknown_variant"
    NOT_A_DEVICE_NAME = "not_a_device_name"


class DevicesError(Exception):
    """Base of the room's errors; ``code`` and ``params`` are what a page translates."""

    def __init__(self, code: ErrorCode, **params: object) -> None:
        self.code = code
        self.params: dict[str, str] = {name: str(value) for name, value in params.items()}
        super().__init__(translate(f"devices.errors.{code}", "en", **self.params))


class DevicesValueError(DevicesError, ValueError):
    """An argument the engine cannot work with (a ``ValueError``, as Python code expects)."""


class BenchmarkBusy(DevicesError, RuntimeError):
    """Another benchmark holds this server's lock; ``retry_after_s`` says when it will end."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(ErrorCode.BUSY, seconds=retry_after_s)
        self.retry_after_s = retry_after_s


class BenchmarkQueueFull(DevicesError, RuntimeError):
    """So many runs with other settings already wait that a new one would wait too long."""

    def __init__(self, waiting: int) -> None:
        super().__init__(ErrorCode.QUEUE_FULL, waiting=waiting)
        self.waiting = waiting


def choices(names: Iterable[object]) -> str:
    """Allowed names as an error lists them: ``a, b, c``."""
    return ", ".join(str(name) for name in names)
