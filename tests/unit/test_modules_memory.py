"""The uninitialised-memory demo and the training job across the sandbox boundary.

Memory: the values shown are the allocator's own, except 8-byte words whose value lies where
user-space addresses live, which are masked (both float32 halves) in the child and again on
the server; a reply outside its type or not made of float32 values is untrusted. Training:
the job's trace is the in-process trace, number for number, and a forged reply is refused.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
import torch
from torch import nn

import torchatlas.modules as modules
from torchatlas.modules.jobs import MEMORY_LIMITS, TRACE_LIMITS, train_job
from torchatlas.modules.memory import (
    ADDRESS_HIGH,
    ADDRESS_LOW,
    COLUMNS,
    ROWS,
    MemoryValues,
    _cells,
    allocate,
    init_report,
    looks_like_address,
    remask,
)
from torchatlas.modules.training import TrainingTrace
from torchatlas.sandbox.codec import encode
from torchatlas.sandboxed import RoomJob, _outcome


def _words_as_floats(words: list[int]) -> torch.Tensor:
    """A (4, 3) float32 tensor whose memory is exactly these six 8-byte words."""
    signed = [word - 2**64 if word >= 2**63 else word for word in words]
    return torch.tensor(signed, dtype=torch.int64).view(torch.float32).reshape(ROWS, COLUMNS)


def _pair_word(low: float, high: float) -> int:
    return int.from_bytes(struct.pack("<ff", low, high), "little")


# ---------------------------------------------------------------- what counts as an address
def test_real_addresses_of_this_process_look_like_addresses() -> None:
    tensor = torch.empty(8)
    for address in (id(object()), tensor.data_ptr(), id(torch), id(nn.Linear)):
        assert looks_like_address(address), hex(address)


@pytest.mark.parametrize(
    ("word", "address"),
    [
        (0, False),  # zeros
        (ADDRESS_LOW - 1, False),  # a small integer (a length, a flag)
        (_pair_word(7.25, 7.25), False),  # two ordinary floats
        (_pair_word(1.0, 0.0), True),  # a float beside a zero: within the range, masked
        (ADDRESS_HIGH - 1, True),
        (ADDRESS_HIGH, False),
        (-1, False),  # 0xffff…: above the range
    ],
)
def test_the_address_range(word: int, address: bool) -> None:
    assert looks_like_address(word) is address


def test_cells_mask_both_halves_of_each_pointer_word() -> None:
    pointer = id(object())
    words = [pointer, 0, _pair_word(7.25, -1.5), 5, _pair_word(math.nan, 2.0), pointer + 64]
    cells = [value for row in _cells(_words_as_floats(words)) for value in row]
    assert cells[0:2] == [None, None] and cells[10:12] == [None, None]
    assert cells[2:4] == [0.0, 0.0] and cells[4:6] == [7.25, -1.5]
    assert cells[6] == pytest.approx(7e-45) and cells[7] == 0.0  # 5: a small int, shown
    assert math.isnan(cells[8]) and cells[9] == 2.0


def test_the_server_masks_again_what_a_child_left() -> None:
    """A child that did not mask (a bug, or a reply it was made to forge): the server does."""
    pointer = id(object())
    raw = _words_as_floats([pointer, 0, 0, 0, pointer, 0]).tolist()
    values = MemoryValues(tuple(map(tuple, raw)), tuple(map(tuple, raw)))
    report = init_report(values)
    assert report.failure is None and report.masked_words == 4 and report.words == 12
    flat = [value for row in report.empty for value in row]
    assert flat[0:2] == [None, None] and flat[8:10] == [None, None]  # words 0 and 4
    assert all(value == 0.0 for value in flat[2:8] + flat[10:])


@pytest.mark.parametrize(
    "cells",
    [
        ((1e300, 0.0, 0.0),) + ((0.0,) * 3,) * 3,  # not a float32 value
        ((0.1, 0.0, 0.0),) + ((0.0,) * 3,) * 3,  # 0.1 is not a float32 either
        ((0.0,) * 3,) * 5,  # the wrong shape
        ((0.0,) * 2,) * 4,
    ],
)
def test_a_reply_that_is_not_float32_memory_is_untrusted(cells: Any) -> None:
    assert remask(cells) is None
    report = init_report(MemoryValues(cells, cells))
    assert report.failure is not None and report.failure.kind == "untrusted"
    assert report.empty == () and report.within_bound  # the nn.Linear part is still shown


@pytest.mark.parametrize(
    "reply",
    [
        {"result": {"empty": [["1.0"] * 3] * 4, "float_tensor": [[0.0] * 3] * 4}},
        {"result": {"empty": [[0.0] * 3] * 4}},
        {"result": {"empty": [[0.0] * 3] * 400, "float_tensor": []}},
        {"result": {"empty": [[0.0] * 3] * 4, "float_tensor": [[0.0] * 3] * 4, "x": 1}},
        {"result": [1, 2]},
        {"result": {"empty": [[{"$float": "nan"}] * 3] * 4, "float_tensor": [[True] * 3] * 4}},
    ],
)
def test_a_forged_memory_reply_is_refused_by_its_type(reply: Any) -> None:
    from torchatlas.sandbox.schema import SchemaError

    with pytest.raises(SchemaError):
        _outcome(reply, MemoryValues, MEMORY_LIMITS)


def test_an_honest_allocation_round_trips() -> None:
    values = allocate()
    job = _outcome({"result": encode(values)}, MemoryValues, MEMORY_LIMITS)
    report = init_report(job.value)
    assert report.failure is None and len(report.empty) == ROWS
    cells = [v for grid in (report.empty, report.float_tensor) for row in grid for v in row]
    for start in range(0, len(cells), 2):
        pair = cells[start : start + 2]
        assert pair == [None, None] or not looks_like_address(_pair_word(*pair))
    assert report.nonfinite_in_empty == sum(
        v is not None and not math.isfinite(v) for row in report.empty for v in row
    )


def test_linear_initialises_within_its_bound() -> None:
    def in_this_process(job: str, params: dict, returns: Any, **kwargs: Any) -> RoomJob:
        return RoomJob(value=allocate())  # the sandbox's job, for speed

    report = modules.uninitialised_memory(run=in_this_process)
    assert report.failure is None
    assert report.bound == pytest.approx(1 / math.sqrt(3)) and report.within_bound
    for _ in range(20):  # torch's own reset_parameters, not ours
        layer = nn.Linear(3, 4)
        assert layer.weight.abs().max() <= report.bound and layer.bias.abs().max() <= report.bound


# ---------------------------------------------------------------- the training job's reply
def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    ("model", "lr", "steps", "forget"),
    [("mylinear", 0.1, 30, False), ("mlp", 2.0, 200, False), ("mylinear_plain", 0.1, 5, True)],
)
def test_the_jobs_trace_is_torchs_trace(model: str, lr: float, steps: int, forget: bool) -> None:
    reply = train_job({}, model=model, lr=lr, steps=steps, forget=forget)
    job = _outcome(reply, TrainingTrace, TRACE_LIMITS)
    trace = modules.train_steps(model, lr=lr, steps=steps, forget_zero_grad=forget)
    got = job.value
    assert got is not None and len(got.steps) == len(trace.steps)
    assert (got.names, got.shapes, got.registered) == (trace.names, trace.shapes, trace.registered)
    assert (got.diverged_at, got.stopped_at) == (trace.diverged_at, trace.stopped_at)
    assert got.optimizer_error == trace.optimizer_error
    for mine, true in zip(got.steps, trace.steps, strict=True):
        assert _same(mine.loss, true.loss)
        for a, b in zip(mine.after, true.after, strict=True):
            assert all(_same(x, y) for x, y in zip(a, b, strict=True))


def test_a_refusal_comes_back_coded() -> None:
    reply = json.loads(json.dumps(train_job({}, model="x", lr=0.1, steps=5, forget=False)))
    job = _outcome(reply, TrainingTrace, None)  # as the server reads it: plain JSON
    assert job.refused == ("bad_model", {"model": "x", "choices": "mylinear, mylinear_plain, mlp"})


@pytest.mark.parametrize(
    "forge",
    [
        lambda d: d.update(steps=d["steps"] * 200),  # more records than MAX_STEPS
        lambda d: d.update(names="x" * 10_000),
        lambda d: d["steps"][0].update(loss="0.5"),
        lambda d: d["steps"][0].update(index=2**100),
        lambda d: d.update(model_key={"$float": "nan"}),
    ],
    ids=["steps", "name-type", "loss-type", "int-bits", "marker"],
)
def test_a_forged_trace_is_refused(forge: Any) -> None:
    from torchatlas.sandbox.schema import SchemaError

    reply = train_job({}, model="mylinear", lr=0.1, steps=3, forget=False)
    forge(reply["result"])
    with pytest.raises(SchemaError):
        _outcome(reply, TrainingTrace, TRACE_LIMITS)


@pytest.mark.parametrize(
    ("model", "lr", "steps", "forget"),
    [("mlp", 0.1, 20, False), ("mylinear", 2.0, 300, True), ("mylinear_plain", 0.1, 3, False)],
)
def test_the_jobs_fast_encoding_is_the_codecs(model: str, lr: float, steps: int, forget: bool):
    from torchatlas.modules.jobs import encode_trace

    trace = modules.train_steps(model, lr=lr, steps=steps, forget_zero_grad=forget)
    assert encode_trace(trace) == encode(trace)
