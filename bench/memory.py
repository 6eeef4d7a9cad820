"""Memory of a process tree: the proportional set size (PSS) of a process and all its
descendants, from ``/proc/<pid>/smaps_rollup``, sampled in a thread to keep the peak.

PSS shares each page between the processes that map it, so a server and its forked sandbox
workers (which share most of torch's pages) sum to what they really take. Linux only; every
read tolerates a process that is gone meanwhile.

>>> total, counted = tree_pss_bytes(os.getpid())  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path


def stat_fields(stat_text: str) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name (which may hold spaces and ')')."""
    return stat_text[stat_text.rindex(")") + 2 :].split()


def start_time(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The process's start time (clock ticks since boot), or None when it is gone: with the
    pid it names one process for good, since a pid can be recycled."""
    try:
        return stat_fields((proc / str(pid) / "stat").read_text())[19]
    except (OSError, ValueError, IndexError):
        return None


def process_children(proc: Path = Path("/proc")) -> dict[int, list[int]]:
    """Parent pid → child pids, for every process readable under ``proc``."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = stat_fields((entry / "stat").read_text())
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


def own_status_bytes(field: str) -> int | None:
    """A memory figure of this process from /proc/self/status (``VmRSS``, ``VmHWM``…), in
    bytes; None off Linux or when the field is absent."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


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


class PssSampler:
    """Samples the summed PSS of ``pids()`` every ``interval_s`` in a thread; keeps the peak.

    ``pids`` is asked at every sample (a server's tree grows and shrinks as workers come and
    go), e.g. ``Server.remember_tree``."""

    def __init__(self, pids: Callable[[], Iterable[int]], interval_s: float = 0.5) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.peak = 0
        self.processes_at_peak = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss-sampler", daemon=True)

    def sample(self) -> int:
        total, counted = 0, 0
        for pid in self.pids():
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


def settled_pss(pids: Callable[[], Iterable[int]], samples: int = 5, gap_s: float = 0.5) -> int:
    """The median of a few samples: one sample can catch a worker being replaced."""
    values = []
    sampler = PssSampler(pids)
    for _ in range(samples):
        values.append(sampler.sample())
        time.sleep(gap_s)
    return int(statistics.median(values))
