"""What moving data costs: copy bandwidth and latency across sizes, path by path.

Paths: CPU→CPU always; with an accelerator, host→device from pageable and from pinned memory,
pinned with ``non_blocking=True`` (timed to the synchronisation, and to the moment the call
returned), device→host and device→device. Every figure is a median over repeats after warm-up,
with the accelerator synchronised before the clock starts and before it stops.

A benchmark saturates the machine's memory bus, so one runs per process at a time
(:data:`_LOCK`); it has a total time budget, checks a cancel flag between measurements, and
stops early (keeping what it measured) rather than overrun its budget or memory.

Memory is bounded by a stated budget, :data:`MEMORY_BUDGET_BYTES`: the server's memory is
shared by everyone in the class, and one press must not take a gigabyte of it. Every path
copies one source into one destination, and a run makes a path's two buffers just before it
measures that path, after freeing the ones it no longer needs (:class:`_Buffers`), so at any
moment it holds at most :data:`BUFFERS_AT_ONCE` buffers of one size, host and device together
(pageable, pinned and device memory all counted). The sizes (:data:`SIZES`) are the ×4
ladder up to the largest whose buffers fit the budget (:data:`MAX_BYTES`); a larger request is
clamped to it. Freed pinned blocks (torch's caching host allocator keeps them) and device
blocks (its caching device allocator) are handed back as soon as their buffers are freed.

The benchmark measures the machine, not the visitor, so a server shares it: :data:`BOARD` (a
:class:`BenchmarkBoard`) keeps the latest result and runs requests one at a time, first come
first served. A request with the settings of the run in progress joins it; other settings wait
their turn; the same settings soon after a complete run get that run's result.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import math
import statistics
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import torch

from torchatlas.devices.errors import (
    BenchmarkBusy,
    BenchmarkQueueFull,
    DevicesValueError,
    ErrorCode,
    choices,
)
from torchatlas.devices.inventory import accelerators, available_accelerator, host_memory

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
SMALLEST_SIZE = 4 * KIB
SIZE_STEP = 4  # each size is 4× the last
# The most one run holds at once, every buffer of every kind together. A run is one press of a
# visitor's, and the server's memory is shared by the whole class: 128 MiB keeps a press (with
# the interpreter's and the driver's own overhead) well under a 200 MB rise of the server.
MEMORY_BUDGET_BYTES = 128 * MIB
BUFFERS_AT_ONCE = 2  # one source and one destination: a run makes a path's buffers per path


def sizes_within(budget_bytes: int) -> tuple[int, ...]:
    """The ×4 ladder from 4 KiB up to the largest size whose buffers fit ``budget_bytes``."""
    sizes, size = [], SMALLEST_SIZE
    while size * BUFFERS_AT_ONCE <= budget_bytes:
        sizes.append(size)
        size *= SIZE_STEP
    return tuple(sizes) or (SMALLEST_SIZE,)


SIZES: tuple[int, ...] = sizes_within(MEMORY_BUDGET_BYTES)  # 4 KiB … 64 MiB
MAX_BYTES = SIZES[-1]  # the largest copy any run makes
MAX_TIME_BUDGET_S = 60.0
DEFAULT_TIME_BUDGET_S = 5.0
# The largest size: past the CPU's caches (tens of MiB), so the bandwidth plateau shows.
DEFAULT_MAX_BYTES = MAX_BYTES
SAMPLE_TARGET_S = 0.002  # small copies are repeated inside one sample to beat timer noise
MAX_COPIES_PER_SAMPLE = 2000
WARMUPS = 2
MIN_REPEATS, MAX_REPEATS = 1, 50


class TransferPath(StrEnum):
    """Where a copy goes from and to; the value names its label in the translation tables."""

    CPU_TO_CPU = "cpu_to_cpu"
    HOST_TO_DEVICE_PAGEABLE = "host_to_device_pageable"
    HOST_TO_DEVICE_PINNED = "host_to_device_pinned"
    HOST_TO_DEVICE_NON_BLOCKING = "host_to_device_non_blocking"
    DEVICE_TO_HOST = "device_to_host"
    DEVICE_TO_DEVICE = "device_to_device"


class StopReason(StrEnum):
    """Why a run ended before measuring every size."""

    CANCELLED = "cancelled"
    TIME_BUDGET = "time_budget"
    OUT_OF_MEMORY = "out_of_memory"


CPU_TO_CPU = TransferPath.CPU_TO_CPU
HOST_TO_DEVICE_PAGEABLE = TransferPath.HOST_TO_DEVICE_PAGEABLE
HOST_TO_DEVICE_PINNED = TransferPath.HOST_TO_DEVICE_PINNED
HOST_TO_DEVICE_NON_BLOCKING = TransferPath.HOST_TO_DEVICE_NON_BLOCKING
DEVICE_TO_HOST = TransferPath.DEVICE_TO_HOST
DEVICE_TO_DEVICE = TransferPath.DEVICE_TO_DEVICE
ACCELERATOR_PATHS = (
    HOST_TO_DEVICE_PAGEABLE,
    HOST_TO_DEVICE_PINNED,
    HOST_TO_DEVICE_NON_BLOCKING,
    DEVICE_TO_HOST,
    DEVICE_TO_DEVICE,
)
PATHS: tuple[TransferPath, ...] = (CPU_TO_CPU, *ACCELERATOR_PATHS)
# The code each path times, for the page's table and the CSV.
PATH_CODE: dict[TransferPath, str] = {
    CPU_TO_CPU: "cpu_dst.copy_(cpu_src)",
    HOST_TO_DEVICE_PAGEABLE: "dev_dst.copy_(cpu_src)",
    HOST_TO_DEVICE_PINNED: "dev_dst.copy_(pinned_src)",
    HOST_TO_DEVICE_NON_BLOCKING: "dev_dst.copy_(pinned_src, non_blocking=True)",
    DEVICE_TO_HOST: "cpu_dst.copy_(dev_src)",
    DEVICE_TO_DEVICE: "dev_dst.copy_(dev_src)",
}
PCIE_PATHS = (
    HOST_TO_DEVICE_PAGEABLE,
    HOST_TO_DEVICE_PINNED,
    HOST_TO_DEVICE_NON_BLOCKING,
    DEVICE_TO_HOST,
)
PINNED_PATHS = (HOST_TO_DEVICE_PINNED, HOST_TO_DEVICE_NON_BLOCKING)
# The two buffers (source, destination) each path copies between, as PATH_CODE names them.
PATH_BUFFERS: dict[TransferPath, tuple[str, str]] = {
    CPU_TO_CPU: ("cpu_src", "cpu_dst"),
    HOST_TO_DEVICE_PAGEABLE: ("cpu_src", "dev_dst"),
    HOST_TO_DEVICE_PINNED: ("pinned_src", "dev_dst"),
    HOST_TO_DEVICE_NON_BLOCKING: ("pinned_src", "dev_dst"),
    DEVICE_TO_HOST: ("dev_src", "cpu_dst"),
    DEVICE_TO_DEVICE: ("dev_src", "dev_dst"),
}
DEVICE_BUFFER_NAMES = frozenset({"dev_src", "dev_dst"})

# The board: a press with the settings of a complete result younger than this gets that result
# (a class pressing "run" together measures the machine once); more requests with distinct
# settings than MAX_WAITING are refused, since each may take up to the longest budget.
RERUN_AFTER_S = 30.0
MAX_WAITING = 8
LOCK_POLL_S = 0.1  # a run waiting for a direct caller's lock looks at its cancel flag this often

_LOCK = threading.Lock()
_active: dict[str, float] = {}  # started (monotonic) and budget of the benchmark holding _LOCK


@dataclass(frozen=True)
class BenchmarkConfig:
    max_bytes: int = DEFAULT_MAX_BYTES
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    repeats: int = 5
    device: str | None = None  # None: the available accelerator, if any
    paths: tuple[TransferPath, ...] | None = None  # None: every path this machine has

    def __post_init__(self) -> None:
        if self.max_bytes < SIZES[0]:
            raise DevicesValueError(
                ErrorCode.MAX_BYTES_TOO_SMALL, minimum=SIZES[0], max_bytes=self.max_bytes
            )
        # Never more than the memory budget allows: a larger request (an old link, a
        # notebook) measures up to the largest size, and is that run (the board joins them).
        object.__setattr__(self, "max_bytes", min(int(self.max_bytes), MAX_BYTES))
        if not 0 < self.time_budget_s <= MAX_TIME_BUDGET_S:
            raise DevicesValueError(
                ErrorCode.TIME_BUDGET_OUT_OF_RANGE,
                maximum=f"{MAX_TIME_BUDGET_S:g}",
                budget=f"{self.time_budget_s:g}",
            )
        if not MIN_REPEATS <= self.repeats <= MAX_REPEATS:
            raise DevicesValueError(
                ErrorCode.REPEATS_OUT_OF_RANGE,
                low=MIN_REPEATS,
                high=MAX_REPEATS,
                repeats=self.repeats,
            )
        if self.paths is not None:
            if unknown := sorted(set(map(str, self.paths)) - set(PATHS)):
                raise DevicesValueError(
                    ErrorCode.UNKNOWN_PATHS, unknown=choices(unknown), choices=choices(PATHS)
                )
            # Names given as plain strings become the enum, so results carry one kind of path.
            object.__setattr__(self, "paths", tuple(TransferPath(p) for p in self.paths))


@dataclass(frozen=True)
class Measurement:
    path: TransferPath
    size_bytes: int
    median_s: float  # one copy, median over repeats
    min_s: float
    repeats: int
    copies_per_sample: int
    call_return_s: float | None = None  # non_blocking only: when the Python call came back

    @property
    def gbps(self) -> float:
        """Bytes copied per second, in GB/s (10⁹ bytes, as bus bandwidths are quoted)."""
        return self.size_bytes / self.median_s / 1e9


@dataclass(frozen=True)
class Reference:
    """A nominal, physical line for the chart (e.g. the PCIe link); never a measurement."""

    code: str  # "pcie": names its label in the translation tables
    gbps: float
    paths: tuple[TransferPath, ...]
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    path: TransferPath
    size_bytes: int
    elapsed_s: float
    last: Measurement | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 1.0


@dataclass(frozen=True)
class BenchmarkResult:
    device: str | None
    sizes: tuple[int, ...]
    paths: tuple[TransferPath, ...]
    measurements: tuple[Measurement, ...]
    complete: bool
    stop_reason: StopReason | None  # None: every planned size was measured
    elapsed_s: float
    time_budget_s: float
    references: tuple[Reference, ...] = ()
    # The most the run's buffers held at one moment, by its own accounting (every tensor it
    # made, at its size): all of them together, and the host's share (pageable and pinned).
    peak_bytes: int = 0
    peak_host_bytes: int = 0

    def for_path(self, path: TransferPath) -> list[Measurement]:
        return sorted((m for m in self.measurements if m.path == path), key=lambda m: m.size_bytes)

    def latency_s(self, path: TransferPath) -> float | None:
        """Time of the smallest copy: mostly fixed cost (dispatch, launch, synchronisation)."""
        rows = self.for_path(path)
        return rows[0].median_s if rows else None

    def peak_gbps(self, path: TransferPath) -> float | None:
        rows = self.for_path(path)
        return max(m.gbps for m in rows) if rows else None

    def dips(self, path: TransferPath, factor: float = 5.0, drop: float = 30.0) -> list[int]:
        """Sizes that are not physics but waiting, typically for a busy core on a shared
        machine: ``factor``× below both neighbours (the largest size: below its one
        neighbour; the smallest is slow by nature, it is all latency), or ``drop``× below the
        best smaller size (leaving the caches costs a few times, never ten: a run of such
        sizes is one long wait, not a dip)."""
        rows = self.for_path(path)
        found = []
        best_smaller = 0.0
        for index, row in enumerate(rows):
            neighbours = [rows[i].gbps for i in (index - 1, index + 1) if 0 <= i < len(rows)]
            isolated = index > 0 and all(row.gbps * factor < gbps for gbps in neighbours)
            if isolated or row.gbps * drop < best_smaller:
                found.append(row.size_bytes)
            best_smaller = max(best_smaller, row.gbps)
        return found

    def dip_sizes(self) -> list[int]:
        """Every size that dipped on some path, smallest first."""
        return sorted({size for path in self.paths for size in self.dips(path)})

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(
            ["path", "code", "device", "size_bytes", "median_s", "min_s", "gbps", "repeats",
             "copies_per_sample", "call_return_s"]
        )  # fmt: skip
        for m in self.measurements:
            writer.writerow(
                [m.path, PATH_CODE[m.path], self.device or "cpu", m.size_bytes,
                 f"{m.median_s:.9g}", f"{m.min_s:.9g}", f"{m.gbps:.6g}", m.repeats,
                 m.copies_per_sample, "" if m.call_return_s is None else f"{m.call_return_s:.9g}"]
            )  # fmt: skip
        return out.getvalue()


def size_cap(host_available: int | None, device_free: int | None, has_device: bool) -> int:
    """The largest size worth offering: within the memory budget (:data:`MAX_BYTES`) and,
    with the buffers a run holds at once, no more than half of the free host (and device)
    memory."""
    limits = [MAX_BYTES]
    if host_available is not None:
        limits.append(host_available // 2 // BUFFERS_AT_ONCE)
    if has_device and device_free is not None:
        limits.append(device_free // 2 // BUFFERS_AT_ONCE)
    allowed = [size for size in SIZES if size <= min(limits)]
    return allowed[-1] if allowed else SIZES[0]


def machine_size_cap(device: torch.device | None = None) -> int:
    device = available_accelerator() if device is None else device
    _, host_available = host_memory()
    device_free = None
    if device is not None:
        found = [a for a in accelerators() if a.device == str(device)]
        device_free = found[0].free_memory_bytes if found else None
    return size_cap(host_available, device_free, device is not None)


def sizes_up_to(max_bytes: int) -> tuple[int, ...]:
    return tuple(size for size in SIZES if size <= max_bytes)


def references(device: torch.device | None) -> tuple[Reference, ...]:
    """Nominal lines that apply to this machine: today the PCIe link of a CUDA device."""
    if device is None:
        return ()
    for info in accelerators():
        if info.device == str(device) and info.pcie is not None:
            link = info.pcie
            return (
                Reference(
                    "pcie",
                    link.nominal_gbps,
                    PCIE_PATHS,
                    {"generation": str(link.generation), "lanes": str(link.lanes)},
                ),
            )
    return ()


def _acquire(budget_s: float) -> None:
    if not _LOCK.acquire(blocking=False):
        started = _active.get("started", time.monotonic())
        budget = _active.get("budget", budget_s)
        raise BenchmarkBusy(max(1, math.ceil(started + budget - time.monotonic()) + 1))
    _active.update(started=time.monotonic(), budget=budget_s)


def _release() -> None:
    _active.clear()
    _LOCK.release()


def is_busy() -> bool:
    return _LOCK.locked()


class _StopRun(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason


def _timed(copy: Callable[[], object], sync: Callable[[], None], copies: int) -> float:
    sync()
    started = time.perf_counter()
    for _ in range(copies):
        copy()
    sync()
    return (time.perf_counter() - started) / copies


def measure(
    path: TransferPath,
    size_bytes: int,
    copy: Callable[[], object],
    sync: Callable[[], None],
    repeats: int,
    returns_early: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> Measurement:
    """Median time of one ``copy()`` after warm-up; small copies are batched per sample.

    ``should_stop`` is asked before every sample, so "stop" never waits for more than one
    sample of the largest size (a 1 GiB copy on a slow machine takes a good fraction of a
    second; a whole measurement, warm-ups and repeats, several seconds)."""

    def check() -> None:
        if should_stop is not None and should_stop():
            raise _StopRun(StopReason.CANCELLED)

    estimate = math.inf
    for _ in range(WARMUPS):
        check()
        estimate = min(estimate, _timed(copy, sync, 1))
    copies = max(1, min(MAX_COPIES_PER_SAMPLE, int(SAMPLE_TARGET_S / max(estimate, 1e-9))))
    samples = []
    for _ in range(repeats):
        check()
        samples.append(_timed(copy, sync, copies))
    call_return = None
    if returns_early:
        returned = []
        for _ in range(repeats):
            sync()
            started = time.perf_counter()
            copy()
            returned.append(time.perf_counter() - started)
            sync()
        call_return = statistics.median(returned)
    return Measurement(
        path=path,
        size_bytes=size_bytes,
        median_s=statistics.median(samples),
        min_s=min(samples),
        repeats=repeats,
        copies_per_sample=copies,
        call_return_s=call_return,
    )


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _release_cached(device: torch.device | None, pinned: bool = True) -> None:
    """Hand freed blocks back: torch's caching device allocator and its caching host (pinned)
    allocator keep what was freed for reuse, which the server would carry between runs."""
    if device is None:
        return
    torch.accelerator.synchronize(device)
    torch.accelerator.empty_cache()
    if pinned:
        empty_host_cache = getattr(torch.accelerator, "empty_host_cache", None)
        if empty_host_cache is None:  # an older torch: the private name
            empty_host_cache = getattr(torch._C, "_host_emptyCache", None)
        # A backend without a host cache to empty has nothing kept: not worth failing a run.
        with contextlib.suppress(RuntimeError, NotImplementedError):
            if empty_host_cache is not None:
                empty_host_cache()


class _Buffers:
    """The two tensors of one size that the path being measured copies between (its source
    and its destination, :data:`PATH_BUFFERS`).

    :meth:`use` frees the buffers the next path does not need before it makes the ones it
    does (each touched once, so first-use page faults are not timed): a run never holds more
    than :data:`BUFFERS_AT_ONCE` buffers, ``held_bytes`` says how much it holds and
    ``peak_bytes`` the most it held (``peak_host_bytes``: the host's share)."""

    def __init__(self, size: int, device: torch.device | None) -> None:
        self.size = size
        self.device = device
        self.tensors: dict[str, torch.Tensor] = {}
        self.cannot_pin = False
        self.peak_bytes = self.peak_host_bytes = 0

    @property
    def held_bytes(self) -> int:
        return self.size * len(self.tensors)

    @property
    def held_host_bytes(self) -> int:
        return self.size * sum(name not in DEVICE_BUFFER_NAMES for name in self.tensors)

    def _make(self, name: str) -> torch.Tensor | None:
        size, device = self.size, self.device
        if name == "cpu_src":
            return torch.empty(size, dtype=torch.uint8).fill_(1)
        if name == "cpu_dst":
            return torch.empty(size, dtype=torch.uint8).fill_(0)
        if name == "pinned_src":
            try:
                return torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
            except RuntimeError as exc:
                if _out_of_memory(exc):
                    raise
                # Some backends cannot pin host memory: skip those paths, measure the rest.
                self.cannot_pin = True
                return None
        fill = torch.ones if name == "dev_src" else torch.zeros
        return fill(size, dtype=torch.uint8, device=device)

    def _free(self, names: Iterable[str]) -> None:
        freed = [name for name in names if self.tensors.pop(name, None) is not None]
        if self.device is not None and freed:
            _release_cached(self.device, pinned="pinned_src" in freed)

    def use(self, path: TransferPath) -> Callable[[], object] | None:
        """Make ``path``'s two buffers (freeing the others first) and return its timed copy;
        None when this machine cannot make them (host memory that cannot be pinned)."""
        needed = PATH_BUFFERS[path]
        if path in PINNED_PATHS and self.cannot_pin:
            return None
        self._free([name for name in self.tensors if name not in needed])
        for name in needed:
            if name in self.tensors:
                continue
            tensor = self._make(name)
            if tensor is None:
                return None
            self.tensors[name] = tensor
            self.peak_bytes = max(self.peak_bytes, self.held_bytes)
            self.peak_host_bytes = max(self.peak_host_bytes, self.held_host_bytes)
        src, dst = (self.tensors[name] for name in needed)
        if path == HOST_TO_DEVICE_NON_BLOCKING:
            return lambda: dst.copy_(src, non_blocking=True)
        return lambda: dst.copy_(src)

    def close(self) -> None:
        """Free every buffer, and the allocators' cached blocks with them."""
        self._free(list(self.tensors))


def _resolve_device(config: BenchmarkConfig) -> torch.device | None:
    if config.device is None:
        return available_accelerator()
    device = torch.device(config.device)
    return None if device.type == "cpu" else device


def _plan(
    config: BenchmarkConfig, device: torch.device | None
) -> tuple[tuple[int, ...], tuple[TransferPath, ...]]:
    available = PATHS if device is not None else (CPU_TO_CPU,)
    paths = tuple(p for p in (config.paths or available) if p in available)
    return sizes_up_to(config.max_bytes), paths


class _Sweep:
    """One run of the benchmark over sizes and paths: its clock and deadline, what it
    measured so far (each path's time per copy at the previous size) and the memory peaks."""

    def __init__(
        self,
        config: BenchmarkConfig,
        device: torch.device | None,
        total: int,
        progress: Callable[[Progress], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.config, self.device, self.total = config, device, total
        self.progress, self.should_stop = progress, should_stop
        self.started = time.perf_counter()
        self.deadline = self.started + config.time_budget_s
        self.measured: list[Measurement] = []
        self.last_time: dict[str, float] = {}  # path → seconds per copy at the previous size
        self.peak_bytes = self.peak_host_bytes = 0

    def sync(self) -> None:
        if self.device is not None:
            torch.accelerator.synchronize(self.device)

    def check(self, next_cost_s: float) -> None:
        """Stop (:class:`_StopRun`) when cancelled or when the next work would pass the
        deadline."""
        if self.should_stop is not None and self.should_stop():
            raise _StopRun(StopReason.CANCELLED)
        if time.perf_counter() + next_cost_s > self.deadline:
            raise _StopRun(StopReason.TIME_BUDGET)

    def report(self, path: TransferPath, size: int, last: Measurement | None) -> None:
        if self.progress is not None:
            elapsed = time.perf_counter() - self.started
            self.progress(Progress(len(self.measured), self.total, path, size, elapsed, last))

    def measure_size(self, size: int, paths: tuple[TransferPath, ...]) -> None:
        """Every path at ``size``, on buffers of that size freed before the next size."""
        runs = WARMUPS + self.config.repeats
        # Each size is 4× the last: predict this size from the previous one and stop
        # before, not after, the budget runs out.
        per_copy = {p: 4 * self.last_time[p] for p in paths if p in self.last_time}
        self.check(sum(t * runs for t in per_copy.values()))
        buffers = _Buffers(size, self.device)
        try:
            for path in paths:
                self.check(per_copy.get(path, 0.0) * runs)
                self.measure_path(buffers, path, size)
        finally:
            buffers.close()
            del buffers

    def measure_path(self, buffers: _Buffers, path: TransferPath, size: int) -> None:
        try:
            copy = buffers.use(path)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if _out_of_memory(exc):
                raise _StopRun(StopReason.OUT_OF_MEMORY) from exc
            raise
        finally:
            self.peak_bytes = max(self.peak_bytes, buffers.peak_bytes)
            self.peak_host_bytes = max(self.peak_host_bytes, buffers.peak_host_bytes)
        if copy is None:
            return
        self.report(path, size, self.measured[-1] if self.measured else None)
        try:
            result = measure(
                path,
                size,
                copy,
                self.sync,
                self.config.repeats,
                returns_early=path == HOST_TO_DEVICE_NON_BLOCKING,
                should_stop=self.should_stop,
            )
        finally:
            copy = None  # it holds its two buffers: let the next path free them
        self.measured.append(result)
        self.last_time[path] = result.median_s
        self.report(path, size, result)


def _measure_all(
    config: BenchmarkConfig,
    progress: Callable[[Progress], None] | None,
    should_stop: Callable[[], bool] | None,
) -> BenchmarkResult:
    device = _resolve_device(config)
    sizes, paths = _plan(config, device)
    sweep = _Sweep(config, device, len(sizes) * len(paths), progress, should_stop)
    stop_reason: StopReason | None = None
    try:
        for size in sizes:
            sweep.measure_size(size, paths)
    except _StopRun as stop:
        stop_reason = stop.reason
    finally:
        _release_cached(device)
    elapsed = time.perf_counter() - sweep.started
    return BenchmarkResult(
        device=str(device) if device is not None else None,
        sizes=sizes,
        paths=paths,
        measurements=tuple(sweep.measured),
        complete=stop_reason is None,
        stop_reason=stop_reason,
        elapsed_s=elapsed,
        time_budget_s=config.time_budget_s,
        references=references(device),
        peak_bytes=sweep.peak_bytes,
        peak_host_bytes=sweep.peak_host_bytes,
    )


def run_transfer_benchmark(
    config: BenchmarkConfig | None = None,
    progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> BenchmarkResult:
    """Run the benchmark in this thread; raises :class:`BenchmarkBusy` if one is running."""
    config = config or BenchmarkConfig()
    _acquire(config.time_budget_s)
    try:
        return _measure_all(config, progress, should_stop)
    finally:
        _release()


class BenchmarkJob:
    """The benchmark in a background thread, so a page can poll it, show progress, and cancel
    it from a later script run. ``start`` takes the server lock before returning."""

    def __init__(self, config: BenchmarkConfig) -> None:
        self.config = config
        self.progress: Progress | None = None
        self.result: BenchmarkResult | None = None
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name="transfer-benchmark", daemon=True)

    @classmethod
    def start(cls, config: BenchmarkConfig | None = None) -> BenchmarkJob:
        job = cls(config or BenchmarkConfig())
        _acquire(job.config.time_budget_s)
        try:
            job._thread.start()
        except BaseException:
            _release()
            raise
        return job

    def _run(self) -> None:
        try:
            self.result = _measure_all(self.config, self._on_progress, self._cancel.is_set)
        except Exception as exc:  # reported to the page through .error, never lost
            self.error = exc
        finally:
            _release()

    def run_when_free(self) -> None:
        """Run in this thread once the server lock is free (a direct caller may hold it);
        a cancel while waiting ends the job without measuring."""
        while not _LOCK.acquire(timeout=LOCK_POLL_S):
            if self._cancel.is_set():
                return
        _active.update(started=time.monotonic(), budget=self.config.time_budget_s)
        self._run()

    def _on_progress(self, progress: Progress) -> None:
        self.progress = progress

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        self._thread.join(timeout_s)
        return self.done


# ---------------------------------------------------------------- the server's shared run


class RunPhase(StrEnum):
    QUEUED = "queued"  # waits for the runs ahead of it
    RUNNING = "running"
    FINISHED = "finished"  # measured (fully or until stopped), or withdrawn before it started
    FAILED = "failed"  # ended by an unexpected error: ``RunStatus.error``


class RequestOutcome(StrEnum):
    """What a press of "run" did."""

    STARTED = "started"  # a new run, measuring now
    JOINED = "joined"  # a run with the same settings was running or waiting: its result is yours
    QUEUED = "queued"  # a new run with these settings, after the ones ahead of it
    RECENT = "recent"  # a complete result with these settings is fresh: that one, no new run


@dataclass(frozen=True)
class Ticket:
    """A visitor's claim on a run: the id to ask the board about, and who asked."""

    run_id: int
    owner: str
    outcome: RequestOutcome
    rerun_after_s: int = 0  # RECENT: seconds until the same settings start a new run


@dataclass(frozen=True)
class RunStatus:
    """One run as a watcher sees it, at the moment it was asked."""

    run_id: int
    phase: RunPhase
    config: BenchmarkConfig
    mine: bool  # the asking visitor started it: only they may stop it
    ahead: int = 0  # QUEUED: runs that start before it, the running one included
    progress: Progress | None = None  # RUNNING: the runner's latest progress
    stopping: bool = False  # its starter pressed "stop"; it ends at the next sample
    error: BaseException | None = None  # FAILED: what ended it

    @property
    def active(self) -> bool:
        return self.phase in (RunPhase.QUEUED, RunPhase.RUNNING)


@dataclass(frozen=True)
class SharedResult:
    """The server's latest measurement, with its settings and its age when asked."""

    result: BenchmarkResult
    config: BenchmarkConfig
    run_id: int
    age_s: float
    rerun_after_s: int = 0  # until then, a press with these settings gets this result


@dataclass(eq=False)
class _Run:
    run_id: int
    owner: str
    job: BenchmarkJob


class BenchmarkBoard:
    """A process-wide, thread-safe holder of the latest result and the running job.

    Requests run one at a time in the order they came, in a worker thread that lives while
    there is work. It keeps one result (the newest run's, stopped runs included), the running
    and waiting runs, and the ends (phase and error, no result) of the last
    ``remembered`` runs, so a watcher who looks late still learns how its run ended.
    ``clock`` is monotonic seconds, and replaceable to test ages."""

    def __init__(
        self,
        rerun_after_s: float = RERUN_AFTER_S,
        max_waiting: int = MAX_WAITING,
        remembered: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rerun_after_s = rerun_after_s
        self.max_waiting = max_waiting
        self.remembered = remembered
        self.clock = clock
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._latest: tuple[BenchmarkResult, BenchmarkConfig, int, float] | None = None
        self._running: _Run | None = None
        self._waiting: deque[_Run] = deque()
        self._ended: OrderedDict[int, RunStatus] = OrderedDict()
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------ reading
    def latest(self) -> SharedResult | None:
        with self._cond:
            if self._latest is None:
                return None
            result, config, run_id, finished = self._latest
            age = max(0.0, self.clock() - finished)
            wait_s = math.ceil(self.rerun_after_s - age) if result.complete else 0
            return SharedResult(result, config, run_id, age, max(0, wait_s))

    def status(self, run_id: int, owner: str) -> RunStatus:
        """How the run stands for ``owner``; a run the board no longer remembers has ended."""
        with self._cond:
            return self._status(run_id, owner)

    def running(self, owner: str) -> RunStatus | None:
        """The run measuring now, as ``owner`` sees it; None when the machine is idle."""
        with self._cond:
            run = self._running
            return None if run is None else self._status(run.run_id, owner)

    def _status(self, run_id: int, owner: str) -> RunStatus:
        run = self._running
        if run is not None and run.run_id == run_id:
            job = run.job
            return RunStatus(run_id, RunPhase.RUNNING, job.config, run.owner == owner,
                             progress=job.progress, stopping=job.cancelled)  # fmt: skip
        for place, waiting in enumerate(self._waiting):
            if waiting.run_id == run_id:
                ahead = place + (self._running is not None)
                return RunStatus(run_id, RunPhase.QUEUED, waiting.job.config,
                                 waiting.owner == owner, ahead=ahead)  # fmt: skip
        if (ended := self._ended.get(run_id)) is not None:
            return RunStatus(run_id, ended.phase, ended.config, False, error=ended.error)
        config = self._latest[1] if self._latest and self._latest[2] == run_id else None
        return RunStatus(run_id, RunPhase.FINISHED, config or BenchmarkConfig(), False)

    # ------------------------------------------------------------ asking
    def request(self, config: BenchmarkConfig, owner: str) -> Ticket:
        """A press of "run": join the run (running or waiting) with these settings, get a
        fresh complete result with them, or queue a new run. Raises
        :class:`BenchmarkQueueFull` when ``max_waiting`` runs with other settings wait."""
        with self._cond:
            running = self._running
            if running is not None and running.job.config == config and not running.job.cancelled:
                return Ticket(running.run_id, owner, RequestOutcome.JOINED)
            for waiting in self._waiting:
                if waiting.job.config == config:
                    return Ticket(waiting.run_id, owner, RequestOutcome.JOINED)
            if self._latest is not None:
                result, latest_config, run_id, finished = self._latest
                age = self.clock() - finished
                if result.complete and latest_config == config and age < self.rerun_after_s:
                    wait_s = max(1, math.ceil(self.rerun_after_s - age))
                    return Ticket(run_id, owner, RequestOutcome.RECENT, wait_s)
            if len(self._waiting) >= self.max_waiting:
                raise BenchmarkQueueFull(len(self._waiting))
            run = _Run(next(self._ids), owner, BenchmarkJob(config))
            self._waiting.append(run)
            outcome = RequestOutcome.STARTED if running is None else RequestOutcome.QUEUED
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._work, name="transfer-benchmark-board", daemon=True
                )
                self._worker.start()
            self._cond.notify_all()
            return Ticket(run.run_id, owner, outcome)

    def cancel(self, run_id: int, owner: str) -> bool:
        """Stop a run (running or waiting) that ``owner`` started; False for anyone else's:
        a watcher may stop watching, never stop the run for the others."""
        with self._cond:
            if self._running is not None and self._running.run_id == run_id:
                run = self._running
            else:
                run = next((w for w in self._waiting if w.run_id == run_id), None)
            if run is None or run.owner != owner:
                return False
            run.job.cancel()
            if run in self._waiting:  # never started: withdrawn, nothing measured
                self._waiting.remove(run)
                self._end(run, RunPhase.FINISHED, None)
            return True

    def wait(self, run_id: int, timeout_s: float | None = None) -> bool:
        """Block until the run has ended (tests, notebooks); False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._status(run_id, "").active, timeout=timeout_s
            )

    def reset(self, timeout_s: float = 30.0) -> None:
        """Stop every run and forget everything (tests start from an empty board)."""
        with self._cond:
            for run in [*self._waiting, *([self._running] if self._running else [])]:
                run.job.cancel()
            self._waiting.clear()
            self._cond.wait_for(lambda: self._worker is None, timeout=timeout_s)
            self._latest = None
            self._ended.clear()

    # ------------------------------------------------------------ the worker
    def _end(self, run: _Run, phase: RunPhase, error: BaseException | None) -> None:
        self._ended[run.run_id] = RunStatus(run.run_id, phase, run.job.config, False, error=error)
        while len(self._ended) > self.remembered:
            self._ended.popitem(last=False)
        self._cond.notify_all()

    def _work(self) -> None:
        try:
            while True:
                with self._cond:
                    if not self._waiting:  # decided under the lock a request takes
                        self._worker = None
                        self._cond.notify_all()
                        return
                    run = self._running = self._waiting.popleft()
                    self._cond.notify_all()
                try:
                    run.job.run_when_free()
                finally:
                    with self._cond:
                        self._running = None
                        job = run.job
                        if job.result is not None:
                            self._latest = (job.result, job.config, run.run_id, self.clock())
                        # Kept without its traceback, whose frames would hold the run's tensors.
                        error = job.error.with_traceback(None) if job.error is not None else None
                        self._end(run, RunPhase.FAILED if error else RunPhase.FINISHED, error)
        finally:
            # Even if the thread dies, the next request starts a worker instead of waiting
            # forever for this one.
            with self._cond:
                if self._worker is threading.current_thread():
                    self._worker = None
                    self._cond.notify_all()


BOARD = BenchmarkBoard()
"""The server's one board: every session of this process shares it."""
