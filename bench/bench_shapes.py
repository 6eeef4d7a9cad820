"""Benchmark of the shape explorer against baselines measured in the same run.

    python -m bench.bench_shapes [--repeats N]

1. ``explore()`` warm, through the sandbox, on torchvision ResNet-50 with a 1024×3×2048×2048
   input vs a bare in-process meta forward-hook trace of the same model (build on meta, hooks,
   forward). Target ≤ 3×.
2. The same ``explore()`` vs ``torchinfo.summary(resnet50(), input_size=(16, 3, 224, 224))``
   (a real CPU forward). Target: explore ≥ 20× faster.
3. Input-size independence: ``explore()`` at 1024×3×2048×2048 vs 1×3×224×224. Target ≤ 1.3×.
4. Resident memory (VmRSS) of the sandbox's worker processes and of this process (which
   imports what the app imports, with the pool warm).

Every ``explore()`` timed runs its analysis: the room's report cache is emptied first.
Timings are medians of interleaved runs (the machine is shared and noisy). Exits 1 when a
target is missed or the sandbox is not available.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench.harness import timed

HOOK_TRACE = 3.0  # targets
TORCHINFO = 20.0
SIZE = 1.3
BIG = [1024, 3, 2048, 2048]
SMALL = [1, 3, 224, 224]
SOURCE = "from torchvision.models import resnet50\n"
RESULTS = Path(__file__).resolve().parent / "results" / "shapes.json"


def rss_mb(pid: int | str = "self") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (the sandbox's forkserver/zygote and its workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def bare_hook_trace(shape: list[int]) -> None:
    """What a careful user would write in a notebook: meta build + hooks + forward."""
    import torch
    from torchvision.models import resnet50

    with torch.device("meta"):
        model = resnet50().eval()
    shapes: list[tuple[str, tuple[int, ...]]] = []
    names = {id(module): name for name, module in model.named_modules()}
    for module in model.modules():
        module.register_forward_hook(
            lambda m, args, out: shapes.append((names[id(m)], tuple(out.shape)))
        )
    with torch.no_grad(), torch.device("meta"):
        model(torch.empty(shape, device="meta"))
    assert len(shapes) > 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--torchinfo-repeats", type=int, default=3)
    args = parser.parse_args()

    import torch
    import torchinfo
    from torchvision.models import resnet50

    from torchatlas.shapes import explore, register_jobs

    try:
        from torchatlas.sandbox import get_pool
    except ImportError as exc:
        print(f"FAIL: the sandbox is not available ({exc}); explore() cannot run.")
        return 1

    rss_before_pool = rss_mb()
    pool = register_jobs(get_pool())  # the zygote starts once, with the room's jobs
    started = time.perf_counter()
    pool.warm_up()
    warm_up_s = time.perf_counter() - started

    def run_explore(shape: list[int]) -> None:
        # explore() runs a job on every call (the page's shared reports are in
        # components/shapes/state.py): each call times one analysis.
        report = explore(SOURCE, [shape], model="resnet50()", timeout_s=60)
        assert report.error is None, report.error
        assert report.outputs == [[shape[0], 1000]], report.outputs

    for _ in range(2):  # warm: worker started, torchvision imported, first-call costs paid
        run_explore(BIG)
        run_explore(SMALL)
    # What the app process holds with the pool warm (before this process builds models itself).
    rss_pool_warm = rss_mb()
    sandbox_rss = {pid: rss_mb(pid) for pid in descendants(os.getpid())}
    bare_hook_trace(BIG)

    big, small, bare = [], [], []
    for _ in range(args.repeats):  # interleaved so background noise hits all three alike
        big.append(timed(lambda: run_explore(BIG)))
        small.append(timed(lambda: run_explore(SMALL)))
        bare.append(timed(lambda: bare_hook_trace(BIG)))

    def torchinfo_run() -> None:
        torchinfo.summary(resnet50(), input_size=(16, 3, 224, 224), verbose=0)

    torchinfo_run()  # warm
    torchinfo_times = [timed(torchinfo_run) for _ in range(args.torchinfo_repeats)]

    median = statistics.median
    results = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "explore_big_s": median(big),
        "explore_small_s": median(small),
        "bare_hook_trace_s": median(bare),
        "torchinfo_s": median(torchinfo_times),
        "ratio_explore_vs_hook_trace": median(big) / median(bare),
        "speedup_vs_torchinfo": median(torchinfo_times) / median(big),
        "ratio_big_vs_small": median(big) / median(small),
        "pool_warm_up_s": warm_up_s,
        "sandbox_rss_mb": sandbox_rss,
        "app_rss_mb_before_pool": rss_before_pool,
        "app_rss_mb_pool_warm": rss_pool_warm,
    }
    print(f"torch {results['torch']}, {results['threads']} threads, medians of {args.repeats}")
    print(f"explore() ResNet-50 1024×3×2048×2048 via sandbox : {median(big) * 1000:8.1f} ms")
    print(f"explore() ResNet-50 1×3×224×224 via sandbox      : {median(small) * 1000:8.1f} ms")
    print(f"bare in-process meta hook trace 1024×3×2048×2048 : {median(bare) * 1000:8.1f} ms")
    print(f"torchinfo.summary 16×3×224×224 (real forward)    : {median(torchinfo_times):8.2f} s")
    checks = [
        ("explore / bare hook trace", results["ratio_explore_vs_hook_trace"], "≤", HOOK_TRACE),
        ("torchinfo / explore", results["speedup_vs_torchinfo"], "≥", TORCHINFO),
        ("explore big / small input", results["ratio_big_vs_small"], "≤", SIZE),
    ]
    failed = False
    for label, value, op, target in checks:
        ok = value <= target if op == "≤" else value >= target
        failed |= not ok
        print(f"{label:28s}: {value:7.2f}×  (target {op} {target}×)  {'ok' if ok else 'MISSED'}")
    print(f"pool warm-up: {warm_up_s:.1f} s")
    zygote_pid = pool._zygote.process.pid if pool._zygote is not None else None
    for pid, rss in sandbox_rss.items():
        if rss != rss:  # NaN: a job's child that exited meanwhile
            continue
        role = (
            "zygote (torch imported; every child is forked from it)"
            if pid == zygote_pid
            else "spare child, warm, waiting for the next job"
        )
        print(f"sandbox {role}, pid {pid}: {rss:.0f} MB resident, mostly shared copy-on-write")
    print(
        f"this process (imports like the app): {rss_before_pool:.0f} MB before the pool, "
        f"{results['app_rss_mb_pool_warm']:.0f} MB with the pool warm"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    pool.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
