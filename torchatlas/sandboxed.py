"""Every room's sandbox jobs, registered on the process-wide pool, and the one way a room
runs its engine there (:func:`run_room_job`).

The pool starts its zygote with the jobs registered so far, and a registration that adds a job
after that start replaces the zygote (jobs running in the old one end as crashed). So every
caller of the process-wide pool registers all rooms' jobs at once, through :func:`shared_pool`,
whichever room a visitor opens first. The sandbox itself knows no room; this module is the one
place that knows which rooms run visitor-driven computation.

A room whose computation takes its sizes, values or structure from a visitor (a program, an
op chain, an index expression, shapes, a link) runs that computation as a job: the engine
function runs in a confined child with a memory limit and a CPU deadline, its frozen
dataclass result crosses back as JSON (:mod:`torchatlas.sandbox.codec`), and the server
rebuilds it against the declared type and bounds before anything renders it.

>>> outcome = run_room_job("strides.steps", {"shape": [2, 3]}, returns=tuple)  # doctest: +SKIP
>>> outcome.value if outcome.ok else outcome.failure.kind  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from torchatlas.sandbox.codec import DEFAULT_LIMITS, Limits, decode
from torchatlas.sandbox.schema import SchemaError

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# The sandbox's own kinds of failure, plus "untrusted" (a reply outside its declared type)
# and "unavailable" (no sandbox on this server). A room maps each to its own translated text.
FAILURE_KINDS = (
    "refused", "syntax", "timeout", "memory", "crashed", "output_too_large", "busy",
    "job_error", "unavailable", "code_error", "too_many_jobs", "untrusted",
)  # fmt: skip
# Failures of the moment (a full line, a loaded server, a crash, an unreadable reply): worth
# trying again, so a room does not cache them. A memory or time limit reached is kept: the
# same input reaches it again.
TRANSIENT_KINDS = frozenset(
    {"crashed", "busy", "too_many_jobs", "untrusted", "job_error", "unavailable"}
)
ROOM_JOB_TIMEOUT_S = 5.0


def register_room_jobs(pool: SandboxPool) -> SandboxPool:
    """Register every room's jobs and warm-up with ``pool`` (again: a no-op); returns it."""
    from torchatlas.autograd.jobs import register_jobs as register_autograd
    from torchatlas.basics.jobs import register_jobs as register_basics
    from torchatlas.modules.jobs import register_jobs as register_modules
    from torchatlas.shapes.jobs import register_jobs as register_shapes
    from torchatlas.strides.jobs import register_jobs as register_strides

    for register in (
        register_shapes,
        register_modules,
        register_autograd,
        register_strides,
        register_basics,
    ):
        pool = register(pool)
    return pool


def shared_pool() -> SandboxPool:
    """The process-wide sandbox pool, with every room's jobs registered."""
    from torchatlas.sandbox import get_pool

    return register_room_jobs(get_pool())


@dataclass(frozen=True)
class JobFailure:
    """Why a room job has no result: one of :data:`FAILURE_KINDS`, and the sandbox's own
    English words (for the server log and a detail line; a page shows its room's text)."""

    kind: str
    detail: str = ""

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT_KINDS


@dataclass(frozen=True)
class RoomJob(Generic[T]):
    """A room job's outcome: its ``value`` (rebuilt and checked), or the engine's coded
    refusal (``refused``: code and parameters, raised in the child by the engine's own checks),
    or a ``failure`` of the sandbox (limits, line, crash, untrusted reply)."""

    value: T | None = None
    refused: tuple[str, dict[str, Any]] | None = None
    failure: JobFailure | None = None
    usage: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return self.failure is None and self.refused is None

    @property
    def worth_keeping(self) -> bool:
        """Whether a cache may keep this outcome for the next visitor with the same input."""
        return self.failure is None or not self.failure.transient


_REFUSAL_PARAMS_LIMITS = Limits(max_str=2000, max_items=64, max_nodes=2000, max_depth=4)


def _outcome(value: Any, returns: Any, limits: Limits) -> RoomJob[Any]:
    if type(value) is not dict or len(value) != 1:
        raise SchemaError("a room job's reply is one of result or refused")
    if "result" in value:
        return RoomJob(value=decode(value["result"], returns, limits))
    refused = value.get("refused")
    if type(refused) is not dict or set(refused) != {"code", "params"}:
        raise SchemaError("a refusal is a code and its parameters")
    code = decode(refused["code"], str, _REFUSAL_PARAMS_LIMITS)
    params = decode(refused["params"], dict[str, Any], _REFUSAL_PARAMS_LIMITS)
    if len(code) > 64:
        raise SchemaError("a refusal's code is a short name")
    return RoomJob(refused=(code, params))


def run_room_job(
    job: str,
    params: dict[str, Any],
    returns: Any,
    *,
    session_id: str | None = None,
    timeout_s: float = ROOM_JOB_TIMEOUT_S,
    on_queued: Callable[[int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    pool: SandboxPool | None = None,
) -> RoomJob[Any]:
    """Run the room job ``job`` (registered by its room's ``jobs.py``) on ``params`` in a
    confined sandbox child, through the shared pool's fair queue, and rebuild its result as
    ``returns`` (a type hint) within ``limits``. Never raises: a sandbox that cannot start,
    a limit reached, a crash or a reply that does not match ``returns`` is a ``failure``."""
    try:
        if pool is None:
            pool = shared_pool()
    except Exception as exc:  # no sandbox on this server: the room says so, nothing breaks
        LOG.warning("room job %s: the sandbox is unavailable: %s", job, str(exc)[:300])
        return RoomJob(failure=JobFailure("unavailable", f"{type(exc).__name__}: {exc}"[:500]))
    extra = {"on_queued": on_queued} if on_queued is not None else {}
    result = pool.run_job("", job, params, timeout_s=timeout_s, session_id=session_id, **extra)
    if not result.ok or result.value is None:
        error = result.error
        kind = getattr(error, "kind", "unavailable")
        kind = kind if kind in FAILURE_KINDS else "job_error"
        detail = str(getattr(error, "message", "") or "")[:2000]
        if kind == "job_error":
            LOG.warning("room job %s failed: %s", job, detail[:300])
        return RoomJob(failure=JobFailure(kind, detail), usage=dict(result.usage))
    try:
        outcome = _outcome(result.value, returns, limits)
    except SchemaError as exc:  # named for the server log, never echoed to the page
        LOG.warning("room job %s: the reply was refused: %s", job, str(exc)[:300])
        return RoomJob(failure=JobFailure("untrusted"), usage=dict(result.usage))
    return RoomJob(outcome.value, outcome.refused, None, dict(result.usage))
