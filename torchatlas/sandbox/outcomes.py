"""The sandbox's kinds of failure, named once for the sandbox, its client
(:mod:`torchatlas.sandboxed`) and every room that shows them.

Each is a kind of outcome, never a room's text: a room that runs pasted source has a code of
the same name in its own error enum, whose translated text the page shows
(:meth:`torchatlas.errors.SourceError.of_failure` is the one mapping), and a test checks that
each such room names every kind.
"""

from __future__ import annotations

from enum import StrEnum


class FailureKind(StrEnum):
    """Why a sandbox job has no result."""

    REFUSED = "refused"  # the allow-list refused the pasted source
    SYNTAX = "syntax"  # the pasted source is not Python
    CODE_ERROR = "code_error"  # the pasted source raised
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    OUTPUT_TOO_LARGE = "output_too_large"
    BUSY = "busy"  # the line is full
    TOO_MANY_JOBS = "too_many_jobs"  # this visitor's share of the line is full
    JOB_ERROR = "job_error"  # the job itself failed (and any kind nobody knows reads as it)
    UNAVAILABLE = "unavailable"  # no sandbox on this server
    UNTRUSTED = "untrusted"  # a reply outside its declared type or bounds


FAILURE_KINDS: tuple[str, ...] = tuple(kind.value for kind in FailureKind)
# Failures of the moment (a full line, a loaded server, a crash, an unreadable reply): worth
# trying again, so no room caches them. A timeout is one of them: besides the child's CPU
# limit, the zygote stops a child at a wall-clock deadline, which a loaded server's honest
# job can reach. A memory limit reached is kept: the same input reaches it again.
TRANSIENT_KINDS: frozenset[str] = frozenset(
    {"timeout", "crashed", "busy", "too_many_jobs", "untrusted", "job_error", "unavailable"}
)


def with_failure_kinds(name: str, own: type[StrEnum], module: str) -> type[StrEnum]:
    """A room's error enum: its ``own`` codes, then one member per :class:`FailureKind` of the
    same name and value, so the sandbox's kinds are written here only and a room that runs
    pasted source cannot miss one (``module``: where the enum lives, for pickling and repr)."""
    members = [(code.name, code.value) for code in own]
    members += [(kind.name, kind.value) for kind in FailureKind]
    room_enum = StrEnum(name, members, module=module)  # type: ignore[misc]
    room_enum.__doc__ = own.__doc__
    return room_enum


def known_kind(kind: object) -> str:
    """``kind`` when it is one of :data:`FAILURE_KINDS`, else ``job_error`` (a reply may
    name anything)."""
    return kind if isinstance(kind, str) and kind in FAILURE_KINDS else FailureKind.JOB_ERROR.value
