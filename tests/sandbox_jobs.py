"""The sandbox's test jobs and pools: one copy, in bench/sandbox_jobs.py (the benchmarks use
the same jobs, and bench may not import tests). Re-exported here for the tests."""

from __future__ import annotations

from bench.sandbox_jobs import (
    ECHO,
    GOOD_MODEL,
    JOBS,
    SLEEP,
    WARM_UP,
    make_pool,
    warm_pool,
)

__all__ = ["ECHO", "GOOD_MODEL", "JOBS", "SLEEP", "WARM_UP", "make_pool", "warm_pool"]
