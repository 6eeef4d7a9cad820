"""The strides room's contained path (issue 21): its sandbox jobs give the same steps as the
in-process trace, the engine's descriptions are sized from a view's extent (never its offset
or its whole storage), integers past 64 bits are refused in the room's words, ops cross into
the child as data, and a forged reply is refused before anything draws it."""

from __future__ import annotations

import base64
import dataclasses
import json
import time

import numpy as np
import pytest
import torch

from torchatlas.sandbox.codec import decode, encode
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandboxed import run_room_job
from torchatlas.strides import FOOTPRINT_BINS, ErrorCode, parse_op, run_chain, trace
from torchatlas.strides.dtypes import START_DTYPES
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.jobs import (
    CHAIN,
    QUESTION,
    WRITE,
    WireChain,
    WireQuiz,
    chain_run,
    checked_chain,
    checked_quiz,
    checked_write,
    plan_chain,
    quiz_item,
    wire_chain,
    wire_chain_of,
    wire_limits,
    with_refused,
)
from torchatlas.strides.parser import (
    op_from_json,
    op_to_json,
    parse_write,
    write_from_json,
    write_to_json,
)
from torchatlas.strides.trace import footprint_of, indices_of, list_nodes, listable
from torchatlas.strides.writes import WriteResult, write_through

LISTED = 4096


def same(a: object, b: object) -> bool:
    """Equal as the codec writes them (NaN equals NaN there)."""
    return json.dumps(encode(a), sort_keys=True) == json.dumps(encode(b), sort_keys=True)


def contained(shape: tuple[int, ...], dtype: str, ops: list[str], session: str):
    plan = plan_chain(ops)
    params = {"shape": list(shape), "dtype": dtype, "ops": list(plan.ops), "listed_up_to": LISTED}
    outcome = run_room_job(CHAIN, params, WireChain, visitor=session, limits=wire_limits(LISTED))
    assert outcome.ok, (outcome.failure, outcome.refused)
    return with_refused(checked_chain(outcome.value), plan, shape, dtype)


# ------------------------------------------------------------------ the same steps as in-process
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_gives_the_same_steps_contained_as_in_process(name: str) -> None:
    example = EXAMPLES[name]
    ops = list(example.ops)
    run = contained(example.shape, example.dtype, ops, f"example-{name}")
    local = chain_run(example.shape, example.dtype, ops, LISTED)
    assert same(run.steps, tuple(trace(example.shape, example.dtype, ops, listed_up_to=LISTED)))
    assert run.code == local.code


@pytest.mark.parametrize("dtype", START_DTYPES)
def test_the_packed_reply_gives_the_same_steps_in_every_dtype(dtype: str) -> None:
    for example in EXAMPLES.values():
        ops = list(example.ops)
        reply = json.loads(json.dumps(encode(wire_chain_of(example.shape, dtype, ops, LISTED))))
        back = checked_chain(decode(reply, WireChain, wire_limits(LISTED)))
        assert same(back.steps, tuple(trace(example.shape, dtype, ops, listed_up_to=LISTED)))


@pytest.mark.parametrize(
    ("shape", "dtype", "ops"),
    [
        ((3, 4), "complex64", [".t()", ".view(torch.float32)", "[:, 1:]"]),
        ((2, 3), "bool", [".T", ".contiguous()", ".expand(2, 3, 2)"]),
        ((2, 3), "float8_e4m3fn", [".flatten()", ".view(torch.uint8)"]),  # NaNs as values
        ((5,), "int64", ["[1:]", "__import__('os')", ".t()"]),  # stops at the refused op
        ((3,), "float16", ["[5:]", ".unsqueeze(0)"]),  # empty steps
        ((3, 4), "float32", [".t()", ".view(-1)", ".T"]),  # stops where torch refuses
    ],
)
def test_other_chains_give_the_same_steps_contained_as_in_process(
    shape: tuple[int, ...], dtype: str, ops: list[str]
) -> None:
    run = contained(shape, dtype, ops, f"other-{dtype}")
    assert same(run.steps, tuple(trace(shape, dtype, ops, listed_up_to=LISTED)))
    assert run.code == chain_run(shape, dtype, ops, LISTED).code


def test_a_write_and_a_question_give_the_same_results_contained() -> None:
    ops = [".unsqueeze(0)", ".expand(4, 3)"]
    write = parse_write("[0, 1] = 9")
    params = {"shape": [3], "dtype": "float32", "ops": list(plan_chain(ops).ops), "step": 1,
              "write": write_to_json(write), "listed_up_to": LISTED}  # fmt: skip
    outcome = run_room_job(WRITE, params, WriteResult, visitor="write")
    assert outcome.ok
    assert same(
        checked_write(outcome.value, 3), write_through((3,), "float32", ops, 1, "[0, 1] = 9")
    )
    outcome = run_room_job(
        QUESTION,
        {"seed": 7, "dtype": "int16"},
        WireQuiz | None,
        visitor="q",
        limits=wire_limits(LISTED),
    )
    assert outcome.ok
    assert same(checked_quiz(outcome.value), quiz_item(7, "int16"))


# ------------------------------------------------------------------ sized from the view's extent
def test_a_zero_element_view_near_two_to_the_62_is_described_at_once() -> None:
    started = time.perf_counter()
    steps = trace((2, 3), "float64", [".as_strided((0, 5), (1, 1), 4611686018427387904)", ".T"])
    assert time.perf_counter() - started < 2.0
    last = steps[-1]
    assert last.error is None and last.size == (5, 0)
    assert last.storage_offset == 2**62 and last.byte_range == (2**65, 2**65)
    assert last.storage_indices == [[], [], [], [], []] and last.values == [[], [], [], [], []]
    assert last.footprint == (False,) * 6


def test_a_zero_element_shape_of_2_to_the_62_rows_is_not_listed() -> None:
    steps = trace((2, 3), "float32", ["[:0]", ".view(4611686018427387904, 0)"])
    last = steps[-1]
    assert last.error is None and last.size == (2**62, 0)
    assert last.storage_indices is None and last.values is None  # 2**62 empty lists: no
    assert list_nodes((2**62, 0)) > 2**62 and not listable((2**62, 0), LISTED)
    assert listable((3, 0, 5), LISTED) and list_nodes((3, 0, 5)) == 4


def test_the_footprint_of_a_few_elements_at_the_end_of_a_large_storage_is_exact() -> None:
    base = torch.zeros(1024, 1024, dtype=torch.complex128)
    view = base[1023, -4:].view(torch.uint8)[3::7]
    cells = 16 * (1 << 20)
    expected = [False] * FOOTPRINT_BINS
    first = view.storage_offset()
    for cell in range(first, first + 7 * view.numel(), 7):
        expected[cell * FOOTPRINT_BINS // cells] = True
    assert list(footprint_of(view)) == expected
    flat = indices_of(view).reshape(-1).tolist()
    assert flat == list(range(first, first + 7 * view.numel(), 7))


@pytest.mark.parametrize(
    "tensor",
    [
        torch.arange(60).reshape(3, 4, 5).permute(2, 0, 1),  # dense in another order
        torch.arange(60).reshape(3, 4, 5)[:, ::2, 1:],
        torch.arange(6).unsqueeze(1).expand(6, 4),
        torch.arange(40).as_strided((2, 2, 2), (1, 1, 5)),  # overlapping and gapped
        torch.arange(300)[7:].unfold(0, 9, 4),
    ],
)
def test_footprints_match_every_cell_read(tensor: torch.Tensor) -> None:
    cells = tensor.untyped_storage().nbytes() // tensor.element_size()
    bins = min(cells, FOOTPRINT_BINS)
    expected = [False] * bins
    for cell in indices_of(tensor).reshape(-1).tolist():
        expected[cell * bins // cells] = True
    assert list(footprint_of(tensor)) == expected


# ------------------------------------------------------------------ integers past 64 bits
@pytest.mark.parametrize(
    "text",
    [
        "[2**70]",
        "[1180591620717411303424]",
        ".select(0, -9223372036854775809)",
        ".as_strided((1,), (1,), 9223372036854775808)",
    ],
)
def test_integers_past_64_bits_are_refused_before_torch(text: str) -> None:
    steps = trace((3,), "float32", [text])
    if "**" in text:  # an expression, not a literal
        assert steps[-1].error.code is ErrorCode.NOT_LITERAL
    else:
        assert steps[-1].error.code is ErrorCode.NUMBER_TOO_BIG
        assert "does not fit in 64 bits" in steps[-1].error.message


def test_the_largest_64_bit_integers_still_reach_torch() -> None:
    steps = trace((3,), "float32", [".as_strided((0,), (1,), 9223372036854775807)"])
    assert steps[-1].error is None and steps[-1].storage_offset == 2**63 - 1


# ------------------------------------------------------------------ ops cross as data
def test_ops_cross_into_the_child_as_data_and_back_unchanged() -> None:
    from components.strides.panels import OP_TEMPLATES

    texts = {*OP_TEMPLATES, *(op for example in EXAMPLES.values() for op in example.ops)}
    texts |= {
        "[[0, 2], ..., None, 1:-1:2]",
        ".view(torch.cfloat)",
        ".narrow(dim=0, start=1, length=1)",
    }
    for text in texts:
        op = parse_op(text)
        assert op_from_json(json.loads(json.dumps(op_to_json(op)))) == op, text
    for text in ("fill_(-1)", "[0, ..., 1:] = 2.5", "zero_()", "mul_(3)"):
        write = parse_write(text)
        assert write_from_json(json.loads(json.dumps(write_to_json(write)))) == write


@pytest.mark.parametrize(
    "change",
    [
        {"name": "storage"},
        {"name": "__class__", "kind": "attribute"},
        {"kwargs": {"dims": {"t": [0]}, "evil": 1}},
        {"args": {"t": [{"d": "object"}]}},
        {"args": {"t": [2**64]}},
        {"args": [0]},  # a list where the arguments' tuple belongs
    ],
)
def test_an_op_outside_the_allow_list_is_refused_in_the_child(change: dict) -> None:
    data = {**op_to_json(parse_op(".permute(1, 0)")), **change}
    with pytest.raises(ValueError):
        op_from_json(data)


def test_an_unparsed_op_stops_the_chain_in_the_server() -> None:
    plan = plan_chain([".t()", "x.__class__", ".T"])
    assert len(plan.ops) == 1 and plan.refused is not None
    assert plan.refused.index == 2 and plan.refused.error.code is ErrorCode.UNSUPPORTED


# ------------------------------------------------------------------ forged replies
def packed(values: list, dtype: str) -> str:
    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode("ascii")


def _reply(shape=(4, 4), dtype="float32", ops=(".t()", "[1:]")) -> dict:
    return json.loads(json.dumps(encode(wire_chain(chain_run(shape, dtype, list(ops), LISTED)))))


def _forged(reply: dict, step: int, **fields: object) -> WireChain:
    reply["steps"][step].update(fields)
    return decode(reply, WireChain)


def test_an_honest_reply_is_accepted() -> None:
    run = checked_chain(decode(_reply(), WireChain))
    assert run.steps[-1].size == (3, 4)


@pytest.mark.parametrize(
    ("step", "fields"),
    [
        (1, {"cells_read": packed([0] * 15 + [16], "<i8")}),  # a cell past the storage
        (1, {"cells_read": packed([-1] * 16, "<i8")}),  # before the storage
        (1, {"cells_read": packed([0] * 15, "<i8")}),  # fewer cells than elements
        (1, {"cells_read": "not base64!" * 20}),
        (0, {"storage_values": packed([0.0] * 15, "<f4")}),  # fewer values than cells
        (2, {"storage_same_as": 3}),  # borrowed from a later step
        (1, {"values": packed([1.0] * 16, "<f4")}),  # element values beside a listed storage
    ],
)
def test_a_reply_whose_lists_disagree_with_its_numbers_is_refused(step: int, fields: dict) -> None:
    with pytest.raises(SchemaError):
        checked_chain(_forged(_reply(), step, **fields))


def test_a_reply_claiming_a_huge_empty_shape_with_lists_is_refused() -> None:
    reply = _reply()
    inner = reply["steps"][2]["step"]
    inner.update(size=[2**40, 0], stride=[1, 1], numel=0)
    reply["steps"][2]["cells_read"] = ""
    with pytest.raises(SchemaError):
        checked_chain(decode(reply, WireChain))


def test_a_reply_with_a_numel_or_storage_that_disagrees_is_refused() -> None:
    for change in ({"numel": 99}, {"storage_cells": 17}, {"storage_nbytes": 2**40},
                   {"footprint": [True] * 97}, {"storage_offset": -1}):  # fmt: skip
        reply = _reply()
        reply["steps"][1]["step"].update(change)
        with pytest.raises(SchemaError):
            checked_chain(decode(reply, WireChain))


def test_complex_and_non_finite_values_come_back_as_numbers() -> None:
    chain = run_chain((2,), "float32", [".view(torch.complex64)"])
    steps = list(chain.steps)
    steps[1] = dataclasses.replace(steps[1], storage_values=[complex(float("nan"), -1.5)])
    steps[1] = dataclasses.replace(steps[1], values=[complex(float("nan"), -1.5)])
    from torchatlas.strides.jobs import ChainRun

    reply = json.loads(json.dumps(encode(wire_chain(ChainRun(tuple(steps), "")))))
    back = checked_chain(decode(reply, WireChain)).steps[1]
    value = back.storage_values[0]
    assert isinstance(value, complex) and value.imag == -1.5 and value.real != value.real
    assert same(back.values, [value])
