"""The jobs the module room runs inside a sandbox worker, by name, and their warm-up.

Each is a trusted function called as ``fn(namespace, **params)`` on the names the pasted source
defined, returning JSON-able data. :func:`register_jobs` hands :data:`JOBS` and the warm-up to
a sandbox pool (always through ``torchatlas.sandboxed.shared_pool`` for the page's pool), so the
sandbox needs to know nothing of this room.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchatlas.modules.inspector import inspect_namespace
from torchatlas.modules.memory import MEMORY, uninitialised_values

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

INSPECT = "modules.inspect"

JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    INSPECT: inspect_namespace,
    MEMORY: uninitialised_values,
}

# A model that has every kind of tensor attachment the walk looks at: the zygote inspects it
# once before it forks, so each child finds every code path imported and touched.
WARM_UP_SOURCE = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.register_buffer("mask", torch.ones(4), persistent=False)
        self.W = torch.FloatTensor(4, 2)
        self.extra = [nn.Linear(2, 2)]
        self.scales = [torch.ones(2)]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.gains = nn.ParameterList([nn.Parameter(torch.ones(2))])
        self.head = nn.Linear(4, 2)
        self.tied = self.head
"""

WARM_UP: list[dict[str, Any]] = [{"source": WARM_UP_SOURCE, "job": INSPECT, "params": {}}]
"""Requests the sandbox's zygote runs once before it forks any child."""


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's jobs and warm-up with ``pool`` (again: a no-op); returns it. It
    leaves the pool's spare-child warm-up as it is (another room's common job)."""
    return pool.register(JOBS, WARM_UP)
