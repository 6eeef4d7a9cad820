"""Operations (layer 4) and the contract: results, errors, health, the fair queue (between
clients, then between each client's sessions), rate limits, restarts."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.sandbox_jobs import JOBS as TEST_JOBS
from tests.sandbox_jobs import make_pool, warm_pool
from torchatlas.clients import Visitor
from torchatlas.presets import PRESETS
from torchatlas.sandbox import SandboxPool, get_pool, run_job
from torchatlas.sandbox.pool import FairQueue
from torchatlas.shapes import parse_shapes, register_jobs

pytestmark = pytest.mark.slow

MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc(x.mean(dim=(2, 3)))
"""


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with warm_pool(test_hooks=True, rate_limit=0) as sandbox:
        yield sandbox


def test_echo_round_trips_through_json(pool: SandboxPool) -> None:
    result = pool.run_job(MODEL, "sandbox.echo", {"numbers": [1, 2.5], "text": "한국어"})
    assert result.ok and result.error is None
    assert result.value["classes"] == ["Net"]
    assert result.value["params"] == {"numbers": [1, 2.5], "text": "한국어"}
    assert result.value["pid"] != os.getpid()
    assert set(result.value["environ"]) <= {"LANG", "LC_ALL", "OMP_NUM_THREADS"}
    json.dumps(result.to_dict())


def test_a_child_without_an_answer_is_explained_by_its_exit_report(pool: SandboxPool) -> None:
    result = pool.run_job(MODEL, "sandbox.sleep", {"seconds": 30}, timeout_s=1)
    assert not result.ok and result.error.kind == "timeout"
    assert result.usage["max_rss_kb"] > 0  # the exit report was waited for


def test_answered_jobs_give_their_slot_back_once_the_child_has_exited() -> None:
    """The pool answers as soon as the child has, but the concurrency slot stays taken until
    the child has really gone: no slot may leak, and a one-slot pool must keep working."""
    with warm_pool(concurrency=1, queue_wait_s=5, rate_limit=0) as single:
        for _ in range(5):
            result = single.run_job(MODEL, "sandbox.echo", {})
            assert result.ok, result.error
        deadline = time.monotonic() + 5
        while single.health().warm_workers != "1/1" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert single.health().warm_workers == "1/1"
        assert single._running == 0


def test_meta_forward_of_user_model(pool: SandboxPool) -> None:
    result = pool.run_job(
        MODEL, "sandbox.meta_forward", {"model": "Net", "shape": [1024, 3, 2048, 2048]}
    )
    assert result.ok and result.value == {"shape": [1024, 2]}


def test_syntax_error_has_line_and_column(pool: SandboxPool) -> None:
    result = pool.run_job("import torch\n\nclass Net(:\n    pass\n", "sandbox.echo", {})
    assert not result.ok
    assert result.error.kind == "syntax"
    assert result.error.line == 3 and result.error.col is not None


def test_refusal_lists_every_line(pool: SandboxPool) -> None:
    result = pool.run_job("import os\nx = 1\ny = eval('x')\n", "sandbox.echo", {})
    assert result.error.kind == "refused"
    assert [refusal.line for refusal in result.error.refusals] == [1, 3]
    assert result.error.line == 1
    assert "Line 1" in result.error.message
    assert result.to_dict()["error"]["refusals"][0]["code"] == "import"


def test_exception_while_defining_names_the_line(pool: SandboxPool) -> None:
    result = pool.run_job("import torch\n\nx = undefined_name + 1\n", "sandbox.echo", {})
    assert result.error.kind == "code_error"
    assert result.error.line == 3
    assert "NameError" in result.error.message


@pytest.mark.parametrize(("job", "fragment"), [("sandbox.fail", "always fails"),
                                               ("sandbox.not_json", "not JSON")])  # fmt: skip
def test_job_errors_are_reported_not_raised(pool: SandboxPool, job: str, fragment: str) -> None:
    result = pool.run_job(MODEL, job, {})
    assert not result.ok and result.error.kind == "job_error"
    assert fragment in result.error.message


def test_unknown_job_and_bad_params(pool: SandboxPool) -> None:
    assert pool.run_job(MODEL, "os.system", {}).error.kind == "job_error"
    assert pool.run_job(MODEL, "sandbox.echo", {"x": object()}).error.kind == "job_error"


def test_layers_can_be_switched_off_only_in_tests() -> None:
    production = make_pool()
    result = production.run_job(MODEL, "sandbox.echo", {}, layers_off=("static",))
    assert not result.ok and "only be switched off in tests" in result.error.message
    production.shutdown()


def test_health_reports_every_layer(pool: SandboxPool) -> None:
    deadline = time.monotonic() + 5  # an earlier test's child may still be exiting
    while pool.health().warm_workers != f"{pool.concurrency}/{pool.concurrency}":
        assert time.monotonic() < deadline, pool.health()
        time.sleep(0.02)
    health = pool.health().to_dict()
    assert health["allow_list"] and health["facade"] and health["process_isolation"]
    assert health["scrubbed_env"] and health["rlimits"]
    assert health["seccomp"], health["detail"]  # this kernel accepts filters (see NOTES.md)
    assert health["own_user"] == (os.geteuid() == 0)
    assert health["warm_workers"] == f"{pool.concurrency}/{pool.concurrency}"


def test_rate_limit_per_session() -> None:
    with warm_pool(rate_limit=2, rate_window_s=30) as limited:
        assert limited.run_job(MODEL, "sandbox.echo", {}, visitor="a").ok
        assert limited.run_job(MODEL, "sandbox.echo", {}, visitor="a").ok
        third = limited.run_job(MODEL, "sandbox.echo", {}, visitor="a")
        assert not third.ok and third.error.kind == "busy"
        assert "Wait" in third.error.message
        assert limited.run_job(MODEL, "sandbox.echo", {}, visitor="b").ok  # others unaffected


def test_rate_limit_per_client_binds_every_session_of_one_address() -> None:
    """Fresh sessions do not renew a client's rate: the client's own, larger limit counts them
    all; another client is unaffected, and a job refused by the line is not counted."""
    laptop = [Visitor("ip:192.0.2.1", f"tab-{n}") for n in range(5)]
    with warm_pool(rate_limit=2, client_rate_limit=3, client_rate_window_s=30) as limited:
        for visitor in laptop[:3]:  # three sessions, one job each: within both limits
            assert limited.run_job(MODEL, "sandbox.echo", {}, visitor=visitor).ok
        fourth = limited.run_job(MODEL, "sandbox.echo", {}, visitor=laptop[3])
        assert not fourth.ok and fourth.error.kind == "busy"
        assert "network address" in fourth.error.message and "Wait" in fourth.error.message
        other = Visitor("ip:198.51.100.2", "tab-0")  # the same session name, another machine
        assert limited.run_job(MODEL, "sandbox.echo", {}, visitor=other).ok


def test_a_job_refused_by_the_line_does_not_count_against_the_rate() -> None:
    with warm_pool(concurrency=1, queue_limit=1, rate_limit=0, client_rate_limit=2) as small:
        busy = threading.Thread(
            target=small.run_job,
            args=(MODEL, "sandbox.sleep", {"seconds": 1}),
            kwargs={"visitor": Visitor("ip:192.0.2.9", "a")},
        )
        waiting = threading.Thread(
            target=small.run_job,
            args=(MODEL, "sandbox.echo", {}),
            kwargs={"visitor": Visitor("ip:192.0.2.8", "b")},
        )
        busy.start()
        _until(lambda: small._running == 1)
        waiting.start()
        _until(lambda: small.queued == 1)
        laptop = Visitor("ip:192.0.2.1", "s")
        for _ in range(3):  # the line is full (one client each, nobody holds more): refused
            refused = small.run_job(MODEL, "sandbox.echo", {}, visitor=laptop)
            assert refused.error.kind == "busy" and "line is full" in refused.error.message
        busy.join()
        waiting.join()
        for _ in range(2):  # the refusals were not counted: the client's two jobs run
            assert small.run_job(MODEL, "sandbox.echo", {}, visitor=laptop).ok
        third = small.run_job(MODEL, "sandbox.echo", {}, visitor=laptop)
        assert third.error.kind == "busy" and "network address" in third.error.message


def test_concurrency_cap_and_queue() -> None:
    """A job that finds every slot taken waits in line (and says where), then runs; only a
    job that has waited ``queue_wait_s`` in vain is answered "busy"."""
    with warm_pool(concurrency=1, rate_limit=0) as small:
        slow = threading.Thread(
            target=small.run_job, args=(MODEL, "sandbox.sleep", {"seconds": 1}), daemon=True
        )
        slow.start()
        _until(lambda: small.health().warm_workers == "0/1")
        positions: list[int] = []
        waiting = small.run_job(MODEL, "sandbox.echo", {}, on_queued=positions.append)
        assert waiting.ok, waiting.error
        assert positions == [1, 0]
        slow.join()
    with warm_pool(concurrency=1, queue_wait_s=0.3, rate_limit=0) as impatient:
        slow = threading.Thread(
            target=impatient.run_job, args=(MODEL, "sandbox.sleep", {"seconds": 2}), daemon=True
        )
        slow.start()
        _until(lambda: impatient.health().warm_workers == "0/1")
        given_up = impatient.run_job(MODEL, "sandbox.echo", {})
        assert not given_up.ok and given_up.error.kind == "busy"
        assert impatient.queued == 0
        slow.join()
        # Its worker is replaced after the job; under load the new one can take longer than
        # this pool's 0.3 s of patience to be ready, which is not what is tested here.
        _until(lambda: impatient.health().warm_workers == "1/1")
        assert impatient.run_job(MODEL, "sandbox.echo", {}).ok


def _until(condition: Callable[[], bool], limit_s: float = 10) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


# ---------------------------------------------------------------- fairness, without processes


def test_fair_queue_serves_a_newcomer_before_a_flooders_backlog() -> None:
    queue = FairQueue(1, per_session=2, limit=64)
    a1, _ = queue.enter("a")
    a2, _ = queue.enter("a")
    a3, _ = queue.enter("a")
    assert a1.state == "running" and a2.state == a3.state == "waiting"
    assert queue.enter("a") == (None, "session")  # the flooder's fourth: answered at once
    b1, _ = queue.enter("b")
    assert [queue.position(t) for t in (a2, a3, b1)] == [2, 3, 1]
    queue.release(a1)
    assert b1.state == "running" and a2.state == "waiting"
    c1, _ = queue.enter("c")  # a session with no turn yet goes before a's backlog, too
    queue.release(b1)
    assert c1.state == "running"
    queue.release(c1)
    assert a2.state == "running"
    queue.release(a2)
    assert a3.state == "running"


def test_fair_queue_runs_one_job_per_session_and_bounds_the_line() -> None:
    queue = FairQueue(2, per_session=2, limit=3)
    a1, _ = queue.enter("a")
    a2, _ = queue.enter("a")
    assert a1.state == "running" and a2.state == "waiting"  # a slot is free, but not for a
    assert queue.running_count == 1
    b1, _ = queue.enter("b")
    assert b1.state == "running"
    queue.enter("c")
    queue.enter("d")
    assert queue.enter("e") == (None, "full")  # three waiting: the line is full
    assert queue.enter(None) == (None, "full")  # a call without a session waits in line too
    queue.release(a1)
    assert queue.waiting_count == 2 and a2.state == "waiting"  # c was first in line


def test_fair_queue_keeps_a_class_in_arrival_order() -> None:
    queue = FairQueue(2, per_session=2, limit=64)
    tickets = [queue.enter(f"student-{index}")[0] for index in range(30)]
    assert all(ticket is not None for ticket in tickets)
    assert [queue.position(ticket) for ticket in tickets] == [0, 0, *range(1, 29)]
    started = []
    while any(ticket.state != "done" for ticket in tickets):
        running = [ticket for ticket in tickets if ticket.state == "running"]
        started.extend(ticket for ticket in running if ticket not in started)
        queue.release(running[0])
    assert started == tickets


def test_waiting_reports_positions_and_a_failing_callback_leaves_the_line() -> None:
    queue = FairQueue(1, per_session=2, limit=64)
    first, _ = queue.enter("a")
    second, _ = queue.enter("b")
    third, _ = queue.enter("c")
    seen: list[int] = []
    waiter = threading.Thread(target=queue.wait, args=(third, 10, seen.append))
    waiter.start()
    _until(lambda: seen == [2])

    def give_up(position: int) -> None:
        raise KeyboardInterrupt  # e.g. the page's script was stopped while it waited

    with pytest.raises(KeyboardInterrupt):
        queue.wait(second, 10, give_up)
    assert second.state == "left"
    _until(lambda: seen == [2, 1])
    queue.release(first)
    waiter.join(5)
    assert seen == [2, 1, 0] and third.state == "running"
    assert queue.waiting_count == 0 and queue.running_count == 1


# ---------------------------------------------------------------- fairness between clients

LAPTOP, HOME, SCHOOL = "ip:192.0.2.66", "ip:198.51.100.7", "ip:203.0.113.30"


def _sessions(client: str, count: int, prefix: str = "s") -> list[Visitor]:
    return [Visitor(client, f"{prefix}-{index}") for index in range(count)]


def test_many_sessions_of_one_client_cannot_hold_back_another_client() -> None:
    """The red team's flood: one laptop, 20 fresh sessions, two jobs each. Per session, each
    session's first job would be a newcomer's, served in the current round ahead of the
    honest visitor's (and one job per session could run); per client, they are one client's
    backlog, with one running job."""
    for slots in (1, 2):
        queue = FairQueue(slots, per_session=2, limit=64)
        flood = [queue.enter(v)[0] for v in _sessions(LAPTOP, 20) for _ in range(2)]
        assert all(ticket is not None for ticket in flood)
        assert queue.running_count == 1  # one running job for the whole laptop
        honest, refusal = queue.enter(Visitor(HOME, "tab"))
        assert honest is not None and refusal == ""
        if slots == 2:  # the slot out of the flood's reach: it runs at once
            assert honest.state == "running"
            continue
        assert queue.position(honest) == 1  # next, ahead of the laptop's 39 waiting jobs
        running = next(ticket for ticket in flood if ticket.state == "running")
        queue.release(running)  # one slot-turn
        assert honest.state == "running"


def test_a_flood_of_fresh_sessions_never_delays_another_client_by_more_than_one_turn() -> None:
    """The flood resubmits from fresh sessions after every answer; the honest client asks
    again and again: each of its jobs runs at the next free slot."""
    queue = FairQueue(1, per_session=2, limit=64)
    fresh = iter(_sessions(LAPTOP, 1000))
    flood = [queue.enter(next(fresh))[0] for _ in range(30)]
    for round_ in range(10):
        honest, _ = queue.enter(Visitor(HOME, f"tab-{round_}"))
        flood += [queue.enter(next(fresh))[0] for _ in range(5)]  # and it floods on
        assert queue.position(honest) == 1
        running = [ticket for ticket in flood if ticket is not None and ticket.state == "running"]
        queue.release(running[0])
        assert honest.state == "running"
        queue.release(honest)


def test_a_full_line_pushes_out_the_newest_job_of_the_client_holding_the_most() -> None:
    queue = FairQueue(1, per_session=2, limit=3)
    first, _ = queue.enter(Visitor(LAPTOP, "x"))
    flood = [queue.enter(v)[0] for v in _sessions(LAPTOP, 3)]
    assert [t.state for t in flood] == ["waiting"] * 3 and queue.waiting_count == 3
    assert queue.enter(Visitor(LAPTOP, "more")) == (None, "client")  # its share: all of it
    honest, _ = queue.enter(Visitor(HOME, "tab"))
    assert honest.state == "waiting" and flood[2].state == "pushed"
    assert queue.waiting_count == 3 and queue.position(honest) == 1
    assert queue.wait(flood[2], 10) is False  # its caller is answered at once
    other, _ = queue.enter(Visitor(SCHOOL, "a"))  # the laptop still holds 2: room is made
    assert other.state == "waiting" and flood[1].state == "pushed"
    # One job each now: a push would only swap two clients' places, so the line is full.
    assert queue.enter(Visitor("ip:192.0.2.200", "a")) == (None, "full")
    assert queue.enter(None) == (None, "full")
    queue.release(first)
    started = []
    while queue.running_count:
        running = next(t for t in (honest, other, flood[0]) if t.state == "running")
        started.append(running)
        queue.release(running)
    assert started == [honest, other, flood[0]]  # the laptop had its turn: it goes last


def test_sessions_of_one_client_take_turns() -> None:
    queue = FairQueue(1, per_session=2, limit=64)
    a1, a2, a3 = (queue.enter(Visitor(SCHOOL, "a"))[0] for _ in range(3))
    b1, b2 = (queue.enter(Visitor(SCHOOL, "b"))[0] for _ in range(2))
    (c1,) = (queue.enter(Visitor(SCHOOL, "c"))[0] for _ in range(1))
    assert a1.state == "running"
    order = [a1]
    while len(order) < 6:
        queue.release(order[-1])
        order.append(next(t for t in (a2, a3, b1, b2, c1) if t.state == "running"))
    # b and c had no turn yet; then a and b take turns, ties by arrival.
    assert order == [a1, b1, c1, a2, b2, a3]
    assert [queue.position(t) for t in order] == [0] * 6


def test_a_class_behind_one_address_is_served_without_a_refusal() -> None:
    """Thirty phones behind one school address press Analyse at once, while a laptop floods
    the line from fresh sessions: every phone's job is taken and runs (one at a time while the
    laptop competes), none is refused or pushed out."""
    queue = FairQueue(2, per_session=2, limit=64)
    flood = [queue.enter(v)[0] for v in _sessions(LAPTOP, 40)]
    assert queue.waiting_count == 39
    phones = [queue.enter(v) for v in _sessions(SCHOOL, 30, "phone")]
    assert [refusal for _, refusal in phones] == [""] * 30
    tickets = [ticket for ticket, _ in phones]
    assert tickets[0].state == "running"  # the slot the laptop cannot reach
    assert queue.waiting_count == 64  # full: the laptop's newest jobs made room
    served = []
    while any(ticket.state in ("waiting", "running") for ticket in tickets):
        assert all(ticket.state != "pushed" for ticket in tickets)
        running = [t for t in tickets + flood if t is not None and t.state == "running"]
        assert len(running) == 2 and {t.client for t in running} == {LAPTOP, SCHOOL}
        phone = next(t for t in running if t.client == SCHOOL)
        served.append(phone)
        queue.release(phone)
    assert served == tickets  # in the order they pressed


def test_a_class_alone_is_served_one_at_a_time_and_a_newcomer_finds_a_free_slot() -> None:
    queue = FairQueue(3, per_session=2, limit=64)
    phones = [queue.enter(v)[0] for v in _sessions(SCHOOL, 30)]
    assert [t.state for t in phones[:3]] == ["running", "running", "waiting"]
    newcomer, _ = queue.enter(Visitor(HOME, "tab"))  # never behind the class's two jobs
    assert newcomer.state == "running"
    queue.release(phones[0])
    assert phones[2].state == "running"  # the class is alone again in line: two slots


# ---------------------------------------------------------------- fairness, end to end

SLEEP_S = 1.0
# The flood's jobs are longer: an honest job that waited for one would take seconds, while one
# that ran at once took up to 0.7 s under the full suite's load (a worker's start included).
FLOOD_S = 3.0


def _timed(sandbox: SandboxPool, results: dict, name: str, *args: object, **kw: object) -> None:
    result = sandbox.run_job(*args, **kw)
    results[name] = (result, time.monotonic())


def _flood(sandbox: SandboxPool, results: dict, count: int) -> list[threading.Thread]:
    """Session "flood" submits ``count`` sleep jobs at once."""
    threads = []
    for index in range(count):
        thread = threading.Thread(
            target=_timed,
            args=(sandbox, results, f"a{index}", MODEL, "sandbox.sleep", {"seconds": SLEEP_S}),
            kwargs={"visitor": "flood"},
            daemon=True,
        )
        thread.start()
        threads.append(thread)
        time.sleep(0.05)  # in order: a0 runs, a1 and a2 wait, the rest are refused
    return threads


def test_a_flood_from_one_session_cannot_hold_back_another() -> None:
    """One slot, session A floods with sleep jobs: A gets one running job and two waiting, the
    rest are refused at once; session B's single job runs as soon as A's running one ends,
    ahead of A's backlog (first come, first served would put it behind both)."""
    with warm_pool(concurrency=1, rate_limit=0) as single:
        results: dict[str, tuple] = {}
        threads = _flood(single, results, 6)
        _until(lambda: len(results) == 3)  # a3..a5 answered without waiting
        for name in ("a3", "a4", "a5"):
            refused, _ = results[name]
            assert refused.error.kind == "too_many_jobs", refused.error
            assert refused.elapsed_s < SLEEP_S / 2
            assert "running" in refused.error.message
        positions: list[int] = []
        _timed(single, results, "b", MODEL, "sandbox.echo", {}, visitor="b",
               on_queued=positions.append)  # fmt: skip
        for thread in threads:
            thread.join()
        honest, honest_done = results["b"]
        assert honest.ok, honest.error
        assert positions[0] == 1 and positions[-1] == 0  # first in line, ahead of a1 and a2
        assert honest_done < results["a1"][1] < results["a2"][1]
        assert honest.elapsed_s < 2 * SLEEP_S  # waited for a0 at most, never for a1 or a2


def test_with_two_slots_a_flooder_leaves_one_free() -> None:
    with warm_pool(concurrency=2, rate_limit=0) as pair:
        results: dict[str, tuple] = {}
        threads = _flood(pair, results, 4)
        positions: list[int] = []
        honest = pair.run_job(MODEL, "sandbox.echo", {}, visitor="b", on_queued=positions.append)
        assert honest.ok and positions == []  # it never waited
        assert honest.elapsed_s < SLEEP_S / 2
        for thread in threads:
            thread.join()


def test_a_flood_from_twenty_sessions_of_one_client_leaves_another_client_a_slot() -> None:
    """The red team's flood, end to end: one client, twenty fresh sessions, a sleep job each.
    The client gets one of the two slots; another client's job runs at once in the other,
    every time it asks (a per-session queue gave the flood both slots and a line of newcomers
    ahead of the honest job)."""
    with warm_pool(concurrency=2, rate_limit=0) as pair:
        results: dict[str, tuple] = {}
        threads = [
            threading.Thread(
                target=_timed,
                args=(pair, results, v.session, MODEL, "sandbox.sleep", {"seconds": FLOOD_S}),
                kwargs={"visitor": v},
                daemon=True,
            )
            for v in _sessions(LAPTOP, 20)
        ]
        for thread in threads:
            thread.start()
        _until(lambda: pair.queued == 19)
        assert pair._running == 1
        for round_ in range(3):
            _until(lambda: pair._running == 1)  # its own previous child has exited
            positions: list[int] = []
            honest = pair.run_job(
                MODEL, "sandbox.echo", {}, visitor=Visitor(HOME, f"tab-{round_}"),
                on_queued=positions.append,
            )  # fmt: skip
            assert honest.ok, honest.error
            assert positions == [] and honest.elapsed_s < FLOOD_S / 2  # it never waited
    for thread in threads:  # the pool is shut down: the flood's waiting jobs end at once
        thread.join(10)


def test_queue_positions_are_reported_in_order() -> None:
    with warm_pool(concurrency=1, rate_limit=0) as single:
        blocker = threading.Thread(
            target=single.run_job,
            args=(MODEL, "sandbox.sleep", {"seconds": SLEEP_S}),
            kwargs={"visitor": "first"},
        )
        blocker.start()
        _until(lambda: single._running == 1)
        seen: dict[str, list[int]] = {name: [] for name in "abc"}
        threads = []
        for name in "abc":
            thread = threading.Thread(
                target=single.run_job,
                args=(MODEL, "sandbox.echo", {}),
                kwargs={"visitor": name, "on_queued": seen[name].append},
            )
            thread.start()
            threads.append(thread)
            _until(lambda name=name: bool(seen[name]))
        assert [seen[name][0] for name in "abc"] == [1, 2, 3]
        for thread in [blocker, *threads]:
            thread.join()
        assert seen == {"a": [1, 0], "b": [2, 1, 0], "c": [3, 2, 1, 0]}


@pytest.mark.parametrize("address", ["one school address", "an address each"])
def test_a_class_of_thirty_is_queued_never_busy(address: str) -> None:
    """Thirty sessions press Analyse at once, behind one school address (one client: its
    rate, its share of the line) or each on its own: every one gets its result (default
    limits)."""
    with warm_pool() as sandbox:
        results: dict[str, tuple] = {}
        one = address == "one school address"
        threads = [
            threading.Thread(
                target=_timed,
                args=(sandbox, results, f"s{index}", MODEL, "sandbox.echo", {}),
                kwargs={
                    "visitor": Visitor(SCHOOL if one else f"ip:10.0.0.{index}", f"s{index}"),
                    "timeout_s": 5,
                },
            )
            for index in range(30)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        errors = [result.error for result, _ in results.values() if not result.ok]
        assert len(results) == 30 and errors == []
        assert sandbox.queued == 0


def test_zygote_is_restarted_after_it_dies() -> None:
    with warm_pool(rate_limit=0) as sandbox:
        os.kill(sandbox._zygote.process.pid, signal.SIGKILL)
        sandbox._zygote.process.wait()
        assert not sandbox.health().process_isolation
        result = sandbox.run_job(MODEL, "sandbox.echo", {})
        assert result.ok, result.error


def test_after_shutdown_jobs_are_unavailable() -> None:
    sandbox = make_pool()
    sandbox.shutdown()
    result = sandbox.run_job(MODEL, "sandbox.echo", {})
    assert result.error.kind == "unavailable"


def test_module_level_singleton() -> None:
    """The page's pool runs the jobs its rooms registered, never the tests' own."""
    assert get_pool() is get_pool()
    register_jobs(get_pool())
    assert set(get_pool().jobs) >= {"shapes.analyze", "shapes.why_meta"}
    assert not set(get_pool().jobs) & set(TEST_JOBS)
    result = run_job(MODEL, "sandbox.echo", {}, visitor="singleton")
    assert result.error.kind == "job_error" and "Unknown sandbox job" in result.error.message


def test_a_job_is_registered_by_the_name_it_is_defined_with() -> None:
    sandbox = SandboxPool()
    with pytest.raises(ValueError, match="module-level"):
        sandbox.register({"x.lambda": lambda namespace: {}})
    with pytest.raises(ValueError, match="registered"):
        sandbox.register({"x.job": TEST_JOBS["sandbox.echo"]}, [{"source": "", "job": "x.other"}])
    assert sandbox.jobs == {}  # a refused registration leaves nothing behind
    sandbox.register({"x.job": TEST_JOBS["sandbox.echo"]})
    sandbox.register({"x.job": TEST_JOBS["sandbox.echo"]})  # the same again: nothing changes
    with pytest.raises(ValueError, match="already registered"):
        sandbox.register({"x.job": TEST_JOBS["sandbox.call"]})
    assert sandbox.jobs == {"x.job": "bench.sandbox_jobs:echo"}  # where it is defined


def test_a_registration_after_the_start_restarts_the_zygote_with_it() -> None:
    with warm_pool(jobs={"sandbox.echo": TEST_JOBS["sandbox.echo"]}, rate_limit=0) as sandbox:
        first = sandbox._zygote.process.pid
        assert sandbox.run_job(MODEL, "sandbox.echo", {}).ok
        assert sandbox.run_job(MODEL, "sandbox.fail", {}).error.message.startswith("Unknown")
        sandbox.register({"sandbox.fail": TEST_JOBS["sandbox.fail"]})
        result = sandbox.run_job(MODEL, "sandbox.fail", {})
        assert result.error.kind == "job_error" and "always fails" in result.error.message
        assert sandbox._zygote.process.pid != first


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_preset_analyses_inside_the_confined_worker(pool: SandboxPool, key: str) -> None:
    """No preset needs a file, a thread pool or a process that the worker denies."""
    preset = PRESETS[key]
    params = {"input_shapes": parse_shapes(preset.shapes), "model": preset.model or None}
    dtypes = [part.strip() for part in preset.dtypes.split(";")]
    if dtypes != ["float32"]:
        params["input_dtypes"] = dtypes
    for symbolic in (False, True):
        result = pool.run_job(
            preset.source, "shapes.analyze", {**params, "symbolic": symbolic}, timeout_s=30
        )
        assert result.ok, result.error
        error = result.value["error"]
        assert error is None or key.endswith("broken"), error
        assert result.value["layers"]


def test_zygote_outlives_the_thread_that_started_it() -> None:
    """Streamlit starts it from a script-run thread that ends soon after."""
    sandbox = make_pool(rate_limit=0)
    try:
        starter = threading.Thread(target=sandbox.warm_up)
        starter.start()
        starter.join()
        pid = sandbox._zygote.process.pid
        time.sleep(0.5)
        result = sandbox.run_job(MODEL, "sandbox.echo", {})
        assert result.ok, result.error
        assert sandbox._zygote.process.pid == pid
    finally:
        sandbox.shutdown()


def _zygote_children(sandbox: SandboxPool) -> set[int]:
    pid = sandbox._zygote.process.pid
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _ready_spare(sandbox: SandboxPool, not_one_of: set[int]) -> int:
    """The zygote's spare child once it says it is confined (a pid no job has used yet)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        spare = sandbox._zygote.last_spare_pid
        if spare is not None and spare not in not_one_of:
            return spare
        time.sleep(0.01)
    raise AssertionError(f"no new spare: children {_zygote_children(sandbox)}")


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def test_every_job_gets_the_spare_forked_and_confined_before_it() -> None:
    """A request pays neither the fork nor the confinement: a spare child waits, already
    confined, and each job takes it (a new process every time, never reused)."""
    with warm_pool(rate_limit=0, test_hooks=True) as sandbox:
        used: set[int] = set()
        for _ in range(3):
            spare = _ready_spare(sandbox, not_one_of=used)
            assert spare in _zygote_children(sandbox)
            status = _status(spare)
            assert status["Seccomp"] == "2"  # filter mode, before any job exists
            if os.geteuid() == 0:
                assert status["Uid"].split()[0] != "0"  # a user of its own, not root
            result = sandbox.run_job(MODEL, "sandbox.echo", {})
            assert result.ok, result.error
            assert result.value["pid"] == spare
            used.add(spare)
        # A job that switches a layer off gets a fresh fork; the spare stays for the next one.
        spare = _ready_spare(sandbox, not_one_of=used)
        result = sandbox.run_job(MODEL, "sandbox.echo", {}, layers_off=("seccomp",))
        assert result.ok and result.value["pid"] not in used | {spare}
        assert sandbox.run_job(MODEL, "sandbox.echo", {}).value["pid"] == spare


def test_a_spare_killed_from_outside_is_replaced() -> None:
    with warm_pool(rate_limit=0) as sandbox:
        spare = _ready_spare(sandbox, not_one_of=set())
        os.kill(spare, signal.SIGKILL)
        time.sleep(0.2)
        result = sandbox.run_job(MODEL, "sandbox.echo", {})
        assert result.ok, result.error
        assert result.value["pid"] != spare
        new_spare = _ready_spare(sandbox, not_one_of={spare})
        assert sandbox.run_job(MODEL, "sandbox.echo", {}).value["pid"] == new_spare


def _minor_faults(pid: int) -> int:
    """The page faults ``pid`` has taken (a warm-up's first touches show here)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def test_the_spare_warms_up_only_once_no_job_runs() -> None:
    """The next spare is forked and confined while a job runs, but its warm-up (thousands of
    first touches: CPU that the running job, and the server decoding its reply, need on a
    one- or two-core host) waits until no job runs."""
    with warm_pool(rate_limit=0, concurrency=2) as sandbox:
        first = _ready_spare(sandbox, not_one_of=set())
        job = threading.Thread(
            target=sandbox.run_job, args=(MODEL, "sandbox.sleep", {"seconds": 2.0})
        )
        job.start()
        second = _ready_spare(sandbox, not_one_of={first})
        time.sleep(0.2)  # it has said it is confined; now it only waits
        during = _minor_faults(second)
        time.sleep(0.5)
        assert _minor_faults(second) == during  # confined, waiting, cold
        job.join()
        deadline = time.monotonic() + 20
        while _minor_faults(second) < during + 500 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _minor_faults(second) >= during + 500  # it warmed up once the job had ended
        result = sandbox.run_job(MODEL, "sandbox.echo", {})
        assert result.ok and result.value["pid"] == second


def test_jobs_back_to_back_each_get_a_new_process() -> None:
    """A job that comes while the next spare is still confining itself (or warming up) waits
    for it rather than forking another child; each job still gets a process of its own."""
    with warm_pool(rate_limit=0, concurrency=1) as sandbox:
        first = _ready_spare(sandbox, not_one_of=set())
        pids = [sandbox.run_job(MODEL, "sandbox.echo", {}).value["pid"] for _ in range(4)]
        assert pids[0] == first
        assert len(set(pids)) == 4
