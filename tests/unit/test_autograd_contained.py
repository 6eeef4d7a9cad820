"""The contained run is the in-process run: every example, and a few tricky programs, traced
and replayed backward in a sandbox child (``autograd.run``) and rebuilt from its bounded JSON
reply, with the program as plain PyTorch written here meanwhile (``contained_run``), equal
field by field to the same run in this process."""

from __future__ import annotations

import pytest

from tests.unit.test_autograd_oracle import TRICKY
from torchatlas.autograd import parse
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.jobs import RUN, ProgramReply, contained_run, run_program
from torchatlas.sandboxed import run_room_job

PROGRAMS = {
    **{f"example:{key}": (example.program, None) for key, example in EXAMPLES.items()},
    **{f"tricky:{key}": TRICKY[key] for key in ("alias_leaf", "leaf_root_alone",
                                                  "inplace_on_view", "empty_reduced_over_dim")},
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(PROGRAMS))
def test_the_sandbox_job_returns_the_in_process_run(key: str) -> None:
    program, root = PROGRAMS[key]
    # one visitor per program: the sandbox limits how many jobs one visitor starts
    job = contained_run(parse(program), 3, root, visitor=f"tests-{key}", timeout_s=30)
    assert job.ok, (job.failure, job.refused)
    assert job.value == run_program(program, 3, root)


def test_a_refusal_in_the_job_comes_back_as_the_rooms_code() -> None:
    params = {"program": "x = randn(3)\ny = x.unfold(0, 2, 1)", "seed": 0, "root": None}
    job = run_room_job(RUN, params, ProgramReply, visitor="tests-refusal")
    assert job.refused is not None and job.refused[0] == "unknown_method"


def _replay_values() -> dict:
    """An honest reply's values columns, as the server receives them."""
    from torchatlas.sandbox.codec import encode

    run = run_program(EXAMPLES["mlp"].program, 3, None)
    reply = ProgramReply.of(run.graph, run.trace)
    assert reply.replay is not None
    return encode(reply.replay.values)


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (lambda v: v["norms"].pop(), "different lengths"),
        (lambda v: v["data"].pop(), "do not fill"),
        (lambda v: v.update(width=8), "do not fill"),
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


@pytest.mark.parametrize("where", [-1, "past the end", 10**6])
def test_a_step_pointing_outside_the_values_table_is_refused(where) -> None:
    from torchatlas.sandbox.codec import decode, encode
    from torchatlas.sandbox.schema import SchemaError

    run = run_program(EXAMPLES["mlp"].program, 3, None)
    forged = encode(ProgramReply.of(run.graph, run.trace))
    replay = forged["replay"]
    assert decode(forged, ProgramReply).to_run(run.code) == run  # the honest reply
    step = next(step for step in replay["steps"] if step["grad_in"])
    step["grad_in"][0] = len(replay["values"]["shapes"]) if where == "past the end" else where
    with pytest.raises(SchemaError, match="outside the values table"):
        decode(forged, ProgramReply).to_run(run.code)


@pytest.mark.parametrize(
    ("numbers", "width"),
    [
        ((0.5, -0.0, float("inf"), -3.25), 4),  # float32 values: exact in 4 bytes
        ((0.1, 2.0), 8),  # 0.1 as a float64 is not a float32
        ((1e300,), 8),  # past float32's range
        ((float("nan"), 1.0), 8),  # a NaN never compares equal: kept exact in 8 bytes
        ((), 8),
    ],
)
def test_packed_values_are_exact_and_narrow_only_when_nothing_changes(numbers, width) -> None:
    import math
    import struct

    from torchatlas.autograd.graph import Values
    from torchatlas.autograd.jobs import PackedValues

    table = [Values((len(numbers),), numbers, 1.0), Values((9999,), None, 2.0)]
    packed = PackedValues.of(table)
    assert packed.width == width
    back = packed.unpack()
    assert back[1] == table[1]
    assert back[0].shape == table[0].shape and back[0].norm == 1.0
    as_bits = [struct.pack("<d", x) for x in back[0].flat]  # -0.0 and NaN, bit for bit
    assert as_bits == [struct.pack("<d", x) for x in numbers] or any(map(math.isnan, numbers))


def test_many_values_travel_in_parts_under_the_codec_s_string_bound() -> None:
    from torchatlas.autograd.graph import MAX_SHOWN, Values
    from torchatlas.autograd.jobs import DATA_CHUNK, PackedValues
    from torchatlas.sandbox.codec import DEFAULT_LIMITS, decode, encode

    table = [Values((MAX_SHOWN,), tuple(float(i + k) / 3 for i in range(MAX_SHOWN)), 1.0)
             for k in range(200)]  # fmt: skip
    packed = PackedValues.of(table)
    assert len(packed.data) > 1 and max(map(len, packed.data)) <= DATA_CHUNK
    assert DEFAULT_LIMITS.max_str >= DATA_CHUNK
    assert decode(encode(packed), PackedValues).unpack() == table


def test_the_spare_s_warm_up_runs_the_room_s_common_operations_and_their_backward() -> None:
    from torchatlas.autograd.jobs import SPARE_WARM_UP_PROGRAM

    run = run_program(SPARE_WARM_UP_PROGRAM, 0, None)
    assert run.graph.error is None and run.trace is not None and run.trace.error is None
    backward = {step.name for step in run.trace.steps}
    for operation in ("Relu", "Tanh", "Sigmoid", "Exp", "Log", "Sin", "Cos", "Abs", "Sqrt"):
        assert any(name.startswith(operation) for name in backward), operation
    filled = {leaf.name for leaf in run.trace.grads if leaf.grad is not None}
    assert filled == {"w1", "b1", "w2"}
