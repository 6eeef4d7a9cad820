"""Class mode under a class: ``python -m bench.classmode_load [--students 100] [--lesson
dlwp_tensors] [--level app|api] [--database sqlite|postgresql] [--replicas 1|2] [--idle-s 30]
[--json PATH]``.

``--level app`` (the issue's measurement): starts ``streamlit run app.py`` as
``bench/classroom.py`` does (its ``Server``, on a fresh data folder, or on a throw-away
PostgreSQL cluster with ``--database postgresql``), starts a class through the engine and
opens the teacher's "resume" link (``/class?class=CODE&teacher=KEY``) in one websocket
session; every student is another session (``bench/classroom_client.py``: the browser's
protocol, ``run_every`` fragments polled as the browser polls them) that opens the join link
``/class?class=CODE``, types a nickname and presses Join. Then the teacher presses Next on the
Class page for every step of the lesson; at a step with a question the teacher presses
"Open the question", each student (after 0–3 s of thought) picks an option and presses Send,
the teacher presses Reveal once the tally shows every answer, and every student's bar shows
the verdict. Afterwards the students stay following, idle, for ``--idle-s`` seconds.
``--replicas 2`` (with ``--database postgresql``) starts two servers on the one database, as
behind a load balancer: the teacher on the first, student i on replica i mod 2; every figure
below is then given per replica too, and CPU and memory are summed over both server trees
(the PSS goal holds per replica).

Timed:
- ``join``: the press of Join → the student's page shows them in the class.
- ``follow``: the teacher's press of Next → the student's screen shows the step (a full run
  finished on the step's room page whose class bar says "Step k of n"). ``follow_commit``:
  the same, from the moment the move was committed (read off the database by this tool).
- ``question``: the press of "Open the question" → the student's bar shows the options.
- ``tally``: a student's press of Send → the teacher's tally shows it. The teacher's screen
  shows counts, not names, so the k-th press is matched with the moment the count reached k
  (first in, first counted).
- ``reveal``: the press of Reveal → the student's bar shows the verdict.
- ``room``: on a step whose room stays closed until the reveal (the lesson's
  ``hide = ["room"]``), the press of Reveal → the student's page shows the room open (the
  verdict comes first, then the room).
- ``idle``: the server tree's CPU time (user + system, every process under the server) over
  the idle window, as a share of one core, with every student following and the teacher's
  Class page open.
- memory: the server tree's PSS (summed from ``/proc/<pid>/smaps_rollup``), peak over the
  whole class.
An error is a step not shown in time, an exception or a refusal card on a page, a lost
connection, or a protocol failure; the run must have none.

``--level api``: the same class against the engine alone (threads in this process, one
``ClassStore`` as one replica, students polling ``version()`` every ``POLL_S`` seconds as a
page does where the server cannot wake it, ``components/classmode/push.py``): the engine's
share of the figures, without Streamlit.

Goals (issue 35, a class of 100): 0 errors; p95 follow ≤ 1.5 s and p95 tally ≤ 1.5 s; p95 join
≤ 1 s on every replica; the idle class ≤ 25 % of one core; each server tree's peak PSS
≤ 2.0 GB. Exits 1 when a goal is missed, 2 when the measurement could not be made. The clients
run on the server's machine and take some of its CPU (their own share is printed): compare
figures from the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.classroom import (
    describe_checkout,
    percentile,
    process_tree,
    pss_bytes,
)
from bench.classroom_client import Student
from bench.server import Server, start_together
from components.classmode.state import POLL_S  # the page's student poll, on average

ROOT = Path(__file__).resolve().parents[1]
GB = 1_000_000_000
GOALS = {
    "follow_p95_s": 1.5,
    "tally_p95_s": 1.5,
    "join_p95_s": 1.0,  # on every replica
    "idle_core_share": 0.25,
    "peak_pss_bytes": 2.0 * GB,  # each server tree
}
STEP_TIMEOUT_S = 30.0  # a student's screen must show a change within this, else an error
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Figures:
    level: str
    database: str
    lesson: str
    students: int
    steps: int = 0
    questions: int = 0
    follow_s: list[float] = field(default_factory=list)
    follow_commit_s: list[float] = field(default_factory=list)
    question_s: list[float] = field(default_factory=list)
    tally_s: list[float] = field(default_factory=list)
    reveal_s: list[float] = field(default_factory=list)
    room_s: list[float] = field(default_factory=list)
    join_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    idle_s: float = 0.0
    idle_core_share: float | None = None
    idle_client_share: float | None = None
    baseline_pss: int | None = None
    peak_pss: int | None = None
    server_tracebacks: int = 0
    aborted: str | None = None
    # server CPU (ms) per student in each phase of a step, polling included: where time goes
    phase_cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    # this tool's own CPU (ms) per student in the same phases: the clients share the machine
    client_cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    server_pid: int | None = None
    # --replicas: each replica's server pid and URL; join and follow times per replica
    # (keyed "0", "1", ... so the JSON reads back the same); the PSS peak of all trees at once
    replicas: int = 1
    server_pids: list[int] = field(default_factory=list)
    replica_urls: list[str] = field(default_factory=list)
    join_by_replica: dict[str, list[float]] = field(default_factory=dict)
    follow_by_replica: dict[str, list[float]] = field(default_factory=dict)
    peak_pss_total: int | None = None
    cpus: int = field(default_factory=lambda: os.cpu_count() or 0)
    load_before: float = field(default_factory=lambda: os.getloadavg()[0])
    load_after: float | None = None


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95)


def replica_of(fig: Figures, student: Student) -> str:
    """Which replica a tab talks to, as the figures key it."""
    urls = fig.replica_urls or [student.base_url]
    return str(urls.index(student.base_url)) if student.base_url in urls else "0"


def check_goals(fig: Figures) -> list[str]:
    missed = []
    if fig.errors:
        missed.append(f"{len(fig.errors)} error(s), goal 0 (first: {fig.errors[0]})")
    if fig.server_tracebacks:
        missed.append(f"{fig.server_tracebacks} traceback(s) in the server log")
    if fig.aborted:
        missed.append(f"aborted: {fig.aborted}")
    if not fig.follow_s or p95(fig.follow_s) > GOALS["follow_p95_s"]:
        missed.append(f"follow p95 {_s(fig.follow_s)}, goal ≤ {GOALS['follow_p95_s']} s")
    if fig.questions and (not fig.tally_s or p95(fig.tally_s) > GOALS["tally_p95_s"]):
        missed.append(f"tally p95 {_s(fig.tally_s)}, goal ≤ {GOALS['tally_p95_s']} s")
    joins = fig.join_by_replica or ({"0": fig.join_s} if fig.join_s else {})
    for replica, values in sorted(joins.items()):
        if p95(values) > GOALS["join_p95_s"]:
            missed.append(
                f"join p95 {_s(values)} on replica {replica}, goal ≤ {GOALS['join_p95_s']} s"
            )
    if fig.idle_core_share is None or fig.idle_core_share > GOALS["idle_core_share"]:
        missed.append(f"idle share {fig.idle_core_share}, goal ≤ {GOALS['idle_core_share']}")
    if fig.level == "app" and (fig.peak_pss is None or fig.peak_pss > GOALS["peak_pss_bytes"]):
        missed.append(f"peak PSS {fig.peak_pss}, goal ≤ {GOALS['peak_pss_bytes']:.0f}")
    return missed


class PhaseClock:
    """Server CPU time per student between marks (``fig.phase_cpu_ms[name]``)."""

    def __init__(self, fig: Figures, students: int) -> None:
        self.fig, self.students = fig, max(1, students)
        self.last = trees_cpu_s(fig.server_pids)
        self.last_client = time.process_time()

    def mark(self, name: str) -> None:
        if not self.fig.server_pids:
            return
        now, client = trees_cpu_s(self.fig.server_pids), time.process_time()
        if name != "between":
            per = 1000 * (now - self.last) / self.students
            self.fig.phase_cpu_ms.setdefault(name, []).append(per)
            per = 1000 * (client - self.last_client) / self.students
            self.fig.client_cpu_ms.setdefault(name, []).append(per)
        self.last, self.last_client = now, client


def _mb(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 1e6:.0f}"


def _s(values: Sequence[float]) -> str:
    return "n/a" if not values else f"{p95(values):.2f} s"


def format_figures(fig: Figures) -> str:
    def row(name: str, values: list[float]) -> str:
        if not values:
            return f"  {name:<14} (none)"
        return (
            f"  {name:<14} n={len(values):<4} p50 {percentile(values, 50):6.2f} s"
            f"  p95 {p95(values):6.2f} s  max {max(values):6.2f} s"
        )

    per_replica = []
    if fig.replicas > 1:
        for replica in sorted(fig.join_by_replica):
            per_replica.append(row(f" join on {replica}", fig.join_by_replica[replica]))
        for replica in sorted(fig.follow_by_replica):
            per_replica.append(row(f" follow on {replica}", fig.follow_by_replica[replica]))
    lines = [
        f"class mode, level {fig.level}, {fig.database}"
        + (f", {fig.replicas} replicas" if fig.replicas > 1 else "")
        + f": {fig.students} students, lesson {fig.lesson} ({fig.steps} steps,"
        f" {fig.questions} questions)",
        row("join", fig.join_s),
        row("follow", fig.follow_s),
        *per_replica,
        row("follow_commit", fig.follow_commit_s),
        row("question", fig.question_s),
        row("tally", fig.tally_s),
        row("reveal", fig.reveal_s),
        row("room", fig.room_s),
        f"  idle           {fig.idle_s:.0f} s: server tree "
        + ("n/a" if fig.idle_core_share is None else f"{100 * fig.idle_core_share:.1f} %")
        + " of one core"
        + (
            ""
            if fig.idle_client_share is None
            else f" (this tool's clients: {100 * fig.idle_client_share:.1f} %)"
        ),
    ]
    if fig.peak_pss is not None or fig.baseline_pss is not None:
        lines.append(
            f"  memory         PSS baseline {_mb(fig.baseline_pss)} MB, peak {_mb(fig.peak_pss)} MB"
            + (
                f" (the largest replica; all {fig.replicas} at once {_mb(fig.peak_pss_total)} MB)"
                if fig.replicas > 1
                else ""
            )
        )
    for name, values in fig.phase_cpu_ms.items():
        client = fig.client_cpu_ms.get(name) or [0.0]
        lines.append(
            f"  server CPU     {name}: {statistics.median(values):.0f} ms per student per step"
            f" (median over steps, polling included; this tool's clients:"
            f" {statistics.median(client):.0f} ms)"
        )
    lines.append(
        f"  machine        {fig.cpus} CPUs; 1-min load average {fig.load_before:.1f} before,"
        f" {fig.load_after if fig.load_after is None else round(fig.load_after, 1)} after"
    )
    lines.append(f"  errors         {len(fig.errors)}")
    lines += [f"    {e}" for e in fig.errors[:10]]
    if fig.aborted:
        lines.append(f"  ABORTED: {fig.aborted}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- CPU and memory


class TreePss:
    """Each server tree's summed PSS every ``interval_s`` in a thread; keeps each tree's
    peak (``peak``: the largest) and the peak of all trees together (``peak_total``)."""

    def __init__(self, servers: Sequence[Server], interval_s: float = 0.5) -> None:
        self.servers = list(servers)
        self.interval_s = interval_s
        self.peaks = [0] * len(self.servers)
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pss")

    @property
    def peak(self) -> int:
        return max(self.peaks, default=0)

    def sample(self) -> int:
        """The largest tree's PSS now (all of them summed go to ``peak_total``)."""
        trees = [sum(pss_bytes(pid) or 0 for pid in s.remember_tree()) for s in self.servers]
        self.peaks = [max(old, new) for old, new in zip(self.peaks, trees, strict=True)]
        self.peak_total = max(self.peak_total, sum(trees))
        return max(trees, default=0)

    def settled(self, samples: int = 5, gap_s: float = 0.5) -> int:
        values = []
        for _ in range(samples):
            values.append(self.sample())
            time.sleep(gap_s)
        return sorted(values)[len(values) // 2]

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.sample()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> TreePss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def trees_cpu_s(roots: Sequence[int]) -> float:
    """:func:`tree_cpu_s` summed over several servers (the replicas)."""
    return sum(tree_cpu_s(root) for root in roots)


def tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of ``root`` and its live descendants."""
    total = 0.0
    for pid in process_tree(root):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


# --------------------------------------------------------------------------- databases


@contextlib.contextmanager
def database(kind: str, folder: Path):  # type: ignore[no-untyped-def]
    """(URL for this tool's store, environment for the server)."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'classes.sqlite3'}", {"ATLAS_DATA_DIR": str(folder)}
        return
    from bench.postgres import postgres_cluster

    with postgres_cluster() as url:
        yield url, {"ATLAS_DATABASE_URL": url}


class CommitWatch:
    """Notes when each class version was first seen committed (a thread reading the
    database every 10 ms through its own store, uncached)."""

    def __init__(self, url: str, code: str) -> None:
        from torchatlas.classmode import ClassStore, Limits

        self.store = ClassStore(url, limits=Limits(version_cache_s=0.0))
        self.code = code
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commit-watch")

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.seen.setdefault(self.store.version(self.code), time.perf_counter())
            self._stop.wait(0.01)

    def __enter__(self) -> CommitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# --------------------------------------------------------------------------- app level


def _texts(student: Student, kinds: tuple[str, ...] = ("markdown",)) -> list[str]:
    return [n.text() for n in student.find() if n.kind in kinds]


def _refusal(student: Student) -> str | None:
    """An exception or a refusal card on the page (class mode's cards start with their
    title), or a lost connection."""
    from torchatlas.i18n import translate

    title = translate("classmode.errors.title", "en")
    for node in student.find():
        if node.kind == "exception":
            return f"exception {node.proto.type}: {node.proto.message}"[:200]
        if node.kind == "alert" and title in node.text():
            return " ".join(node.text().replace("*", "").split())[:200]
    if student.page_not_found:
        return f"page not found: {student.page_not_found}"
    return student.closed_reason or None


async def wait_for(
    student: Student, ready: Callable[[], bool], since: float, timeout_s: float
) -> tuple[float | None, str | None]:
    """Seconds from ``since`` (perf_counter) until ``ready()`` holds with no run in
    progress; (None, why) on a timeout or an error on the page."""
    limit = time.monotonic() + timeout_s
    while True:
        student.settled.clear()  # before looking: a run that finishes after the look wakes us
        if not student.running and ready():
            return time.perf_counter() - since, None
        problem = _refusal(student)
        if problem:
            return None, problem
        remaining = limit - time.monotonic()
        if remaining <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(student.settled.wait(), min(remaining, 1.0))
    stall_dump()
    return None, f"not shown within {timeout_s:g} s ({describe(student)})"


# --dump-on-stall: the server runs with PYTHONFAULTHANDLER=1; at the first tab left waiting,
# SIGABRT makes it write every thread's stack to its log (and end the run).
STALL = {"pid": 0, "dumped": False}


def stall_dump() -> None:
    if STALL["pid"] and not STALL["dumped"]:
        STALL["dumped"] = True
        with contextlib.suppress(OSError):
            os.kill(int(STALL["pid"]), signal.SIGABRT)


class Tab(Student):
    """A student's tab that also remembers its last messages, both ways (for a report)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.trail: collections.deque[str] = collections.deque(maxlen=16)
        self.t0 = time.monotonic()

    def _note(self, text: str) -> None:
        self.trail.append(f"{time.monotonic() - self.t0:.1f}s {text}")

    def handle(self, message: Any) -> None:
        kind = message.WhichOneof("type")
        if kind == "new_session":
            frags = list(message.metadata.run.fragment_ids) if message.HasField("metadata") else []
            self._note(f"<new_session frags={len(frags)}")
        elif kind == "navigation":
            page = next(
                (p.url_pathname for p in message.navigation.app_pages
                 if p.page_script_hash == message.navigation.page_script_hash), "?"
            )  # fmt: skip
            self._note(f"<navigation {page}")
        elif kind == "script_finished":
            self._note(f"<finished {message.script_finished}")
        elif kind == "auto_rerun":
            self._note("<auto_rerun")
        elif kind == "stop_auto_rerun":
            self._note("<stop_auto_rerun")
        elif kind == "page_info_changed":
            self._note("<query changed")
        elif kind == "page_not_found":
            self._note("<page_not_found")
        super().handle(message)

    async def send_rerun(self, widgets: Sequence[Any] = (), **kwargs: Any) -> None:
        what = "fragment" if kwargs.get("fragment_id") else "full"
        self._note(f">rerun {what}{' auto' if kwargs.get('auto') else ''} w={len(widgets)}")
        await super().send_rerun(widgets, **kwargs)


def describe(student: Student) -> str:
    """What the tab shows now, for a timeout's report."""
    page = next((path for path, h in student.pages.items() if h == student.page_hash), "?")
    buttons = [
        n.widget_id.rsplit("-", 1)[-1] + (" (disabled)" if n.proto.disabled else "")
        for n in student.find(kind="button")
    ]
    radios = [
        f"{n.widget_id.rsplit('-', 1)[-1]}={student.current_value(n)!r}"
        for n in student.find(kind="radio")
    ]
    trail = " | ".join(getattr(student, "trail", ()))
    return (
        f"page {page}, runs {student.epoch}, running {student.running}, last status "
        f"{student.last_status}, polling {sorted(student._auto)}, buttons {buttons}, "
        f"radios {radios}; last messages: {trail}"
    )


def _button(student: Student, key: str) -> Any:
    found = student.find(kind="button", key=key)
    return found[0] if found else None


async def press(student: Student, key: str, extra: Sequence[Any] = ()) -> bool:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    node = _button(student, key)
    if node is None or node.proto.disabled:
        return False
    await student.send_rerun(
        [*extra, WidgetState(id=node.widget_id, trigger_value=True)],
        fragment_id=node.fragment_id,
    )
    return True


async def open_page(student: Student, query: str, ready: Callable[[], bool]) -> str | None:
    await student.connect()
    started = time.perf_counter()
    await student.send_rerun(page_name="class", page_hash="", query=query, keep_page=False)
    _, error = await wait_for(student, ready, started, 60)
    return error


async def join(student: Student, code: str, nickname: str, fig: Figures) -> str | None:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    error = await open_page(
        student, f"class={code}", lambda: _button(student, "classmode_join_button") is not None
    )
    if error:
        return f"join page: {error}"
    boxes = student.find(kind="text_input", key="classmode_join_name")
    if not boxes:
        return "join page: no nickname box"
    name = WidgetState(id=boxes[0].widget_id, string_value=nickname)
    started = time.perf_counter()
    await press(student, "classmode_join_button", [name])
    seconds, error = await wait_for(
        student,
        lambda: "student=" in student.query and _button(student, "classmode_leave") is not None,
        started,
        60,
    )
    if error:
        return f"join: {error}"
    fig.join_s.append(seconds or 0.0)
    fig.join_by_replica.setdefault(replica_of(fig, student), []).append(seconds or 0.0)
    return None


def shows_step(student: Student, room: str, number: int, total: int, epoch: int) -> bool:
    line = f"Step {number} of {total}"
    return (
        student.epoch > epoch
        and student.page_hash != ""
        and student.page_hash == student.pages.get(room)
        and any(line in text for text in _texts(student))
    )


def question_radio(student: Student, code: str, number: int) -> Any:
    found = student.find(kind="radio", key=f"classmode_q_{code}_{number}_given")
    return found[0] if found else None


def shows_verdict(student: Student) -> bool:
    from torchatlas.i18n import translate

    marks = [
        translate(f"classmode.question.{name}", "en").split("{")[0].strip()
        for name in ("right", "wrong", "no_answer")
    ]
    return any(
        n.kind == "alert" and any(mark and mark in n.text() for mark in marks)
        for n in student.find()
    )


def shows_room_closed(student: Student) -> bool:
    from torchatlas.i18n import translate

    note = translate("classmode.question.room_hidden", "en")
    return any(n.kind == "alert" and note in n.text() for n in student.find())


def answered_count(teacher: Student) -> int | None:
    for node in teacher.find(kind="metric"):
        if node.proto.label == "Answered":
            with contextlib.suppress(ValueError):
                return int(node.proto.body)
    return None


async def run_app_class(
    base_urls: Sequence[str],
    url: str,
    args: argparse.Namespace,
    fig: Figures,
    log: Callable[[str], None],
) -> None:
    from torchatlas.classmode import ClassStore
    from torchatlas.lessons import find

    lesson = find(args.lesson)
    if lesson is None:
        raise RuntimeError(f"no lesson {args.lesson!r}")
    total = len(lesson.steps)
    fig.steps = min(total, args.steps)
    store = ClassStore(url)
    teacher_pass = store.start(lesson.id, "en", client="bench-teacher")
    code, key = teacher_pass.code, teacher_pass.teacher_key
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    teacher = Tab(base_urls[0], -1, pool)  # the teacher on the first replica
    pupils = [Tab(base_urls[i % len(base_urls)], i, pool) for i in range(args.students)]
    rng = random.Random(args.seed)
    try:
        error = await open_page(
            teacher,
            f"class={code}&teacher={key}",
            lambda: _button(teacher, "classmode_next") is not None,
        )
        if error:
            raise RuntimeError(f"the teacher's page: {error}")
        log(f"class {code}: teacher ready; {args.students} students join over ~5 s")

        async def arrive(i: int) -> None:
            await asyncio.sleep(5.0 * i / max(1, args.students))
            problem = await join(pupils[i], code, f"Student bench {i}", fig)
            if problem:
                fig.errors.append(f"student {i}: {problem}")

        await asyncio.gather(*(arrive(i) for i in range(args.students)))
        present = [p for p in pupils if not any(e.startswith(f"student {p.index}:")
                                                for e in fig.errors)]  # fmt: skip
        log(f"{len(present)} joined; the lesson starts")
        with CommitWatch(url, code) as commits:
            for number in range(1, fig.steps + 1):
                await lesson_step(teacher, present, code, lesson, number, commits, rng, fig, log)
                if STALL["dumped"]:
                    raise RuntimeError("a tab waited in vain: the server's stacks are in its log")
                if time.monotonic() > args.deadline:
                    raise RuntimeError("the deadline passed mid-lesson")
        fig.idle_s = args.idle_s
        log(f"lesson done; {len(present)} students idle, following, for {args.idle_s:g} s")
        await asyncio.sleep(3)  # the last reveal's reruns finish
        pids = fig.server_pids
        cpu0, client0, wall0 = trees_cpu_s(pids), time.process_time(), time.monotonic()
        await asyncio.sleep(args.idle_s)
        wall = time.monotonic() - wall0
        fig.idle_core_share = (trees_cpu_s(pids) - cpu0) / wall
        fig.idle_client_share = (time.process_time() - client0) / wall
        for student in [teacher, *present]:
            problem = _refusal(student)
            if problem:
                fig.errors.append(f"student {student.index} after idling: {problem}")
    finally:
        await asyncio.gather(*(s.close() for s in [teacher, *pupils]), return_exceptions=True)
        pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class StepRun:
    """One lesson step as the class lives it: who is in it and where its figures go."""

    teacher: Student
    pupils: list[Student]
    code: str
    lesson: Any
    number: int
    commits: CommitWatch
    rng: random.Random
    fig: Figures
    log: Callable[[str], None]
    clock: PhaseClock

    @property
    def step(self) -> Any:
        return self.lesson.step(self.number)

    def error(self, text: str) -> None:
        self.fig.errors.append(f"step {self.number}{text}")


async def lesson_step(
    teacher: Student,
    pupils: list[Student],
    code: str,
    lesson: Any,
    number: int,
    commits: CommitWatch,
    rng: random.Random,
    fig: Figures,
    log: Callable[[str], None],
) -> None:
    """The teacher moves to step ``number`` and every student follows; at a step with a
    question, the teacher opens it, the students answer, and the teacher reveals it. Each
    phase is timed (``fig``) and its server CPU per student marked (:class:`PhaseClock`)."""
    run = StepRun(
        teacher, pupils, code, lesson, number, commits, rng, fig, log, PhaseClock(fig, len(pupils))
    )
    if not await move_and_follow(run):
        return
    question = run.step.question
    if question is None or not question.options:  # code: classmode_code_load
        return
    fig.questions += 1
    asked = await open_question(run)
    if asked is None:
        return
    presses = await answer_and_tally(run, asked)
    if not await reveal_and_show_verdicts(run, presses):
        return
    await teacher_ready_for_next(run)


async def move_and_follow(run: StepRun) -> bool:
    """The teacher presses Next; every student's screen must show the step in its room
    (``follow``, and ``follow_commit`` from the commit). False when Next was not there."""
    total, step, number = len(run.lesson.steps), run.step, run.number
    epochs = {p.index: p.epoch for p in run.pupils}
    versions_before = max(run.commits.seen, default=0)
    pressed = time.perf_counter()
    if not await press(run.teacher, "classmode_next"):
        run.error(": the teacher's Next button is missing or disabled")
        return False

    async def follow(p: Student) -> None:
        seconds, problem = await wait_for(
            p, lambda: shows_step(p, step.room, number, total, epochs[p.index]), pressed,
            STEP_TIMEOUT_S,
        )  # fmt: skip
        if problem:
            run.error(f", student {p.index}: {problem}")
            return
        run.fig.follow_s.append(seconds or 0.0)
        run.fig.follow_by_replica.setdefault(replica_of(run.fig, p), []).append(seconds or 0.0)
        committed = min(
            (t for v, t in run.commits.seen.items() if v > versions_before), default=None
        )
        if committed is not None and seconds is not None:
            run.fig.follow_commit_s.append(seconds - (committed - pressed))

    await asyncio.gather(*(follow(p) for p in run.pupils))
    run.clock.mark("follow")
    shown = run.fig.follow_s[-len(run.pupils) :]
    run.log(f"step {number} ({step.room}): followed, p95 {_s(shown)}")
    return True


async def open_question(run: StepRun) -> float | None:
    """The teacher presses "Open the question" once it is there; when it was pressed (None:
    it never came)."""
    teacher = run.teacher
    _, problem = await wait_for(
        teacher, lambda: _button(teacher, "classmode_ask") is not None, time.perf_counter(), 30
    )
    if problem:
        run.error(f": the teacher's page: {problem}")
        return None
    run.clock.mark("between")
    asked = time.perf_counter()
    await press(teacher, "classmode_ask")
    return asked


async def answer_and_tally(run: StepRun, asked: float) -> list[float]:
    """Every student answers (``question`` timed from ``asked``); each press of Send is
    matched with the moment the teacher's count reached it (``tally``). The presses' times."""
    teacher = run.teacher
    presses: list[float] = []
    count_times: dict[int, float] = {}
    watching = True

    async def watch_tally() -> None:
        while watching:
            count = answered_count(teacher)
            if count is not None and count not in count_times and not teacher.running:
                count_times[count] = time.perf_counter()
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_tally())
    await asyncio.gather(*(student_answers(run, p, asked, presses) for p in run.pupils))
    run.clock.mark("ask_and_answer")
    limit = time.monotonic() + STEP_TIMEOUT_S
    while len(presses) not in count_times and time.monotonic() < limit:
        await asyncio.sleep(0.02)
    watching = False
    await watcher
    record_tally(run, presses, count_times)
    return presses


async def student_answers(run: StepRun, p: Student, asked: float, presses: list[float]) -> None:
    """One student: sees the options, thinks 0–3 s, picks one, presses Send (its time goes to
    ``presses``) and sees their answer taken."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    code, number = run.code, run.number
    seconds, problem = await wait_for(
        p, lambda: question_radio(p, code, number) is not None, asked, STEP_TIMEOUT_S
    )
    if problem:
        run.error(f", student {p.index}, question: {problem}")
        return
    run.fig.question_s.append(seconds or 0.0)
    await asyncio.sleep(run.rng.uniform(0, 3))  # reading and thinking
    radio = question_radio(p, code, number)
    pick = run.rng.randrange(len(radio.proto.options))
    choice = WidgetState(id=radio.widget_id, string_value=radio.proto.options[pick])
    epoch = p.epoch
    await p.send_rerun([choice], fragment_id=radio.fragment_id)
    send_key = f"classmode_q_{code}_{number}_send"
    _, problem = await wait_for(
        p,
        lambda: p.epoch > epoch and _button(p, send_key) is not None
        and not _button(p, send_key).proto.disabled,
        time.perf_counter(), STEP_TIMEOUT_S,
    )  # fmt: skip
    if problem:
        run.error(f", student {p.index}, pick: {problem}")
        return
    presses.append(time.perf_counter())
    await press(p, send_key)
    sent = "Your answer:"
    _, problem = await wait_for(
        p, lambda: any(sent in t for t in _texts(p, ("markdown",))), presses[-1],
        STEP_TIMEOUT_S,
    )  # fmt: skip
    if problem:
        run.error(f", student {p.index}, answer: {problem}")


def record_tally(run: StepRun, presses: list[float], count_times: dict[int, float]) -> None:
    """The k-th press in time is counted when the teacher's count first reached k (the
    teacher's screen shows counts, not names: first in, first counted)."""
    for k, pressed_at in enumerate(sorted(presses), start=1):
        reached = min((t for c, t in count_times.items() if c >= k), default=None)
        if reached is None:
            run.error(f": the tally never showed {k} answers")
            break
        run.fig.tally_s.append(max(0.0, reached - pressed_at))


async def reveal_and_show_verdicts(run: StepRun, presses: list[float]) -> bool:
    """The teacher presses Reveal once it is there; every student's bar must show the verdict
    (``reveal``) and, where the step kept its room closed, the room must open (``room``).
    False when Reveal never came."""
    teacher = run.teacher
    _, problem = await wait_for(
        teacher, lambda: _button(teacher, "classmode_reveal") is not None, time.perf_counter(), 30
    )
    if problem:
        run.error(f": no reveal button: {problem}")
        return False
    run.clock.mark("between")
    revealed = time.perf_counter()
    await press(teacher, "classmode_reveal")

    async def verdict(p: Student) -> None:
        seconds, problem = await wait_for(p, lambda: shows_verdict(p), revealed, STEP_TIMEOUT_S)
        if problem:
            run.error(f", student {p.index}, reveal: {problem}")
            return
        run.fig.reveal_s.append(seconds or 0.0)
        if not run.step.hides_room:
            return
        seconds, problem = await wait_for(
            p, lambda: not shows_room_closed(p), revealed, STEP_TIMEOUT_S
        )
        if problem:
            run.error(f", student {p.index}, the room after the reveal: {problem}")
            return
        run.fig.room_s.append(seconds or 0.0)

    await asyncio.gather(*(verdict(p) for p in run.pupils))
    run.clock.mark("reveal")
    room = f", room p95 {_s(run.fig.room_s[-len(run.pupils) :])}" if run.step.hides_room else ""
    run.log(
        f"step {run.number}: {len(presses)} answers, tally p95 "
        f"{_s(run.fig.tally_s[-len(presses) :])}, reveal p95 "
        f"{_s(run.fig.reveal_s[-len(run.pupils) :])}{room}"
    )
    return True


async def teacher_ready_for_next(run: StepRun) -> None:
    """The teacher's page must show the Next button again before the next step."""
    teacher = run.teacher
    await wait_for(
        teacher,
        lambda: _button(teacher, "classmode_reveal") is None
        and _button(teacher, "classmode_next") is not None,
        time.perf_counter(), 30,
    )  # fmt: skip


def run_app(args: argparse.Namespace, log: Callable[[str], None]) -> Figures:
    fig = Figures("app", args.database, args.lesson, args.students, replicas=args.replicas)
    with (
        tempfile.TemporaryDirectory(prefix="classmode-load-") as folder,
        database(args.database, Path(folder)) as (url, env),
    ):
        saved = {name: os.environ.get(name) for name in env}
        if args.dump_on_stall:
            env = {**env, "PYTHONFAULTHANDLER": "1"}
            saved.setdefault("PYTHONFAULTHANDLER", os.environ.get("PYTHONFAULTHANDLER"))
        os.environ.update(env)  # the servers inherit them
        logs = [Path(folder) / f"server{i}.log" for i in range(args.replicas)]
        servers = [Server(0, log_path, args.app_dir) for log_path in logs]
        fig.replica_urls = [server.url for server in servers]
        try:
            urls = ", ".join(server.url for server in servers)
            log(f"starting {len(servers)} server(s) on {urls} ({args.database})")
            start_together(servers, args.deadline)
            fig.server_pids = [server.pid for server in servers]
            args.server_pid = fig.server_pid = servers[0].pid
            if args.dump_on_stall:
                STALL["pid"] = servers[0].pid
            for server in servers:
                asyncio.run(warm(server.url))
            time.sleep(2)
            fig.baseline_pss = TreePss(servers).settled()
            with TreePss(servers) as sampler:
                asyncio.run(run_app_class(fig.replica_urls, url, args, fig, log))
            fig.peak_pss, fig.peak_pss_total = sampler.peak, sampler.peak_total
        except Exception as error:  # a lost server or connection ends the run, reported
            fig.aborted = f"{type(error).__name__}: {error}"[:500]
        finally:
            for server in servers:
                server.stop()
            for server in servers:
                count, last = server.tracebacks()
                fig.server_tracebacks += count
                if last:
                    fig.errors.append(f"server traceback: {last}")
            if args.server_log is not None:
                args.server_log.write_text("".join(server.log_text() for server in servers))
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return fig


async def warm(base_url: str) -> None:
    """A first visitor opens the Class page (the server imports the engine once)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        visitor = Student(base_url, -100, pool)
        try:
            await open_page(
                visitor, "", lambda: _button(visitor, "classmode_start_button") is not None
            )
        finally:
            await visitor.close()


# --------------------------------------------------------------------------- api level


def run_api(args: argparse.Namespace, log: Callable[[str], None]) -> Figures:
    """The class against the engine: 60 threads polling ``version()`` as the page does."""
    from torchatlas.classmode import ClassError, ClassStore
    from torchatlas.lessons import find

    fig = Figures("api", args.database, args.lesson, args.students)
    lesson = find(args.lesson)
    with (
        tempfile.TemporaryDirectory(prefix="classmode-load-") as folder,
        database(args.database, Path(folder)) as (url, _env),
    ):
        store = ClassStore(url)  # one replica: every student shares its cache
        teacher = store.start(lesson.id, "en", client="bench")
        code, key = teacher.code, teacher.teacher_key
        pupils = []
        for i in range(args.students):
            started = time.perf_counter()
            pupils.append(store.join(code, f"s{i}", client=f"c{i}"))
            fig.join_s.append(time.perf_counter() - started)
        fig.steps = min(len(lesson.steps), args.steps)
        moved: dict[int, float] = {}  # version → when its change was committed
        answered: list[tuple[float, int]] = []
        stop = threading.Event()
        lock = threading.Lock()

        def student(i: int) -> None:
            rng = random.Random(i)
            seen = 0
            time.sleep(rng.uniform(0, POLL_S))
            while not stop.is_set():
                try:
                    version = store.version(code)
                    if version > seen:
                        state = store.current_state(code)
                        seen = state.version
                        with lock:
                            if state.version in moved:
                                fig.follow_commit_s.append(
                                    time.perf_counter() - moved[state.version]
                                )
                        if state.asked and not state.revealed:
                            picked = dict(store.student(code, pupils[i].student_key).answers)
                            if state.step not in picked:
                                store.answer(
                                    code,
                                    pupils[i].student_key,
                                    rng.randrange(len(state.options)),
                                )
                                with lock:
                                    answered.append((time.perf_counter(), state.step))
                except ClassError as error:
                    with lock:
                        fig.errors.append(f"student {i}: {error.code}")
                except Exception as error:  # every failure is a finding
                    with lock:
                        fig.errors.append(f"student {i}: {type(error).__name__}: {error}")
                stop.wait(POLL_S)

        threads = [threading.Thread(target=student, args=(i,)) for i in range(args.students)]
        for thread in threads:
            thread.start()
        for number in range(1, fig.steps + 1):
            step = lesson.step(number)
            state = store.move(code, key, step=number, room=step.room, query=step.fields())
            moved[state.version] = time.perf_counter()
            time.sleep(POLL_S + 1)
            if step.question is None or not step.question.options:  # code exercises apart
                continue
            fig.questions += 1
            state = store.ask(code, key)
            moved[state.version] = time.perf_counter()
            deadline = time.monotonic() + 10
            counted: dict[int, float] = {}
            while time.monotonic() < deadline:
                tally = store.tally(code, key)
                counted.setdefault(tally.answered, time.perf_counter())
                if tally.answered >= args.students:
                    break
                time.sleep(0.02)
            with lock:
                presses = sorted(t for t, s in answered if s == number)
            for k, pressed in enumerate(presses, start=1):
                reached = min((t for c, t in counted.items() if c >= k), default=None)
                if reached is None:
                    fig.errors.append(f"step {number}: tally short of {k}")
                    break
                fig.tally_s.append(max(0.0, reached - pressed))
            state = store.reveal(code, key)
            moved[state.version] = time.perf_counter()
            time.sleep(POLL_S + 0.5)
        fig.follow_s = list(fig.follow_commit_s)
        log(f"lesson done; {args.students} pollers idle for {args.idle_s:g} s")
        cpu0, wall0 = time.process_time(), time.monotonic()
        time.sleep(args.idle_s)
        wall = time.monotonic() - wall0
        fig.idle_s = wall
        fig.idle_core_share = (time.process_time() - cpu0) / wall
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    return fig


# --------------------------------------------------------------------------- entry


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.classmode_load", description=__doc__)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--lesson", default="dlwp_tensors")
    parser.add_argument("--steps", type=int, default=12, help="at most this many steps")
    parser.add_argument("--level", choices=("app", "api"), default="app")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="servers on the one database (2 needs --database postgresql): the teacher on"
        " the first, student i on replica i mod N",
    )
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument(
        "--app-dir",
        type=Path,
        default=ROOT,
        help="the checkout whose app.py the servers run (another commit's, exported with"
        " git archive, for a before/after with this same tool)",
    )
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--deadline-s", type=float, default=1500.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--server-log", type=Path, default=None)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--dump-on-stall",
        action="store_true",
        help="diagnosis: at the first tab left waiting, the server writes its threads' stacks"
        " to its log (--server-log) and the run ends",
    )
    # bench/classroom.py hands over its whole command line (``--mode class ...``).
    parser.add_argument("--mode", default="class", help=argparse.SUPPRESS)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"classmode_load: ignoring {' '.join(unknown)}", file=sys.stderr)
    if not 1 <= args.students <= 200:
        parser.error("--students: 1 to 200")
    if not 0 < args.idle_s <= 600:
        parser.error("--idle-s: up to 600")
    if not (args.app_dir / "app.py").is_file():
        parser.error(f"--app-dir {args.app_dir} has no app.py")
    args.app_dir = args.app_dir.resolve()
    if not 1 <= args.replicas <= 4:
        parser.error("--replicas: 1 to 4")
    if args.replicas > 1 and (args.database != "postgresql" or args.level != "app"):
        parser.error("--replicas 2 or more: --level app --database postgresql (one database)")
    args.deadline = time.monotonic() + args.deadline_s
    args.server_pid = None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def log(line: str) -> None:
        if not args.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    print(f"class mode load: app {describe_checkout(args.app_dir)}", flush=True)
    try:
        fig = run_app(args, log) if args.level == "app" else run_api(args, log)
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    fig.load_after = os.getloadavg()[0]
    print(format_figures(fig), flush=True)
    missed = check_goals(fig)
    print("goals of issue 35:", "all met" if not missed else f"{len(missed)} missed")
    for line in missed:
        print(f"  MISSED {line}")
    if args.json is not None:
        args.json.write_text(json.dumps({**asdict(fig), "goals_missed": missed}, indent=2))
    if fig.aborted or not fig.follow_s:
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
