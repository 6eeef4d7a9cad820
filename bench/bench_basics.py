"""Benchmark of the basics room against baselines measured in the same run.

    python -m bench.bench_basics [--rounds 30]

1. The full promotion table (12 tensor dtypes × 12 tensor, 12 0-dim and 4 Python-scalar
   operands: ``torch.result_type`` and the real ``+`` for each cell), built from scratch each
   round, median over rounds. Target: ≤ 50 ms (the issue's figure). Printed beside it, as
   ratios: the same number of bare ``torch.result_type`` calls, and of bare
   ``result_type`` + ``add`` pairs on the same operands (what the table cannot avoid doing).
   The page itself builds the table once per process.
2. Page rerun under AppTest, per section (through app.py's navigation, the section's default
   inputs), against a rerun of a trivial one-line page served by the same app shell
   (bench_strides' scratch shell), interleaved, medians. Target: each section ≤ 3×.

3. The contained path (no target: the figures a visitor's first, uncached answer pays): each
   of the room's sandbox jobs on its section's default input, against the same engine call
   in-process, medians. Cached answers (every rerun above) never reach the sandbox.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from bench.bench_strides import serve_like_a_server, shell_with_trivial_page
from bench.harness import open_page, timed
from torchatlas.basics import TABLE_COLUMNS, build_table
from torchatlas.basics.promotion import table_operand
from torchatlas.basics.quiz import Section

TABLE_TARGET_S = 0.050
PAGE_TARGET = 3.0


def table_against_bare_calls(rounds: int) -> tuple[float, float, float, int]:
    """Medians of (full table, bare result_type calls, bare result_type + add pairs)."""
    build_table()  # warm: torch's first calls of each kernel pay one-time setup
    rows = [table_operand(kind, dtype) for kind, dtype in TABLE_COLUMNS[:12]]
    columns = [table_operand(kind, dtype) for kind, dtype in TABLE_COLUMNS]
    cells = len(rows) * len(columns)

    def bare_result_type() -> None:
        for left in rows:
            for right in columns:
                torch.result_type(left, right)  # type: ignore[arg-type]

    def bare_pairs() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            for left in rows:
                for right in columns:
                    torch.result_type(left, right)  # type: ignore[arg-type]
                    with contextlib.suppress(RuntimeError, NotImplementedError):
                        torch.add(left, right)  # type: ignore[arg-type]

    table, bare, pairs = [], [], []
    for _ in range(rounds):  # interleaved: the machine is shared and noisy
        table.append(timed(build_table))
        bare.append(timed(bare_result_type))
        pairs.append(timed(bare_pairs))
    return statistics.median(table), statistics.median(bare), statistics.median(pairs), cells


def page_reruns(rounds: int) -> dict[str, float]:
    pages = {}
    for section in Section:
        page = open_page("views/basics.py", basics_section=section.value)
        assert not page.exception, [e.value for e in page.exception]
        pages[section.value] = page
    with tempfile.TemporaryDirectory() as scratch:
        runs = {**pages, "trivial_in_shell": shell_with_trivial_page(Path(scratch) / "shell")}
        for app in runs.values():
            app.run()
            app.run()
        assert [str(title.value) for title in runs["trivial_in_shell"].title] == ["Hello"]
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, app in runs.items():
                times[name].append(timed(app.run))
    for name, page in pages.items():
        assert not page.exception, (name, [e.value for e in page.exception])
    return {name: statistics.median(values) for name, values in times.items()}


def contained_against_in_process(rounds: int) -> dict[str, tuple[float, float]]:
    """Medians of (sandbox job, in-process engine call) per job, on the defaults."""
    from torchatlas.basics import (
        DTypeSpec,
        broadcast,
        einsum,
        index,
        parse_shape,
        parse_shapes,
        parse_value,
        promote,
        serialize,
    )
    from torchatlas.basics.jobs import REPLY_LIMITS, RETURNS
    from torchatlas.basics.link import LINK
    from torchatlas.sandboxed import run_room_job, shared_pool

    defaults = {LINK.session_key(item.name): item.default for item in LINK.fields}

    def field(key: str) -> str:
        return defaults[key]

    shapes = [list(s) for s in parse_shapes(field("basics_shapes"))]
    es = [list(s) for s in parse_shapes(field("basics_einsum_shapes"))]
    ishape = list(parse_shape(field("basics_index_shape")))
    sshape = list(parse_shape(field("basics_save_shape")))
    promote_params = {
        "left": field("basics_left"), "left_value": field("basics_left_value"),
        "right_kind": field("basics_right_kind"), "right": field("basics_right"),
        "right_value": field("basics_right_value"), "op": field("basics_op"),
    }  # fmt: skip
    cases = {
        "basics.promote": (promote_params, lambda: promote(
            DTypeSpec("tensor", field("basics_left"), parse_value(field("basics_left_value"))),
            DTypeSpec(field("basics_right_kind"), field("basics_right"),
                      parse_value(field("basics_right_value"))))),
        "basics.broadcast": ({"shapes": shapes}, lambda: broadcast(shapes)),
        "basics.einsum": ({"equation": field("basics_equation"), "shapes": es},
                          lambda: einsum(field("basics_equation"), es)),
        "basics.index": ({"shape": ishape, "expression": field("basics_index")},
                         lambda: index(ishape, field("basics_index"))),
        "basics.save": ({"shape": sshape, "view": field("basics_save_view"),
                         "dtype": field("basics_save_dtype")},
                        lambda: serialize(sshape, field("basics_save_view"),
                                          field("basics_save_dtype"))),
    }  # fmt: skip
    pool = shared_pool()
    pool.warm_up()
    out = {}
    for job, (params, local) in cases.items():
        local()

        def contained(job: str = job, params: dict = params) -> None:
            outcome = run_room_job(job, params, RETURNS[job], limits=REPLY_LIMITS, pool=pool)
            assert outcome.ok, (job, outcome.failure, outcome.refused)

        jobs, calls = [], []
        for _ in range(rounds):
            jobs.append(timed(contained))
            calls.append(timed(local))
        out[job] = statistics.median(jobs), statistics.median(calls)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    ms = 1000
    failed = False

    table, bare, pairs, cells = table_against_bare_calls(max(args.rounds, 20))
    print(f"1. promotion table, {cells} cells, built from scratch (median):")
    print(f"   full table:                          {table * ms:7.2f} ms "
          f"(target ≤ {TABLE_TARGET_S * ms:.0f} ms)")  # fmt: skip
    print(f"   {cells} bare torch.result_type calls:   {bare * ms:7.2f} ms "
          f"(table is {table / bare:.1f}×)")  # fmt: skip
    print(f"   {cells} bare result_type + add pairs:   {pairs * ms:7.2f} ms "
          f"(table is {table / pairs:.2f}×)")  # fmt: skip
    if table > TABLE_TARGET_S:
        print(f"FAIL: the table takes {table * ms:.1f} ms (target ≤ {TABLE_TARGET_S * ms:.0f} ms)")
        failed = True

    serve_like_a_server()
    medians = page_reruns(args.rounds)
    trivial = medians.pop("trivial_in_shell")
    print(f"\n2. page rerun (median of {args.rounds}), against a trivial one-line page "
          f"in the app shell ({trivial * ms:.1f} ms):")  # fmt: skip
    for name, seconds in medians.items():
        ratio = seconds / trivial
        print(f"   {name:<13} {seconds * ms:7.1f} ms   {ratio:5.2f}× (target ≤ {PAGE_TARGET}×)")
        if ratio > PAGE_TARGET:
            print(f"FAIL: the {name} section reruns in {ratio:.2f}× the trivial page")
            failed = True
    print("\n3. contained path: a fresh sandbox job vs the same engine call in-process (median):")
    for job, (contained, local) in contained_against_in_process(max(5, args.rounds // 3)).items():
        print(f"   {job:<17} {contained * ms:7.1f} ms job   {local * ms:7.2f} ms in-process "
              f"(fixed cost ≈ {(contained - local) * ms:.1f} ms)")  # fmt: skip
    if failed:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
