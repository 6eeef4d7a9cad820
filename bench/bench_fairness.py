"""Fairness of the sandbox pool under a flood: ``python -m bench.bench_fairness [--runs N]``.

The red team's attack: ONE client (one laptop, one address) opens many fresh browser sessions,
each pasting a model that spins until the sandbox's time limit stops it (``--flood spin``, a
core busy for 10 s a job; or ``--flood sleep``), and submits again as soon as it is answered,
every submission from a session never seen before (a session costs nothing). Meanwhile an
honest visitor on ANOTHER client (another address) asks for an analysis of a small model, the
``net`` preset, through ``torchatlas.shapes.explore``, the page's own path, its rounds spread
over ``--spread-s`` seconds (several of the flood's jobs).

Prints the honest request's time on the idle pool and under the flood (both measured in this
run, on the same warm pool: idle requests before and after the flood make one baseline),
the flood's extra delay (median and p95 over the rounds), how the flooder's submissions were
answered and where the honest requests were queued. Exits 1 when the flood delays the honest
analysis by more than 3 s (p95) or it is ever answered "busy" (or "too many jobs").
"""

from __future__ import annotations

import argparse
import collections
import itertools
import statistics
import sys
import threading
import time

from bench import sandbox_jobs
from torchatlas.clients import Visitor
from torchatlas.presets import PRESETS
from torchatlas.sandbox import SandboxPool
from torchatlas.sandbox import pool as pool_module
from torchatlas.shapes import explore, parse_shapes, register_jobs

DELAY_TARGET_S = 3.0
FLOOD_TIMEOUT_S = 10  # the shape explorer's own limit for one analysis
FLOOD_CLIENT = "ip:192.0.2.66"  # the laptop: every flood session comes from here
HONEST_CLIENT = "ip:198.51.100.7"  # another machine
FLOOD_SOURCES = {
    "spin": "while True:\n    pass\n",
    "sleep": None,  # the benchmark's own job that sleeps
}
REFUSED = ("busy", "too_many_jobs")
PAUSE_S = 0.1  # between honest requests, in every condition alike (the spare child re-warms)


class Honest:
    """The honest client's requests: each from a fresh session of its own address."""

    def __init__(self) -> None:
        self.sessions = itertools.count()
        self.refused: list[str] = []

    def request(self, positions: list[int]) -> float:
        """One analysis of the default preset; seconds from call to report."""
        time.sleep(PAUSE_S)
        preset = PRESETS["net"]
        started = time.perf_counter()
        report = explore(
            preset.source,
            parse_shapes(preset.shapes),
            model=preset.model,
            timeout_s=10,
            visitor=Visitor(HONEST_CLIENT, f"honest-{next(self.sessions)}"),
            on_queued=positions.append,
        )
        elapsed = time.perf_counter() - started
        if report.error is not None:
            kind = str(report.error.kind)
            if kind in REFUSED:
                self.refused.append(f"{kind}: {report.error.message}")
            else:
                raise SystemExit(f"the honest analysis failed: {kind}: {report.error.message}")
        return elapsed


class Flood:
    """``threads`` threads of one client, each resubmitting as soon as it is answered, every
    submission from a fresh session."""

    def __init__(self, sandbox: SandboxPool, kind: str, threads: int) -> None:
        self.sandbox = sandbox
        self.kind = kind
        self.stop = threading.Event()
        self.answers: collections.Counter[str] = collections.Counter()
        self.refusal_s: list[float] = []
        self.lock = threading.Lock()
        self.sessions = itertools.count()
        self.threads = [
            threading.Thread(target=self._run, name=f"flood-{n}", daemon=True)
            for n in range(threads)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                visitor = Visitor(FLOOD_CLIENT, f"flood-{next(self.sessions)}")
            if self.kind == "sleep":
                result = self.sandbox.run_job(
                    "x = 1", sandbox_jobs.SLEEP, {"seconds": FLOOD_TIMEOUT_S},
                    timeout_s=FLOOD_TIMEOUT_S + 2, visitor=visitor,
                )  # fmt: skip
            else:
                result = self.sandbox.run_job(
                    FLOOD_SOURCES["spin"], sandbox_jobs.ECHO, {},
                    timeout_s=FLOOD_TIMEOUT_S, visitor=visitor,
                )  # fmt: skip
            answer = "ok" if result.ok else result.error.kind
            with self.lock:
                self.answers[answer] += 1
                if answer in REFUSED:
                    self.refusal_s.append(result.elapsed_s)
            if answer in REFUSED:
                time.sleep(0.02)  # a flooding browser sends again at once

    def running(self) -> bool:
        return self.sandbox._running >= 1

    def finish(self) -> None:
        self.stop.set()


def pool_for_bench() -> SandboxPool:
    """The page's pool (its jobs, its production limits) plus the benchmark's own jobs, all
    registered before it starts; except the rate limits: the flood must be held by the fair
    queue itself, not by the flooder's rate running out."""
    pool = SandboxPool(
        rate_limit=0,
        client_rate_limit=0,
        jobs=sandbox_jobs.JOBS,
        warm_up_requests=sandbox_jobs.WARM_UP,
    )
    return register_jobs(pool)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="honest requests per condition")
    parser.add_argument("--flood", choices=sorted(FLOOD_SOURCES), default="spin")
    parser.add_argument("--flood-sessions", type=int, default=12, help="flood threads")
    parser.add_argument(
        "--spread-s", type=float, default=30.0,
        help="the flooded rounds are spread over this long (several of the flood's 10 s jobs)",
    )  # fmt: skip
    args = parser.parse_args()

    sandbox = pool_for_bench()
    pool_module._POOL = sandbox  # explore() reaches it through get_pool(), as the page does
    started = time.perf_counter()
    sandbox.warm_up()
    print(
        f"pool: {sandbox.concurrency} slots, {sandbox.session_queue_limit} waiting per session, "
        f"{sandbox.queue_limit} waiting in all; warm-up {time.perf_counter() - started:.1f} s"
    )
    honest = Honest()
    positions: list[int] = []
    for _ in range(3):  # warm: the first requests pay one-off costs on both sides
        honest.request(positions)

    idle: list[float] = []
    half = (args.runs + 1) // 2
    for _ in range(half):
        idle.append(honest.request(positions))

    flood = Flood(sandbox, args.flood, args.flood_sessions)
    flood.start()
    deadline = time.monotonic() + 10
    while not flood.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # every flood thread has submitted
    flooded: list[float] = []
    flooded_positions: list[int] = []
    gap_s = args.spread_s / max(1, args.runs)
    for _ in range(args.runs):
        round_started = time.monotonic()
        flooded.append(honest.request(flooded_positions))
        time.sleep(max(0.0, gap_s - (time.monotonic() - round_started)))
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
        honest.request(positions)
    for _ in range(args.runs - half):
        idle.append(honest.request(positions))
    after.shutdown()

    idle_median = statistics.median(idle)
    delays = [elapsed - idle_median for elapsed in flooded]
    delay_median, delay_p95 = statistics.median(delays), _p95(delays)
    answers = ", ".join(f"{kind} {count}" for kind, count in sorted(flood.answers.items()))
    refusal = (
        f"; refusals answered in {statistics.median(flood.refusal_s) * 1000:.1f} ms (median)"
        if flood.refusal_s
        else ""
    )
    print(
        f"flood ({args.flood}, {args.flood_sessions} threads of one client, "
        f"{next(flood.sessions)} fresh sessions): {answers}{refusal}"
    )
    print(
        f"honest analysis of the 'net' preset (another client), {args.runs} rounds: "
        f"idle median {idle_median * 1000:.0f} ms "
        f"(before the flood {statistics.median(idle[:half]) * 1000:.0f} ms, "
        f"after {statistics.median(idle[half:]) * 1000:.0f} ms); "
        f"flooded median {statistics.median(flooded) * 1000:.0f} ms, "
        f"p95 {_p95(flooded) * 1000:.0f} ms"
    )
    print(
        f"delay from the flood: median {delay_median * 1000:.0f} ms, p95 {delay_p95 * 1000:.0f} ms "
        f"(target ≤ {DELAY_TARGET_S:g} s); honest answered busy: {len(honest.refused)}"
    )
    print(
        f"honest requests queued under the flood: {sum(1 for p in flooded_positions if p > 0)} "
        f"position reports {flooded_positions or '(none: a slot was always free)'}"
    )
    missed = []
    if delay_p95 > DELAY_TARGET_S:
        missed.append(f"p95 delay {delay_p95:.2f} s > {DELAY_TARGET_S:g} s")
    if honest.refused:
        missed.append(f"the honest client was refused {len(honest.refused)}×: {honest.refused[0]}")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
