"""run_room_job: a room's computation in a confined child, its reply rebuilt as the declared
type or refused; limits become failures a page can explain; nothing ever raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.sandbox_jobs import warm_pool
from torchatlas.rooms import ROOMS, room_keys
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


def test_the_caller_s_work_runs_once_here_while_the_child_computes(pool: SandboxPool) -> None:
    """``meanwhile`` overlaps the server's share of a job with the child's: it starts once
    the request is sent, long before this child (asleep) can answer, in the caller's thread."""
    calls: list[tuple[float, int]] = []
    started = time.monotonic()
    outcome = run_room_job(
        "sandbox.sleep", {"seconds": 0.6}, reader=lambda reply: reply["slept"], pool=pool,
        meanwhile=lambda: calls.append((time.monotonic(), threading.get_ident())),
    )  # fmt: skip
    assert outcome.ok and outcome.value == 0.6, outcome.failure
    assert len(calls) == 1 and calls[0][1] == threading.get_ident()
    assert calls[0][0] - started < 0.5  # the child was still asleep


def test_the_caller_s_work_runs_once_when_no_child_gets_the_job(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    unknown = run_room_job(
        "nobody.registered", {}, Pair, pool=pool, meanwhile=lambda: calls.append("a")
    )
    assert unknown.failure is not None and calls == ["a"]

    import torchatlas.sandboxed as sandboxed

    def no_pool() -> SandboxPool:
        raise OSError("no zygote")

    monkeypatch.setattr(sandboxed, "shared_pool", no_pool)
    gone = run_room_job("autograd.run", {}, Pair, meanwhile=lambda: calls.append("b"))
    assert gone.failure is not None and gone.failure.kind == "unavailable" and calls == ["a", "b"]


def test_the_caller_s_error_is_raised_after_the_job_and_frees_its_slot() -> None:
    def broken() -> None:
        raise LookupError("the caller's own bug")

    with warm_pool(concurrency=1, queue_wait_s=5, rate_limit=0) as single:  # one slot
        for _ in range(3):  # a leaked slot would leave the next job waiting, then busy
            with pytest.raises(LookupError, match="own bug"):
                run_room_job(
                    "sandbox.sleep", {"seconds": 0.1}, reader=dict, pool=single, meanwhile=broken
                )
        again = _reply(single, {"result": {"name": "x", "sizes": [1]}})
        assert again.ok and again.value == Pair("x", (1,))
        deadline = time.monotonic() + 5
        while single._running and time.monotonic() < deadline:  # the last child exits
            time.sleep(0.02)
        assert single._running == 0


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
        assert {room.key for room in ROOMS if room.jobs} <= rooms
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


# ---------------------------------------------------------------- rooms that run pasted code
def test_pasted_source_runs_in_the_child_and_its_reply_is_read_by_the_room(
    pool: SandboxPool,
) -> None:
    """The shape explorer's job goes through the one client: the source travels with the
    job, and the room's own bounded schema reads the reply (``reader``)."""
    from torchatlas.shapes import ShapeReport

    source = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
    source += "        return x\n"
    outcome = run_room_job(
        "shapes.analyze", {"input_shapes": [[2, 3]]}, source=source,
        reader=ShapeReport.from_dict, pool=pool,
    )  # fmt: skip
    assert outcome.ok, outcome.failure
    assert isinstance(outcome.value, ShapeReport) and outcome.value.outputs == [[2, 3]]


def test_a_refused_source_says_where(pool: SandboxPool) -> None:
    """The allow-list's refusals reach the room with their lines (the page marks them)."""
    from torchatlas.shapes import ShapeReport

    source = "import torch\n\nx = ().__class__.__base__\n"
    outcome = run_room_job(
        "shapes.analyze", {"input_shapes": [[1]]}, source=source,
        reader=ShapeReport.from_dict, pool=pool,
    )  # fmt: skip
    failure = outcome.failure
    assert failure is not None and failure.kind == "refused"
    assert failure.refusals and {refusal.line for refusal in failure.refusals} == {3}


def test_a_reply_the_rooms_reader_refuses_is_untrusted(pool: SandboxPool) -> None:
    def refuse(reply: object) -> object:
        raise ValueError("not a report")

    outcome = run_room_job(
        "sandbox.room_reply", {"reply": {"layers": "x"}}, reader=refuse, pool=pool
    )
    assert outcome.failure is not None and outcome.failure.kind == "untrusted"
    assert not outcome.worth_keeping


def test_no_room_reaches_another_through_the_sandbox_client() -> None:
    """The shape explorer and the module room share what they both need
    (torchatlas.modelcode), and the client registers every room's jobs by name: no chain of
    imports leads from one room's engine to another's."""
    import grimp

    graph = grimp.build_graph("torchatlas", exclude_type_checking_imports=True)
    rooms = room_keys()
    chains = [
        (a, b)
        for a in rooms
        for b in rooms
        if a != b and graph.chain_exists(f"torchatlas.{a}", f"torchatlas.{b}", as_packages=True)
    ]
    assert chains == []


# ---------------------------------------------------------------- one coded error
def test_the_sandboxed_rooms_errors_are_the_kits_coded_error() -> None:
    """Each error of the two rooms is a CodedError (one shape of error, shown by the kit's
    error card): its text comes from the room's table in both languages, it keeps where it
    happened, and it survives a pickle and a trip as JSON with everything it carries."""
    import pickle

    from torchatlas.errors import CodedError
    from torchatlas.i18n import LANGUAGES
    from torchatlas.modules import ErrorKind as ModuleKind
    from torchatlas.modules import ModelsError, ModuleError, TrainingError
    from torchatlas.modules.report import error_from
    from torchatlas.shapes import ErrorKind, RefusalCode, RefusedLine, ShapeError
    from torchatlas.shapes.report import _error_from

    shape = ShapeError(
        ErrorKind.REFUSED, params={"timeout": "5", "lines": 1, "detail": "d"}, line=3, col=4,
        refusals=[RefusedLine(3, 4, RefusalCode.DUNDER, "no")],
    )  # fmt: skip
    module = ModuleError(ModuleKind.NO_MODULE, params={"code": "x"}, line=2)
    refused = ModelsError(TrainingError.BAD_STEPS, steps=9, limit=500)
    for error in (shape, module, refused):
        assert isinstance(error, CodedError)
        for lang in LANGUAGES:
            text = error.text(lang)
            assert text and "{" not in text and not text.startswith(error.room + "."), text
        assert pickle.loads(pickle.dumps(error)) == error or isinstance(error, ModelsError)
    assert _error_from(shape.to_dict()) == shape and shape.refusals[0].line == 3
    assert error_from(module.to_dict()) == module and module.params == {"code": "x"}
    assert refused.key == "modules.training.errors.bad_steps"
