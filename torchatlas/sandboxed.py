"""Every room's sandbox jobs, registered on the process-wide pool in one call.

The pool starts its zygote with the jobs registered so far, and a registration that adds a job
after that start replaces the zygote (jobs running in the old one end as crashed). So every
caller of the process-wide pool registers all rooms' jobs at once, through :func:`shared_pool`,
whichever room a visitor opens first. The sandbox itself knows no room; this module is the one
place that knows which rooms run pasted code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool


def register_room_jobs(pool: SandboxPool) -> SandboxPool:
    """Register every room's jobs and warm-up with ``pool`` (again: a no-op); returns it."""
    from torchatlas.modules.jobs import register_jobs as register_modules
    from torchatlas.shapes.jobs import register_jobs as register_shapes

    return register_modules(register_shapes(pool))


def shared_pool() -> SandboxPool:
    """The process-wide sandbox pool, with every room's jobs registered."""
    from torchatlas.sandbox import get_pool

    return register_room_jobs(get_pool())
