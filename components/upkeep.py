"""Server upkeep: what the server does for every room, once per process.

Rooms register the slow work a first visitor would otherwise wait for (loading a model,
analysing a default example) with :func:`warm_up`; the server runs every registered warm-up
once at start, after the rooms are imported (``components.warm``), each on its own so one
failing room does not keep the others cold.

>>> @warm_up("example")  # doctest: +SKIP
... def _load_default() -> None:
...     ...
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_WARM_UPS: dict[str, Callable[[], object]] = {}


def warm_up(name: str) -> Callable[[Callable[[], object]], Callable[[], object]]:
    """Register ``function`` as the warm-up called ``name`` (a room's key, or ``room.part``).
    Registering the same name again replaces it (a module reloaded in a test)."""

    def register(function: Callable[[], object]) -> Callable[[], object]:
        with _LOCK:
            _WARM_UPS[name] = function
        return function

    return register


def registered_warm_ups() -> dict[str, Callable[[], object]]:
    """The warm-ups registered so far, by name (a copy)."""
    with _LOCK:
        return dict(_WARM_UPS)


def run_warm_ups() -> list[str]:
    """Run every registered warm-up once, in registration order; the names of those that
    failed (logged, never raised: each room's page reports its own errors)."""
    failed = []
    for name, function in registered_warm_ups().items():
        try:
            function()
        except Exception:
            _LOG.warning("warm-up %s failed", name, exc_info=True)
            failed.append(name)
    return failed
