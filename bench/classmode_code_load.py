"""Class mode with code answers: ``python -m bench.classmode_code_load [--students 60]
[--window-s 5] [--json PATH]``.

Starts ``streamlit run app.py`` on a fresh data folder (``bench/classroom.py``'s ``Server``),
saves a teacher's lesson with a *write the code* exercise (``y``, a (2, 6) view of ``x``)
through the engine, starts a class with it, moves to the exercise and opens it. Every student
is a browser tab of its own address (``bench/classroom_client.py``) that joins by the join
link and, within ``--window-s`` seconds of each other, writes code into the class bar's code
box and presses *Run and check*: a third pass (``y = x.view(2, 6)``), a third fail
(``y = x.clone().view(3, 4)``), a third raise (``y = x.view(5, 5)``), each with the student's
own comment, so every answer is graded in the sandbox (none from the cache of identical
answers).

Timed: ``verdict``, a press → that student's screen shows its verdict (graded in the
sandbox, on the server). Checked: every submission graded with the expected status, the
teacher's tally (read through the engine) exactly (passes, fails, errors) with RuntimeError as
the commonest error, no error or refusal on any page, the server tree's peak PSS.

Goals (issue 33): every submission graded; p95 verdict ≤ 3 s; the tally exact; peak PSS
≤ 2.0 GB; 0 errors. Exits 1 when a goal is missed, 2 when the measurement could not be made.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.classmode_load import (
    TreePss,
    _button,
    _refusal,
    open_page,
    p95,
    press,
    wait_for,
    warm,
)
from bench.classroom import Server
from bench.classroom_client import Student

GB = 1_000_000_000
GOALS = {"verdict_p95_s": 3.0, "peak_pss_bytes": 2.0 * GB}
ANSWERS = (
    ("pass", "y = x.view(2, 6)"),
    ("fail", "y = x.clone().view(3, 4)"),
    ("error", "y = x.view(5, 5)"),
)
LESSON = """note = "teacher"
minutes = 5

[en]
title = "A view by hand"
summary = "Write a view; torch checks it."

[[steps]]
room = "strides"

[steps.en]
title = "Your turn"
text = "Make a view."

[steps.question]
kind = "exercise"
setup = "x = torch.arange(12.)"
solution = "y = x.view(2, 6)"
checks = [
  { template = "shape", name = "y", expected = "(2, 6)" },
  { template = "shares_storage", name = "y", expected = "x" },
]

[steps.question.en]
prompt = "Make y, a (2, 6) view of x."
explain = "view copies nothing."
"""


@dataclass
class Figures:
    students: int
    verdict_s: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    tally: tuple[int, ...] = ()
    common_errors: tuple[tuple[str, int], ...] = ()
    baseline_pss: int = 0
    peak_pss: int = 0
    errors: list[str] = field(default_factory=list)
    aborted: str = ""


def shown_status(student: Student) -> str | None:
    """The verdict card's status on the student's screen (its title), else None."""
    from torchatlas.i18n import translate

    titles = {translate(f"kinds.exercise.status.{s}", "en"): s for s in ("pass", "fail", "error")}
    for node in student.find(kind="alert"):
        for title, status in titles.items():
            if f"**{title}**" in node.text() or node.text().startswith(title):
                return status
    return None


async def submit(student: Student, box: str, source: str, fig: Figures, expected: str) -> None:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    code_area = student.find(kind="text_area", key=f"{box}_code")
    if not code_area:
        fig.errors.append(f"student {student.index}: no code box")
        return
    typed = WidgetState(id=code_area[0].widget_id, string_value=source)
    started = time.perf_counter()
    if not await press(student, f"{box}_run", [typed]):
        fig.errors.append(f"student {student.index}: no Run and check button")
        return
    seconds, problem = await wait_for(student, lambda: shown_status(student) is not None,
                                      started, 60)  # fmt: skip
    if problem or seconds is None:
        fig.errors.append(f"student {student.index}: {problem}")
        return
    fig.verdict_s.append(seconds)
    status = shown_status(student) or ""
    fig.statuses[status] = fig.statuses.get(status, 0) + 1
    if status != expected:
        fig.errors.append(f"student {student.index}: {status!r}, expected {expected!r}")


async def join(student: Student, code: str, box: str) -> str | None:
    """Open the join link, type a nickname, press Join; the class is on the exercise, so the
    student lands on its room with the code box in the class bar."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    error = await open_page(
        student, f"class={code}", lambda: _button(student, "classmode_join_button") is not None
    )
    if error:
        return f"join page: {error}"
    boxes = student.find(kind="text_input", key="classmode_join_name")
    if not boxes:
        return "join page: no nickname box"
    name = WidgetState(id=boxes[0].widget_id, string_value=f"coder {student.index}")
    await press(student, "classmode_join_button", [name])
    _, error = await wait_for(
        student, lambda: bool(student.find(kind="text_area", key=f"{box}_code")),
        time.perf_counter(), 60,
    )  # fmt: skip
    return f"the code box: {error}" if error else None


async def run_class(base_url: str, url: str, args: argparse.Namespace, fig: Figures) -> None:
    from torchatlas.classmode import ClassStore
    from torchatlas.classmode.authored import ID_PREFIX, LessonStore

    saved = LessonStore(url).create(LESSON, client="bench-teacher")
    store = ClassStore(url)
    teacher = store.start(ID_PREFIX + saved.code.lower(), "en", client="bench-teacher")
    code, key = teacher.code, teacher.teacher_key
    store.move(code, key, step=1, room="strides", query={})
    store.ask(code, key)
    box = f"classmode_q_{code}_1"
    rng = random.Random(args.seed)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        pupils = [Student(base_url, i, pool) for i in range(args.students)]
        try:
            joined = await asyncio.gather(*(join(p, code, box) for p in pupils))
            for pupil, problem in zip(pupils, joined, strict=True):
                if problem:
                    fig.errors.append(f"student {pupil.index}: {problem}")

            async def answer(pupil: Student) -> None:
                await asyncio.sleep(rng.uniform(0, args.window_s))
                expected, source = ANSWERS[pupil.index % len(ANSWERS)]
                # Each student's own text (the same code): the server grades every one in the
                # sandbox, none answered from the cache of identical answers.
                await submit(pupil, box, f"{source}  # {pupil.index}", fig, expected)

            await asyncio.gather(*(answer(p) for p in pupils))
            tally = store.tally(code, key)
            fig.tally, fig.common_errors = tally.counts, tally.errors
            want = tuple(
                sum(1 for i in range(args.students) if ANSWERS[i % 3][0] == status)
                for status in ("pass", "fail", "error")
            )
            if tally.counts != want:
                fig.errors.append(f"tally {tally.counts}, expected {want}")
            for pupil in pupils:
                problem = _refusal(pupil)
                if problem:
                    fig.errors.append(f"student {pupil.index}: {problem}")
        finally:
            await asyncio.gather(*(p.close() for p in pupils), return_exceptions=True)


def run(args: argparse.Namespace) -> Figures:
    import os

    fig = Figures(args.students)
    with tempfile.TemporaryDirectory(prefix="classmode-code-") as folder:
        saved = os.environ.get("ATLAS_DATA_DIR")
        os.environ["ATLAS_DATA_DIR"] = folder
        os.environ.pop("ATLAS_DATABASE_URL", None)
        server = Server(0, Path(folder) / "server.log")
        try:
            server.start(time.monotonic() + 300)
            asyncio.run(warm(server.url))
            fig.baseline_pss = TreePss([server]).settled()
            url = f"sqlite:///{folder}/classes.sqlite3"
            with TreePss([server]) as sampler:
                asyncio.run(run_class(server.url, url, args, fig))
            fig.peak_pss = sampler.peak
        except Exception as error:  # a lost server or connection ends the run, reported
            fig.aborted = f"{type(error).__name__}: {error}"[:500]
        finally:
            server.stop()
            _, last = server.tracebacks()
            if last:
                fig.errors.append(f"server traceback: {last}")
            if saved is None:
                os.environ.pop("ATLAS_DATA_DIR", None)
            else:
                os.environ["ATLAS_DATA_DIR"] = saved
    return fig


def missed(fig: Figures) -> list[str]:
    out = []
    if len(fig.verdict_s) != fig.students:
        out.append(f"{len(fig.verdict_s)} of {fig.students} submissions graded")
    if fig.verdict_s and p95(fig.verdict_s) > GOALS["verdict_p95_s"]:
        out.append(f"verdict p95 {p95(fig.verdict_s):.2f} s > {GOALS['verdict_p95_s']} s")
    if fig.peak_pss > GOALS["peak_pss_bytes"]:
        out.append(f"peak PSS {fig.peak_pss / GB:.2f} GB > 2.0 GB")
    if fig.errors:
        out.append(f"{len(fig.errors)} errors, first: {fig.errors[0]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    fig = run(args)
    if fig.aborted:
        print(f"aborted: {fig.aborted}", file=sys.stderr)
        return 2
    values = sorted(fig.verdict_s)
    print(f"students {fig.students}; graded {len(values)}; statuses {fig.statuses}")
    if values:
        print(f"submit → verdict: median {values[len(values) // 2]:.2f} s, "
              f"p95 {p95(values):.2f} s, max {values[-1]:.2f} s")  # fmt: skip
    print(f"tally (pass, fail, error) {fig.tally}; commonest errors {fig.common_errors}")
    print(f"server tree PSS: baseline {fig.baseline_pss / 1e6:.0f} MB, "
          f"peak {fig.peak_pss / 1e6:.0f} MB")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(fig), indent=2))
    problems = missed(fig)
    for problem in problems:
        print(f"MISSED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
