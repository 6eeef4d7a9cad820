"""A scenario under Community Cloud's memory: ``python -m bench.memory_budget [--memory-max 2.7G]
[--json PATH] classroom|class [the scenario tool's own options]``.

Cloud gives an app 690 MB – 2.7 GB; past the cap the kernel reclaims the app's page cache and
then kills one of its processes. This wrapper runs a scenario tool in this process
(``classroom``: ``bench/classroom.py``, the 30-student classroom; ``class``:
``bench/classmode_load.py``, a class of ``--students`` phones) with the server it starts put
into a memory cgroup of its own, capped at ``--memory-max``, so the server and its sandbox
workers (which the server forks, and so inherit the cgroup) live under the cap as on Cloud,
and the scenario's clients (threads of this process) do not count. Where the machine allows:

- cgroup v2: a child of this process's cgroup with ``memory.max`` (the peak: ``memory.peak``,
  OOM kills: ``memory.events``);
- cgroup v1's memory controller (a hybrid host, as this one: the v2 hierarchy has no memory
  controller): ``memory.limit_in_bytes``, ``memory.max_usage_in_bytes``, ``memory.oom_control``;
- neither (no permission, no controller): no cap is enforced; the verdict compares the server
  tree's peak PSS, which the scenario tool samples anyway, with the cap.

The tool's own figures (its ``--json``) give the errors and the PSS peak. The verdict: no
error, no OOM kill, and the peak (the cgroup's, else the PSS) within the cap. Exits 0 when
that holds, 1 when it does not, 2 when the scenario could not be measured.

A cgroup counts page cache the server faults in first; files another process read before
(torch's libraries, here) are charged to that process's cgroup, so on a fresh Cloud container
the cgroup figure would be higher by those pages. The PSS figure counts mapped files in
proportion either way: both are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.server import Server

MB = 1_000_000
CLOUD_MEMORY_MAX = "2.7G"  # Community Cloud's largest allowance, decimal as Streamlit states it
# The scenario tools: each one's module (run in this process, so its Server can be replaced)
# and the modules whose ``Server`` name it starts its server through.
SCENARIOS: dict[str, tuple[str, tuple[str, ...]]] = {
    "classroom": ("bench.classroom", ("bench.classroom",)),
    "class": ("bench.classmode_load", ("bench.classroom", "bench.classmode_load")),
}
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*$", re.IGNORECASE)
POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_size(text: str) -> int:
    """``2.7G`` → 2,700,000,000 bytes (K, M, G, T decimal; Ki, Mi, Gi, Ti binary; a trailing
    B allowed), as systemd's MemoryMax= reads it except that plain G is decimal here: Cloud
    states its limits in decimal gigabytes."""
    found = SIZE.match(text)
    if found is None:
        raise ValueError(f"not a size: {text!r} (e.g. 2.7G, 690M, 2Gi)")
    number, unit, binary = found.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** POWERS[unit.upper()])


# --------------------------------------------------------------------------- cgroups


@dataclass(frozen=True)
class Hierarchy:
    """Where this process sits in a cgroup hierarchy that has the memory controller."""

    version: int  # 2 (unified) or 1 (the v1 memory controller)
    path: Path  # this process's cgroup directory


def own_hierarchies(proc_cgroup: str, mountinfo: str) -> list[Hierarchy]:
    """This process's cgroup directories that may hold a memory cgroup, v2 first, from the
    texts of ``/proc/self/cgroup`` and ``/proc/self/mountinfo``."""
    places: dict[str, str] = {}  # "" (v2) or "memory" (v1) → this process's cgroup path
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers = parts[1].split(",")
        if parts[0] == "0" and parts[1] == "":
            places[""] = parts[2]
        elif "memory" in controllers:
            places["memory"] = parts[2]
    found: list[Hierarchy] = []
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount, kind, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if kind == "cgroup2" and "" in places:
            found.append(Hierarchy(2, mount_path(mount, root, places[""])))
        elif kind == "cgroup" and "memory" in options and "memory" in places:
            found.append(Hierarchy(1, mount_path(mount, root, places["memory"])))
    return sorted(found, key=lambda h: -h.version)


def mount_path(mount: str, root: str, cgroup: str) -> Path:
    """The directory of ``cgroup`` (a path as /proc/self/cgroup gives it) under a mount of
    the hierarchy whose root is ``root`` (not "/" when a container mounted a sub-tree)."""
    if root != "/" and (cgroup == root or cgroup.startswith(root.rstrip("/") + "/")):
        cgroup = cgroup[len(root.rstrip("/")) :]
    return Path(mount) / cgroup.lstrip("/")


def keyed(text: str, key: str) -> int | None:
    """The number after ``key`` in a ``key value`` per line file (memory.events, oom_control)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return None


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:  # v2 writes "max" for no limit
        return None


@dataclass
class MemoryCgroup:
    """A memory cgroup this tool made, capped at ``limit`` bytes."""

    version: int
    path: Path
    limit: int
    # v2 kernels before 5.19 have no memory.peak: sampled from memory.current instead.
    sampled_peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _sampler: threading.Thread | None = field(default=None, repr=False)

    @property
    def limit_file(self) -> str:
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    def add(self, pid: int) -> None:
        """Move ``pid`` into this cgroup; its later children are born in it."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        text = read_text(self.path / "cgroup.procs") or ""
        return [int(word) for word in text.split()]

    def current(self) -> int | None:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        return read_int(self.path / name)

    def peak(self) -> int | None:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        recorded = read_int(self.path / name)
        if recorded is None and not self.sampled_peak:
            return None
        return max(recorded or 0, self.sampled_peak)

    def oom_kills(self) -> int | None:
        if self.version == 2:
            return keyed(read_text(self.path / "memory.events") or "", "oom_kill")
        return keyed(read_text(self.path / "memory.oom_control") or "", "oom_kill")

    def limit_hits(self) -> int | None:
        """How often usage reached the cap (the kernel then reclaimed, or killed)."""
        if self.version == 2:
            return keyed(read_text(self.path / "memory.events") or "", "max")
        return read_int(self.path / "memory.failcnt")

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            now = self.current()
            if now is not None:
                self.sampled_peak = max(self.sampled_peak, now)

    def start_sampling(self) -> None:
        self._sampler = threading.Thread(target=self._sample, name="cgroup-sampler", daemon=True)
        self._sampler.start()

    def remove(self, attempts: int = 50) -> bool:
        """Stop sampling and remove the cgroup (it must be empty: the server was stopped)."""
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5)
        for _ in range(attempts):  # a killed process leaves the cgroup a moment after it died
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.1)
        return False


def make_cgroup(
    limit: int, hierarchies: Sequence[Hierarchy], name: str, enable_controller: bool = True
) -> tuple[MemoryCgroup | None, list[str]]:
    """A memory cgroup named ``name`` under the first hierarchy that allows one, capped at
    ``limit`` bytes with no swap (Cloud has none: past the cap a process is killed, not
    swapped); else None. Also why each hierarchy was passed over. ``enable_controller``: on
    v2, ask the parent to hand out the memory controller when it does not yet (a setting of
    the parent's, which a test leaves alone)."""
    notes: list[str] = []
    for hierarchy in hierarchies:
        path = hierarchy.path / name
        group = MemoryCgroup(hierarchy.version, path, limit)
        try:
            path.mkdir()
        except OSError as error:
            notes.append(f"cgroup v{hierarchy.version} at {hierarchy.path}: {error.strerror}")
            continue
        if enable_controller and hierarchy.version == 2 and not (path / "memory.max").exists():
            # The parent hands out the memory controller only when asked (and only when it
            # holds no process itself, the v2 rule): ask once.
            with contextlib.suppress(OSError):
                (hierarchy.path / "cgroup.subtree_control").write_text("+memory")
        if not (path / group.limit_file).exists():
            notes.append(f"cgroup v{hierarchy.version} at {hierarchy.path}: no memory controller")
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        try:
            (path / group.limit_file).write_text(str(limit))
            # No swap beyond the cap (v1 counts memory and swap together: the same figure).
            swap = ("memory.swap.max", "0") if hierarchy.version == 2 else (
                "memory.memsw.limit_in_bytes", str(limit))  # fmt: skip
            with contextlib.suppress(OSError):  # absent where the kernel has no swap accounting
                (path / swap[0]).write_text(swap[1])
            if hierarchy.version == 1:
                # Charges follow a moved process (the server is moved a moment after it started).
                with contextlib.suppress(OSError):
                    (path / "memory.move_charge_at_immigrate").write_text("3")
            written = read_int(path / group.limit_file)
        except OSError as error:
            notes.append(f"cgroup v{hierarchy.version} at {path}: {error.strerror}")
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        # v1 rounds the limit down to whole pages.
        if written is None or abs(written - limit) > 65536:
            notes.append(f"cgroup v{hierarchy.version} at {path}: the cap did not hold ({written})")
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        return group, notes
    return None, notes


def capped_server(group: MemoryCgroup) -> type[Server]:
    """``bench.server.Server`` whose server process goes into ``group`` the moment it exists.

    ``Server.start`` starts the process and then waits for its health check; a thread moves
    the new process into the cgroup meanwhile, within a millisecond of ``Popen`` returning,
    while the interpreter is still starting, long before the server forks its sandbox (the
    workers are then born in the cgroup). v1 moves the few pages charged by then along
    (``move_charge_at_immigrate``)."""

    class CappedServer(Server):
        def start(self, deadline: float | None = None) -> None:
            done = threading.Event()

            def move_when_started() -> None:
                while not done.is_set():
                    if self.process is not None:
                        group.add(self.process.pid)
                        return
                    time.sleep(0.001)

            mover = threading.Thread(target=move_when_started, name="cgroup-mover", daemon=True)
            mover.start()
            try:
                super().start(deadline)
            finally:
                done.set()
                mover.join(timeout=5)
            if self.process is not None and self.process.pid not in group.pids():
                raise RuntimeError(f"the server {self.process.pid} is not in {group.path}")

    return CappedServer


@contextlib.contextmanager
def servers_in(group: MemoryCgroup | None, modules: Sequence[str]) -> Iterator[None]:
    """Within the block, ``modules`` start their servers in ``group`` (nothing changes when
    there is none). The scenario tools name ``Server`` at module level and run in this
    process, so replacing that name there is the whole change."""
    if group is None:
        yield
        return
    loaded = [importlib.import_module(name) for name in modules]
    saved = [module.Server for module in loaded]
    replacement = capped_server(group)
    for module in loaded:
        module.Server = replacement
    try:
        yield
    finally:
        for module, original in zip(loaded, saved, strict=True):
            module.Server = original


# --------------------------------------------------------------------------- figures


@dataclass
class ToolFigures:
    """What the verdict needs from a scenario tool's own ``--json``."""

    errors: int = 0
    first_errors: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    pss_peak: int | None = None


def classroom_figures(report: dict[str, Any]) -> ToolFigures:
    """bench.classroom's report: an action's error, the first visitor's, a server traceback."""
    figures = ToolFigures()
    for mode in report.get("modes", []):
        failed = [o["error"] for o in mode.get("outcomes", []) if o.get("error")]
        failed += [v["error"] for v in mode.get("first_visit", {}).values() if v.get("error")]
        tracebacks = int(mode.get("server_tracebacks") or 0)
        figures.errors += len(failed) + tracebacks
        figures.first_errors += [f"{mode['mode']}: {text}" for text in failed[:3]]
        if tracebacks:
            figures.first_errors.append(f"{mode['mode']}: {tracebacks} server traceback(s)")
        if mode.get("aborted"):
            figures.aborted.append(f"{mode['mode']}: {mode['aborted']}")
        peak = (mode.get("memory_bytes") or {}).get("peak")
        if peak is not None:
            figures.pss_peak = max(figures.pss_peak or 0, int(peak))
    if not report.get("modes"):
        figures.aborted.append("no mode was measured")
    return figures


def class_figures(report: dict[str, Any]) -> ToolFigures:
    """bench.classmode_load's report (a server traceback is already one of its errors)."""
    errors = list(report.get("errors") or [])
    aborted = [str(report["aborted"])] if report.get("aborted") else []
    peak = report.get("peak_pss")
    return ToolFigures(len(errors), errors[:3], aborted, int(peak) if peak is not None else None)


FIGURES: dict[str, Callable[[dict[str, Any]], ToolFigures]] = {
    "classroom": classroom_figures,
    "class": class_figures,
}


@dataclass
class Budget:
    """One scenario's run under the cap, and the verdict."""

    scenario: str
    command: str
    limit: int
    enforced_by: str | None  # e.g. "cgroup v1 memory.limit_in_bytes at /sys/fs/cgroup/…"
    tool_exit: int
    tool: ToolFigures
    cgroup_peak: int | None = None
    limit_hits: int | None = None
    oom_kills: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def peak(self) -> int | None:
        """The figure held against the cap: the cgroup's own count where there is one."""
        return self.cgroup_peak if self.cgroup_peak is not None else self.tool.pss_peak

    def problems(self) -> list[str]:
        found = [f"not measured to the end: {text}" for text in self.tool.aborted]
        if self.tool.errors:
            found.append(f"{self.tool.errors} error(s), first: {self.tool.first_errors[:1]}")
        if self.oom_kills:
            found.append(f"{self.oom_kills} process(es) killed at the cap")
        if self.peak is None:
            found.append("no memory figure")
        elif self.peak > self.limit:
            found.append(f"peak {self.peak / MB:,.0f} MB > cap {self.limit / MB:,.0f} MB")
        if self.tool.pss_peak is not None and self.tool.pss_peak > self.limit:
            found.append(f"peak PSS {self.tool.pss_peak / MB:,.0f} MB > cap")
        return found

    def exit_code(self) -> int:
        if self.tool.aborted or self.peak is None:
            return 2
        return 1 if self.problems() else 0


def mb(value: int | None) -> str:
    return "—" if value is None else f"{value / MB:,.0f} MB"


def format_budget(budget: Budget) -> str:
    lines = [
        f"memory budget: {budget.scenario}, cap {mb(budget.limit)}",
        f"  command        {budget.command}",
        f"  cap enforced   {budget.enforced_by or 'no (no memory cgroup here): PSS compared'}",
        f"  errors         {budget.tool.errors}",
        f"  PSS peak       {mb(budget.tool.pss_peak)} (the server tree, the tool's sampler)",
    ]
    if budget.enforced_by:
        lines += [
            f"  cgroup peak    {mb(budget.cgroup_peak)} (all the server's memory, page cache too)",
            f"  at the cap     {budget.limit_hits} time(s); OOM kills {budget.oom_kills}",
        ]
    lines += [f"  note           {note}" for note in budget.notes]
    lines.append(f"  tool exit      {budget.tool_exit} (its own goals; see its report above)")
    problems = budget.problems()
    verdict = "; ".join(problems) if problems else "within the budget"
    lines.append(f"  verdict        {verdict}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory_budget",
        description="A scenario tool's run with its server under Cloud's memory cap.",
    )
    parser.add_argument(
        "--memory-max", default=CLOUD_MEMORY_MAX, help="the cap (default 2.7G: Cloud's)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("scenario", choices=sorted(SCENARIOS), help="classroom or class")
    parser.add_argument("tool_args", nargs=argparse.REMAINDER, help="the tool's own options")
    args = parser.parse_args(argv)
    try:
        args.limit = parse_size(args.memory_max)
    except ValueError as error:
        parser.error(str(error))
    if args.limit < 256 * MB:
        parser.error("--memory-max: at least 256M (the server alone needs more)")
    return args


def tool_json(tool_args: list[str], folder: Path) -> tuple[list[str], Path]:
    """The tool's arguments with a ``--json`` this wrapper reads (the caller's, if given)."""
    for index, word in enumerate(tool_args):
        if word == "--json" and index + 1 < len(tool_args):
            return tool_args, Path(tool_args[index + 1])
        if word.startswith("--json="):
            return tool_args, Path(word.partition("=")[2])
    path = folder / "tool.json"
    return [*tool_args, "--json", str(path)], path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    module, server_modules = SCENARIOS[args.scenario]
    hierarchies = own_hierarchies(
        read_text(Path("/proc/self/cgroup")) or "", read_text(Path("/proc/self/mountinfo")) or ""
    )
    group, notes = make_cgroup(args.limit, hierarchies, f"atlas-budget-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="memory-budget-") as folder:
        tool_args, report_path = tool_json(list(args.tool_args), Path(folder))
        if group is not None:
            print(f"memory budget: the server runs in {group.path} ({group.limit_file} "
                  f"{group.limit})", flush=True)  # fmt: skip
            group.start_sampling()
        kept: tuple[int | None, int | None, int | None] = (None, None, None)
        try:
            with servers_in(group, server_modules):
                code = int(importlib.import_module(module).main(tool_args))
        finally:
            if group is not None:  # read before the cgroup (and its files) goes
                kept = (group.peak(), group.limit_hits(), group.oom_kills())
            removed = group.remove() if group is not None else True
        try:
            report = json.loads(report_path.read_text())
        except (OSError, ValueError):
            report = {"aborted": f"the tool wrote no report (exit {code})"}
    budget = Budget(
        scenario=args.scenario,
        command=f"python -m bench.memory_budget --memory-max {args.memory_max} "
        f"{args.scenario} {' '.join(args.tool_args)}".strip(),
        limit=args.limit,
        enforced_by=f"cgroup v{group.version} {group.limit_file} at {group.path}"
        if group is not None
        else None,
        tool_exit=code,
        tool=FIGURES[args.scenario](report),
        notes=notes,
    )
    if group is not None:
        budget.cgroup_peak, budget.limit_hits, budget.oom_kills = kept
        if not removed:
            budget.notes.append(f"{group.path} could not be removed: a process is left in it")
    print(format_budget(budget), flush=True)
    if args.json is not None:
        figures = {**asdict(budget), "peak": budget.peak, "problems": budget.problems()}
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return budget.exit_code()


if __name__ == "__main__":
    sys.exit(main())
