"""Isolated, resource-limited execution of pasted model code, for the rooms that need it.

Four layers, each meant to hold on its own:
1. :mod:`.policy` — a static allow-list over the AST (a courtesy: clear, line-numbered refusals);
2. :mod:`.facade` — a capability namespace: curated torch/nn/F/torchvision.models, few builtins;
3. :mod:`.worker` / :mod:`.zygote` — a fresh forked child per job, confined by a scrubbed
   environment, a uid of its own (when started as root), rlimits and seccomp, killed on
   timeout; it can affect no process but itself (signals, limits, priorities, affinity and
   file owners are pinned to itself), whether the server runs as root or not;
4. :mod:`.pool` — a warm zygote, a concurrency cap, a queue fair between clients (machines)
   and, within each, between its sessions, rate limits per session and per client, health.

It knows nothing of those rooms: each registers its own jobs (trusted functions called on
the names the pasted code defined) with the pool that will run them.

>>> pool = SandboxPool(jobs={"room.job": job_function})  # doctest: +SKIP
>>> result = pool.run_job(source, "room.job", {"some": "params"})  # doctest: +SKIP
"""

from torchatlas.sandbox.policy import Refusal, check_source
from torchatlas.sandbox.pool import (
    SandboxError,
    SandboxHealth,
    SandboxPool,
    SandboxResult,
    get_pool,
    run_job,
)

__all__ = [
    "Refusal",
    "SandboxError",
    "SandboxHealth",
    "SandboxPool",
    "SandboxResult",
    "check_source",
    "get_pool",
    "run_job",
]
