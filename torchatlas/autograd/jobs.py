"""The autograd room's sandbox job: a visitor's program traced and replayed backward in a
confined child, its frozen record sent back as bounded JSON.

A program is text a visitor types or a link carries. The parser (in the server: it gives the
clear, translated refusals) is the first wall; running the program, its backward and reading
the graph happen only here, in a child with a memory limit and a CPU deadline, so a program
that slips past the room's own size checks can exhaust nothing but that child.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchatlas.autograd.backward import BackwardTrace, trace_and_backward
from torchatlas.autograd.errors import AutogradError
from torchatlas.autograd.graph import Graph
from torchatlas.autograd.parser import python_code
from torchatlas.autograd.programs import parse
from torchatlas.sandbox.codec import job_reply

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

RUN = "autograd.run"


@dataclass(frozen=True)
class ProgramRun:
    """What the room shows of one program: its graph, backward from ``trace.root`` (None when
    the program stopped or has nothing to start from), and the program as plain PyTorch."""

    graph: Graph
    trace: BackwardTrace | None
    code: str


def run_program(program: str, seed: int, root: str | None) -> ProgramRun:
    """Trace ``program`` and replay backward from ``root`` (default: the graph's own)."""
    graph, trace = trace_and_backward(program, root, seed=seed)
    return ProgramRun(graph, trace, python_code(parse(program), seed))


def run_job(namespace: dict[str, Any], *, program: str, seed: int, root: str | None) -> dict:
    """The sandbox job: :func:`run_program` as JSON (a refusal by the engine's own checks
    comes back as its code and parameters)."""
    del namespace  # no pasted module: the program is data for the room's own interpreter
    return job_reply(lambda: run_program(program, seed, root), refusals=(AutogradError,))


JOBS = {RUN: run_job}
# The warm-up runs in the zygote, before it forks: it touches the interpreter's paths with a
# program that has no root to replay (backward runs in children; the zygote settles autograd's
# engine itself, see torchatlas.sandbox.zygote.settle_autograd_engine).
WARM_UP: list[dict[str, Any]] = [
    {
        "source": "",
        "job": RUN,
        "params": {
            "program": "x = randn(3)\ny = (x * 2).sum()",
            "seed": 0,
            "root": None,
        },
    }
]


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's job and its warm-up with ``pool`` (again: a no-op); returns it."""
    return pool.register(JOBS, WARM_UP)
