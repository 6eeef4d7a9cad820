"""The transfer benchmark: sizes, caps, medians, the one-per-server lock, the time budget,
cancelling, CSV; and the accelerator paths where a device exists."""

from __future__ import annotations

import csv
import io
import threading
import time

import pytest

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


def test_sizes_run_from_4_kib_to_1_gib_by_fours() -> None:
    assert transfer.SIZES[0] == 4 * KIB and transfer.SIZES[-1] == GIB
    assert all(b == 4 * a for a, b in zip(transfer.SIZES, transfer.SIZES[1:], strict=False))
    assert transfer.sizes_up_to(64 * KIB) == (4 * KIB, 16 * KIB, 64 * KIB)


@pytest.mark.parametrize(
    ("host", "device_free", "has_device", "cap"),
    [
        (None, None, False, GIB),
        (64 * GIB, None, False, GIB),  # never above 1 GiB
        (1 * GIB, None, False, 256 * MIB),  # two buffers within half of 1 GiB
        (6 * GIB, 1 * GIB, True, 256 * MIB),  # device memory is the tighter limit
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
    def __init__(self, *args: object) -> None:
        pass

    def can_copy(self, path: str) -> bool:
        return True

    def copy_for(self, path: str) -> object:
        return lambda: None


def test_stop_does_not_wait_for_a_whole_measurement(monkeypatch) -> None:
    """A large copy's warm-ups and repeats take seconds on a slow machine: "stop" is honoured
    before the next sample, not after the measurement."""
    copies: list[float] = []

    class SlowBuffers(NoBuffers):
        def copy_for(self, path: str) -> object:
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
    class Failing:
        def __init__(self, *args) -> None:
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
