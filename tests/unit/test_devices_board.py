"""The server's shared transfer benchmark (``transfer.BenchmarkBoard``): watchers of one run get
the same result, other settings queue first come first served, a fresh result is shared with
its age, only a run's starter stops it, and the board keeps one result."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from torchatlas.devices import transfer
from torchatlas.devices.errors import BenchmarkQueueFull, ErrorCode
from torchatlas.devices.transfer import (
    KIB,
    BenchmarkBoard,
    BenchmarkConfig,
    BenchmarkResult,
    Measurement,
    Progress,
    RequestOutcome,
    RunPhase,
    StopReason,
    TransferPath,
)

DEFAULT = BenchmarkConfig(max_bytes=4 * KIB, time_budget_s=5, device="cpu")
OTHER = BenchmarkConfig(max_bytes=16 * KIB, time_budget_s=5, device="cpu")
THIRD = BenchmarkConfig(max_bytes=4 * KIB, time_budget_s=9, device="cpu")


def _until(condition: Callable[[], object], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the board never got there"
        time.sleep(0.005)


class Machine:
    """Stands in for the measurement: each run reports progress, then waits for ``finish``
    (or for its stop flag), so a test decides when a run ends."""

    def __init__(self) -> None:
        self.finish = threading.Event()
        self.ran: list[BenchmarkConfig] = []
        self.fail: Exception | None = None

    def __call__(
        self,
        config: BenchmarkConfig,
        progress: Callable[[Progress], None],
        should_stop: Callable[[], bool],
    ) -> BenchmarkResult:
        self.ran.append(config)
        progress(Progress(1, 2, TransferPath.CPU_TO_CPU, 4 * KIB, 0.1))
        stop = None
        while not self.finish.wait(0.005):
            if should_stop():
                stop = StopReason.CANCELLED
                break
        if self.fail is not None:
            raise self.fail
        row = Measurement(TransferPath.CPU_TO_CPU, 4 * KIB, 1e-6, 1e-6, 5, 1)
        return BenchmarkResult(None, (4 * KIB,), (TransferPath.CPU_TO_CPU,), (row,),
                               stop is None, stop, 0.1, config.time_budget_s)  # fmt: skip


@pytest.fixture
def machine(monkeypatch) -> Machine:
    fake = Machine()
    monkeypatch.setattr(transfer, "_measure_all", fake)
    return fake


@pytest.fixture
def board():
    made = BenchmarkBoard()
    yield made
    made.reset()


def _running(board: BenchmarkBoard, run_id: int) -> bool:
    status = board.status(run_id, "")
    return status.phase is RunPhase.RUNNING and status.progress is not None


def test_two_watchers_get_the_same_result(board, machine) -> None:
    first = board.request(DEFAULT, "ada")
    assert first.outcome is RequestOutcome.STARTED
    _until(lambda: _running(board, first.run_id))
    second = board.request(DEFAULT, "bob")  # the same settings while it runs: no error
    assert second.outcome is RequestOutcome.JOINED and second.run_id == first.run_id
    seen_by_bob = board.status(second.run_id, "bob")
    # Bob sees the run's progress as its starter does, and that he did not start it.
    assert seen_by_bob.phase is RunPhase.RUNNING and not seen_by_bob.mine
    assert seen_by_bob.progress == board.status(first.run_id, "ada").progress
    assert board.status(first.run_id, "ada").mine
    machine.finish.set()
    assert board.wait(first.run_id, 20)
    assert board.status(first.run_id, "ada").phase is RunPhase.FINISHED
    assert board.status(second.run_id, "bob").phase is RunPhase.FINISHED
    latest = board.latest()
    assert latest is not None and latest.run_id == first.run_id and latest.config == DEFAULT
    assert latest.result.complete
    assert machine.ran == [DEFAULT]  # measured once for both


def test_other_settings_queue_first_come_first_served(board, machine) -> None:
    first = board.request(DEFAULT, "ada")
    _until(lambda: _running(board, first.run_id))
    second = board.request(OTHER, "bob")
    third = board.request(THIRD, "cy")
    again = board.request(OTHER, "dee")  # the same as a waiting run: joins that one
    assert [second.outcome, third.outcome] == [RequestOutcome.QUEUED] * 2
    assert again.outcome is RequestOutcome.JOINED and again.run_id == second.run_id
    assert board.status(second.run_id, "bob").ahead == 1
    assert board.status(third.run_id, "cy").ahead == 2
    assert board.status(third.run_id, "cy").phase is RunPhase.QUEUED
    # Whoever waits can see the run measuring now, with its settings.
    assert board.running("cy").config == DEFAULT and not board.running("cy").mine
    machine.finish.set()
    assert board.wait(third.run_id, 20)
    assert machine.ran == [DEFAULT, OTHER, THIRD]  # one at a time, in the order asked
    assert board.latest().config == THIRD and board.latest().run_id == third.run_id
    assert board.running("ada") is None


def test_a_fresh_result_is_shared_with_its_age(board, machine) -> None:
    now = [1000.0]
    board.clock = lambda: now[0]
    assert board.latest() is None
    machine.finish.set()
    ticket = board.request(DEFAULT, "ada")
    assert board.wait(ticket.run_id, 20)
    now[0] += 12
    assert board.latest().age_s == pytest.approx(12)
    assert board.latest().rerun_after_s == pytest.approx(board.rerun_after_s - 12, abs=1)
    recent = board.request(DEFAULT, "bob")  # younger than rerun_after_s: no new run
    assert recent.outcome is RequestOutcome.RECENT and recent.run_id == ticket.run_id
    assert recent.rerun_after_s == pytest.approx(board.rerun_after_s - 12, abs=1)
    assert machine.ran == [DEFAULT]
    other = board.request(OTHER, "bob")
    assert other.outcome is RequestOutcome.STARTED  # other settings: a run of their own
    assert board.wait(other.run_id, 20) and board.latest().config == OTHER
    now[0] += board.rerun_after_s
    assert board.request(OTHER, "bob").outcome is RequestOutcome.STARTED  # old enough: again


def test_only_the_starter_stops_a_run(board, machine) -> None:
    ticket = board.request(DEFAULT, "ada")
    _until(lambda: _running(board, ticket.run_id))
    assert not board.cancel(ticket.run_id, "bob")  # a watcher cannot stop it for everyone
    assert not board.status(ticket.run_id, "ada").stopping
    assert board.cancel(ticket.run_id, "ada")
    assert board.wait(ticket.run_id, 20)
    latest = board.latest()
    assert latest.result.stop_reason is StopReason.CANCELLED  # kept, and shown as stopped
    assert latest.rerun_after_s == 0
    # A stopped run is not fresh: the same settings start a new run at once.
    assert board.request(DEFAULT, "bob").outcome is RequestOutcome.STARTED


def test_a_waiting_run_is_withdrawn_by_its_starter_only(board, machine) -> None:
    first = board.request(DEFAULT, "ada")
    _until(lambda: _running(board, first.run_id))
    waiting = board.request(OTHER, "bob")
    assert not board.cancel(waiting.run_id, "ada")
    assert board.cancel(waiting.run_id, "bob")
    assert board.status(waiting.run_id, "bob").phase is RunPhase.FINISHED
    machine.finish.set()
    assert board.wait(first.run_id, 20)
    _until(lambda: board.running("") is None)
    assert machine.ran == [DEFAULT]


def test_the_line_is_bounded(machine) -> None:
    board = BenchmarkBoard(max_waiting=1)
    try:
        first = board.request(DEFAULT, "ada")
        _until(lambda: _running(board, first.run_id))
        board.request(OTHER, "bob")
        with pytest.raises(BenchmarkQueueFull) as refused:
            board.request(THIRD, "cy")
        assert refused.value.code == ErrorCode.QUEUE_FULL
        assert refused.value.params == {"waiting": "1"}
        assert board.request(OTHER, "cy").outcome is RequestOutcome.JOINED  # joining is free
    finally:
        board.reset()


def test_an_error_reaches_every_watcher_without_its_frames(board, machine) -> None:
    machine.fail = RuntimeError("the bus fell off")
    ticket = board.request(DEFAULT, "ada")
    board.request(DEFAULT, "bob")
    machine.finish.set()
    assert board.wait(ticket.run_id, 20)
    for who in ("ada", "bob"):
        status = board.status(ticket.run_id, who)
        assert status.phase is RunPhase.FAILED and "bus fell off" in str(status.error)
        assert status.error.__traceback__ is None
    assert board.latest() is None  # a failed run replaces no result


def test_one_result_and_a_bounded_memory_of_ends(machine) -> None:
    board = BenchmarkBoard(rerun_after_s=0, remembered=2)
    machine.finish.set()
    try:
        tickets = [board.request(config, "ada") for config in (DEFAULT, OTHER, THIRD)]
        assert board.wait(tickets[-1].run_id, 20)
        assert board.latest().run_id == tickets[-1].run_id
        assert len(board._ended) == 2  # the oldest end is forgotten…
        forgotten = board.status(tickets[0].run_id, "ada")
        assert forgotten.phase is RunPhase.FINISHED and not forgotten.active  # …as ended
    finally:
        board.reset()


def test_a_run_waits_for_a_direct_caller_and_really_measures(board) -> None:
    """A notebook's ``run_transfer_benchmark`` holds the lock: the board's run waits for it,
    then measures for real (no fake machine here)."""
    release, holding = threading.Event(), threading.Event()

    def hold(_progress: Progress) -> None:
        holding.set()
        release.wait(20)

    holder = threading.Thread(target=transfer.run_transfer_benchmark, args=(DEFAULT, hold))
    holder.start()
    try:
        assert holding.wait(20)
        ticket = board.request(OTHER, "ada")
        # The board's worker has taken the run (it is the running one) and now waits for the
        # direct caller's lock: no measurement can report progress while that is held.
        _until(lambda: board.status(ticket.run_id, "ada").phase is RunPhase.RUNNING)
        assert transfer.is_busy()
        assert board.status(ticket.run_id, "ada").progress is None  # waiting for the lock
    finally:
        release.set()
        holder.join(20)
    assert board.wait(ticket.run_id, 60)
    result = board.latest().result
    assert result.complete and [m.size_bytes for m in result.measurements] == [4 * KIB, 16 * KIB]
    assert not transfer.is_busy()


def test_a_class_pressing_together_measures_once(board, machine) -> None:
    """Thirty presses at the same moment: one run, everyone else joins it, nobody refused."""
    barrier = threading.Barrier(30)
    tickets: list[transfer.Ticket] = []

    def press(student: int) -> None:
        barrier.wait(10)
        tickets.append(board.request(DEFAULT, f"student-{student}"))

    threads = [threading.Thread(target=press, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    outcomes = sorted(ticket.outcome for ticket in tickets)
    assert outcomes.count(RequestOutcome.STARTED) == 1
    assert outcomes.count(RequestOutcome.JOINED) == 29
    assert len({ticket.run_id for ticket in tickets}) == 1
    machine.finish.set()
    assert board.wait(tickets[0].run_id, 20)
    assert machine.ran == [DEFAULT]
    assert {board.status(t.run_id, t.owner).phase for t in tickets} == {RunPhase.FINISHED}
