"""A class of students against one server: ``python -m bench.classroom [--students 30]
[--rounds 2] [--mode mixed|all-analyse|all-classify-same|all-upload|all] [--settle-s 120]``.

Starts ``streamlit run app.py`` on a free loopback port (as tests/e2e/conftest.py does), then
drives it with N clients that speak Streamlit's own websocket protocol as the browser does:
``GET /_stcore/health`` sets the ``_streamlit_xsrf`` cookie; ``/_stcore/stream`` is opened with
the subprotocols ``["streamlit", <token>]``; a ``BackMsg.rerun_script`` names the page and
carries the query string and widget states (each widget's id read from the ``ForwardMsg``
deltas, a keyed widget's key is part of its id); uploads ask for URLs over the websocket and PUT
the file with the XSRF header; ``run_every`` fragments are polled as the browser polls them.

Each student action is timed from the moment its message is sent until a script run that
finished after it shows the action's result; an exception, an error element, a "busy"
warning, a run that ends without the result, or a timeout is an error. Rooms and actions:
    open    any room    the page's title and a finished run (shapes analyses, classify
                        classifies the default sample on a first visit)
    click   strides     a point of the tensor chart (a plotly selection: a fragment rerun)
    analyse shapes      the editor's Analyse button: the report table
    sample  classify    pick another bundled sample photo: its predictions
    upload  classify    the student's own photo (a sample re-encoded per student and round)
    demo    devices     a demonstration's Run button: its result
    bench   devices     the transfer benchmark, polled to its end: its result
Modes: ``mixed`` spreads the students over the four rooms, each doing its room's actions with
a short pause between them; ``all-analyse``, ``all-classify-same`` and ``all-upload`` put
everyone in one room and, once all have opened it, have them act within about a second.
``all`` runs the four modes one after another, each on a freshly started server.

Memory is the proportional set size (PSS) of the server and all its descendants (the sandbox's
workers included), summed from ``/proc/<pid>/smaps_rollup`` every half second. ``baseline`` is
taken after a first visitor has opened every room and left, before the class arrives;
``settled`` once every student has closed their connection and ``--settle-s`` have passed.
The first visitor's own timings (a shape analysis and a classification, both asked for the
moment the server answers its health check) are printed too.

The clients run on the same machine as the server and take some of its CPU: compare figures
from the same machine and the same tool. Everything is bounded: students, rounds, each action
(a timeout), each mode and the whole run (a deadline); only 127.0.0.1 is contacted, and every
process started is stopped at the end, on an error or Ctrl-C. Exits 1 when a goal of
issue 13 is missed (see ``GOALS``), 2 when the measurement itself could not be made.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import io
import json
import math
import os
import random
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = ROOT / "assets" / "samples"
ROOMS = ("strides", "shapes", "classify", "devices")
MODES = ("mixed", "all-analyse", "all-classify-same", "all-upload")
ROOM_ACTIONS = {
    "strides": ("click",),
    "shapes": ("analyse",),
    "classify": ("sample", "upload"),
    "devices": ("demo", "bench"),
}
FOCUS = {  # the one room and action of each "everyone at once" mode
    "all-analyse": ("shapes", "analyse"),
    "all-classify-same": ("classify", "sample"),
    "all-upload": ("classify", "upload"),
}
ACTION_TIMEOUT_S = {
    "open": 90.0,
    "click": 45.0,
    "analyse": 90.0,
    "sample": 90.0,
    "upload": 120.0,
    "demo": 60.0,
    "bench": 180.0,
}
MB = 1_000_000  # figures are printed in MB of 10^6 bytes
GB = 1_000_000_000


@dataclass(frozen=True)
class Goals:
    """Issue 13's goals for one mode. ``p95_s`` maps an action ("room.action", or "*" for
    every action) to its p95 bound in seconds."""

    p95_s: dict[str, float]
    max_errors: int = 0


GOALS: dict[str, Goals] = {
    "mixed": Goals({"*": 3.0}),
    "all-analyse": Goals({"shapes.analyse": 2.0}),
    "all-classify-same": Goals({"classify.sample": 2.0}),
    "all-upload": Goals({"classify.upload": 5.0}),
}
PEAK_PSS_LIMIT_BYTES = 2 * GB
SETTLED_MARGIN_BYTES = 150 * MB
FIRST_VISIT_LIMIT_S = 3.0
# An alert saying one of these, on a page that lacks the action's result, is a refusal.
BUSY_WORDS = ("busy", "another visitor", "try again", "queue is full", "too many")

# --------------------------------------------------------------------------- pure parts


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation between closest ranks, as
    ``numpy.percentile`` computes it by default; NaN for no values."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Outcome:
    """One student's action: how long it took, and the error (None when it succeeded)."""

    action: str  # "room.action", e.g. "shapes.analyse"
    student: int
    round: int
    seconds: float
    error: str | None = None
    skipped: str | None = None  # why it was not measured (e.g. the page answers in the browser)


@dataclass(frozen=True)
class ActionStats:
    action: str
    count: int
    errors: int
    skipped: int
    p50_s: float
    p95_s: float
    max_s: float
    first_error: str | None


def summarize(outcomes: Iterable[Outcome]) -> list[ActionStats]:
    """Per action, in first-seen order: attempts, errors, p50/p95/max of the successful ones."""
    grouped: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.action, []).append(outcome)
    stats = []
    for action, group in grouped.items():
        times = [o.seconds for o in group if o.error is None and o.skipped is None]
        errors = [o for o in group if o.error is not None]
        stats.append(
            ActionStats(
                action=action,
                count=len(group),
                errors=len(errors),
                skipped=sum(1 for o in group if o.skipped is not None),
                p50_s=percentile(times, 50),
                p95_s=percentile(times, 95),
                max_s=max(times) if times else math.nan,
                first_error=errors[0].error if errors else None,
            )
        )
    return stats


def _stat_fields(stat_text: str) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name (which may hold spaces and ')')."""
    return stat_text[stat_text.rindex(")") + 2 :].split()


def process_children(proc: Path = Path("/proc")) -> dict[int, list[int]]:
    """Parent pid → child pids, for every process readable under ``proc``."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat_fields((entry / "stat").read_text())
        except (OSError, ValueError):
            continue  # gone meanwhile, or not a process
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(root: int, proc: Path = Path("/proc")) -> list[int]:
    """``root`` and all its descendants (root first)."""
    children = process_children(proc)
    tree, pending, seen = [], [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        tree.append(pid)
        pending.extend(sorted(children.get(pid, []), reverse=True))
    return tree


def pss_bytes(pid: int, proc: Path = Path("/proc")) -> int | None:
    """The process's PSS from smaps_rollup (None when it is gone or unreadable)."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024  # the kernel counts in kB of 1024 bytes
    return None


def tree_pss_bytes(root: int, proc: Path = Path("/proc")) -> tuple[int, int]:
    """(summed PSS in bytes, number of processes counted) for ``root`` and its descendants."""
    total, counted = 0, 0
    for pid in process_tree(root, proc):
        value = pss_bytes(pid, proc)
        if value is not None:
            total += value
            counted += 1
    return total, counted


@dataclass
class MemoryFigures:
    baseline: int | None = None
    peak: int | None = None
    settled: int | None = None
    settle_s: float = 0.0
    processes_at_peak: int = 0


@dataclass
class ModeResult:
    mode: str
    students: int
    rounds: int
    outcomes: list[Outcome] = field(default_factory=list)
    memory: MemoryFigures = field(default_factory=MemoryFigures)
    first_visit: dict[str, Outcome] = field(default_factory=dict)  # "shapes"/"classify"
    server_tracebacks: int = 0
    client_cpu_share: float | None = None  # this tool's CPU time per second of the class
    last_traceback: str | None = None
    aborted: str | None = None  # why the mode stopped early (deadline, server died)


def check_goals(result: ModeResult) -> list[str]:
    """Every goal of issue 13 this mode missed, as sentences (empty when all are met)."""
    missed: list[str] = []
    goals = GOALS[result.mode]
    if result.aborted:
        missed.append(f"{result.mode}: not measured to the end ({result.aborted})")
    for stat in summarize(result.outcomes):
        if stat.errors > goals.max_errors:
            missed.append(
                f"{result.mode}: {stat.action} had {stat.errors} error(s), "
                f"first: {stat.first_error}"
            )
        bound = goals.p95_s.get(stat.action, goals.p95_s.get("*"))
        if bound is None:
            continue
        if math.isnan(stat.p95_s):
            if stat.count > stat.skipped:
                missed.append(f"{result.mode}: {stat.action} never succeeded")
        elif stat.p95_s > bound:
            missed.append(f"{result.mode}: {stat.action} p95 {stat.p95_s:.2f} s > {bound:g} s")
    focus = FOCUS.get(result.mode)
    if focus is not None and not any(o.action == ".".join(focus) for o in result.outcomes):
        missed.append(f"{result.mode}: no {'.'.join(focus)} was measured")
    memory = result.memory
    if memory.peak is None or memory.baseline is None:
        missed.append(f"{result.mode}: memory not measured")
    else:
        if memory.peak > PEAK_PSS_LIMIT_BYTES:
            missed.append(
                f"{result.mode}: peak PSS {memory.peak / MB:,.0f} MB > "
                f"{PEAK_PSS_LIMIT_BYTES / MB:,.0f} MB"
            )
        if memory.settled is None:
            missed.append(f"{result.mode}: settled PSS not measured")
        elif memory.settled - memory.baseline > SETTLED_MARGIN_BYTES:
            missed.append(
                f"{result.mode}: settled PSS {memory.settled / MB:,.0f} MB is "
                f"{(memory.settled - memory.baseline) / MB:,.0f} MB above the baseline "
                f"{memory.baseline / MB:,.0f} MB (allowed {SETTLED_MARGIN_BYTES / MB:,.0f})"
            )
    for room, outcome in result.first_visit.items():
        if outcome.error is not None:
            missed.append(f"{result.mode}: the first visitor's {room} failed: {outcome.error}")
        elif outcome.seconds > FIRST_VISIT_LIMIT_S:
            missed.append(
                f"{result.mode}: the first visitor waited {outcome.seconds:.1f} s for "
                f"{room} (goal {FIRST_VISIT_LIMIT_S:g} s)"
            )
    return missed


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.classroom",
        description="N protocol-level students against one `streamlit run app.py`.",
    )
    parser.add_argument("--students", type=int, default=30, help="clients (1–200)")
    parser.add_argument("--rounds", type=int, default=2, help="times each student acts (1–20)")
    parser.add_argument("--mode", choices=(*MODES, "all"), default="mixed")
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
    args.modes = list(MODES) if args.mode == "all" else [args.mode]
    if not args.deadline_s:
        args.deadline_s = len(args.modes) * (900.0 + args.settle_s)
    return args


# --------------------------------------------------------------------------- output


def _seconds(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def _mb(value: int | None) -> str:
    return "—" if value is None else f"{value / MB:,.0f}"


def format_result(result: ModeResult) -> str:
    lines = [f"mode {result.mode}: {result.students} students, {result.rounds} round(s)"]
    if result.first_visit:
        parts = []
        for room, outcome in result.first_visit.items():
            what = {"shapes": "shape analysis", "classify": "classification"}.get(room, room)
            shown = outcome.error or f"{outcome.seconds:.2f} s"
            parts.append(f"{what} {shown}")
        lines.append("  first visitor after the start: " + ", ".join(parts))
    header = f"  {'action':<18}{'count':>6}{'errors':>7}{'p50 s':>8}{'p95 s':>8}{'max s':>8}  note"
    lines.append(header)
    for stat in summarize(result.outcomes):
        note = stat.first_error or ""
        if stat.skipped:
            note = (note + "; " if note else "") + f"{stat.skipped} not measured"
        lines.append(
            f"  {stat.action:<18}{stat.count:>6}{stat.errors:>7}{_seconds(stat.p50_s):>8}"
            f"{_seconds(stat.p95_s):>8}{_seconds(stat.max_s):>8}  {note[:90]}"
        )
    memory = result.memory
    settled = _mb(memory.settled)
    if memory.settled is not None and memory.baseline is not None:
        settled += f" ({(memory.settled - memory.baseline) / MB:+,.0f} after {memory.settle_s:g} s)"
    lines.append(
        f"  PSS of the server tree (MB): baseline {_mb(memory.baseline)}, peak {_mb(memory.peak)}"
        f" ({memory.processes_at_peak} processes), settled {settled}"
    )
    if result.client_cpu_share is not None:
        lines.append(
            f"  the clients themselves used {result.client_cpu_share:.0%} of one core meanwhile"
        )
    if result.server_tracebacks:
        lines.append(
            f"  server log: {result.server_tracebacks} traceback(s), last: {result.last_traceback}"
        )
    if result.aborted:
        lines.append(f"  stopped early: {result.aborted}")
    return "\n".join(lines)


def result_json(result: ModeResult) -> dict[str, Any]:
    def clean(value: float) -> float | None:
        return None if math.isnan(value) else round(value, 4)

    return {
        "mode": result.mode,
        "students": result.students,
        "rounds": result.rounds,
        "actions": [
            {**asdict(s), "p50_s": clean(s.p50_s), "p95_s": clean(s.p95_s), "max_s": clean(s.max_s)}
            for s in summarize(result.outcomes)
        ],
        "memory_bytes": asdict(result.memory),
        "first_visit": {room: asdict(o) for room, o in result.first_visit.items()},
        "server_tracebacks": result.server_tracebacks,
        "client_cpu_share": result.client_cpu_share,
        "aborted": result.aborted,
        "goals_missed": check_goals(result),
        "outcomes": [asdict(o) for o in result.outcomes],
    }


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_time(pid: int) -> str | None:
    try:
        return _stat_fields(Path(f"/proc/{pid}/stat").read_text())[19]
    except (OSError, ValueError, IndexError):
        return None


class Server:
    """``streamlit run app.py`` in its own process group, on 127.0.0.1 only.

    Every descendant ever seen is remembered (with its start time, so a recycled pid is never
    hit), so a worker that left the process group is stopped too."""

    def __init__(self, port: int, log_path: Path, app_dir: Path = ROOT) -> None:
        self.app_dir = app_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.seen: dict[int, str] = {}
        self._lock = threading.Lock()

    def start(self, deadline: float) -> None:
        command = [
            sys.executable, "-m", "streamlit", "run", "app.py",
            "--server.headless", "true",
            "--server.port", str(self.port),
            "--server.address", "127.0.0.1",
            "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.app_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        limit = min(deadline, time.monotonic() + 180)
        while time.monotonic() < limit:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"streamlit exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                with _OPENER.open(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"{self.url} did not answer its health check in time")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def remember_tree(self) -> list[int]:
        pids = process_tree(self.pid)
        with self._lock:
            for pid in pids:
                if pid not in self.seen:
                    started = _start_time(pid)
                    if started is not None:
                        self.seen[pid] = started
        return pids

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            self.remember_tree()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        time.sleep(0.2)
        with self._lock:
            leftovers = dict(self.seen)
        for pid, started in leftovers.items():
            if _start_time(pid) == started:  # still the very process this server started
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.process = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_text()[-chars:]

    def tracebacks(self) -> tuple[int, str | None]:
        """(number of tracebacks in the server log, the last one's exception line)."""
        text = ANSI_ESCAPE.sub("", self.log_text())
        count = text.count("Traceback (most recent call last)")
        if not count:
            return 0, None
        tail = text[text.rindex("Traceback (most recent call last)") :]
        found = EXCEPTION_LINE.search(tail)
        return count, found.group(0).strip() if found else None


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Streamlit prints tracebacks in colour
EXCEPTION_LINE = re.compile(r"^(?:\w+\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)\b.*$", re.M)


class PssSampler:
    """Samples the server tree's PSS every ``interval_s`` in a thread; keeps the peak."""

    def __init__(self, server: Server, interval_s: float = 0.5) -> None:
        self.server = server
        self.interval_s = interval_s
        self.peak = 0
        self.processes_at_peak = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def sample(self) -> int:
        total, counted = 0, 0
        for pid in self.server.remember_tree():
            value = pss_bytes(pid)
            if value is not None:
                total += value
                counted += 1
        self.samples.append((time.monotonic(), total))
        if total > self.peak:
            self.peak, self.processes_at_peak = total, counted
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.sample()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def settled_pss(server: Server, samples: int = 5, gap_s: float = 0.5) -> int:
    """The median of a few samples: one sample can catch a worker being replaced."""
    values = []
    sampler = PssSampler(server)
    for _ in range(samples):
        values.append(sampler.sample())
        time.sleep(gap_s)
    return int(statistics.median(values))


# --------------------------------------------------------------------------- HTTP (loopback)

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
XSRF_COOKIE = "_streamlit_xsrf"


def fetch_xsrf_cookie(base_url: str) -> str:
    """GET /_stcore/health, as the browser's first request does: it sets the XSRF cookie."""
    with _OPENER.open(f"{base_url}/_stcore/health", timeout=30) as response:
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            if name.strip() == XSRF_COOKIE:
                return rest.split(";", 1)[0]
    return ""  # XSRF protection off: the token is simply absent


def put_file(url: str, token: str, name: str, data: bytes, content_type: str) -> int:
    """PUT one file as multipart form data (field "file"), as the browser's uploader does."""
    boundary = f"----classroom{uuid.uuid4().hex}"
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n'.encode(),
            f"Content-Type: {content_type}\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if token:
        headers["X-Xsrftoken"] = token
        headers["Cookie"] = f"{XSRF_COOKIE}={token}"
    request = urllib.request.Request(url, data=body, method="PUT", headers=headers)
    try:
        with _OPENER.open(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def student_photo(student: int, round_: int, longest_px: int) -> tuple[str, bytes]:
    """A bundled sample, resized and marked per student and round, re-encoded as JPEG: every
    student's file (and every round's) has its own bytes, so no cache can answer it."""
    from PIL import Image, ImageDraw

    samples = sorted(p for p in SAMPLES_DIR.iterdir() if p.suffix in (".jpg", ".png"))
    source = samples[student % len(samples)]
    with Image.open(source) as opened:
        image = opened.convert("RGB")
    scale = longest_px / max(image.size)
    image = image.resize(
        (max(1, round(image.width * scale)), max(1, round(image.height * scale))),
        Image.Resampling.BICUBIC,
    )
    mark = max(4, longest_px // 40)
    colour = ((student * 53) % 256, (round_ * 97 + 31) % 256, (student * 7 + round_ * 13) % 256)
    ImageDraw.Draw(image).rectangle((0, 0, mark, mark), fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return f"student{student:02d}-round{round_ + 1}-{source.stem}.jpg", buffer.getvalue()


# --------------------------------------------------------------------------- the protocol


def _decode_plotly_array(value: Any) -> list[Any]:
    """A Plotly array: a list, or a typed array (``{"dtype": "u2", "bdata": base64}``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and "bdata" in value:
        codes = {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I"}
        codes |= {"f4": "f", "f8": "d"}
        code = codes.get(str(value.get("dtype")))
        if code is None:
            return []
        raw = base64.b64decode(value["bdata"])
        count = len(raw) // struct.calcsize(code)
        return list(struct.unpack(f"<{count}{code}", raw[: count * struct.calcsize(code)]))
    return []


def plotly_click(spec_json: str, pick: int) -> str | None:
    """The selection state the browser sends when a point of this figure is clicked: the
    ``pick``-th point (modulo their number) of the first trace that has points."""
    try:
        spec = json.loads(spec_json)
    except ValueError:
        return None
    for curve, trace in enumerate(spec.get("data") or []):
        xs = _decode_plotly_array(trace.get("x"))
        if not xs:
            continue
        ys = _decode_plotly_array(trace.get("y"))
        custom = _decode_plotly_array(trace.get("customdata"))
        index = pick % len(xs)
        point: dict[str, Any] = {
            "curve_number": curve,
            "point_number": index,
            "point_index": index,
            "x": xs[index],
        }
        if index < len(ys):
            point["y"] = ys[index]
        if index < len(custom):
            point["customdata"] = custom[index]
        selection = {"points": [point], "point_indices": [index], "box": [], "lasso": []}
        return json.dumps({"selection": selection})
    return None


@dataclass
class Node:
    """One element or block of the page, as the browser holds it."""

    kind: str  # element type ("markdown", "button", ...) or "block:<type>"
    proto: Any  # the element's own message (Markdown, Button, ...) or the Block
    widget_id: str
    fragment_id: str
    epoch: int  # the number of script runs that had finished when it arrived

    def text(self) -> str:
        for name in ("body", "label", "message"):
            value = getattr(self.proto, name, None)
            if isinstance(value, str) and value:
                return value
        return ""


class ProtocolError(RuntimeError):
    pass


class Student:
    """One browser tab, as Streamlit's frontend talks to the server."""

    def __init__(self, base_url: str, index: int, pool: concurrent.futures.Executor) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.base_url = base_url
        self.index = index
        self.pool = pool
        self.token = ""
        self.ws: Any = None
        self.nodes: dict[tuple[int, ...], Node] = {}
        self.epoch = 0  # script runs finished so far
        self.last_status: int | None = None
        self.running = False
        self.page_hash = ""
        self.query = ""
        self.session_id = ""
        self.pages: dict[str, str] = {}  # url path → page script hash
        self.page_not_found = ""
        self.closed_reason = ""
        self.last_message_at = time.monotonic()
        self.baseline_counts: dict[str, int] = {}
        self._fragments_this_run: set[str] = set()
        self._wake = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._auto: dict[str, asyncio.Task[None]] = {}
        self._url_requests: dict[str, asyncio.Future[Any]] = {}
        self._status = ForwardMsg.ScriptFinishedStatus
        self._pending: tuple[int, Callable[[int], bool], float] | None = None
        self._verdict: tuple[float, str | None] | None = None

    # ------------------------------------------------------------------ connection
    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        loop = asyncio.get_running_loop()
        self.token = await loop.run_in_executor(self.pool, fetch_xsrf_cookie, self.base_url)
        headers = {"Cookie": f"{XSRF_COOKIE}={self.token}"} if self.token else {}
        self.ws = await connect(
            self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream",
            subprotocols=["streamlit", self.token] if self.token else ["streamlit"],
            additional_headers=headers,
            origin=self.base_url,
            proxy=None,
            max_size=None,
            open_timeout=60,
            ping_interval=None,  # the browser sends no pings; a busy server must not drop us
            close_timeout=5,
        )
        self._reader = asyncio.create_task(self._read(), name=f"student-{self.index}-reader")

    async def close(self) -> None:
        for task in self._auto.values():
            task.cancel()
        self._auto.clear()
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(), 10)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader

    async def _send(self, back_msg: Any) -> None:
        if self.ws is None:
            raise ProtocolError("not connected")
        await self.ws.send(back_msg.SerializeToString())

    async def send_rerun(
        self,
        widgets: Sequence[Any] = (),
        *,
        fragment_id: str = "",
        page_name: str = "",
        page_hash: str | None = None,
        query: str | None = None,
        auto: bool = False,
    ) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo

        state = ClientState(
            query_string=self.query if query is None else query,
            page_script_hash=self.page_hash if page_hash is None else page_hash,
            page_name=page_name,
            fragment_id=fragment_id,
            is_auto_rerun=auto,
            context_info=ContextInfo(
                timezone="UTC",
                timezone_offset=0,
                locale="en-US",
                url=f"{self.base_url}/{page_name}",
                is_embedded=False,
                color_scheme="light",
            ),
        )
        state.widget_states.widgets.extend(widgets)
        await self._send(BackMsg(rerun_script=state))

    # ------------------------------------------------------------------ reading
    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            async for data in self.ws:
                message = ForwardMsg()
                message.ParseFromString(data)
                self._handle(message)
                self.last_message_at = time.monotonic()
                self._wake.set()
        except Exception as error:  # the connection ended: every waiter must hear of it
            self.closed_reason = f"connection lost: {type(error).__name__}"
        else:
            self.closed_reason = "connection closed by the server"
        finally:
            for future in self._url_requests.values():
                if not future.done():
                    future.set_exception(ProtocolError(self.closed_reason))
            self._wake.set()

    def _handle(self, message: Any) -> None:
        kind = message.WhichOneof("type")
        if kind == "delta":
            self._delta(message)
        elif kind == "new_session":
            session = message.new_session
            if session.initialize.session_id:
                self.session_id = session.initialize.session_id
            for page in session.app_pages:
                self.pages[page.url_pathname] = page.page_script_hash
            if not message.metadata.run.fragment_ids:  # a full run: the browser clears
                for task in self._auto.values():  # its polling timers
                    task.cancel()
                self._auto.clear()
            self.running = True
        elif kind == "navigation":
            nav = message.navigation
            for page in nav.app_pages:
                self.pages[page.url_pathname] = page.page_script_hash
            if nav.page_script_hash:
                self.page_hash = nav.page_script_hash
        elif kind == "page_info_changed":
            self.query = message.page_info_changed.query_string
        elif kind == "session_status_changed":
            self.running = message.session_status_changed.script_is_running
        elif kind == "script_finished":
            self._finished(message)
        elif kind == "auto_rerun":
            self._start_auto(message.auto_rerun.fragment_id, message.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            for fragment_id in message.stop_auto_rerun.fragment_ids:
                task = self._auto.pop(fragment_id, None)
                if task is not None:
                    task.cancel()
        elif kind == "file_urls_response":
            response = message.file_urls_response
            future = self._url_requests.pop(response.response_id, None)
            if future is not None and not future.done():
                future.set_result(response)
        elif kind == "page_not_found":
            self.page_not_found = message.page_not_found.page_name or "?"

    def _delta(self, message: Any) -> None:
        delta = message.delta
        path = tuple(message.metadata.delta_path)
        which = delta.WhichOneof("type")
        if delta.fragment_id:
            self._fragments_this_run.add(delta.fragment_id)
        if which == "new_element":
            element = delta.new_element
            element_type = element.WhichOneof("type") or "?"
            inner = getattr(element, element_type, None)
            widget_id = getattr(inner, "id", "") if inner is not None else ""
            self._drop_below(path)
            self.nodes[path] = Node(
                element_type, inner, widget_id or "", delta.fragment_id, self.epoch
            )
        elif which == "add_block":
            block = delta.add_block
            block_type = block.WhichOneof("type") or "?"
            old = self.nodes.get(path)
            if old is None or old.kind != f"block:{block_type}":
                self._drop_below(path)
            self.nodes[path] = Node(
                f"block:{block_type}", block, getattr(block, "id", "") or "", delta.fragment_id,
                self.epoch,
            )  # fmt: skip

    def _drop_below(self, path: tuple[int, ...]) -> None:
        depth = len(path)
        for other in [p for p in self.nodes if len(p) > depth and p[:depth] == path]:
            del self.nodes[other]

    def _finished(self, message: Any) -> None:
        status = message.script_finished
        current = self.epoch
        if status == self._status.FINISHED_SUCCESSFULLY:
            # The browser drops what the finished run did not send again.
            self.nodes = {p: n for p, n in self.nodes.items() if n.epoch >= current}
        elif status == self._status.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            fragments = set(message.metadata.run.fragment_ids) | self._fragments_this_run
            self.nodes = {
                p: n
                for p, n in self.nodes.items()
                if n.epoch >= current or n.fragment_id not in fragments
            }
        self._fragments_this_run = set()
        self.last_status = status
        self.epoch += 1
        self.running = False
        self._judge()

    def _start_auto(self, fragment_id: str, interval_s: float) -> None:
        if not fragment_id:
            return  # the browser ignores an auto-rerun without a fragment
        old = self._auto.pop(fragment_id, None)
        if old is not None:
            old.cancel()

        async def poll() -> None:
            while True:
                await asyncio.sleep(max(0.05, interval_s))
                with contextlib.suppress(Exception):
                    await self.send_rerun(fragment_id=fragment_id, auto=True)

        self._auto[fragment_id] = asyncio.create_task(poll(), name=f"auto-{fragment_id}")

    # ------------------------------------------------------------------ the page
    def find(
        self,
        kind: str | None = None,
        key: str | None = None,
        where: Callable[[Node], bool] | None = None,
    ) -> list[Node]:
        """Nodes in page order, of an element type, whose widget id names ``key``."""
        found = []
        for path in sorted(self.nodes):
            node = self.nodes[path]
            if kind is not None and node.kind != kind:
                continue
            if key is not None and not (
                node.widget_id.endswith(f"-{key}") or f"-{key}-" in node.widget_id
            ):
                continue
            if where is not None and not where(node):
                continue
            found.append(node)
        return found

    def problems(self) -> tuple[str | None, str | None]:
        """(a hard error: an exception or error element; a warning or a "busy" note) on the
        page now. A warning counts only when the action's result is missing."""
        from streamlit.proto.Alert_pb2 import Alert

        hard = warning = None
        for node in self.find():
            if node.kind == "exception":
                hard = hard or f"exception: {node.proto.type} {node.proto.message}".strip()
            elif node.kind == "alert" and node.proto.format == Alert.ERROR:
                hard = hard or f"error: {node.text()}"
            elif node.kind == "alert" and node.proto.format == Alert.WARNING:
                warning = warning or f"warning: {node.text()}"
            elif node.kind == "alert" and any(w in node.text().lower() for w in BUSY_WORDS):
                warning = warning or f"note: {node.text()}"  # "busy" said in another colour
        if self.page_not_found:
            hard = hard or f"page not found: {self.page_not_found}"
        return hard, warning

    def fresh(self, since_epoch: int) -> list[Node]:
        """Nodes that arrived after the first ``since_epoch`` runs had finished."""
        return [n for n in self.find() if n.epoch >= since_epoch]

    # ------------------------------------------------------------------ one action
    def _judge(self) -> None:
        """At each finished run: has the pending action got its result, or an error?

        Judged as the finish arrives (not when the waiting task next wakes), so a poll that
        starts right after the deciding run cannot delay the verdict."""
        if self._pending is None or self._verdict is not None:
            return
        since, done, started = self._pending
        if self.epoch <= since or self.last_status == self._status.FINISHED_EARLY_FOR_RERUN:
            return  # nothing finished since the send, or the script asked for another run
        elapsed = time.perf_counter() - started
        hard, warning = self.problems()
        if self.last_status == self._status.FINISHED_WITH_COMPILE_ERROR:
            self._verdict = (elapsed, "the page script failed to compile")
        elif hard:
            self._verdict = (elapsed, hard)
        elif done(since) and not self._auto:  # a page still polling a job is not done
            self._verdict = (elapsed, None)
        elif warning and not self._auto:
            self._verdict = (elapsed, warning)

    async def act(
        self,
        send: Callable[[], Awaitable[None]],
        done: Callable[[int], bool],
        timeout_s: float,
        deadline: float,
        quiet_s: float = 1.5,
    ) -> tuple[float, str | None]:
        """Send, then wait for a finished run that shows the result; (seconds, error).

        ``done(since)`` looks at the page after each finished run. A run that ends without
        the result, while the page polls no job and the server says nothing more for
        ``quiet_s``, is an error, as is a timeout."""
        since = self.epoch
        started = time.perf_counter()
        limit = min(time.monotonic() + timeout_s, deadline)
        self._pending, self._verdict = (since, done, started), None
        self._wake.clear()
        try:
            try:
                await send()
            except Exception as error:
                elapsed = time.perf_counter() - started
                return elapsed, f"send failed: {type(error).__name__}: {error}"
            while self._verdict is None:
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    return time.perf_counter() - started, f"timeout after {timeout_s:g} s"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(remaining, quiet_s))
                self._wake.clear()
                if self._verdict is not None:
                    break
                if self.closed_reason:
                    return time.perf_counter() - started, self.closed_reason
                settled = (
                    self.epoch > since
                    and not self.running
                    and not self._auto
                    and self.last_status != self._status.FINISHED_EARLY_FOR_RERUN
                    and time.monotonic() - self.last_message_at >= quiet_s
                )
                if settled:
                    hard, warning = self.problems()
                    elapsed = time.perf_counter() - started
                    return elapsed, hard or warning or "the run finished without the result"
            return self._verdict
        finally:
            self._pending = None

    # ------------------------------------------------------------------ uploads
    async def upload(self, uploader: Node, name: str, data: bytes) -> None:
        """Ask for an upload URL, PUT the file, and tell the widget (one rerun)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.Common_pb2 import (
            FileUploaderState,
            FileURLs,
            FileURLsRequest,
            UploadedFileInfo,
        )
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        request_id = uuid.uuid4().hex
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._url_requests[request_id] = future
        await self._send(
            BackMsg(
                file_urls_request=FileURLsRequest(
                    request_id=request_id, file_names=[name], session_id=self.session_id
                )
            )
        )
        response = await asyncio.wait_for(future, 60)
        if response.error_msg or not response.file_urls:
            raise ProtocolError(f"no upload URL: {response.error_msg or 'empty answer'}")
        urls = response.file_urls[0]
        target = urls.upload_url
        if target.startswith("/"):
            target = self.base_url + target
        elif not target.startswith("http"):
            target = f"{self.base_url}/{target}"
        status = await asyncio.get_running_loop().run_in_executor(
            self.pool, put_file, target, self.token, name, data, "image/jpeg"
        )
        if status not in (200, 204):
            raise ProtocolError(f"upload answered HTTP {status}")
        info = UploadedFileInfo(
            name=name,
            size=len(data),
            file_id=urls.file_id,
            file_urls=FileURLs(
                file_id=urls.file_id, upload_url=urls.upload_url, delete_url=urls.delete_url
            ),
        )
        state = WidgetState(
            id=uploader.widget_id,
            file_uploader_state_value=FileUploaderState(uploaded_file_info=[info]),
        )
        await self.send_rerun([state], fragment_id=uploader.fragment_id)


# --------------------------------------------------------------------------- rooms and actions


def _trigger(widget_id: str) -> Any:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=widget_id, trigger_value=True)


def _count_in(student: Student, fragment_id: str) -> int:
    return sum(1 for n in student.find() if n.fragment_id == fragment_id)


async def open_room(student: Student, room: str, first: bool, deadline: float) -> Outcome:
    """A first visit (a new tab on the room's link) or, later, the room picked in the sidebar."""
    action = f"{room}.open"
    started = time.perf_counter()
    if first:
        try:
            await asyncio.wait_for(student.connect(), max(1.0, deadline - time.monotonic()))
        except Exception as error:
            seconds = time.perf_counter() - started
            return Outcome(action, student.index, 0, seconds, f"connect failed: {error!r}"[:200])

        async def send() -> None:
            await student.send_rerun(page_name=room, page_hash="", query="")

    else:
        page_hash = student.pages.get(room, "")

        async def send() -> None:
            await student.send_rerun(page_name="" if page_hash else room, page_hash=page_hash)

    def done(since: int) -> bool:
        return any(
            n.kind == "heading" and n.proto.tag == "h1" for n in student.fresh(since)
        ) and student.page_hash == student.pages.get(room, student.page_hash)

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S["open"], deadline)
    if first:
        seconds = time.perf_counter() - started  # a new tab pays for its connection too
    if error is None:  # what an unpressed demo card holds, to know a pressed one
        for node in student.find(kind="button"):
            if "devices_run_" in node.widget_id:
                student.baseline_counts.setdefault(
                    node.fragment_id, _count_in(student, node.fragment_id)
                )
    return Outcome(action, student.index, 0, seconds, error)


async def strides_click(student: Student, round_: int, deadline: float) -> Outcome:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    action = "strides.click"
    charts = (
        student.find(kind="plotly_chart", key="strides_tensor_chart")
        or student.find(kind="plotly_chart", key="strides_storage_chart")
        or student.find(kind="plotly_chart", where=lambda n: bool(n.proto.selection_mode))
    )
    if not charts:
        in_browser = student.find(kind="bidi_component") or student.find(kind="component_instance")
        if in_browser:
            return Outcome(action, student.index, round_, 0.0, skipped="answered in the browser")
        return Outcome(action, student.index, round_, 0.0, "no clickable chart on the page")
    chart = charts[0]
    payload = plotly_click(chart.proto.spec, student.index * 7 + round_ * 3)
    if payload is None:
        return Outcome(action, student.index, round_, 0.0, "the chart has no points")
    state = WidgetState(id=chart.widget_id, string_value=payload)

    async def send() -> None:
        await student.send_rerun([state], fragment_id=chart.fragment_id)

    def done(since: int) -> bool:
        return any(n.fragment_id == chart.fragment_id for n in student.fresh(since))

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S["click"], deadline)
    return Outcome(action, student.index, round_, seconds, error)


def _report_present(student: Student, since: int) -> bool:
    return any(n.kind in ("dataframe", "table", "metric") for n in student.fresh(since))


async def shapes_analyse(student: Student, round_: int, deadline: float) -> Outcome:
    action = "shapes.analyse"
    buttons = (
        student.find(
            kind="button",
            where=lambda n: n.proto.is_form_submitter and "shapes" in n.proto.form_id,
        )
        or student.find(kind="button", where=lambda n: n.proto.is_form_submitter)
        or student.find(
            kind="button",
            where=lambda n: (
                "shapes" in n.widget_id
                and any(word in n.widget_id.lower() for word in ("analy", "_run"))
            ),
        )
    )
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no Analyse button on the page")
    button = buttons[0]

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    seconds, error = await student.act(
        send, lambda since: _report_present(student, since), ACTION_TIMEOUT_S["analyse"], deadline
    )
    return Outcome(action, student.index, round_, seconds, error)


def _predictions_present(student: Student, since: int, name: str | None = None) -> bool:
    fresh = student.fresh(since)
    shown = any(n.kind in ("plotly_chart", "dataframe") and "c_top" in n.widget_id for n in fresh)
    shown = shown or any(n.kind == "imgs" for n in fresh)
    if name is None:
        return shown
    # The picture's caption starts with its name ("coffee.jpg · 640 × 480").
    named = any(n.kind == "markdown" and n.text().startswith(name) for n in fresh)
    return shown and named


def sample_picker(student: Student) -> list[Node]:
    return student.find(kind="button_group", key="c_samples") or student.find(
        kind="button_group", where=lambda n: "sample" in n.widget_id
    )


def sample_choices(student: Student) -> list[str]:
    """The sample pills' labels that are not selected on a first visit."""
    pills = sample_picker(student)
    if not pills:
        return []
    defaults = set(pills[0].proto.default)
    return [o.content for i, o in enumerate(pills[0].proto.options) if i not in defaults]


async def classify_sample(student: Student, round_: int, pick: int, deadline: float) -> Outcome:
    from streamlit.proto.Common_pb2 import StringArray
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    action = "classify.sample"
    pills = sample_picker(student)
    choices = sample_choices(student)
    if not pills or not choices:
        return Outcome(action, student.index, round_, 0.0, "no sample picker on the page")
    label = choices[pick % len(choices)]
    state = WidgetState(id=pills[0].widget_id, string_array_value=StringArray(data=[label]))

    async def send() -> None:
        await student.send_rerun([state], fragment_id=pills[0].fragment_id)

    seconds, error = await student.act(
        send,
        lambda since: _predictions_present(student, since, label),
        ACTION_TIMEOUT_S["sample"],
        deadline,
    )
    return Outcome(action, student.index, round_, seconds, error)


async def classify_upload(
    student: Student, round_: int, photo: tuple[str, bytes], deadline: float
) -> Outcome:
    action = "classify.upload"
    uploaders = student.find(kind="file_uploader", key="c_uploads") or student.find(
        kind="file_uploader"
    )
    if not uploaders:
        return Outcome(action, student.index, round_, 0.0, "no file uploader on the page")
    name, data = photo

    async def send() -> None:
        await student.upload(uploaders[0], name, data)

    seconds, error = await student.act(
        send,
        lambda since: _predictions_present(student, since, name),
        ACTION_TIMEOUT_S["upload"],
        deadline,
    )
    return Outcome(action, student.index, round_, seconds, error)


async def devices_demo(student: Student, round_: int, deadline: float) -> Outcome:
    action = "devices.demo"
    buttons = student.find(kind="button", where=lambda n: "devices_run_" in n.widget_id)
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no demonstration button on the page")
    button = buttons[(student.index + round_) % len(buttons)]
    before = student.baseline_counts.get(button.fragment_id, _count_in(student, button.fragment_id))

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    def done(since: int) -> bool:
        fresh = [n for n in student.fresh(since) if n.fragment_id == button.fragment_id]
        return bool(fresh) and _count_in(student, button.fragment_id) > before

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S["demo"], deadline)
    return Outcome(action, student.index, round_, seconds, error)


async def devices_bench(student: Student, round_: int, deadline: float) -> Outcome:
    action = "devices.bench"
    buttons = student.find(kind="button", key="devices_bench_run")
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no benchmark button on the page")
    button = buttons[0]

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    def done(since: int) -> bool:
        # The result's download button, sent after the press, with no job still shown running
        # (a page may keep showing an earlier measurement while a new one runs).
        running = student.find(kind="progress") or student.find(
            kind="button", where=lambda n: "bench_stop" in n.widget_id
        )
        return not running and any(
            n.kind == "download_button" and "devices_bench" in n.widget_id
            for n in student.fresh(since)
        )

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S["bench"], deadline)
    return Outcome(action, student.index, round_, seconds, error)


# --------------------------------------------------------------------------- the class


class Gate:
    """Everyone waits here until all students have arrived (or left); then all go at once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrived = 0
        self._open = asyncio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived >= self.size:
            self._open.set()

    async def pass_(self, deadline: float) -> None:
        self.arrive()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._open.wait(), max(0.0, deadline - time.monotonic()))


@dataclass
class Plan:
    mode: str
    students: int
    rounds: int
    photo_px: int
    seed: int
    arrival_spread_s: float = 5.0  # a class opens the link over a few seconds
    press_jitter_s: float = 1.0  # "now everyone press": within about a second
    pause_s: tuple[float, float] = (0.5, 2.0)  # between one student's actions in mixed rooms


async def run_student(
    base_url: str,
    index: int,
    plan: Plan,
    gates: list[Gate],
    pool: concurrent.futures.Executor,
    outcomes: list[Outcome],
    deadline: float,
    log: Callable[[str], None],
) -> None:
    rng = random.Random(plan.seed * 1000 + index)
    focus = FOCUS.get(plan.mode)
    room = focus[0] if focus else ROOMS[index % len(ROOMS)]
    student = Student(base_url, index, pool)
    passed = 0
    loop = asyncio.get_running_loop()
    try:
        await asyncio.sleep(plan.arrival_spread_s * index / max(1, plan.students))
        connected = False
        for round_ in range(plan.rounds):
            if time.monotonic() >= deadline:
                break
            opened = await open_room(student, room, not connected, deadline)
            outcomes.append(
                Outcome(opened.action, index, round_, opened.seconds, opened.error, opened.skipped)
            )
            connected = connected or student.ws is not None
            if opened.error is not None and (student.closed_reason or student.ws is None):
                log(f"student {index}: {opened.error}")
                break
            actions = (focus[1],) if focus else ROOM_ACTIONS[room]
            photo = None
            if "upload" in actions:
                photo = await loop.run_in_executor(
                    pool, student_photo, index, round_, plan.photo_px
                )
            if focus:
                await gates[round_].pass_(deadline)
                passed += 1
                await asyncio.sleep(rng.uniform(0, plan.press_jitter_s))
            for name in actions:
                if not focus:
                    await asyncio.sleep(rng.uniform(*plan.pause_s))
                if time.monotonic() >= deadline:
                    break
                if name == "click":
                    outcome = await strides_click(student, round_, deadline)
                elif name == "analyse":
                    outcome = await shapes_analyse(student, round_, deadline)
                elif name == "sample":
                    pick = round_ if focus else index + round_
                    outcome = await classify_sample(student, round_, pick, deadline)
                elif name == "upload":
                    assert photo is not None
                    outcome = await classify_upload(student, round_, photo, deadline)
                elif name == "demo":
                    outcome = await devices_demo(student, round_, deadline)
                else:
                    outcome = await devices_bench(student, round_, deadline)
                outcomes.append(outcome)
                if outcome.error and student.closed_reason:
                    break
            if student.closed_reason:
                log(f"student {index}: {student.closed_reason}")
                break
    finally:
        for gate in gates[passed:]:
            gate.arrive()  # a student who left must not hold the others back
        await student.close()


async def first_visit(
    base_url: str, pool: concurrent.futures.Executor, deadline: float
) -> dict[str, Outcome]:
    """The first shape analysis and the first classification, asked for at once."""

    async def visit(room: str, index: int) -> Outcome:
        student = Student(base_url, index, pool)
        started = time.perf_counter()
        try:
            outcome = await open_room(student, room, True, deadline)
            if outcome.error is None:
                present = (
                    _report_present(student, 0)
                    if room == "shapes"
                    else _predictions_present(student, 0)
                )
                if not present:
                    outcome = Outcome(outcome.action, index, 0, outcome.seconds, "no result shown")
            return Outcome(f"{room}.first", index, 0, time.perf_counter() - started, outcome.error)
        finally:
            await student.close()

    shapes, classify = await asyncio.gather(visit("shapes", -1), visit("classify", -2))
    return {"shapes": shapes, "classify": classify}


async def warm_up(base_url: str, pool: concurrent.futures.Executor, deadline: float) -> None:
    """Open the other rooms once, as a first visitor would, so the baseline has seen them."""
    for number, room in enumerate(("strides", "devices")):
        student = Student(base_url, -10 - number, pool)
        try:
            await open_room(student, room, True, deadline)
        finally:
            await student.close()


async def run_class(
    base_url: str, plan: Plan, deadline: float, log: Callable[[str], None]
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    gates = [Gate(plan.students) for _ in range(plan.rounds)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.students + 4) as pool:
        tasks = [
            asyncio.create_task(
                run_student(base_url, i, plan, gates, pool, outcomes, deadline, log),
                name=f"student-{i}",
            )
            for i in range(plan.students)
        ]
        done, pending = await asyncio.wait(tasks, timeout=max(1.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=30)
        for task in done:
            if task.exception() is not None:
                log(f"{task.get_name()} stopped: {task.exception()!r}")
    return outcomes


def run_mode(
    mode: str, args: argparse.Namespace, deadline: float, log: Callable[[str], None]
) -> ModeResult:
    result = ModeResult(mode=mode, students=args.students, rounds=args.rounds)
    plan = Plan(mode, args.students, args.rounds, args.photo_px, args.seed)
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
            result.memory.baseline = settled_pss(server)
            log(f"{mode}: baseline {_mb(result.memory.baseline)} MB; the class arrives")
            with PssSampler(server) as sampler:
                mode_deadline = min(deadline, time.monotonic() + 900)
                wall, cpu = time.monotonic(), time.process_time()
                result.outcomes = asyncio.run(run_class(server.url, plan, mode_deadline, log))
                wall = time.monotonic() - wall
                result.client_cpu_share = (time.process_time() - cpu) / wall if wall else None
                if time.monotonic() >= mode_deadline:
                    result.aborted = "the mode's time limit was reached"
            result.memory.peak = sampler.peak
            result.memory.processes_at_peak = sampler.processes_at_peak
            settle = max(0.0, min(args.settle_s, deadline - time.monotonic() - 10))
            log(f"{mode}: the class left; settling for {settle:g} s")
            with PssSampler(server) as sampler:  # the peak includes the settling time
                time.sleep(settle)
            result.memory.peak = max(result.memory.peak, sampler.peak)
            result.memory.settled = settled_pss(server)
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
    print("goals of issue 13:", "all met" if not missed else f"{len(missed)} missed")
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
