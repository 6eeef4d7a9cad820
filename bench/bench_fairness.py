"""Fairness of the sandbox pool under a flood: ``python -m bench.bench_fairness [--runs N]``.

One session floods the pool from several threads: each submits a job whose pasted code spins
until the page's time limit stops it (``--flood spin``, a core busy for 10 s a job) or sleeps
(``--flood sleep``), and submits again as soon as it is answered. Meanwhile other sessions
(one per request, as students are) ask for an honest analysis of a small model, the ``net``
preset, through ``torchatlas.shapes.explore``, the page's own path.

Prints the median of the honest request on the idle pool and under the flood (measured in the
same run, on the same warm pool, honest requests on the idle pool before and after the flood
interleaved into one baseline), their ratio, how the flooder's submissions were answered and
where the honest requests were queued. Exits 1 when the flooded median is more than 3× the
idle one, or 3 s or more (issue 11's target).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import threading
import time

from bench import sandbox_jobs
from torchatlas.presets import PRESETS
from torchatlas.sandbox import SandboxPool
from torchatlas.sandbox import pool as pool_module
from torchatlas.shapes import explore, parse_shapes, register_jobs

RATIO_TARGET = 3.0
SECONDS_TARGET = 3.0
FLOOD_TIMEOUT_S = 10  # the shape explorer's own limit for one analysis
FLOOD_SOURCES = {
    "spin": "while True:\n    pass\n",
    "sleep": None,  # the benchmark's own job that sleeps
}


PAUSE_S = 0.1  # between honest requests, in every condition alike (the spare child re-warms)


def honest_request(index: int, positions: list[int]) -> float:
    """One student's analysis of the default preset; seconds from call to report."""
    time.sleep(PAUSE_S)
    preset = PRESETS["net"]
    started = time.perf_counter()
    report = explore(
        preset.source,
        parse_shapes(preset.shapes),
        model=preset.model,
        timeout_s=10,
        session_id=f"student-{index}",
        on_queued=positions.append,
    )
    elapsed = time.perf_counter() - started
    if report.error is not None:
        raise SystemExit(f"the honest analysis failed: {report.error.kind}: {report.error.message}")
    return elapsed


class Flood:
    """``threads`` threads of one session, each resubmitting as soon as it is answered."""

    def __init__(self, sandbox: SandboxPool, kind: str, threads: int) -> None:
        self.sandbox = sandbox
        self.kind = kind
        self.stop = threading.Event()
        self.answers: collections.Counter[str] = collections.Counter()
        self.refusal_s: list[float] = []
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, name=f"flood-{n}", daemon=True)
            for n in range(threads)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.kind == "sleep":
                result = self.sandbox.run_job(
                    "x = 1", sandbox_jobs.SLEEP, {"seconds": FLOOD_TIMEOUT_S},
                    timeout_s=FLOOD_TIMEOUT_S + 2, session_id="flooder",
                )  # fmt: skip
            else:
                result = self.sandbox.run_job(
                    FLOOD_SOURCES["spin"], sandbox_jobs.ECHO, {},
                    timeout_s=FLOOD_TIMEOUT_S, session_id="flooder",
                )  # fmt: skip
            answer = "ok" if result.ok else result.error.kind
            with self.lock:
                self.answers[answer] += 1
                if answer in ("too_many_jobs", "busy"):
                    self.refusal_s.append(result.elapsed_s)
            if answer in ("too_many_jobs", "busy"):
                time.sleep(0.02)  # a flooding browser sends again at once

    def running(self) -> bool:
        return self.sandbox._running >= 1

    def finish(self) -> None:
        self.stop.set()


def pool_for_bench() -> SandboxPool:
    """The page's pool (its jobs, its production limits) plus the benchmark's own jobs, all
    registered before it starts; except the per-session rate limit: the flood must be held by
    the fair queue itself, not by the flooder's rate running out."""
    pool = SandboxPool(rate_limit=0, jobs=sandbox_jobs.JOBS, warm_up_requests=sandbox_jobs.WARM_UP)
    return register_jobs(pool)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="honest requests per condition")
    parser.add_argument("--flood", choices=sorted(FLOOD_SOURCES), default="spin")
    parser.add_argument("--flood-threads", type=int, default=6)
    args = parser.parse_args()

    sandbox = pool_for_bench()
    pool_module._POOL = sandbox  # explore() reaches it through get_pool(), as the page does
    started = time.perf_counter()
    sandbox.warm_up()
    print(
        f"pool: {sandbox.concurrency} slots, {sandbox.session_queue_limit} waiting per session, "
        f"{sandbox.queue_limit} waiting in all; warm-up {time.perf_counter() - started:.1f} s"
    )
    positions: list[int] = []
    index = 0
    for _ in range(3):  # warm: the first requests pay one-off costs on both sides
        honest_request(index, positions)
        index += 1

    idle: list[float] = []
    half = (args.runs + 1) // 2
    for _ in range(half):
        idle.append(honest_request(index, positions))
        index += 1

    flood = Flood(sandbox, args.flood, args.flood_threads)
    flood.start()
    deadline = time.monotonic() + 10
    while not flood.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # every flood thread has submitted: one job runs, two wait, the rest refused
    flooded: list[float] = []
    flooded_positions: list[int] = []
    for _ in range(args.runs):
        flooded.append(honest_request(index, flooded_positions))
        index += 1
    flood.finish()
    sandbox.shutdown()  # ends the flood's running and waiting jobs at once
    for thread in flood.threads:
        thread.join(timeout=FLOOD_TIMEOUT_S + 10)

    # The same request on an idle pool again, after the flood (a fresh pool: the old one's
    # zygote was stopped to end the flood), completes the baseline.
    after = pool_for_bench()
    pool_module._POOL = after
    after.warm_up()
    for _ in range(3):
        honest_request(index, positions)
        index += 1
    for _ in range(args.runs - half):
        idle.append(honest_request(index, positions))
        index += 1
    after.shutdown()

    idle_median = statistics.median(idle)
    before, after_flood = statistics.median(idle[:half]), statistics.median(idle[half:])
    flooded_median = statistics.median(flooded)
    ratio = flooded_median / idle_median
    answers = ", ".join(f"{kind} {count}" for kind, count in sorted(flood.answers.items()))
    refusal = (
        f"; refusals answered in {statistics.median(flood.refusal_s) * 1000:.1f} ms (median)"
        if flood.refusal_s
        else ""
    )
    print(f"flood ({args.flood}, {args.flood_threads} threads of one session): {answers}{refusal}")
    print(
        f"honest analysis of the 'net' preset   idle {idle_median * 1000:7.1f} ms   "
        f"flooded {flooded_median * 1000:7.1f} ms   ratio {ratio:.2f}× "
        f"(target ≤ {RATIO_TARGET}×, and < {SECONDS_TARGET:g} s)"
    )
    print(
        f"idle baseline: {before * 1000:.1f} ms before the flood, "
        f"{after_flood * 1000:.1f} ms after it (medians)"
    )
    print(
        f"honest requests queued under the flood: {sum(1 for p in flooded_positions if p > 0)} "
        f"position reports {flooded_positions or '(none: a slot was always free)'}"
    )
    missed = []
    if ratio > RATIO_TARGET:
        missed.append(f"ratio {ratio:.2f}× > {RATIO_TARGET}×")
    if flooded_median >= SECONDS_TARGET:
        missed.append(f"flooded median {flooded_median:.2f} s ≥ {SECONDS_TARGET} s")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
