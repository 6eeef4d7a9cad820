"""run_room_job: a room's computation in a confined child, its reply rebuilt as the declared
type or refused; limits become failures a page can explain; nothing ever raises."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.sandbox_jobs import warm_pool
from torchatlas.sandbox import SandboxPool
from torchatlas.sandboxed import FAILURE_KINDS, register_room_jobs, run_room_job


@dataclass(frozen=True)
class Pair:
    name: str
    sizes: tuple[int, ...]


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with warm_pool(rate_limit=1000, memory_mb=256) as sandbox:
        yield sandbox


def _reply(pool: SandboxPool, reply: object, returns: object = Pair):
    return run_room_job("sandbox.room_reply", {"reply": reply}, returns, pool=pool)


def test_a_result_is_rebuilt_as_the_declared_type(pool: SandboxPool) -> None:
    outcome = _reply(pool, {"result": {"name": "x", "sizes": [2, 3]}})
    assert outcome.ok and outcome.value == Pair("x", (2, 3))


def test_a_coded_refusal_comes_back_as_code_and_parameters(pool: SandboxPool) -> None:
    outcome = _reply(pool, {"refused": {"code": "too_big", "params": {"size": 12}}})
    assert not outcome.ok and outcome.refused == ("too_big", {"size": 12})
    assert outcome.worth_keeping


@pytest.mark.parametrize(
    "reply",
    [
        {"result": {"name": "x", "sizes": [2, "3"]}},  # wrong type
        {"result": {"name": "x", "sizes": [2], "evil": 1}},  # a field nobody declared
        {"result": {"name": "x" * 50_000, "sizes": []}},  # unbounded text
        {"result": {"name": "x", "sizes": [1] * 100_001}},  # unbounded list
        {"result": {"name": "x", "sizes": []}, "refused": None},  # both
        {"refused": {"code": "c" * 500, "params": {}}},  # a code no table has
        {"refused": {"code": "c", "params": {"p": [[[[[[1]]]]]]}}},  # nesting in a parameter
        {"other": 1},
    ],
)
def test_a_forged_reply_is_an_untrusted_failure(pool: SandboxPool, reply: object) -> None:
    outcome = _reply(pool, reply)
    assert outcome.failure is not None and outcome.failure.kind == "untrusted"
    assert outcome.value is None and not outcome.worth_keeping


def test_limits_become_failures_a_page_can_explain(pool: SandboxPool) -> None:
    memory = run_room_job("sandbox.allocate", {"megabytes": 2048}, Pair, pool=pool)
    assert memory.failure is not None and memory.failure.kind == "memory"
    slow = run_room_job("sandbox.sleep", {"seconds": 5}, Pair, pool=pool, timeout_s=1)
    assert slow.failure is not None and slow.failure.kind == "timeout"
    unknown = run_room_job("nobody.registered", {}, Pair, pool=pool)
    assert unknown.failure is not None and unknown.failure.kind in FAILURE_KINDS


def test_a_room_job_may_call_backward_in_its_child(pool: SandboxPool) -> None:
    outcome = run_room_job("sandbox.room_backward", {"size": 4}, tuple[float, ...], pool=pool)
    assert outcome.ok, outcome.failure
    assert outcome.value == (0.0, 2.0, 4.0, 6.0)


def test_no_sandbox_is_a_failure_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchatlas.sandboxed as sandboxed

    def no_pool() -> SandboxPool:
        raise OSError("no zygote")

    monkeypatch.setattr(sandboxed, "shared_pool", no_pool)
    outcome = run_room_job("autograd.run", {}, Pair)
    assert outcome.failure is not None and outcome.failure.kind == "unavailable"


def test_every_room_registers_its_jobs_on_the_shared_pool() -> None:
    sandbox = register_room_jobs(SandboxPool())
    try:
        rooms = {name.split(".")[0] for name in sandbox.jobs}
        assert {"autograd", "shapes", "modules"} <= rooms
        for name, target in sandbox.jobs.items():
            assert target.startswith(f"torchatlas.{name.split('.')[0]}."), (name, target)
    finally:
        sandbox.shutdown()


def test_a_pool_leaves_no_file_behind() -> None:
    import tempfile
    from pathlib import Path

    def sandbox_files() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("torchatlas-sandbox*")}

    before = sandbox_files()
    with warm_pool(rate_limit=1000) as sandbox:
        outcome = run_room_job(
            "sandbox.room_backward", {"size": 2}, tuple[float, ...], pool=sandbox
        )
        assert outcome.ok, outcome.failure
    assert sandbox_files() <= before
