"""The transfer benchmark: sizes, caps, medians, the one-per-server lock, the time budget,
cancelling, CSV; and the accelerator paths where a device exists."""

from __future__ import annotations

import csv
import gc
import io
import threading
import time

import pytest

from bench.memory import own_status_bytes
from torchatlas.devices import link as devices_link
from torchatlas.devices import transfer
from torchatlas.devices.errors import ErrorCode
from torchatlas.devices.inventory import available_accelerator
from torchatlas.devices.transfer import (
    GIB,
    KIB,
    MIB,
    BenchmarkBusy,
    BenchmarkConfig,
    BenchmarkJob,
    StopReason,
    TransferPath,
    run_transfer_benchmark,
)
from torchatlas.i18n import translate

ACCELERATOR = available_accelerator()
SMALL = BenchmarkConfig(max_bytes=256 * KIB, time_budget_s=10, repeats=3, device="cpu")


def test_sizes_run_from_4_kib_by_fours_up_to_the_memory_budget() -> None:
    assert transfer.SIZES[0] == 4 * KIB and transfer.SIZES[-1] == transfer.MAX_BYTES
    assert all(b == 4 * a for a, b in zip(transfer.SIZES, transfer.SIZES[1:], strict=False))
    assert transfer.sizes_up_to(64 * KIB) == (4 * KIB, 16 * KIB, 64 * KIB)
    # The largest size is derived from the stated budget: its buffers fit, the next one's not.
    held = transfer.MAX_BYTES * transfer.BUFFERS_AT_ONCE
    assert held <= transfer.MEMORY_BUDGET_BYTES < 4 * held
    assert transfer.MAX_BYTES == 64 * MIB and transfer.DEFAULT_MAX_BYTES == transfer.MAX_BYTES
    assert transfer.sizes_within(GIB)[-1] == 256 * MIB
    assert transfer.sizes_within(0) == (4 * KIB,)


def test_every_size_a_run_or_a_link_can_ask_for_fits_the_budget() -> None:
    """No size the page offers, no size a link can name, no request at all makes a run hold
    more than the budget: a larger request measures up to the largest size."""
    budget = transfer.MEMORY_BUDGET_BYTES
    assert all(size * transfer.BUFFERS_AT_ONCE <= budget for size in transfer.SIZES)
    for name in ("d_max",):
        options = devices_link.LINK.field(name).options
        assert options and all(int(size) * transfer.BUFFERS_AT_ONCE <= budget for size in options)
        assert int(devices_link.LINK.field(name).default) == transfer.MAX_BYTES
    read = devices_link.LINK.read({"d_max": [str(GIB)]})  # a link from before the budget
    assert read.broken == ("d_max",) and read.values["d_max"] == str(transfer.MAX_BYTES)
    for asked in (transfer.MAX_BYTES + 1, 256 * MIB, GIB, 2**62):
        assert BenchmarkConfig(max_bytes=asked).max_bytes == transfer.MAX_BYTES
    assert BenchmarkConfig(max_bytes=64 * KIB).max_bytes == 64 * KIB
    # Every path copies one source into one destination: two buffers, no more.
    assert set(transfer.PATH_BUFFERS) == set(transfer.PATHS)
    pairs = transfer.PATH_BUFFERS.values()
    assert all(len(set(names)) == transfer.BUFFERS_AT_ONCE for names in pairs)


@pytest.mark.parametrize(
    ("host", "device_free", "has_device", "cap"),
    [
        (None, None, False, 64 * MIB),
        (64 * GIB, 64 * GIB, True, 64 * MIB),  # never above the memory budget's largest size
        (64 * MIB, None, False, 16 * MIB),  # two buffers within half of 64 MiB
        (6 * GIB, 64 * MIB, True, 16 * MIB),  # device memory is the tighter limit
        (10 * KIB, None, False, 4 * KIB),  # floor: the smallest size
    ],
)
def test_size_cap_from_free_memory(host, device_free, has_device, cap) -> None:
    assert transfer.size_cap(host, device_free, has_device) == cap


def test_machine_cap_is_a_listed_size() -> None:
    assert transfer.machine_size_cap() in transfer.SIZES


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError) as raised:
        BenchmarkConfig(max_bytes=10)
    assert raised.value.code == ErrorCode.MAX_BYTES_TOO_SMALL
    assert raised.value.params == {"minimum": str(4 * KIB), "max_bytes": "10"}
    with pytest.raises(ValueError) as raised:
        BenchmarkConfig(time_budget_s=0)
    assert raised.value.code == ErrorCode.TIME_BUDGET_OUT_OF_RANGE
    with pytest.raises(ValueError):
        BenchmarkConfig(time_budget_s=transfer.MAX_TIME_BUDGET_S + 1)
    with pytest.raises(ValueError) as raised:
        BenchmarkConfig(repeats=0)
    assert raised.value.code == ErrorCode.REPEATS_OUT_OF_RANGE
    with pytest.raises(ValueError) as raised:
        BenchmarkConfig(paths=("teleport",))
    assert raised.value.code == ErrorCode.UNKNOWN_PATHS
    # The message is the tables' English, naming what was wrong and what to choose instead.
    assert str(raised.value) == translate("devices.errors.unknown_paths", **raised.value.params)
    assert "teleport" in str(raised.value) and "cpu_to_cpu" in str(raised.value)


def test_paths_given_as_names_become_the_enum() -> None:
    config = BenchmarkConfig(paths=("cpu_to_cpu",))
    assert config.paths == (TransferPath.CPU_TO_CPU,)
    assert type(config.paths[0]) is TransferPath


def test_measure_takes_the_median_of_synchronised_samples() -> None:
    calls = {"copy": 0, "sync": 0}

    def copy() -> None:
        calls["copy"] += 1
        time.sleep(0.001)

    def sync() -> None:
        calls["sync"] += 1

    result = transfer.measure("cpu_to_cpu", 4096, copy, sync, repeats=3)
    assert result.copies_per_sample >= 1 and result.repeats == 3
    assert 0.0009 < result.median_s < 0.05 and result.min_s <= result.median_s
    assert calls["sync"] == 2 * (transfer.WARMUPS + 3)  # before and after every timed sample
    assert result.gbps == pytest.approx(4096 / result.median_s / 1e9)


def test_cpu_benchmark_measures_every_size() -> None:
    seen = []
    result = run_transfer_benchmark(SMALL, progress=seen.append)
    assert result.complete and result.stop_reason is None
    assert result.device is None and result.paths == ("cpu_to_cpu",)
    assert all(type(m.path) is TransferPath for m in result.measurements)
    assert [m.size_bytes for m in result.measurements] == [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB]
    assert all(m.median_s > 0 and m.gbps > 0 for m in result.measurements)
    assert result.latency_s("cpu_to_cpu") == result.measurements[0].median_s
    assert seen[-1].fraction == 1.0 and len(seen) == 2 * 4  # before and after each
    assert result.references == ()  # no physical line is honest for a CPU copy
    assert not transfer.is_busy()


def test_dips_are_sizes_far_below_their_neighbours() -> None:
    def row(size: int, seconds: float) -> transfer.Measurement:
        return transfer.Measurement("cpu_to_cpu", size, seconds, seconds, 5, 1)

    times = {4 * KIB: 1e-6, 16 * KIB: 1e-6, 64 * KIB: 8e-3, 256 * KIB: 4e-6, MIB: 1e-5}
    result = transfer.BenchmarkResult(
        None, tuple(times), ("cpu_to_cpu",), tuple(row(s, t) for s, t in times.items()),
        True, None, 1.0, 5.0,
    )  # fmt: skip
    assert result.dips("cpu_to_cpu") == [64 * KIB]
    assert result.dips("device_to_host") == []


def test_a_run_of_slow_sizes_is_flagged_but_a_cache_drop_is_not() -> None:
    def result_for(gbps: dict[int, float]) -> transfer.BenchmarkResult:
        rows = tuple(
            transfer.Measurement("cpu_to_cpu", size, size / (g * 1e9), size / (g * 1e9), 5, 1)
            for size, g in gbps.items()
        )
        return transfer.BenchmarkResult(
            None, tuple(gbps), ("cpu_to_cpu",), rows, True, None, 1.0, 5.0
        )

    # Recorded on a loaded 2-core machine: 256 KiB to 4 MiB each waited for a free core.
    waiting = {4 * KIB: 2.0, 16 * KIB: 6.0, 64 * KIB: 8.0, 256 * KIB: 0.02, MIB: 0.13,
               4 * MIB: 0.25, 16 * MIB: 1.5, 64 * MIB: 6.0}  # fmt: skip
    assert result_for(waiting).dips("cpu_to_cpu") == [256 * KIB, MIB, 4 * MIB]
    # Out of the caches into main memory: several times slower, and that is physics.
    caches = {4 * KIB: 3.0, 16 * KIB: 20.0, 64 * KIB: 30.0, 256 * KIB: 35.0, MIB: 37.0,
              4 * MIB: 20.0, 16 * MIB: 5.0, 64 * MIB: 3.2, 256 * MIB: 3.0}  # fmt: skip
    assert result_for(caches).dips("cpu_to_cpu") == []


def test_csv_has_one_row_per_measurement() -> None:
    result = run_transfer_benchmark(SMALL)
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert len(rows) == len(result.measurements)
    assert rows[0]["path"] == "cpu_to_cpu" and rows[0]["code"] == "cpu_dst.copy_(cpu_src)"
    assert float(rows[0]["gbps"]) == pytest.approx(result.measurements[0].gbps, rel=1e-4)


def test_cancel_stops_between_measurements() -> None:
    seen: list[transfer.Progress] = []

    def should_stop() -> bool:  # a user presses "stop" once two measurements are in
        return bool(seen) and seen[-1].done >= 2

    result = run_transfer_benchmark(SMALL, progress=seen.append, should_stop=should_stop)
    assert not result.complete and result.stop_reason == "cancelled"
    assert result.stop_reason is StopReason.CANCELLED
    assert len(result.measurements) == 2


class NoBuffers:
    peak_bytes = peak_host_bytes = 0

    def __init__(self, *args: object) -> None:
        pass

    def use(self, path: str) -> object:
        return lambda: None

    def close(self) -> None:
        pass


def test_stop_does_not_wait_for_a_whole_measurement(monkeypatch) -> None:
    """A large copy's warm-ups and repeats take seconds on a slow machine: "stop" is honoured
    before the next sample, not after the measurement."""
    copies: list[float] = []

    class SlowBuffers(NoBuffers):
        def use(self, path: str) -> object:
            return lambda: copies.append(time.sleep(0.01) or time.perf_counter())

    monkeypatch.setattr(transfer, "_Buffers", SlowBuffers)
    config = BenchmarkConfig(max_bytes=4 * KIB, time_budget_s=30, repeats=50, device="cpu")
    result = run_transfer_benchmark(config, should_stop=lambda: len(copies) >= 3)
    assert result.stop_reason == "cancelled" and result.measurements == ()
    # 2 warm-ups, then 1-copy samples: stopped after the sample that made 3 (not 52 copies).
    assert len(copies) == 3
    assert not transfer.is_busy()


def test_time_budget_stops_before_it_would_overrun(monkeypatch) -> None:
    clock = {"now": 0.0}
    per_copy = {4 * KIB: 0.01}  # 4 KiB "takes" 10 ms, and each size 4x longer than the last

    def fake_measure(path, size, copy, sync, repeats, returns_early=False, should_stop=None):
        seconds = per_copy[size] = per_copy.get(size) or 4 * per_copy[size // 4]
        clock["now"] += seconds * (transfer.WARMUPS + repeats)
        return transfer.Measurement(path, size, seconds, seconds, repeats, 1)

    monkeypatch.setattr(transfer, "measure", fake_measure)
    monkeypatch.setattr(transfer, "_Buffers", NoBuffers)
    monkeypatch.setattr(transfer.time, "perf_counter", lambda: clock["now"])
    config = BenchmarkConfig(max_bytes=GIB, time_budget_s=5.0, device="cpu")
    result = run_transfer_benchmark(config)
    assert result.stop_reason == "time_budget" and not result.complete
    # 0.07 + 0.28 + 1.12 = 1.47 s done; the next size would take 4.48 s more: not started.
    assert [m.size_bytes for m in result.measurements] == [4 * KIB, 16 * KIB, 64 * KIB]
    assert result.elapsed_s <= config.time_budget_s


def test_only_one_benchmark_per_server() -> None:
    release = threading.Event()
    started = threading.Event()

    def hold(_progress) -> None:
        started.set()
        release.wait(10)

    holder = threading.Thread(target=run_transfer_benchmark, args=(SMALL, hold))
    holder.start()
    try:
        assert started.wait(10)
        assert transfer.is_busy()
        with pytest.raises(BenchmarkBusy) as busy:
            run_transfer_benchmark(SMALL)
        assert 1 <= busy.value.retry_after_s <= SMALL.time_budget_s + 2
        assert busy.value.code == ErrorCode.BUSY
        assert busy.value.params == {"seconds": str(busy.value.retry_after_s)}
        assert isinstance(busy.value, RuntimeError)
        with pytest.raises(BenchmarkBusy):
            BenchmarkJob.start(SMALL)
    finally:
        release.set()
        holder.join(10)
    assert not transfer.is_busy()


def test_job_runs_in_the_background_and_can_be_cancelled() -> None:
    job = BenchmarkJob.start(SMALL)
    assert job.wait(30)
    assert job.result is not None and job.result.complete and job.error is None
    assert not transfer.is_busy()

    job = BenchmarkJob.start(BenchmarkConfig(max_bytes=GIB // 4, time_budget_s=30, device="cpu"))
    job.cancel()
    assert job.wait(30)
    assert job.result.stop_reason == "cancelled" and job.cancelled
    assert not transfer.is_busy()


def test_out_of_memory_stops_cleanly(monkeypatch) -> None:
    class Failing(NoBuffers):
        def use(self, path: str) -> object:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")

    monkeypatch.setattr(transfer, "_Buffers", Failing)
    result = run_transfer_benchmark(SMALL)
    assert result.stop_reason == "out_of_memory" and result.measurements == ()
    assert not transfer.is_busy()


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_accelerator_paths_are_all_measured() -> None:
    config = BenchmarkConfig(max_bytes=4 * MIB, time_budget_s=30, repeats=3)
    result = run_transfer_benchmark(config)
    assert result.complete and result.device == str(ACCELERATOR)
    assert set(result.paths) == set(transfer.PATHS)
    for path in transfer.PATHS:
        rows = result.for_path(path)
        assert len(rows) == len(transfer.sizes_up_to(4 * MIB)), path
        assert all(m.gbps > 0 for m in rows)
    non_blocking = result.for_path(transfer.HOST_TO_DEVICE_NON_BLOCKING)
    assert all(m.call_return_s is not None for m in non_blocking)
    # At 4 MiB a pinned upload is not slower than a pageable one (allow for noise).
    pinned = result.for_path(transfer.HOST_TO_DEVICE_PINNED)[-1].gbps
    pageable = result.for_path(transfer.HOST_TO_DEVICE_PAGEABLE)[-1].gbps
    assert pinned > 0.7 * pageable


# ---------------------------------------------------------------- memory: one press's share
# What one press may add to the server process (its buffers are held to MEMORY_BUDGET_BYTES;
# the rest is the interpreter's, the allocators' and the driver's own overhead).
RSS_RISE_LIMIT = 200_000_000


class PeakRss:
    """The process's resident memory before, at its highest during, and after a block.

    The kernel's own high-water mark (VmHWM) is reset first through /proc/self/clear_refs, so
    the peak is exact, not sampled; where that cannot be written, a thread samples VmRSS."""

    def __enter__(self) -> PeakRss:
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
                clear.write("5")  # reset the peak resident set size to the current one
            self.exact = True
        except OSError:
            self.exact = False
        self.before = own_status_bytes("VmRSS")
        if self.before is None:
            pytest.skip("no /proc/self/status to read this process's memory from")
        self.sampled = self.before
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        if not self.exact:
            self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.0005):
            self.sampled = max(self.sampled, own_status_bytes("VmRSS") or 0)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._sampler.is_alive():
            self._sampler.join(5)
        self.after = own_status_bytes("VmRSS") or 0
        self.peak = (own_status_bytes("VmHWM") or 0) if self.exact else self.sampled
        self.peak = max(self.peak, self.after)

    @property
    def rise(self) -> int:
        return self.peak - self.before


def _warm_up() -> None:
    """One tiny run on every path first: the copy kernels' first use, and on an accelerator
    its context (which the server made once, when the page first read the inventory), are
    not a press's memory."""
    run_transfer_benchmark(BenchmarkConfig(max_bytes=4 * KIB, time_budget_s=10, repeats=1))


def test_a_run_holds_at_most_two_buffers_whatever_the_paths() -> None:
    """Path by path, the run frees what the next path does not copy before it makes what it
    does: never more than one source and one destination at a time (device buffers are plain
    CPU tensors here, which is all the accounting needs)."""
    size = 64 * KIB
    buffers = transfer._Buffers(size, None)
    for path in transfer.PATHS:
        copy = buffers.use(path)
        if path in transfer.PINNED_PATHS and copy is None:
            continue  # this build cannot pin host memory
        assert copy is not None
        copy()
        assert set(buffers.tensors) == set(transfer.PATH_BUFFERS[path]), path
        assert buffers.held_bytes == 2 * size
    assert buffers.peak_bytes == transfer.BUFFERS_AT_ONCE * size
    buffers.close()
    assert buffers.tensors == {} and buffers.held_bytes == 0


def test_the_largest_press_raises_the_server_memory_by_under_200_mb() -> None:
    """A press asking for the most a link ever could (1 GiB) runs the largest size within the
    budget: its buffers by the engine's own accounting, and the process's real resident
    memory at its peak, stay within bounds (on an accelerator: every path, pinned and device
    buffers included)."""
    _warm_up()
    config = BenchmarkConfig(max_bytes=GIB, time_budget_s=60, repeats=3)
    assert config.max_bytes == transfer.MAX_BYTES
    with PeakRss() as rss:
        result = run_transfer_benchmark(config)
    assert max(m.size_bytes for m in result.measurements) == transfer.MAX_BYTES
    assert result.peak_bytes == transfer.BUFFERS_AT_ONCE * transfer.MAX_BYTES
    assert result.peak_bytes <= transfer.MEMORY_BUDGET_BYTES
    assert result.peak_host_bytes <= result.peak_bytes
    assert rss.rise <= RSS_RISE_LIMIT, f"peak rise {rss.rise / 1e6:.0f} MB (exact: {rss.exact})"
    assert rss.after - rss.before <= RSS_RISE_LIMIT


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_an_accelerator_run_hands_back_its_pinned_and_device_memory() -> None:
    """torch's caching allocators keep freed blocks (device memory, and pinned host memory):
    the run empties both, so nothing it made stays with the server; at its peak the device
    held no more than the budget."""
    import torch

    cuda = ACCELERATOR.type == "cuda"

    def pinned_bytes() -> int:
        return torch.cuda.host_memory_stats().get("allocated_bytes.current", 0) if cuda else 0

    _warm_up()
    torch.accelerator.synchronize(ACCELERATOR)
    reserved_before, pinned_before = torch.accelerator.memory_reserved(), pinned_bytes()
    torch.accelerator.reset_peak_memory_stats()
    config = BenchmarkConfig(max_bytes=transfer.MAX_BYTES, time_budget_s=60, repeats=3)
    with PeakRss() as rss:
        result = run_transfer_benchmark(config)
    assert result.complete and set(result.paths) == set(transfer.PATHS)
    assert result.peak_bytes == transfer.BUFFERS_AT_ONCE * transfer.MAX_BYTES
    peak_reserved = torch.accelerator.max_memory_reserved() - reserved_before
    assert peak_reserved <= transfer.MEMORY_BUDGET_BYTES
    assert torch.accelerator.memory_reserved() <= reserved_before
    assert pinned_bytes() <= pinned_before
    assert rss.rise <= RSS_RISE_LIMIT, f"peak rise {rss.rise / 1e6:.0f} MB (exact: {rss.exact})"
