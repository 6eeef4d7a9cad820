"""Benchmark of the autograd room against baselines measured in the same run.

    python -m bench.bench_autograd [--rounds 30]

1. Engine: tracing and the full backward record of a 50-operation program
   (``trace_and_backward``: parse, run, read every variable and node, backward with a hook on
   every node, every .grad) against the same program as plain PyTorch (the room's own
   generated code, compiled once) run forward and backward with a hook on every node.
   Target ≤ 3× for the median of per-round ratios of this thread's CPU time (rounds
   interleaved, each timing a few calls of both; wall-clock figures printed beside: on a
   shared machine they include waits for a core). The public pair ``trace()`` then
   ``backward()`` (which runs the program twice: a Graph holds no tensors) is printed beside.
2. Page rerun under AppTest while stepping: the autograd page (through app.py's navigation,
   the MLP example, a different backward step before each rerun) against a rerun of a
   trivial one-line page served by the same app shell. Target ≤ 3×, medians of interleaved
   reruns; a bare one-line script outside the shell is printed for context.
The contained path (this program as the sandbox job ``autograd.run`` against ``run_program``
in this process) is timed by ``python -m bench.bench_contained``, beside a strides chain's.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from streamlit.testing.v1 import AppTest

from bench.bench_strides import TRIVIAL_PAGE, serve_like_a_server, shell_with_trivial_page
from bench.harness import open_page, timed
from torchatlas.autograd import backward, parse, python_code, trace, trace_and_backward

ENGINE_TARGET = 3.0
PAGE_TARGET = 3.0


def fifty_op_program() -> str:
    lines = [
        "x = randn(8, 8)",
        "w = randn(8, 8, requires_grad=True)",
        "b = zeros(8, requires_grad=True)",
        "h = x @ w + b",
    ]
    for i in range(11):
        lines.append(f"h = (h * 0.5 + {i}).tanh() - h.sigmoid()")
    lines.append("loss = (h * h).mean()")
    return "\n".join(lines) + "\n"


def bare_torch(code: Any) -> None:
    """The same program in plain torch, forward then backward, a hook on every node."""
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the room's own generated code, never user text
    loss = namespace["loss"]
    record: list[Any] = []
    seen, stack = set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        fn.register_hook(
            lambda grad_inputs, grad_outputs: record.append((grad_inputs, grad_outputs))
        )
        stack.extend(n for n, _ in fn.next_functions)
    loss.backward()
    assert len(record) == len(seen)


def thread_cpu(function: Any) -> float:
    """Seconds of this thread's CPU time one call of ``function`` takes. The engine and its
    baseline run on this thread alone (torch set to one thread), so CPU time counts their
    work and not the time spent waiting for a core on a shared machine, which would weigh
    on the more Python-heavy side more than on the other."""
    started = time.thread_time()
    function()
    return time.thread_time() - started


def engine(rounds: int, calls: int = 5) -> dict[str, float]:
    """Medians over interleaved rounds (each timing ``calls`` calls of each), in this
    thread's CPU time and in wall-clock time, and the median of the per-round CPU ratios."""
    program = fifty_op_program()
    parsed = parse(program)
    code = compile(python_code(parsed, seed=0), "<bench>", "exec")
    graph, result = trace_and_backward(program)
    assert graph.error is None and result is not None and result.error is None
    samples: dict[str, list[float]] = {
        name: [] for name in ("engine", "bare", "pair", "engine_wall", "bare_wall", "ratio")
    }

    def repeat(function: Any, clock: Any = thread_cpu) -> float:
        return clock(lambda: [function() for _ in range(calls)]) / calls

    def run_engine() -> object:
        return trace_and_backward(program)

    def run_bare() -> None:
        bare_torch(code)

    for _ in range(rounds):
        engine_s, bare_s = repeat(run_engine), repeat(run_bare)
        samples["engine"].append(engine_s)
        samples["bare"].append(bare_s)
        samples["ratio"].append(engine_s / bare_s)
        samples["pair"].append(repeat(lambda: backward(trace(program), "loss")))
        samples["engine_wall"].append(repeat(run_engine, timed))
        samples["bare_wall"].append(repeat(run_bare, timed))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    medians["ops"], medians["steps"] = parsed.ops, len(result.steps)
    return medians


def page_reruns(rounds: int) -> dict[str, float]:
    page = open_page("views/autograd.py")
    page.selectbox(key="autograd_example").set_value("mlp").run()
    assert not page.exception, [e.value for e in page.exception]
    total = 10
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "bare").mkdir()
        script = folder / "bare" / "trivial.py"
        script.write_text(TRIVIAL_PAGE)
        runs = {
            "page": page,
            "trivial_in_shell": shell_with_trivial_page(folder / "shell"),
            "trivial_bare": AppTest.from_file(str(script), default_timeout=60),
        }
        for step in range(total + 1):  # every step's drawing once, as a visitor would
            page.session_state["autograd_step"] = step
            page.run()
        for app in runs.values():
            app.run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for index in range(rounds):
            page.session_state["autograd_step"] = index % (total + 1)
            for name, app in runs.items():
                times[name].append(timed(app.run))
        assert not page.exception, [e.value for e in page.exception]
        assert page.session_state["autograd_step"] == (rounds - 1) % (total + 1)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    ms = 1000
    torch.set_num_threads(1)  # small tensors: threads only add noise on a shared machine
    figures = engine(args.rounds)
    engine_ratio = figures["ratio"]
    ops, steps = figures["ops"], figures["steps"]
    print(f"1. a {ops:.0f}-operation program, {steps:.0f} backward steps recorded"
          " (this thread's CPU time; wall clock in brackets)")  # fmt: skip
    print(f"   trace_and_backward (trace + full backward record):  {figures['engine'] * ms:6.2f} ms"
          f" ({figures['engine_wall'] * ms:.2f} ms)")  # fmt: skip
    print(f"   plain torch forward + backward, hook on every node: {figures['bare'] * ms:6.2f} ms"
          f" ({figures['bare_wall'] * ms:.2f} ms)")  # fmt: skip
    print(f"   trace() then backward() (program run twice):        {figures['pair'] * ms:6.2f} ms"
          f" ({figures['pair'] / figures['bare']:.2f}×)")  # fmt: skip
    print(f"   median of per-round ratios: {engine_ratio:.2f}× (target ≤ {ENGINE_TARGET}×); "
          f"wall clock {figures['engine_wall'] / figures['bare_wall']:.2f}×")  # fmt: skip
    serve_like_a_server()
    medians = page_reruns(args.rounds)
    page, trivial = medians["page"], medians["trivial_in_shell"]
    page_ratio = page / trivial
    print("2. page rerun while stepping (MLP example, a new step before each rerun)")
    print(f"   autograd page:                       {page * ms:7.1f} ms")
    print(f"   trivial one-line page in the shell:  {trivial * ms:7.1f} ms")
    print(f"   bare one-line script (context):      {medians['trivial_bare'] * ms:7.1f} ms")
    print(f"   ratio: {page_ratio:.2f}× (target ≤ {PAGE_TARGET}×)")
    failed = False
    if engine_ratio > ENGINE_TARGET:
        print(f"FAIL: engine is {engine_ratio:.2f}× plain torch (target ≤ {ENGINE_TARGET}×)")
        failed = True
    if page_ratio > PAGE_TARGET:
        print(f"FAIL: page rerun is {page_ratio:.2f}× the trivial page (target ≤ {PAGE_TARGET}×)")
        failed = True
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
