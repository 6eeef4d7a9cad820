"""Jobs only the sandbox's tests and benchmarks run (trusted code inside the worker), and
their pools.

They are registered with the tests' and benchmarks' own pools (:func:`make_pool`, or a
benchmark's ``SandboxPool(jobs=JOBS, warm_up_requests=WARM_UP)``), never with the page's: the
zygote imports this module by name (``bench.sandbox_jobs``, the repository root is on its path).
Tests import it through ``tests/sandbox_jobs.py`` (bench may not import tests: one copy, here).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

# Imported here, not in the job: a confined child cannot open files, so everything a job
# needs is imported when the zygote imports this module.
from torchatlas.sandbox.codec import job_reply

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

# The honest model the attack tests run before and after each attack: the pool still serves.
GOOD_MODEL = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)
"""


def echo(namespace: dict[str, Any], **params: Any) -> dict[str, Any]:
    """The user-defined names and the params, plus facts about the process the job ran in."""
    classes = sorted(
        name
        for name, value in namespace.items()
        if isinstance(value, type) and issubclass(value, torch.nn.Module)
    )
    return {
        "classes": classes,
        "names": sorted(namespace),
        "params": params,
        "pid": os.getpid(),
        "uid": os.geteuid(),
        "environ": dict(os.environ),
    }


def meta_forward(namespace: dict[str, Any], *, model: str, shape: list[int]) -> dict[str, Any]:
    """Build ``namespace[model]`` on meta and run it on a meta input of ``shape``."""
    with torch.device("meta"):
        module = namespace[model]()
        output = module(torch.empty(shape))
    return {"shape": list(output.shape)}


def allocate(namespace: dict[str, Any], *, megabytes: int) -> dict[str, Any]:
    """Allocate a real CPU tensor of ``megabytes`` MB (and touch it)."""
    tensor = torch.ones(megabytes * 2**20, dtype=torch.uint8)
    return {"bytes": int(tensor.numel())}


def sleep(namespace: dict[str, Any], *, seconds: float) -> dict[str, Any]:
    """Hold a slot (and a child, to be measured) for ``seconds``."""
    time.sleep(seconds)
    return {"slept": seconds}


def huge_output(namespace: dict[str, Any], *, megabytes: int) -> dict[str, Any]:
    return {"text": "x" * (megabytes * 2**20)}


def not_json(namespace: dict[str, Any]) -> dict[str, Any]:
    return {"value": object()}


def fail(namespace: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("this job always fails")


def call(namespace: dict[str, Any], *, name: str) -> dict[str, Any]:
    """Call the user's function ``name`` (so attacks run at job time, after the namespace)."""
    result = namespace[name]()
    return {"result": result}


def room_reply(namespace: dict[str, Any], *, reply: Any) -> Any:
    """Send back ``reply`` as it is: a forged room-job reply, for the client's checks."""
    return reply


def room_backward(namespace: dict[str, Any], *, size: int) -> dict[str, Any]:
    """A room job that calls backward in the child (autograd in a confined child)."""

    def grads() -> tuple[float, ...]:
        weights = torch.arange(float(size), requires_grad=True)
        (weights * weights).sum().backward()
        assert weights.grad is not None
        return tuple(weights.grad.tolist())

    return job_reply(grads)


JOBS = {
    "sandbox.room_reply": room_reply,
    "sandbox.room_backward": room_backward,
    "sandbox.echo": echo,
    "sandbox.meta_forward": meta_forward,
    "sandbox.allocate": allocate,
    "sandbox.sleep": sleep,
    "sandbox.huge_output": huge_output,
    "sandbox.not_json": not_json,
    "sandbox.fail": fail,
    "sandbox.call": call,
}

ECHO, SLEEP = "sandbox.echo", "sandbox.sleep"  # the smallest job (its time is the overhead)
WARM_UP = [{"source": "import torch\n", "job": ECHO, "params": {}}]


def make_pool(**options: Any) -> SandboxPool:
    """A pool of the tests' own (``options`` as SandboxPool takes them) with these jobs and the
    shape explorer's registered (imported here, not at the top: the zygote imports this module
    for its jobs and needs neither the pool nor the room)."""
    from torchatlas.sandbox import SandboxPool
    from torchatlas.shapes import register_jobs

    return register_jobs(SandboxPool(jobs=JOBS, warm_up_requests=WARM_UP, **options))


@contextlib.contextmanager
def warm_pool(**options: Any) -> Iterator[SandboxPool]:
    """A pool of its own (for a test that tunes, fills or kills it) with the tests' jobs and
    the shape explorer's, or ``jobs`` only: warmed up, always shut down."""
    from torchatlas.sandbox import SandboxPool

    sandbox = SandboxPool(**options) if "jobs" in options else make_pool(**options)
    try:
        sandbox.warm_up()
        yield sandbox
    finally:
        sandbox.shutdown()
