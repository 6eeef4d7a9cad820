"""A class of students against one server: ``python -m bench.classroom [--students 30]
[--rounds 2] [--mode mixed|all-analyse|all-classify-same|all-upload|all] [--rooms a,b]
[--settle-s 120]``. This module is the command; its parts, by role:

- ``bench/server.py``: starts ``streamlit run app.py`` on a free loopback port (the e2e tests
  start their server with it too) and stops it and every process it started;
- ``bench/classroom_client.py``: N clients that speak Streamlit's own websocket protocol as
  the browser does (the XSRF cookie, the ``/_stcore/stream`` websocket, widget states in
  ``rerun_script`` messages, uploads, the polling of ``run_every`` fragments);
- ``bench/classroom_rooms.py``: the seven rooms and their actions (basics: a section picked,
  then an input changed in each of its five sections; strides: a chart click; autograd: an
  example run, a step of backward, all steps; modules: a preset inspected, a training run, a
  training step; shapes: Analyse; classify: a sample, an upload; devices: a demonstration, the
  benchmark);
- ``bench/classroom_scenarios.py``: the modes. ``mixed`` spreads the students over the seven
  rooms (student i in room i mod 7), each doing every action of its room with a short pause
  between them; ``all-analyse``, ``all-classify-same`` and ``all-upload`` put everyone in one
  room and, once all have opened it, have them act within about a second. ``all`` runs the four
  modes one after another, each on a freshly started server. ``--rooms`` limits a mixed class
  to some rooms (a smoke run; the goal of a mixed class needs all seven). ``flood`` runs a
  mixed class twice on one server: alone, then while one laptop (one address, many fresh
  sessions) floods the sandbox with models that run until it stops them; the honest actions'
  p95 must stay within noise of the first run's, with no error and no "busy";
- ``bench/memory.py``: the proportional set size (PSS) of the server and all its descendants
  (the sandbox's workers included), summed from ``/proc/<pid>/smaps_rollup`` every half second;
- ``bench/classroom_report.py``: the statistics, the goals (``GOALS``) and the report.

Each student action is timed from the moment its message is sent until a script run that
finished after it shows the action's result; an exception, an error element, a "busy"
warning, a run that ends without the result, or a timeout is an error. Memory: ``baseline`` is
taken after a first visitor has opened every room and left, before the class arrives;
``settled`` once every student has closed their connection and ``--settle-s`` have passed.
The first visitor's own timings (a shape analysis and a classification, both asked for the
moment the server answers its health check) are printed too.

The clients run on the same machine as the server and take some of its CPU: compare figures
from the same machine and the same tool. Everything is bounded: students, rounds, each action
(a timeout), each mode and the whole run (a deadline); only 127.0.0.1 is contacted, and every
process started is stopped at the end, on an error or Ctrl-C. Exits 1 when a goal of issues 13
and 21 is missed, 2 when the measurement itself could not be made.

Another scenario tool is reached through this command: ``--mode <name>`` for a name in
:data:`EXTRA_MODES` hands the whole command line to that module's ``main(argv) -> int`` when
the module exists (``--mode class``: ``bench/classmode_load.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib
import importlib.util
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.classroom_client import Student, plotly_click
from bench.classroom_report import (
    MB,
    MemoryFigures,
    ModeResult,
    check_goals,
    format_result,
    mb_text,
    percentile,
    result_json,
    summarize,
)
from bench.classroom_rooms import ROOMS, Outcome, every_action, read_catalog
from bench.classroom_scenarios import MODES, FloodCount, Plan, first_visit, run_class, warm_up
from bench.memory import PssSampler, process_tree, pss_bytes, settled_pss, tree_pss_bytes
from bench.server import ROOT, Server

# The parts' public names, reachable from the command's module as before the split
# (bench/classmode_load.py and the tool's tests import them from here).
__all__ = [
    "EXTRA_MODES",
    "MB",
    "MODES",
    "ROOMS",
    "MemoryFigures",
    "ModeResult",
    "Outcome",
    "Server",
    "Student",
    "check_goals",
    "describe_checkout",
    "every_action",
    "format_result",
    "main",
    "parse_args",
    "percentile",
    "plotly_click",
    "process_tree",
    "pss_bytes",
    "read_catalog",
    "result_json",
    "summarize",
    "tree_pss_bytes",
]

# Scenario tools of their own, reached as ``--mode <name>``: the module's ``main(argv) -> int``
# gets the whole command line. A name whose module is not there is not offered.
EXTRA_MODES: dict[str, str] = {"class": "bench.classmode_load"}


def extra_modes() -> dict[str, str]:
    """The extra modes whose module exists in this checkout."""
    found = {}
    for mode, module in EXTRA_MODES.items():
        try:
            if importlib.util.find_spec(module) is not None:
                found[mode] = module
        except (ImportError, ValueError):  # its package is missing, or it is half-imported
            continue
    return found


def requested_extra_mode(argv: Sequence[str]) -> str | None:
    """The module that handles ``--mode X`` in ``argv`` when X is an extra mode, else None."""
    found = None
    for index, word in enumerate(argv):
        if word == "--mode" and index + 1 < len(argv):
            found = argv[index + 1]
        elif word.startswith("--mode="):
            found = word.partition("=")[2]
    return extra_modes().get(found) if found is not None else None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.classroom",
        description="N protocol-level students against one `streamlit run app.py`.",
    )
    parser.add_argument("--students", type=int, default=30, help="clients (1–200)")
    parser.add_argument("--rounds", type=int, default=2, help="times each student acts (1–20)")
    extra = ", ".join(f"{mode} ({module})" for mode, module in extra_modes().items())
    parser.add_argument(
        "--mode",
        choices=(*MODES, "all"),
        default="mixed",
        help="the scenario" + (f"; also, handled by its own tool: {extra}" if extra else ""),
    )
    parser.add_argument(
        "--rooms",
        default=",".join(ROOMS),
        help=f"a mixed class's rooms, comma-separated (default: all seven: {','.join(ROOMS)})",
    )
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--settle-s", type=float, default=120.0, help="wait after the class left (0–900)"
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=0.0,
        help="stop everything after this long (default: 900 s per mode plus the settle time)",
    )
    parser.add_argument(
        "--photo-px", type=int, default=2048, help="longest side of each uploaded photo"
    )
    parser.add_argument(
        "--app-dir",
        type=Path,
        default=ROOT,
        help="the checkout whose app.py to serve (default: this one; e.g. another commit's)",
    )
    parser.add_argument("--seed", type=int, default=13, help="seed of the pauses and jitter")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--server-log", type=Path, default=None, help="keep the server's log here (all modes)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= 200:
        parser.error("--students must be between 1 and 200")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be between 1 and 20")
    if not 0 <= args.settle_s <= 900:
        parser.error("--settle-s must be between 0 and 900")
    if args.port and not 1024 <= args.port <= 65535:
        parser.error("--port must be between 1024 and 65535")
    if not 64 <= args.photo_px <= 8000:
        parser.error("--photo-px must be between 64 and 8000")
    if not (args.app_dir / "app.py").is_file():
        parser.error(f"--app-dir {args.app_dir} has no app.py")
    args.app_dir = args.app_dir.resolve()
    if args.deadline_s < 0:
        parser.error("--deadline-s cannot be negative")
    # "all": the four classes of issue 13 (``flood`` runs a class twice: ask for it by name)
    args.modes = [m for m in MODES if m != "flood"] if args.mode == "all" else [args.mode]
    args.rooms = [room.strip() for room in args.rooms.split(",") if room.strip()]
    unknown = [room for room in args.rooms if room not in ROOMS]
    if unknown or not args.rooms or len(set(args.rooms)) != len(args.rooms):
        parser.error(f"--rooms takes distinct rooms among {', '.join(ROOMS)}")
    if not args.deadline_s:
        args.deadline_s = len(args.modes) * (900.0 + args.settle_s)
    return args


def run_mode(
    mode: str, args: argparse.Namespace, deadline: float, log: Callable[[str], None]
) -> ModeResult:
    result = ModeResult(
        mode=mode, students=args.students, rounds=args.rounds, rooms=tuple(args.rooms)
    )
    plan = Plan(
        mode,
        args.students,
        args.rounds,
        args.photo_px,
        args.seed,
        rooms=tuple(args.rooms),
        catalog=read_catalog(args.app_dir),
    )
    with tempfile.TemporaryDirectory(prefix="classroom-") as folder:
        server = Server(args.port, Path(folder) / "server.log", args.app_dir)
        try:
            log(f"{mode}: starting the server on {server.url}")
            server.start(deadline)
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                result.first_visit = asyncio.run(first_visit(server.url, pool, deadline))
                log(f"{mode}: first visitor done; warming the other rooms")
                asyncio.run(warm_up(server.url, pool, deadline))
            time.sleep(3)  # the warm-up tabs have closed; let the server finish with them
            result.memory.baseline = settled_pss(server.remember_tree)
            log(f"{mode}: baseline {mb_text(result.memory.baseline)} MB; the class arrives")
            with PssSampler(server.remember_tree) as sampler:
                mode_deadline = min(deadline, time.monotonic() + 900)
                if mode == "flood":
                    result.baseline_outcomes = asyncio.run(
                        run_class(server.url, plan, mode_deadline, log)
                    )
                    result.flood = FloodCount()
                    log(f"{mode}: the class again, while one laptop floods the sandbox")
                wall, cpu = time.monotonic(), time.process_time()
                result.outcomes = asyncio.run(
                    run_class(server.url, plan, mode_deadline, log, result.flood)
                )
                wall = time.monotonic() - wall
                result.client_cpu_share = (time.process_time() - cpu) / wall if wall else None
                if time.monotonic() >= mode_deadline:
                    result.aborted = "the mode's time limit was reached"
            result.memory.peak = sampler.peak
            result.memory.processes_at_peak = sampler.processes_at_peak
            settle = max(0.0, min(args.settle_s, deadline - time.monotonic() - 10))
            log(f"{mode}: the class left; settling for {settle:g} s")
            with PssSampler(server.remember_tree) as sampler:  # the peak includes the settling time
                time.sleep(settle)
            result.memory.peak = max(result.memory.peak, sampler.peak)
            result.memory.settled = settled_pss(server.remember_tree)
            result.memory.settle_s = settle
            if settle < args.settle_s:
                result.aborted = result.aborted or "the settle time was cut by the deadline"
        except (RuntimeError, TimeoutError, OSError) as error:
            result.aborted = f"{type(error).__name__}: {error}"[:500]
        finally:
            server.stop()
            result.server_tracebacks, result.last_traceback = server.tracebacks()
            if args.server_log is not None:
                with args.server_log.open("a") as kept:
                    kept.write(f"===== mode {mode}\n{server.log_text()}")
    return result


def describe_checkout(folder: Path) -> str:
    """The served checkout and its commit (with a note when files differ from it)."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return f"{folder} (no git commit known)"
    return f"{folder} at {commit}" + (" with uncommitted changes" if changed else "")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = requested_extra_mode(argv)
    if extra is not None:  # another tool's scenario: it gets the whole command line
        return int(importlib.import_module(extra).main(argv))
    args = parse_args(argv)
    deadline = time.monotonic() + args.deadline_s

    def log(line: str) -> None:
        if not args.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through every `finally`: the server is stopped

    previous = signal.signal(signal.SIGTERM, on_term)
    app = describe_checkout(args.app_dir)
    print(f"classroom: {args.students} students, {args.rounds} round(s); app {app}", flush=True)
    results: list[ModeResult] = []
    try:
        for mode in args.modes:
            if time.monotonic() >= deadline:
                log(f"{mode}: skipped, the deadline has passed")
                continue
            results.append(run_mode(mode, args, deadline, log))
            print(format_result(results[-1]), flush=True)
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    missed = [line for result in results for line in check_goals(result)]
    print("goals of issues 13 and 21:", "all met" if not missed else f"{len(missed)} missed")
    for line in missed:
        print(f"  MISSED {line}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "app": app,
                    "students": args.students,
                    "rounds": args.rounds,
                    "settle_s": args.settle_s,
                    "modes": [result_json(result) for result in results],
                    "goals_missed": missed,
                },
                indent=2,
            )
        )
    unmeasured = [r for r in results if r.memory.baseline is None or not r.outcomes]
    if unmeasured or len(results) < len(args.modes):
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
