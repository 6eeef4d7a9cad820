"""Benchmark of torchatlas.devices' transfer measurements against baselines in the same run.

    python -m bench.bench_devices [--max-mib 64] [--rounds 3]

1. CPU→CPU on the same memory, interleaved size by size, medians: the engine's
   ``transfer.measure`` of ``copy_`` vs a bare ``perf_counter`` loop of the same copy (target:
   the median over sizes of engine/loop is ≤ 1.25), with ``numpy.copyto`` and a 1-thread
   ``copy_`` printed beside it.
   On a loaded 2-core machine torch's parallel copy of mid sizes can wait milliseconds for a
   busy core (compare the 1-thread column): that is the machine, and the page shows it too.
2. The full engine run (``run_transfer_benchmark``) on this machine: every path it has, with
   latency and best bandwidth; with an accelerator also pinned vs pageable host→device.
3. Guard rails: a run with a 0.5 s budget, asking for 1 GiB, stops within budget + 0.5 s; a
   second run while one holds the lock is refused; a cancelled job ends within 1 s.
4. Memory: one press asking for 1 GiB (clamped to the largest size the memory budget allows)
   raises the process's peak resident memory (VmHWM, reset through /proc/self/clear_refs) by
   at most 200 MB, its buffers by the engine's accounting stay within the budget, and the
   largest size still shows the bandwidth plateau (within 2× of the size before it, both
   below the best in-cache bandwidth): printed with the figures.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from bench.memory import own_status_bytes
from torchatlas.devices import transfer
from torchatlas.devices.inventory import available_accelerator

OVERHEAD_TARGET = 1.25  # the engine's timing may add at most 25 % over a bare loop
BUDGET_SLACK_S = 0.5
RSS_RISE_TARGET = 200_000_000  # what one press may add to the server process, in bytes


def fmt_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def plain_loop_s(copy: Callable[[], object], copies: int, rounds: int = 5) -> float:
    """The baseline timer: a bare perf_counter loop, median over rounds."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(copies):
            copy()
        samples.append((time.perf_counter() - started) / copies)
    return statistics.median(samples)


def cpu_against_baselines(max_bytes: int, rounds: int) -> float:
    """Returns the median over sizes of the engine/plain-loop time ratio: a broken timer shows
    at every size, a scheduling hiccup at one size does not."""
    threads = torch.get_num_threads()
    print("\n1. CPU→CPU copy on the same memory, medians of interleaved rounds")
    print("   engine: transfer.measure(copy_); loop: a bare perf_counter loop of the same copy_;")
    print(
        f"   numpy: numpy.copyto; 1 thread: copy_ with torch.set_num_threads(1) (default {threads})"
    )
    print(f"{'size':>8} {'engine':>11} {'engine/loop':>11} {'GB/s':>8} {'numpy GB/s':>10} "
          f"{'1-thread GB/s':>13}")  # fmt: skip
    ratios = []
    for size in transfer.sizes_up_to(max_bytes):
        src = torch.empty(size, dtype=torch.uint8).fill_(1)
        dst = torch.zeros(size, dtype=torch.uint8)
        src_np, dst_np = src.numpy(), dst.numpy()

        def torch_copy(dst: torch.Tensor = dst, src: torch.Tensor = src) -> object:
            return dst.copy_(src)

        def numpy_copy(dst: np.ndarray = dst_np, src: np.ndarray = src_np) -> object:
            return np.copyto(dst, src)

        engine, loop, numpy_s, single = [], [], [], []
        for _ in range(rounds):  # interleaved: the machine is shared and noisy
            measured = transfer.measure("cpu_to_cpu", size, torch_copy, lambda: None, 5)
            engine.append(measured.median_s)
            loop.append(plain_loop_s(torch_copy, measured.copies_per_sample))
            numpy_s.append(
                transfer.measure("cpu_to_cpu", size, numpy_copy, lambda: None, 5).median_s
            )
            torch.set_num_threads(1)
            try:
                single.append(
                    transfer.measure("cpu_to_cpu", size, torch_copy, lambda: None, 5).median_s
                )
            finally:
                torch.set_num_threads(threads)
        engine_s, loop_s = statistics.median(engine), statistics.median(loop)
        ratio = engine_s / loop_s
        ratios.append(ratio)
        print(
            f"{fmt_bytes(size):>8} {engine_s * 1e6:>9.2f}µs {ratio:>11.2f} "
            f"{size / engine_s / 1e9:>8.3g} {size / statistics.median(numpy_s) / 1e9:>10.3g} "
            f"{size / statistics.median(single) / 1e9:>13.3g}"
        )
    return statistics.median(ratios)


def engine_run(max_bytes: int) -> transfer.BenchmarkResult:
    print(f"\n2. run_transfer_benchmark(max {fmt_bytes(max_bytes)}, budget 30 s)")
    config = transfer.BenchmarkConfig(max_bytes=max_bytes, time_budget_s=30)
    result = transfer.run_transfer_benchmark(config)
    print(f"device: {result.device or 'none (CPU only)'}; {len(result.measurements)} measurements "
          f"in {result.elapsed_s:.2f} s; stop: {result.stop_reason or 'complete'}")  # fmt: skip
    print(f"{'path':<30} {'latency':>10} {'best GB/s':>10}  GB/s by size")
    for path in result.paths:
        rows = result.for_path(path)
        if not rows:
            continue
        by_size = " ".join(f"{m.gbps:.3g}" for m in rows)
        print(f"{path:<30} {result.latency_s(path) * 1e6:>8.2f}µs "
              f"{result.peak_gbps(path):>10.3g}  {by_size}")  # fmt: skip
    for reference in result.references:
        print(f"nominal {reference.code} {reference.params}: {reference.gbps:g} GB/s")
    if result.device is not None:
        pinned = result.peak_gbps(transfer.HOST_TO_DEVICE_PINNED)
        pageable = result.peak_gbps(transfer.HOST_TO_DEVICE_PAGEABLE)
        if pinned and pageable:
            print(f"pinned / pageable host→device, best: {pinned / pageable:.2f}×")
    return result


def guard_rails() -> list[str]:
    print("\n3. guard rails")
    failures = []
    config = transfer.BenchmarkConfig(
        max_bytes=transfer.GIB, time_budget_s=0.5, repeats=transfer.MAX_REPEATS, device="cpu"
    )
    result = transfer.run_transfer_benchmark(config)
    ok = result.elapsed_s <= config.time_budget_s + BUDGET_SLACK_S
    verdict = "ok" if ok else "MISSED"
    print(f"budget 0.5 s, asked 1 GiB: {result.elapsed_s:.2f} s, {len(result.measurements)} "
          f"measurements, stop: {result.stop_reason or 'complete'} {verdict}")  # fmt: skip
    if not ok:
        failures.append("time budget overrun")

    release, holding = threading.Event(), threading.Event()

    def hold(_progress: transfer.Progress) -> None:
        holding.set()
        release.wait(10)

    small = transfer.BenchmarkConfig(max_bytes=4096, time_budget_s=10, device="cpu")
    holder = threading.Thread(target=transfer.run_transfer_benchmark, args=(small, hold))
    holder.start()
    holding.wait(10)
    try:
        transfer.run_transfer_benchmark(small)
        refused = False
    except transfer.BenchmarkBusy as busy:
        refused = True
        print(f"second run while one holds the lock: refused, retry in {busy.retry_after_s} s ok")
    release.set()
    holder.join(10)
    if not refused:
        failures.append("lock did not refuse a second run")

    # The most repeats, so the largest sizes are still ahead when "stop" comes.
    job = transfer.BenchmarkJob.start(
        transfer.BenchmarkConfig(
            max_bytes=transfer.MAX_BYTES, time_budget_s=30, repeats=transfer.MAX_REPEATS,
            device="cpu",
        )
    )  # fmt: skip
    while not job.done and (job.progress is None or job.progress.size_bytes < transfer.MIB):
        time.sleep(0.001)
    asked = time.perf_counter()
    job.cancel()
    job.wait(10)
    took = time.perf_counter() - asked
    ok = job.done and took <= 1.0 and job.result is not None
    stop = job.result.stop_reason if job.result else job.error
    verdict = "ok" if ok else "MISSED"
    print(f"cancel: ended {took * 1e3:.0f} ms after the request, stop: {stop} {verdict}")
    if not ok:
        failures.append("cancel too slow")
    return failures


def memory() -> list[str]:
    print("\n4. memory of one press (asking for 1 GiB, every path this machine has)")
    budget = transfer.MEMORY_BUDGET_BYTES
    print(f"budget {fmt_bytes(budget)}: largest size {fmt_bytes(transfer.MAX_BYTES)} "
          f"({transfer.BUFFERS_AT_ONCE} buffers at a time)")  # fmt: skip
    tiny = transfer.BenchmarkConfig(max_bytes=4096, time_budget_s=10, repeats=1)
    transfer.run_transfer_benchmark(tiny)  # first use of the kernels (and the device context)
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")  # the kernel's peak RSS (VmHWM) starts again from now
    except OSError:
        print("cannot reset VmHWM here (not Linux, or not allowed): memory not measured")
        return []
    before = own_status_bytes("VmRSS") or 0
    config = transfer.BenchmarkConfig(max_bytes=transfer.GIB, time_budget_s=60)
    result = transfer.run_transfer_benchmark(config)
    peak, after = own_status_bytes("VmHWM") or 0, own_status_bytes("VmRSS") or 0
    rise = peak - before
    failures = []
    ok = rise <= RSS_RISE_TARGET and result.peak_bytes <= budget
    print(f"RSS {before / 1e6:.0f} MB before; peak rise {rise / 1e6:.1f} MB (target ≤ "
          f"{RSS_RISE_TARGET / 1e6:.0f} MB); {(after - before) / 1e6:.1f} MB left after; "
          f"buffers at most {fmt_bytes(result.peak_bytes)} (host "
          f"{fmt_bytes(result.peak_host_bytes)}) {'ok' if ok else 'MISSED'}")  # fmt: skip
    if not ok:
        failures.append("a press raised the server's memory by more than 200 MB")
    rows = result.for_path(transfer.CPU_TO_CPU)
    if len(rows) >= 3:
        best = max(m.gbps for m in rows)
        last, before_last = rows[-1].gbps, rows[-2].gbps
        flat = max(last, before_last) < 2 * min(last, before_last)
        plateau = flat and last < best and before_last < best
        verdict = "ok" if plateau else "(no plateau: a noisy machine, or caches this large)"
        print(f"CPU→CPU plateau: best {best:.3g} GB/s; {fmt_bytes(rows[-2].size_bytes)} "
              f"{before_last:.3g}, {fmt_bytes(rows[-1].size_bytes)} {last:.3g} GB/s "
              f"{verdict}")  # fmt: skip
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-mib", type=int, default=transfer.MAX_BYTES // transfer.MIB)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    max_bytes = min(args.max_mib * transfer.MIB, transfer.machine_size_cap())
    print(f"torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} threads, "
          f"accelerator: {available_accelerator() or 'none'}")  # fmt: skip
    typical = cpu_against_baselines(max_bytes, args.rounds)
    ok = typical <= OVERHEAD_TARGET
    print(f"median engine/loop time ratio over sizes: {typical:.2f} (target ≤ {OVERHEAD_TARGET}) "
          f"{'ok' if ok else 'MISSED'}")  # fmt: skip
    failures = [] if ok else ["engine timing adds overhead over a bare loop"]
    result = engine_run(max_bytes)
    if not result.measurements or any(m.gbps <= 0 for m in result.measurements):
        failures.append("engine run measured nothing")
    failures += guard_rails()
    failures += memory()
    print("\nall targets met" if not failures else f"\nMISSED: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
