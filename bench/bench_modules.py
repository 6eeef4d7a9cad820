"""Benchmark of the nn.Module room against baselines measured in the same run.

    python -m bench.bench_modules [--rounds 15] [--page-rounds 20]

1. ``inspect_module`` through the sandbox vs the shape explorer's ``explore()`` of the same
   model, on the same process-wide pool (every room's jobs registered), interleaved, medians,
   both reports caches emptied before every call so each call runs a job. Models: torchvision
   ResNet-18 and the shape explorer's LeNet-style preset. Target: inspect ≤ 1.5× explore.
2. 100 training steps of MyLinear(3, 2) with full recording (``train_steps``: every loss,
   every parameter's value and gradient before and after each step) vs the bare loop a
   tutorial writes (same model, data and optimiser; it reads each loss with ``.item()``).
   Target: ≤ 3×.
3. Training through the sandbox (``train_contained``, job ``modules.train``: the run the
   page's controls or a link choose) vs the same run in this process (``train_steps``), for
   100 steps of MyLinear(3, 2) and 500 steps of the MLP, interleaved, a different seed each
   round (nothing cached). Target: contained ≤ 3× in-process plus the sandbox's fixed cost
   per job (measured here with a 1-step run).
4. The page's rerun under AppTest, each section (the room shows one at a time; the default
   preset inspected, the training run drawn, ...) vs a rerun of a trivial one-line page in the
   same app shell, interleaved, medians. Target: every section ≤ 3×.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

from bench.bench_strides import serve_like_a_server, shell_with_trivial_page
from bench.harness import open_page, timed

INSPECT_TARGET = 1.5
TRAINING_TARGET = 3.0
CONTAINED_TARGET = 3.0
PAGE_TARGET = 3.0
RESNET18 = "import torch\nfrom torchvision.models import resnet18\n"


def inspect_against_explore(rounds: int) -> dict[str, tuple[float, float]]:
    import torchatlas.modules as modules
    from torchatlas.presets import PRESETS
    from torchatlas.sandboxed import shared_pool
    from torchatlas.shapes import explore, parse_shapes

    pool = shared_pool()
    pool.warm_up()
    lenet = PRESETS["net"]
    cases = {
        "ResNet-18": (RESNET18, "resnet18()", [[1, 3, 224, 224]]),
        "LeNet preset": (lenet.source, lenet.model, parse_shapes(lenet.shapes)),
    }
    results = {}
    for name, (source, model, input_shapes) in cases.items():

        def run_inspect(source: str = source, model: str = model) -> None:
            report = modules.inspect_module(source, model=model, timeout_s=60)
            assert report.error is None, report.error

        def run_explore(source: str = source, model: str = model, shapes_=input_shapes) -> None:
            report = explore(source, shapes_, model=model, timeout_s=60)
            assert report.error is None, report.error

        for _ in range(2):  # warm: first jobs pay one-off costs in the children
            run_inspect()
            run_explore()
        inspect_s, explore_s = [], []
        for _ in range(rounds):  # interleaved: the machine is shared and noisy
            inspect_s.append(timed(run_inspect))
            explore_s.append(timed(run_explore))
        results[name] = (statistics.median(inspect_s), statistics.median(explore_s))
    return results


def training_against_bare_loop(rounds: int) -> tuple[float, float]:
    from torchatlas.modules import train_steps
    from torchatlas.modules.training import build_model, dataset

    def bare_loop() -> None:
        model = build_model("mylinear")
        x, y = dataset()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss_fn = nn.MSELoss()
        for _ in range(100):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss.item()

    def recorded() -> None:
        trace = train_steps("mylinear", lr=0.1, steps=100)
        assert len(trace.steps) == 100

    for _ in range(3):
        bare_loop()
        recorded()
    bare, full = [], []
    for _ in range(rounds):
        bare.append(timed(bare_loop))
        full.append(timed(recorded))
    return statistics.median(full), statistics.median(bare)


def contained_training(rounds: int) -> tuple[float, dict[str, tuple[float, float]]]:
    from torchatlas.modules import train_contained, train_steps
    from torchatlas.sandboxed import shared_pool

    shared_pool().warm_up()
    cases = {"MyLinear 100": ("mylinear", 100), "MLP 500": ("mlp", 500)}

    def contained(model: str, steps: int, seed: int) -> None:
        job = train_contained(model, lr=0.1, steps=steps, seed=seed, timeout_s=30)
        assert job.ok and len(job.value.steps) == steps, job.failure

    for _ in range(2):
        contained("mylinear", 1, 0)
    fixed = statistics.median(timed(lambda s=s: contained("mylinear", 1, s)) for s in range(rounds))
    results = {}
    for name, (model, steps) in cases.items():
        inside, here = [], []
        for seed in range(rounds):
            inside.append(timed(lambda m=model, n=steps, s=seed: contained(m, n, s + 1)))
            here.append(
                timed(lambda m=model, n=steps, s=seed: train_steps(m, lr=0.1, steps=n, seed=s + 1))
            )
        results[name] = (statistics.median(inside), statistics.median(here))
    return fixed, results


def page_reruns(rounds: int) -> tuple[dict[str, float], float]:
    from components.modules.state import SECTIONS

    pages = {}
    for section in SECTIONS:
        page = open_page("views/modules.py", modules_section=section)
        assert not page.exception, [e.value for e in page.exception]
        pages[section] = page
    assert pages["train"].get("plotly_chart"), "the loss curve is not drawn"
    with tempfile.TemporaryDirectory() as scratch:
        runs = {**pages, "trivial": shell_with_trivial_page(Path(scratch) / "shell")}
        for app in runs.values():
            app.run()
            app.run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):  # interleaved: the machine is shared and noisy
            for name, app in runs.items():
                times[name].append(timed(app.run))
    for name, page in pages.items():
        assert not page.exception, (name, [e.value for e in page.exception])
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {name: medians[name] for name in pages}, medians["trivial"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--page-rounds", type=int, default=20)
    args = parser.parse_args()
    ms = 1000
    failures = []

    print("1. inspect_module vs explore(), same pool, medians of interleaved rounds")
    for name, (inspect_s, explore_s) in inspect_against_explore(args.rounds).items():
        ratio = inspect_s / explore_s
        print(f"   {name:<13} inspect {inspect_s * ms:7.1f} ms  explore {explore_s * ms:7.1f} ms"
              f"  ratio {ratio:.2f} (target ≤ {INSPECT_TARGET})")  # fmt: skip
        if ratio > INSPECT_TARGET:
            failures.append(f"inspect/explore on {name}: {ratio:.2f}")

    full, bare = training_against_bare_loop(args.rounds)
    ratio = full / bare
    print("2. 100 steps of MyLinear(3, 2)")
    print(f"   train_steps (full recording) {full * ms:7.1f} ms  bare loop {bare * ms:7.1f} ms"
          f"  ratio {ratio:.2f} (target ≤ {TRAINING_TARGET})")  # fmt: skip
    if ratio > TRAINING_TARGET:
        failures.append(f"training recording: {ratio:.2f}")

    fixed, runs = contained_training(args.rounds)
    print(
        f"3. training in a sandbox job vs in this process; fixed cost per job {fixed * ms:.1f} ms"
    )
    for name, (inside, here) in runs.items():
        ratio = (inside - fixed) / here
        print(f"   {name:<13} contained {inside * ms:7.1f} ms  in-process {here * ms:7.1f} ms"
              f"  ratio less fixed cost {ratio:.2f} (target ≤ {CONTAINED_TARGET})")  # fmt: skip
        if ratio > CONTAINED_TARGET:
            failures.append(f"contained training {name}: {ratio:.2f}")

    serve_like_a_server()
    sections, trivial = page_reruns(args.page_rounds)
    print(f"4. page rerun under AppTest, per section; trivial page {trivial * ms:.1f} ms")
    for name, seconds in sections.items():
        ratio = seconds / trivial
        print(f"   {name:<8} {seconds * ms:7.1f} ms  ratio {ratio:.2f} (target ≤ {PAGE_TARGET})")
        if ratio > PAGE_TARGET:
            failures.append(f"page rerun of {name}: {ratio:.2f}")

    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("OK: every target met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
