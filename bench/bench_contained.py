"""Benchmark of contained computation (issue 21): a room's engine in a sandbox job against the
same engine in this process, both measured in the same run, for the two rooms the issue names.

    python -m bench.bench_contained [--rounds 25] [--settle-s 0.5]

1. autograd: trace + backward of the 62-operation program (``bench_autograd``'s), as the room
   runs it (``contained_run``: the program as plain PyTorch is written by this process while
   the child traces, and the reply is rebuilt as the room's ``ProgramRun``) against
   ``run_program`` here, which gives the same run;
2. strides: a 24-op chain on a 64×64 tensor (``bench_strides``'s).

Each room job pays a fixed cost (a place in the fair queue, a confined child taking the job, the
request and the reply crossing a socket, the reply checked and rebuilt as dataclasses),
measured in the same rounds as a job that computes almost nothing. Target: the contained job
≤ 1.5 × in-process + that fixed cost, for a visitor's job as the pool is built to serve it: by a
warm spare child (the zygote forks the next spare just after a job's child exits and warms it
up once no job runs; ``--settle-s`` leaves it that time before each timing, in-process ones
too). The target holds the median of per-round ratios, (job − fixed) / in-process with all
three from the same round, as ``bench_autograd``'s does: this machine runs fast or about 1.5×
slower for seconds at a time, so a ratio of medians taken over all rounds can set a slow-phase
median against a fast-phase one. The ratio of medians is printed beside. A job right behind
another finds no spare ready and gets a child forked on the spot: that figure is printed
beside, for context (the room benchmarks, ``bench_autograd`` and ``bench_strides``, time their
jobs back to back). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable

import torch

from bench.bench_autograd import fifty_op_program
from bench.bench_strides import LONG_CHAIN, SHAPE
from bench.harness import timed
from torchatlas.sandboxed import run_room_job, shared_pool

TARGET = 1.5
VISITORS = (f"bench-{n}" for n in itertools.count())  # each its own client: no rate measured


def _job(job: str, params: dict, returns: object, check: Callable[[object], object] = id,
         **options: object) -> Callable[[], object]:  # fmt: skip
    def run() -> object:
        outcome = run_room_job(job, params, returns, visitor=next(VISITORS), **options)
        if not outcome.ok:
            raise SystemExit(f"{job} failed: {outcome.failure or outcome.refused}")
        return check(outcome.value)

    return run


def cases() -> dict[str, tuple[Callable[[], object], Callable[[], object], Callable[[], object]]]:
    """name → (the job, a trivial job of the same room, the same work in process)."""
    from torchatlas.autograd import parse
    from torchatlas.autograd.jobs import contained_run, run_program
    from torchatlas.strides.jobs import (
        CHAIN,
        WireChain,
        chain_run,
        checked_chain,
        plan_chain,
        wire_limits,
    )

    program = fifty_op_program()

    def autograd(text: str) -> Callable[[], object]:
        def run() -> object:  # as the room runs it: checked (cached), then contained
            job = contained_run(parse(text), 0, None, visitor=next(VISITORS), timeout_s=10)
            if job.value is None:
                raise SystemExit(f"autograd failed: {job.failure or job.refused}")
            return job.value

        return run

    def strides(shape: tuple[int, ...], ops: list[str]) -> Callable[[], object]:
        params = {"shape": list(shape), "dtype": "float32", "listed_up_to": 4096,
                  "ops": list(plan_chain(ops).ops)}  # fmt: skip
        return _job(CHAIN, params, WireChain, checked_chain, limits=wire_limits(4096))

    return {
        "autograd: 62-op program, trace + backward": (
            autograd(program),
            autograd("w = ones(1, requires_grad=True)\nloss = w.sum()\n"),
            lambda: run_program(program, 0, None),
        ),
        "strides: 24-op chain on 64×64": (
            strides(SHAPE, LONG_CHAIN),
            strides((1,), []),
            lambda: chain_run(SHAPE, "float32", LONG_CHAIN, 4096),
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--settle-s", type=float, default=0.5)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the sandbox's children
    shared_pool().warm_up(wait=True)
    missed = 0
    for name, (job, trivial, in_process) in cases().items():
        job(), trivial(), in_process()  # first touches, not timed
        samples: dict[str, list[float]] = {"job": [], "fixed": [], "here": [], "burst": []}
        for _ in range(args.rounds):  # interleaved: each sees the same moments of the machine
            # Each timing starts on a settled machine: the zygote forks its next spare and
            # warms it up after a job, which would slow whatever runs then, in-process too.
            time.sleep(args.settle_s)
            samples["here"].append(timed(in_process))
            time.sleep(args.settle_s)
            samples["fixed"].append(timed(trivial))
            time.sleep(args.settle_s)
            samples["job"].append(timed(job))
            samples["burst"].append(timed(job))  # right behind: no spare is ready yet
        rounds = zip(samples["job"], samples["fixed"], samples["here"], strict=True)
        per_round = statistics.median(
            max(round_job - round_fixed, 0.0) / round_here
            for round_job, round_fixed, round_here in rounds
        )
        job_s, fixed, here, burst = (statistics.median(samples[k]) for k in samples)
        ok = per_round <= TARGET
        missed += not ok
        print(
            f"{name}\n  in-process {here * 1000:.1f} ms; contained {job_s * 1000:.1f} ms; "
            f"fixed per-job cost {fixed * 1000:.1f} ms (medians)\n"
            f"  (contained − fixed) / in-process, median of per-round ratios = {per_round:.2f} "
            f"(target ≤ {TARGET}) {'ok' if ok else 'MISSED'}; "
            f"ratio of the medians above {max(job_s - fixed, 0.0) / here:.2f}\n"
            f"  a job right behind another (a spare not warmed up yet): {burst * 1000:.1f} ms, "
            f"{max(burst - fixed, 0.0) / here:.2f}× by the ratio of medians"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
