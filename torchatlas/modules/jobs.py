"""The jobs the module room runs inside a sandbox worker, by name, and their warm-up.

- ``modules.inspect``: the pasted source's model built on meta and walked
  (:func:`~torchatlas.modules.inspector.inspect_namespace`; its reply is checked against
  :data:`~torchatlas.modules.report.REPORT_SCHEMA`).
- ``modules.train``: the training run the visitor's controls (or a link) chose: model,
  learning rate, number of steps, forgotten ``zero_grad()``. The number of steps sets the
  work and the size of the record, and the learning rate can drive the values to overflow, so
  the run happens in a confined child (memory limit, CPU deadline) and comes back as a
  :class:`~torchatlas.modules.training.TrainingTrace` rebuilt within :data:`TRACE_LIMITS`.
- ``modules.memory``: uninitialised tensors, allocated in a fresh child (:mod:`.memory`).

Each is a trusted function called as ``fn(namespace, **params)``; :func:`register_jobs` hands
:data:`JOBS` and the warm-up to a sandbox pool (always through
``torchatlas.sandboxed.shared_pool`` for the page's pool), so the sandbox knows nothing of
this room.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from torchatlas.modules.inspector import inspect_namespace
from torchatlas.modules.memory import MEMORY, allocate
from torchatlas.modules.training import MAX_STEPS, ModelsError, TrainingTrace, train_steps
from torchatlas.sandbox.codec import Limits, encode, job_reply

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

# Every optimizer.step() opens a profiler range whose constructor builds the type
# Optional["torch.classes.profiler._RecordFunction"]: typing compiles that text the first time
# and caches the result. The sandbox refuses text turned into code while a job runs, but allows
# a module's own code while it is imported, and this module is imported in the zygote before it
# forks: built once here, every child finds the type cached and the step runs.
torch.autograd.profiler.record_function("modules.train")

INSPECT = "modules.inspect"
TRAIN = "modules.train"
# A trace's honest size: at most MAX_STEPS records of a few tensors of at most 24 values, three
# copies each (before, grad, after), a handful of short names and torch's messages.
TRACE_LIMITS = Limits(
    max_str=4000, max_items=MAX_STEPS, max_nodes=400_000, max_depth=8, int_bits=64
)
MEMORY_LIMITS = Limits(max_str=100, max_items=16, max_nodes=200, max_depth=4, int_bits=64)


def _values(values: tuple[float, ...] | None) -> Any:
    """:func:`~torchatlas.sandbox.codec.encode` of a tuple of floats, without its per-value
    type dispatch (a 500-step run holds ~75,000 of them): a float that is not finite becomes
    the codec's marker, exactly as ``encode`` writes it."""
    if values is None:
        return None
    return [v if v - v == 0 else encode(v) for v in values]


def encode_trace(trace: TrainingTrace) -> dict[str, Any]:
    """``encode(trace)``, the same JSON (tests/unit/test_modules_memory.py compares them),
    with the recorded numbers written by :func:`_values`."""
    steps = [
        {
            "index": record.index,
            "loss": encode(record.loss),
            "before": [_values(values) for values in record.before],
            "grads": [_values(values) for values in record.grads],
            "after": [_values(values) for values in record.after],
            "grads_cleared": record.grads_cleared,
        }
        for record in trace.steps
    ]
    plain = {
        field.name: encode(getattr(trace, field.name))
        for field in dataclasses.fields(trace)
        if field.init and field.name not in ("steps", "initial")
    }
    return {**plain, "initial": [_values(values) for values in trace.initial], "steps": steps}


def _raise(error: BaseException) -> Any:
    raise error


def train_job(
    namespace: dict[str, Any], *, model: str, lr: float, steps: int, forget: bool, seed: int = 0
) -> dict[str, Any]:
    """Job ``modules.train``: :func:`~torchatlas.modules.training.train_steps` as a reply (the
    engine's own bounds checks come back as a coded refusal)."""
    del namespace  # no pasted code: the run uses the room's built-in models
    try:
        trace = train_steps(model, lr=lr, steps=steps, forget_zero_grad=forget, seed=seed)
    except ModelsError as error:
        refusal = error  # the coded refusal, in job_reply's words
        return job_reply(lambda: _raise(refusal), refusals=(ModelsError,))
    return {"result": encode_trace(trace)}


def memory_job(namespace: dict[str, Any]) -> dict[str, Any]:
    """Job ``modules.memory``: :func:`~torchatlas.modules.memory.allocate` as a reply."""
    del namespace
    return job_reply(allocate)


JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    INSPECT: inspect_namespace,
    TRAIN: train_job,
    MEMORY: memory_job,
}

# A model that has every kind of tensor attachment the walk looks at: the zygote inspects it
# once before it forks, so each child finds every code path imported and touched. Training is
# not warmed: a warm-up runs in the zygote before it forks and must never call backward()
# (autograd's threads started there would break backward in every child).
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
        self.alias = [self.fc]


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
