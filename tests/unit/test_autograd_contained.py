"""The contained run is the in-process run: every example, and a few tricky programs, traced
and replayed backward in a sandbox child (``autograd.run``) and rebuilt from its bounded JSON
reply, equal field by field to the same run in this process."""

from __future__ import annotations

import pytest

from tests.unit.test_autograd_oracle import TRICKY
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.jobs import RUN, ProgramReply, run_program
from torchatlas.sandboxed import run_room_job

PROGRAMS = {
    **{f"example:{key}": (example.program, None) for key, example in EXAMPLES.items()},
    **{f"tricky:{key}": TRICKY[key] for key in ("alias_leaf", "leaf_root_alone",
                                                  "inplace_on_view", "empty_reduced_over_dim")},
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(PROGRAMS))
def test_the_sandbox_job_returns_the_in_process_run(key: str) -> None:
    program, root = PROGRAMS[key]
    job = run_room_job(
        RUN, {"program": program, "seed": 3, "root": root}, ProgramReply, session_id=f"tests-{key}"
    )  # one visitor per program: the sandbox limits how many jobs one visitor starts
    assert job.ok, (job.failure, job.refused)
    assert job.value.to_run() == run_program(program, 3, root)


def test_a_refusal_in_the_job_comes_back_as_the_rooms_code() -> None:
    params = {"program": "x = randn(3)\ny = x.unfold(0, 2, 1)", "seed": 0, "root": None}
    job = run_room_job(RUN, params, ProgramReply, session_id="tests-refusal")
    assert job.refused is not None and job.refused[0] == "unknown_method"


def _replay_values() -> dict:
    """An honest reply's values columns, as the server receives them."""
    from torchatlas.sandbox.codec import encode

    reply = ProgramReply.of(run_program(EXAMPLES["mlp"].program, 3, None))
    assert reply.replay is not None
    return encode(reply.replay.values)


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (lambda v: v["norms"].pop(), "different lengths"),
        (lambda v: v["data"].pop(), "different lengths"),
        (lambda v: v.update(kept=v["kept"][::-1]), "out of order"),
        (lambda v: v.update(kept=[v["kept"][0]] * len(v["kept"])), "out of order"),
        (lambda v: v.update(kept=[*v["kept"][:-1], len(v["shapes"])]), "outside"),
        (lambda v: v["data"].__setitem__(0, v["data"][0][:-4]), "do not fill"),
        (lambda v: v["data"].__setitem__(0, "!" * len(v["data"][0])), "not base64"),
        (lambda v: v["shapes"].__setitem__(v["kept"][0], [10**30, 10**30]), "more values"),
        (lambda v: v["shapes"].__setitem__(v["kept"][0], [-1, 3]), "negative"),
    ],
)
def test_forged_values_columns_are_refused(forge, why: str) -> None:
    """The values columns are checked before anything is decoded or multiplied out: a reply
    whose columns do not hold together is refused, never unpacked."""
    from torchatlas.autograd.jobs import PackedValues
    from torchatlas.sandbox.codec import decode
    from torchatlas.sandbox.schema import SchemaError

    honest = _replay_values()
    assert decode(honest, PackedValues).unpack()  # the honest columns unpack
    forged = _replay_values()
    forge(forged)
    with pytest.raises(SchemaError, match=why):
        decode(forged, PackedValues).unpack()


def test_the_spare_s_warm_up_runs_the_room_s_common_operations_and_their_backward() -> None:
    from torchatlas.autograd.jobs import SPARE_WARM_UP_PROGRAM

    run = run_program(SPARE_WARM_UP_PROGRAM, 0, None)
    assert run.graph.error is None and run.trace is not None and run.trace.error is None
    backward = {step.name for step in run.trace.steps}
    for operation in ("Relu", "Tanh", "Sigmoid", "Exp", "Log", "Sin", "Cos", "Abs", "Sqrt"):
        assert any(name.startswith(operation) for name in backward), operation
    filled = {leaf.name for leaf in run.trace.grads if leaf.grad is not None}
    assert filled == {"w1", "b1", "w2"}
