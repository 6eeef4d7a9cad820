"""The errors the devices engine raises: a stable code and parameters, never a sentence.

Their text lives only in ``assets/translations/{en,ko}/devices.json`` under
``devices.errors.<code>``: the page shows it with ``components.kit.error_card`` in the reader's
language, and ``str(error)`` is the same table's English, for a notebook. Parameters are kept
as text (a size or a count is shown as written).

Three codes are not the engine's refusals but what the page says when torch itself fails
where it should not (``demo_failed``, ``bench_failed``, ``inventory_failed``): :func:`unexpected`
wraps such an exception with its type and words as the detail.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from torchatlas.errors import CodedError


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
    # torch failed where it should not: the exception's own words are the detail
    DEMO_FAILED = "demo_failed"
    BENCH_FAILED = "bench_failed"
    INVENTORY_FAILED = "inventory_failed"


class DevicesError(CodedError):
    """Base of the room's errors; ``code`` and ``params`` are what a page translates."""

    room = "devices"
    codes = ErrorCode

    def __init__(self, code: ErrorCode | str, **params: object) -> None:
        super().__init__(code, **{name: str(value) for name, value in params.items()})


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


def unexpected(error: BaseException, code: ErrorCode) -> DevicesError:
    """``error`` as the room shows it: itself when it is the room's own, else under ``code``
    (one of the three "torch failed" codes) with its type and words as the detail."""
    if isinstance(error, DevicesError):
        return error
    return DevicesError(code, detail=f"{type(error).__name__}: {error}")


def choices(names: Iterable[object]) -> str:
    """Allowed names as an error lists them: ``a, b, c``."""
    return ", ".join(str(name) for name in names)
