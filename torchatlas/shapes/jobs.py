"""The jobs the shape explorer runs inside a sandbox worker, by name, and their warm-up.

Each is a trusted function called as ``fn(namespace, **params)`` on the names the pasted
source defined, returning JSON-able data. :func:`register_jobs` hands :data:`JOBS` and the
warm-up requests to a sandbox pool, so that the sandbox needs to know nothing of this room.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torchatlas.shapes.analysis import _on_cpu, analyze_namespace, why_meta_namespace

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

ANALYZE = "shapes.analyze"
WHY_META = "shapes.why_meta"


def top_level_moves_stay_on_the_cpu() -> Any:
    """The pasted source's top level (``model = Net().cuda()``, ``x = x.to(gpu)``) runs before
    the job: a device move there stays on the CPU (the sandbox has no GPU; a child forked from a
    process with torch cannot start CUDA either), as the job keeps its own moves on meta."""
    return _on_cpu()


analyze_namespace.exec_context = top_level_moves_stay_on_the_cpu  # type: ignore[attr-defined]
why_meta_namespace.exec_context = top_level_moves_stay_on_the_cpu  # type: ignore[attr-defined]

JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    ANALYZE: analyze_namespace,
    WHY_META: why_meta_namespace,
}

# A model whose layers most pasted models share: the zygote analyses it once before it forks,
# so a job's child finds every code path it needs already imported and touched.
WARM_UP_SOURCE = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from collections import OrderedDict
from torchvision.models import resnet18


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.norm = nn.BatchNorm2d(6)
        self.fc1 = nn.Linear(6 * 14 * 14, 10)
        self.attention = nn.MultiheadAttention(10, 2, batch_first=True)
        self.lstm = nn.LSTM(10, 10, batch_first=True)

    def forward(self, x):
        x = self.pool(F.relu(self.norm(self.conv1(x))))
        x = F.interpolate(x, scale_factor=1.0)
        x = torch.cat([x, x], dim=1)[:, :6]
        x = self.fc1(torch.flatten(x, 1)).unsqueeze(1)
        x, _ = self.attention(x, x, x)
        x, _ = self.lstm(x)
        return x.view(x.size(0), -1) * math.sqrt(2)
"""


def _broken(line: str) -> str:
    """The warm-up model with ``line``'s layer given a wrong size: the analysis's error paths
    (mismatch hints) then run once too."""
    return WARM_UP_SOURCE.replace(line, line.replace("(", "(3 + ", 1))


WARM_UP: list[dict[str, Any]] = [
    {"source": WARM_UP_SOURCE, "job": ANALYZE, "params": {"input_shapes": [[2, 1, 32, 32]]}},
    {"source": WARM_UP_SOURCE, "job": ANALYZE,
     "params": {"input_shapes": [[2, 1, 32, 32]], "symbolic": True}},
    {"source": WARM_UP_SOURCE, "job": WHY_META,
     "params": {"input_shapes": [[1, 1, 32, 32]], "batches": [1, 2], "real_budget_s": 0.5}},
    *({"source": _broken(line), "job": ANALYZE, "params": {"input_shapes": [[2, 1, 32, 32]]}}
      for line in ("self.fc1 = nn.Linear(6 * 14 * 14, 10)", "self.conv1 = nn.Conv2d(1, 6, 5)")),
]  # fmt: skip
"""Requests the sandbox's zygote runs once before it forks any child."""

SPARE_WARM_UP: dict[str, Any] = {
    "source": "from torchvision.models import resnet18\n",
    "job": ANALYZE,
    "params": {"input_shapes": [[1, 3, 64, 64]], "model": "resnet18()"},
}
"""What each spare child runs while it waits for a job: the common job on a small model."""


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's jobs and warm-up with ``pool`` (again: a no-op); returns it."""
    return pool.register(JOBS, WARM_UP, SPARE_WARM_UP)
