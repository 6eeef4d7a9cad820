"""Benchmark of the strides room against baselines measured in the same run.

    python -m bench.bench_strides [--rounds 15]

1. Page rerun under AppTest: the strides page (through app.py's navigation, a 64×64 float32
   tensor, a 10-op chain, an element selected) against a rerun of a trivial one-line page
   written to a temporary file. Reruns are interleaved and compared by median; target ≤ 3×.
   The app shell alone (app.py + the home page) is printed beside it for context.
2. ``trace()`` for that chain against running the same ops directly in torch (report only:
   trace also lists every element's storage cell and value, which the direct ops do not).

Exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

from tests.app.apptest import open_page
from torchatlas.strides import trace

PAGE_TARGET = 3.0
SHAPE = (64, 64)
CHAIN = [
    ".t()",
    ".contiguous()",
    ".view(64, 64)",
    ".unsqueeze(0)",
    ".squeeze(0)",
    "[:, ::2]",
    ".T",
    ".clone()",
    ".reshape(64, 32)",
    ".detach()",
]
SELECTED = (len(CHAIN), "element", 65)  # y10[2, 1]
TRIVIAL_PAGE = 'import streamlit as st\nst.write("Hello")\n'


def direct_ops(x: torch.Tensor) -> torch.Tensor:
    """The same chain written directly in torch."""
    y = x.t().contiguous().view(64, 64).unsqueeze(0).squeeze(0)[:, ::2].T.clone()
    return y.reshape(64, 32).detach()


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def page_reruns(rounds: int) -> tuple[float, float, float]:
    page = open_page(
        "views/strides.py",
        strides_shape=", ".join(map(str, SHAPE)),
        strides_ops="\n".join(CHAIN),
        strides_selection=SELECTED,
    )
    assert not page.exception, [e.value for e in page.exception]
    text = "\n".join(str(m.value) for m in page.success)
    assert "reads storage cell" in text, "the selected element is not shown"
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "trivial.py"
        script.write_text(TRIVIAL_PAGE)
        trivial = AppTest.from_file(str(script), default_timeout=60)
        trivial.run()
        shell = open_page("views/home.py")
        for warm in (page, trivial, shell):
            warm.run()
        page_s, trivial_s, shell_s = [], [], []
        for _ in range(rounds):  # interleaved: the machine is shared and noisy
            page_s.append(timed(page.run))
            trivial_s.append(timed(trivial.run))
            shell_s.append(timed(shell.run))
    assert not page.exception, [e.value for e in page.exception]
    return statistics.median(page_s), statistics.median(trivial_s), statistics.median(shell_s)


def trace_against_torch(rounds: int) -> tuple[float, float]:
    trace(SHAPE, "float32", CHAIN)
    traced = statistics.median(timed(lambda: trace(SHAPE, "float32", CHAIN)) for _ in range(rounds))
    x = torch.arange(64 * 64, dtype=torch.float32).reshape(SHAPE)

    def run_direct() -> None:
        for _ in range(100):
            direct_ops(x)

    direct = statistics.median(timed(run_direct) for _ in range(rounds)) / 100
    return traced, direct


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    ms = 1000
    page, trivial, shell = page_reruns(args.rounds)
    ratio = page / trivial
    print(f"strides page rerun (64×64, 10 ops, element selected): {page * ms:7.1f} ms")
    print(f"trivial one-line page rerun:                         {trivial * ms:7.1f} ms")
    print(f"app shell + home page rerun (context):               {shell * ms:7.1f} ms")
    print(f"ratio page / trivial: {ratio:.2f}× (target ≤ {PAGE_TARGET}×)")
    traced, direct = trace_against_torch(args.rounds)
    print(f"trace() of the chain: {traced * ms:.2f} ms; the same ops in torch: {direct * ms:.3f} ms"
          f" ({traced / direct:.0f}×: trace lists every element's cell and value)")  # fmt: skip
    if ratio > PAGE_TARGET:
        print(f"FAIL: page rerun is {ratio:.2f}× the trivial page (target ≤ {PAGE_TARGET}×)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
