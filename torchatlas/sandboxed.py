"""Every room's sandbox jobs, registered on the process-wide pool, and the one way a room
runs its engine there (:func:`run_room_job`).

The pool starts its zygote with the jobs registered so far, and a registration that adds a job
after that start replaces the zygote (jobs running in the old one end as crashed). So every
caller of the process-wide pool registers all rooms' jobs at once, through :func:`shared_pool`,
whichever room a visitor opens first. The sandbox itself knows no room; this module is the one
place that reads which rooms run visitor-driven computation (``torchatlas.rooms``).

A room whose computation takes its sizes, values or structure from a visitor (a program, an
op chain, an index expression, shapes, a link) runs that computation as a job: the engine
function runs in a confined child with a memory limit and a CPU deadline, its frozen
dataclass result crosses back as JSON (:mod:`torchatlas.sandbox.codec`), and the server
rebuilds it against the declared type and bounds before anything renders it.

A room whose job runs pasted code (the shape explorer, the module room) hands the source
too, and may read the reply with its own bounded schema (``reader``) instead of the codec's
envelope; the failure then also says where the sandbox's allow-list refused the source
(:attr:`JobFailure.line`, :attr:`JobFailure.refusals`). The failure kinds
(:data:`FAILURE_KINDS`, :mod:`torchatlas.sandbox.outcomes`) become a room's own codes and
texts in one place, :meth:`torchatlas.errors.SourceError.of_failure`.

Every room's jobs share one pool and one line, fair on two levels: between clients (a
machine's address: a visitor can open any number of sessions but not of addresses) and, within
a client, between its sessions (a class behind one school address takes turns). A room passes
the page's :class:`~torchatlas.clients.Visitor` (``components.visitor.visitor()``) as
``visitor``; the pool (:mod:`torchatlas.sandbox.pool`) gives a free slot to the waiting client
that runs the fewest jobs (one job per client while others wait, with the default two slots),
keeps a slot out of reach of a client that already runs one, bounds what each session and
client may have waiting, and rate-limits both. The visitor only places the
job in line: what the job computes, and any cache of its result, never depends on who asked.

>>> outcome = run_room_job("strides.steps", {"shape": [2, 3]}, returns=tuple)  # doctest: +SKIP
>>> outcome.value if outcome.ok else outcome.failure.kind  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from torchatlas.errors import TorchRefusal
from torchatlas.rooms import rooms
from torchatlas.sandbox.codec import DEFAULT_LIMITS, Limits, decode
from torchatlas.sandbox.outcomes import FAILURE_KINDS as FAILURE_KINDS  # the client's name
from torchatlas.sandbox.outcomes import TRANSIENT_KINDS, known_kind
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandbox.typed_reply import Rebuilt, result_reader

if TYPE_CHECKING:
    from torchatlas.clients import Visitor
    from torchatlas.sandbox import SandboxPool

LOG = logging.getLogger(__name__)
T = TypeVar("T")

ROOM_JOB_TIMEOUT_S = 5.0


# Sandbox jobs of what is no room (the lessons' code questions); the rooms' own come from the
# registry (``Room.jobs``). Each module has ``register_jobs``.
JOBS_OUTSIDE_ROOMS = ("torchatlas.lessons.jobs",)


def job_modules() -> tuple[str, ...]:
    """The sandbox's job table: every module whose ``register_jobs`` the shared pool runs.
    Imported by name, not by an import statement, because every room imports this module (its
    sandbox client) and no room may import another, not even through here."""
    declared = tuple(room.jobs_module for room in rooms() if room.jobs_module is not None)
    return declared + JOBS_OUTSIDE_ROOMS


def register_room_jobs(pool: SandboxPool) -> SandboxPool:
    """Register every room's jobs and warm-up with ``pool`` (again: a no-op); returns it."""
    for module in job_modules():
        pool = importlib.import_module(module).register_jobs(pool)
    return pool


def shared_pool() -> SandboxPool:
    """The process-wide sandbox pool, with every room's jobs registered."""
    from torchatlas.sandbox import get_pool

    return register_room_jobs(get_pool())


@dataclass(frozen=True)
class Refusal:
    """One place the sandbox's allow-list refused pasted source: its line and column, the
    rule's code (``torchatlas.sandbox.policy``) and the sandbox's English reason."""

    line: int
    col: int
    code: str
    detail: str = ""


@dataclass(frozen=True)
class JobFailure:
    """Why a room job has no result: one of :data:`FAILURE_KINDS`, and the sandbox's own
    English words (for the server log and a detail line; a page shows its room's text). For
    pasted source, where the sandbox stopped it (``line``, ``col``) and each refused place."""

    kind: str
    detail: str = ""
    line: int | None = None
    col: int | None = None
    refusals: tuple[Refusal, ...] = ()
    refused: TorchRefusal | None = None  # what the pasted code raised (a code_error)

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


def transient_error(error: Any) -> bool:
    """Whether a room's error stands for a failure of the moment (:data:`TRANSIENT_KINDS`):
    a cache shares it with whoever asked at the same time but does not keep it."""
    kind = getattr(error, "kind", None)
    return error is not None and getattr(kind, "value", kind) in TRANSIENT_KINDS


_REFUSAL_PARAMS_LIMITS = Limits(max_str=2000, max_items=64, max_nodes=2000, max_depth=4)


def _typed_reader(returns: Any, limits: Limits) -> Callable[[bytes | bytearray], Any] | None:
    """The typed reader of ``returns`` (None: the codec reads every reply of that type)."""
    try:
        return result_reader(returns, limits)
    except TypeError:  # a hint that cannot be a cache key: read the ordinary way
        return None


def _outcome(value: Any, returns: Any, limits: Limits) -> RoomJob[Any]:
    if type(value) is Rebuilt:  # read and checked from the reply's bytes by its typed reader
        return RoomJob(value=value["result"])
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


def _failure(error: Any) -> JobFailure:
    """The sandbox's error as a :class:`JobFailure` (an unknown kind reads as ``job_error``)."""
    kind = known_kind(getattr(error, "kind", "unavailable"))
    refusals = tuple(
        Refusal(int(r.line), int(r.col), str(r.code), str(r.message))
        for r in getattr(error, "refusals", None) or ()
    )
    raised = getattr(error, "refused", None)
    return JobFailure(
        kind,
        str(getattr(error, "message", "") or "")[:2000],
        getattr(error, "line", None),
        getattr(error, "col", None),
        refusals,
        raised if isinstance(raised, TorchRefusal) else None,
    )


def run_room_job(
    job: str,
    params: dict[str, Any],
    returns: Any = None,
    *,
    source: str = "",
    reader: Callable[[Any], Any] | None = None,
    visitor: Visitor | str | None = None,
    timeout_s: float = ROOM_JOB_TIMEOUT_S,
    on_queued: Callable[[int], None] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    pool: SandboxPool | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> RoomJob[Any]:
    """Run the room job ``job`` (registered by its room's ``jobs.py``) on ``params`` in a
    confined sandbox child, through the shared pool's fair queue, and rebuild its result as
    ``returns`` (a type hint) within ``limits``. Never raises: a sandbox that cannot start,
    a limit reached, a crash or a reply that does not match ``returns`` is a ``failure``.

    ``visitor`` is who asks (its client and session), for the pool's fair queue and rate
    limits (:class:`~torchatlas.sandbox.pool.FairQueue`); a plain string is a session that is
    its own client, None an anonymous one-off caller.

    ``source`` is pasted code the child runs first (the job gets the names it defined).
    ``reader`` replaces the codec's envelope for a room whose reply has its own bounded
    schema: ``reader(reply)`` is the value, and any ValueError, TypeError or KeyError it
    raises (a SchemaError is a ValueError) makes the reply ``untrusted``.

    ``meanwhile`` is the caller's own work, called once in this thread: while the child
    computes, so the server's share of a job overlaps the child's (or before returning when
    no child got the job). Its exceptions are the caller's, raised once the job is over."""
    try:
        if pool is None:
            from torchatlas import sandbox

            shared_pool()  # every room's jobs registered before the zygote starts
            run_job = sandbox.run_job  # on the process-wide pool shared_pool() registered
        else:
            run_job = pool.run_job
    except Exception as exc:  # no sandbox on this server: the room says so, nothing breaks
        LOG.warning("room job %s: the sandbox is unavailable: %s", job, str(exc)[:300])
        if meanwhile is not None:
            meanwhile()
        return RoomJob(failure=JobFailure("unavailable", f"{type(exc).__name__}: {exc}"[:500]))
    extra: dict[str, Any] = {"on_queued": on_queued} if on_queued is not None else {}
    if meanwhile is not None:
        extra["meanwhile"] = meanwhile
    if reader is None:  # the codec rebuilds and bounds the value: no generic walk before it
        from torchatlas.sandbox.pool import DecodedByCaller

        extra["value_schema"] = DecodedByCaller(_typed_reader(returns, limits))
    result = run_job(source, job, params, timeout_s=timeout_s, visitor=visitor, **extra)
    usage = dict(getattr(result, "usage", None) or {})
    if not result.ok or result.value is None:
        failure = _failure(result.error)
        if failure.kind == "job_error":
            LOG.warning("room job %s failed: %s", job, failure.detail[:300])
        return RoomJob(failure=failure, usage=usage)
    try:
        if reader is not None:
            return RoomJob(value=reader(result.value), usage=usage)
        outcome = _outcome(result.value, returns, limits)
    # A reply outside its type: named for the server log, never echoed to the page.
    except (SchemaError, ValueError, TypeError, KeyError) as exc:
        LOG.warning("room job %s: the reply was refused: %s", job, str(exc)[:300])
        return RoomJob(failure=JobFailure("untrusted"), usage=usage)
    return RoomJob(outcome.value, outcome.refused, None, usage)
