"""Benchmark of the lessons' code questions (issue 33) against a room job measured in the same
run, on the process-wide sandbox pool as the pages use it.

    python -m bench.bench_code_answers [--runs 20] [--students 60] [--window-s 5]

1. One call at a time (a teacher saving a question, a student submitting alone), median of
   ``--runs``: ``compute_answer`` (a 4-line snippet, the shape ask, hints read from its other
   tensors), ``grade`` (the view exercise: shape and shares_storage checks, a values check
   with a reference taken from the setup, an assertion block) and, as the baseline, the
   strides room's chain job on a small chain (``strides.chain``: the same queue, child and
   reply path). Each call waits ``--settle-s`` first, so the pool's next spare child is ready
   as it is for a visitor who is not right behind another. Target: the answer computed
   ≤ 1 s after saving (the median of ``compute_answer``).
2. A class: ``--students`` threads, each a visitor of its own, submit one program each at
   moments spread evenly over ``--window-s`` seconds; the time from submit to verdict of
   each. Target: p95 ≤ 3 s. The same burst of baseline jobs runs first, for the ratio. A
   second burst has every student behind one school address (one client, many sessions:
   the pool's fair queue then shares slots between that client's sessions), for context.

Prints absolute times and ratios to the baseline; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable

from bench.harness import timed
from torchatlas.clients import Visitor
from torchatlas.lessons.code_questions import Ask, Check, compute_answer, grade
from torchatlas.sandboxed import run_room_job, shared_pool

ANSWER_TARGET_S = 1.0
CLASS_P95_TARGET_S = 3.0

SNIPPET = "x = torch.arange(12.)\ny = x.view(3, 4)\nz = y.t()\nw = z.contiguous()"
ASK = Ask("shape", "z")
SETUP = "x = torch.arange(12.)"
CHECKS = (
    Check("shape", "y", "(2, 6)"),
    Check("shares_storage", "y", "x"),
    Check("values_equal", "y", "x.view(2, 6)"),
    Check("assertions", "", "assert y.is_contiguous()"),
)
STUDENT = "y = x.view(2, 6)"


def _visitors(prefix: str) -> Callable[[], Visitor]:
    counter = iter(range(1_000_000))
    return lambda: Visitor.alone(f"{prefix}-{next(counter)}")


def _checked(name: str, outcome: object, ok: Callable[[object], bool]) -> None:
    if not ok(outcome):
        raise SystemExit(f"{name} failed: {outcome}")


def calls() -> dict[str, Callable[[Visitor], object]]:
    """name → one call as a visitor makes it (checked: a failure ends the benchmark)."""
    from torchatlas.strides.jobs import CHAIN, WireChain, checked_chain, plan_chain, wire_limits

    params = {"shape": [3, 4], "dtype": "float32", "listed_up_to": 4096,
              "ops": list(plan_chain([".t()", ".contiguous()"]).ops)}  # fmt: skip

    def baseline(visitor: Visitor) -> object:
        outcome = run_room_job(CHAIN, params, WireChain, visitor=visitor, limits=wire_limits(4096))
        _checked("strides.chain", outcome, lambda o: o.ok)  # type: ignore[attr-defined]
        return checked_chain(outcome.value)

    def answer(visitor: Visitor) -> object:
        outcome = compute_answer(SNIPPET, ASK, visitor=visitor)
        _checked("compute_answer", outcome, lambda o: o.ok and o.value.value == "(4, 3)")  # type: ignore[attr-defined]
        return outcome

    def graded(visitor: Visitor) -> object:
        outcome = grade(SETUP, STUDENT, CHECKS, visitor=visitor)
        _checked("grade", outcome, lambda o: o.ok and o.value.passed)  # type: ignore[attr-defined]
        return outcome

    return {"baseline (strides.chain)": baseline, "compute_answer": answer, "grade": graded}


def one_at_a_time(runs: int, settle_s: float) -> dict[str, float]:
    """The median seconds of each call, interleaved round by round."""
    samples: dict[str, list[float]] = {name: [] for name in calls()}
    visitor = _visitors("one")
    for call in calls().values():
        call(visitor())  # first touches, not timed
    for _ in range(runs):
        for name, call in calls().items():
            time.sleep(settle_s)
            samples[name].append(timed(lambda call=call: call(visitor())))
    return {name: statistics.median(values) for name, values in samples.items()}


def burst(call: Callable[[Visitor], object], students: int, window_s: float,
          visitor: Callable[[int], Visitor]) -> list[float]:  # fmt: skip
    """Seconds from submit to answer of each of ``students`` threads, submitting at moments
    spread evenly over ``window_s``."""
    latencies: list[float] = [0.0] * students
    errors: list[BaseException] = []
    start = time.perf_counter() + 0.2

    def student(index: int) -> None:
        time.sleep(max(0.0, start + index * window_s / students - time.perf_counter()))
        submitted = time.perf_counter()
        try:
            call(visitor(index))
        except BaseException as exc:  # a failed job: reported after the burst
            errors.append(exc)
        latencies[index] = time.perf_counter() - submitted

    threads = [threading.Thread(target=student, args=(i,)) for i in range(students)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} of {students} calls failed: {errors[0]}")
    return latencies


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--settle-s", type=float, default=0.3)
    args = parser.parse_args()
    pool = shared_pool()
    pool.warm_up(wait=True)
    missed = 0

    medians = one_at_a_time(args.runs, args.settle_s)
    base = medians["baseline (strides.chain)"]
    print(f"One call at a time, median of {args.runs}:")
    for name, value in medians.items():
        print(f"  {name:<26} {value * 1000:7.1f} ms   {value / base:5.2f}× baseline")
    ok = medians["compute_answer"] <= ANSWER_TARGET_S
    missed += not ok
    print(f"  answer after saving: {medians['compute_answer']:.3f} s "
          f"(target ≤ {ANSWER_TARGET_S:g} s) {'ok' if ok else 'MISSED'}")  # fmt: skip

    every = calls()

    def own(prefix: str) -> Callable[[int], Visitor]:
        return lambda index: Visitor.alone(f"{prefix}-{index}")

    print(f"\n{args.students} students submitting within {args.window_s:g} s "
          f"({pool.concurrency} sandbox slots):")  # fmt: skip
    results = {}
    for label, call, visitor in (
        ("baseline (strides.chain)", every["baseline (strides.chain)"], own("base")),
        ("grade, a visitor each", every["grade"], own("class")),
        ("grade, one school address", every["grade"],
         lambda index: Visitor("school", f"student-{index}")),
    ):  # fmt: skip
        time.sleep(1.0)  # the previous burst's children have exited
        latencies = burst(call, args.students, args.window_s, visitor)
        results[label] = latencies
        print(f"  {label:<26} p50 {statistics.median(latencies):6.3f} s   "
              f"p95 {_p95(latencies):6.3f} s   max {max(latencies):6.3f} s")  # fmt: skip
    p95 = _p95(results["grade, a visitor each"])
    ratio = p95 / _p95(results["baseline (strides.chain)"])
    ok = p95 <= CLASS_P95_TARGET_S
    missed += not ok
    print(f"  submit → verdict p95: {p95:.3f} s, {ratio:.2f}× the baseline burst's "
          f"(target ≤ {CLASS_P95_TARGET_S:g} s) {'ok' if ok else 'MISSED'}")  # fmt: skip
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
