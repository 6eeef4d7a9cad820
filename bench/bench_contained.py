"""Benchmark of contained computation (issue 21): a room's engine in a sandbox job against the
same engine in this process, both measured in the same run, for the two rooms the issue names.

    python -m bench.bench_contained [--rounds 15]

1. autograd: trace + backward of the 62-operation program (``bench_autograd.contained``);
2. strides: a 24-op chain on a 64×64 tensor (``bench_strides.contained_against_in_process``).

Each room job pays a fixed cost (a place in the fair queue, a confined child taking the job,
the request and the reply crossing a socket, the reply checked and rebuilt as dataclasses),
measured in the same rounds as the median of a job that computes almost nothing. Target:
contained ≤ 1.5 × in-process + that fixed cost (medians). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys

import torch

from bench.bench_autograd import contained as autograd_contained
from bench.bench_strides import contained_against_in_process as strides_contained

TARGET = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the sandbox's children
    jobs = autograd_contained(args.rounds)
    boxed, local, fixed = strides_contained(args.rounds)
    cases = {
        "autograd: 62-op program, trace + backward": (
            jobs["contained"],
            jobs["in_process"],
            jobs["fixed"],
        ),
        "strides: 24-op chain on 64×64": (boxed, local, fixed),
    }
    missed = 0
    for name, (box, here, cost) in cases.items():
        ratio = max(box - cost, 0.0) / here
        ok = ratio <= TARGET
        missed += not ok
        print(
            f"{name}: contained {box * 1000:.1f} ms, in-process {here * 1000:.1f} ms, "
            f"fixed per-job cost {cost * 1000:.1f} ms → (contained − fixed) / in-process "
            f"{ratio:.2f} (target ≤ {TARGET}) {'ok' if ok else 'MISSED'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
