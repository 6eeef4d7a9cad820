"""The strides room's sandbox jobs (registered on the shared pool by torchatlas.sandboxed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

JOBS: dict[str, Any] = {}


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's jobs with ``pool`` (again: a no-op); returns it."""
    return pool.register(JOBS)
