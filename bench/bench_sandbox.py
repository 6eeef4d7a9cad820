"""Sandbox overhead and memory: ``python -m bench.bench_sandbox [--runs N]``.

Prints medians of warm calls through the sandbox against the same work in-process (measured in
the same run), and the memory of the zygote, of one job's child and of this process. Exits 1
when a target is missed:
- a trivial job (exec a small model + echo) through the sandbox: under 0.1 s warm;
- the shape analysis of ResNet-50 at 1024×3×2048×2048: at most 3× the in-process analysis.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from bench import sandbox_jobs
from bench.harness import median_time
from torchatlas.sandbox import SandboxPool
from torchatlas.sandbox.worker import execute, use_jobs
from torchatlas.shapes import JOBS as SHAPES_JOBS
from torchatlas.shapes import register_jobs

TRIVIAL_TARGET_S = 0.1
RESNET_RATIO_TARGET = 3.0
SMALL_MODEL = sandbox_jobs.GOOD_MODEL  # a one-layer model: the job's cost is the sandbox's
RESNET = "from torchvision.models import resnet50\n"
RESNET_PARAMS = {"input_shapes": [[1024, 3, 2048, 2048]], "model": "resnet50()"}


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS from status and Pss from smaps_rollup, in kB (0 where unreadable)."""
    figures = {"rss": 0, "pss": 0}
    for name, key, field in (("status", "rss", "VmRSS:"), ("smaps_rollup", "pss", "Pss:")):
        try:
            for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
                if line.startswith(field):
                    figures[key] = int(line.split()[1])
        except OSError:
            pass
    return figures


def child_memory(pool: SandboxPool, zygote_pid: int) -> dict[str, int]:
    """Memory of a child while it runs a job (it sleeps, so it can be measured)."""
    runner = threading.Thread(
        target=pool.run_job, args=(SMALL_MODEL, sandbox_jobs.SLEEP, {"seconds": 1.5}), daemon=True
    )
    runner.start()
    figures = {"rss": 0, "pss": 0}
    for _ in range(50):
        time.sleep(0.05)
        children = Path(f"/proc/{zygote_pid}/task/{zygote_pid}/children").read_text().split()
        if children:
            time.sleep(0.3)
            figures = memory_kb(int(children[0]))
            break
    runner.join()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    jobs, warm_up = sandbox_jobs.JOBS, sandbox_jobs.WARM_UP
    pool = register_jobs(SandboxPool(rate_limit=0, jobs=jobs, warm_up_requests=warm_up))
    use_jobs({**jobs, **SHAPES_JOBS})  # the same jobs in this process, for the comparison
    started = time.perf_counter()
    pool.warm_up()
    start_s = time.perf_counter() - started
    zygote = pool._zygote
    assert zygote is not None and zygote.info, "the sandbox did not start"
    print(f"zygote start (import torch + warm-up): {start_s:.2f} s; layers: {pool.health()}")

    trivial = {"source": SMALL_MODEL, "job": sandbox_jobs.ECHO, "params": {}}
    pool.run_job(SMALL_MODEL, sandbox_jobs.ECHO, {})
    execute(trivial)
    in_process = median_time(lambda: execute(trivial), args.runs)
    sandboxed = median_time(lambda: pool.run_job(SMALL_MODEL, sandbox_jobs.ECHO, {}), args.runs)
    print(
        f"trivial job   in-process {in_process * 1000:7.1f} ms   sandbox {sandboxed * 1000:7.1f} ms"
        f"   overhead {(sandboxed - in_process) * 1000:6.1f} ms   (target < {TRIVIAL_TARGET_S} s)"
    )

    resnet = {"source": RESNET, "job": "shapes.analyze", "params": RESNET_PARAMS}
    execute(resnet)
    check = pool.run_job(RESNET, "shapes.analyze", RESNET_PARAMS, timeout_s=30)
    assert check.ok and check.value["error"] is None, check.error or check.value["error"]
    resnet_runs = max(3, args.runs // 3)
    resnet_in = median_time(lambda: execute(resnet), resnet_runs)
    resnet_box = median_time(
        lambda: pool.run_job(RESNET, "shapes.analyze", RESNET_PARAMS, timeout_s=30), resnet_runs
    )
    ratio = resnet_box / resnet_in
    print(
        f"ResNet-50 1024×3×2048×2048 analysis   in-process {resnet_in * 1000:7.1f} ms   "
        f"sandbox {resnet_box * 1000:7.1f} ms   ratio {ratio:.2f}× "
        f"(target ≤ {RESNET_RATIO_TARGET}×)"
    )

    zygote_memory = memory_kb(zygote.process.pid)
    child = child_memory(pool, zygote.process.pid)
    this_process = memory_kb(__import__("os").getpid())
    print(
        f"memory (MB)   zygote RSS {zygote_memory['rss'] / 1024:6.0f} PSS "
        f"{zygote_memory['pss'] / 1024:6.0f}   child RSS {child['rss'] / 1024:6.0f} PSS "
        f"{child['pss'] / 1024:6.0f}   this process (app side, torch imported) RSS "
        f"{this_process['rss'] / 1024:6.0f}"
    )
    pool.shutdown()

    missed = []
    if sandboxed >= TRIVIAL_TARGET_S:
        missed.append(f"trivial job {sandboxed:.3f} s ≥ {TRIVIAL_TARGET_S} s")
    if ratio > RESNET_RATIO_TARGET:
        missed.append(f"ResNet-50 ratio {ratio:.2f}× > {RESNET_RATIO_TARGET}×")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
