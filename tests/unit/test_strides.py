"""The strides engine: every op of the room against torch, every error message, the parser's
allow list, write-through, the quiz and the runnable code."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch

from torchatlas.cache import deep_size
from torchatlas.strides import (
    MAX_CHAIN_TEXT,
    MAX_ELEMENTS,
    MAX_SHAPE_TEXT,
    OpParseError,
    ShapeInputError,
    chain_code,
    parse_chain,
    parse_index,
    parse_op,
    parse_shape,
    parse_write,
    run_chain,
    storage_index,
    trace,
)
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.quiz import KINDS, MAX_ANSWER_TEXT, grade, make_question
from torchatlas.strides.writes import write_through


def reference(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.arange(torch.Size(shape).numel()).to(dtype).reshape(shape)


def cells_read(tensor: torch.Tensor) -> list[int]:
    """Every element's storage cell, measured from data pointers (independent of the engine)."""
    base = tensor.untyped_storage().data_ptr()
    size = tensor.element_size()
    flat = []
    for index in (
        torch.cartesian_prod(*[torch.arange(n) for n in tensor.shape]).reshape(-1, tensor.dim())
        if tensor.dim()
        else [()]
    ):
        element = tensor[tuple(int(i) for i in index)]
        flat.append((element.data_ptr() - base) // size)
    return flat


def flat(nested: object) -> list:
    if not isinstance(nested, list):
        return [nested]
    return [item for part in nested for item in flat(part)]


# (start shape, op text, the same op written directly in torch)
OPS = [
    ((4, 6), "[1:, ::2]", lambda x: x[1:, ::2]),
    ((2, 3, 4), "[..., 0]", lambda x: x[..., 0]),
    ((2, 3), "[None]", lambda x: x[None]),
    ((2, 3), "[[0, 1]]", lambda x: x[[0, 1]]),
    ((3, 4), ".select(1, 2)", lambda x: x.select(1, 2)),
    ((3, 4), ".narrow(1, 1, 2)", lambda x: x.narrow(1, 1, 2)),
    ((3, 4), ".t()", lambda x: x.t()),
    ((3, 4), ".T", lambda x: x.T),
    ((2, 3, 4), ".mT", lambda x: x.mT),
    ((2, 3, 4), ".transpose(0, 2)", lambda x: x.transpose(0, 2)),
    ((2, 3, 4), ".permute(2, 0, 1)", lambda x: x.permute(2, 0, 1)),
    ((2, 3, 4), ".movedim(0, -1)", lambda x: x.movedim(0, -1)),
    ((2, 3, 4), ".view(6, 4)", lambda x: x.view(6, 4)),
    ((2, 3, 4), ".reshape(4, -1)", lambda x: x.reshape(4, -1)),
    ((2, 3, 4), ".flatten(1)", lambda x: x.flatten(1)),
    ((2, 12), ".unflatten(1, (3, 4))", lambda x: x.unflatten(1, (3, 4))),
    ((2, 1, 3), ".squeeze(1)", lambda x: x.squeeze(1)),
    ((2, 3), ".unsqueeze(1)", lambda x: x.unsqueeze(1)),
    ((3, 1), ".expand(3, 4)", lambda x: x.expand(3, 4)),
    ((8,), ".as_strided((3, 4), (2, 1))", lambda x: x.as_strided((3, 4), (2, 1))),
    ((4, 4), ".diagonal()", lambda x: x.diagonal()),
    ((10,), ".unfold(0, 4, 2)", lambda x: x.unfold(0, 4, 2)),
    ((6, 4), ".chunk(3)[1]", lambda x: x.chunk(3)[1]),
    ((6, 4), ".split(4)[1]", lambda x: x.split(4)[1]),
    ((3, 4), ".contiguous()", lambda x: x.contiguous()),
    ((3, 4), ".clone()", lambda x: x.clone()),
    ((3, 4), ".flip(0)", lambda x: x.flip(0)),
    ((3, 4), ".to(torch.float16)", lambda x: x.to(torch.float16)),
    ((2, 4), ".view(torch.float16)", lambda x: x.view(torch.float16)),
    ((3, 4), ".detach()", lambda x: x.detach()),
    ((2, 3), "einsum('ij->ji')", lambda x: torch.einsum("ij->ji", x)),
    ((2, 3, 2, 2), ".to(memory_format=torch.channels_last)",
     lambda x: x.to(memory_format=torch.channels_last)),
]  # fmt: skip


@pytest.mark.parametrize(("shape", "text", "direct"), OPS, ids=[op[1] for op in OPS])
def test_every_op_matches_torch(shape: tuple[int, ...], text: str, direct) -> None:
    start, step = trace(shape, "float32", [text])
    x = reference(shape)
    expected = direct(x)
    assert step.error is None, step.error
    assert step.size == tuple(expected.shape)
    assert step.stride == tuple(expected.stride())
    assert step.stride_bytes == tuple(s * expected.element_size() for s in expected.stride())
    assert step.storage_offset == expected.storage_offset()
    assert step.is_contiguous == expected.is_contiguous()
    assert step.dtype == str(expected.dtype).removeprefix("torch.")
    assert step.values == expected.tolist()
    shares = expected.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert step.is_view == shares
    assert (step.storage_id == start.storage_id) == shares
    assert flat(step.storage_indices) == cells_read(expected)


def test_channels_last_contiguity_is_reported_for_4d() -> None:
    start, converted, permuted = trace(
        (2, 3, 2, 2), "float32", [".to(memory_format=torch.channels_last)", ".permute(0, 2, 3, 1)"]
    )
    assert start.is_channels_last is False and start.is_contiguous
    assert converted.is_channels_last is True and not converted.is_contiguous
    assert converted.stride == (12, 1, 6, 3) and not converted.is_view
    assert permuted.is_view and permuted.is_contiguous and permuted.is_channels_last is False
    assert trace((3, 4), "float32", [])[0].is_channels_last is None


def test_views_and_copies_get_storage_ids() -> None:
    steps = trace((3, 4), "float32", [".t()", ".contiguous()", ".view(-1)", ".clone()"])
    assert [s.storage_id for s in steps] == ["S0", "S0", "S1", "S1", "S2"]
    assert [s.is_view for s in steps] == [False, True, False, True, False]
    assert steps[2].storage_nbytes == 48
    # contiguous() on a contiguous tensor hands back the tensor itself
    same = trace((3, 4), "float32", [".contiguous()"])[1]
    assert same.returned_input and same.is_view and same.storage_id == "S0"


def test_reshape_views_or_copies_depending_on_strides() -> None:
    assert trace((3, 4), "float32", [".reshape(-1)"])[1].is_view
    copied = trace((3, 4), "float32", [".t()", ".reshape(-1)"])[2]
    assert not copied.is_view and copied.storage_id == "S1"
    assert copied.values == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]


def test_expand_gives_stride_zero_and_many_readers_per_cell() -> None:
    step = trace((3,), "float32", [".unsqueeze(0)", ".expand(4, 3)"])[-1]
    assert step.stride == (0, 1) and step.is_view
    assert step.storage_indices == [[0, 1, 2]] * 4
    assert storage_index(step, (3, 2)) == 2


def test_view_dtype_reinterprets_the_same_bytes() -> None:
    x, half, raw = trace((2, 4), "float32", [".view(torch.float16)", ".view(torch.uint8)"])
    assert half.size == (2, 8) and half.element_size == 2 and half.storage_id == x.storage_id
    assert half.storage_cells == 16 and half.stride_bytes == (16, 2)
    assert raw.size == (2, 16) and raw.storage_cells == 32
    expected = reference((2, 4)).view(torch.uint8)
    assert raw.values == expected.tolist()
    assert raw.storage_values == expected.reshape(-1).tolist()


def test_start_values_are_storage_indices_for_every_start_dtype() -> None:
    for dtype in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8"):
        step = trace((2, 3), dtype, [])[0]
        assert step.values == [[0, 1, 2], [3, 4, 5]]
        assert step.storage_values == [0, 1, 2, 3, 4, 5]


def test_rank_six_and_large_tensors() -> None:
    steps = trace((2, 1, 2, 1, 2, 3), "float32", [".permute(5, 4, 3, 2, 1, 0)"])
    assert steps[-1].stride == (1, 3, 6, 6, 12, 12)
    big = trace((512, 512), "float32", [".t()"])[-1]
    assert big.numel == 262_144 and big.stride == (1, 512)
    assert big.storage_indices is None and big.values is None  # summarised, numbers exact
    assert big.byte_range == (0, 512 * 512 * 4)


def test_to_dict_is_plain_json() -> None:
    steps = trace((2, 3), "float32", [".t()", "[::-1]"])
    data = json.loads(json.dumps([s.to_dict() for s in steps]))
    for key in ("op", "size", "stride", "storage_offset", "is_contiguous", "storage_id",
                "is_view", "storage_indices", "error"):  # fmt: skip
        assert key in data[1]
    assert data[1]["storage_indices"] == [[0, 3], [1, 4], [2, 5]]
    assert data[2]["error"]["code"] == "negative_step"


# ---------------------------------------------------------------------------------- errors


def last_error(shape: tuple[int, ...], ops: list[str]):
    step = trace(shape, "float32", ops)[-1]
    assert step.error is not None
    return step.error


def test_view_on_incompatible_strides_says_use_reshape() -> None:
    error = last_error((3, 4), [".t()", ".view(-1)"])
    assert error.code == "view_incompatible" and error.text == ".view(-1)"
    assert "use reshape (which will copy here)" in error.message.lower()
    assert "view size is not compatible" in error.torch_message


def test_negative_step_says_flip_copies() -> None:
    error = last_error((4,), ["[::-1]"])
    assert error.code == "negative_step"
    assert "PyTorch has no negative strides; flip() copies" in error.message
    assert error.torch_message == "step must be greater than zero"


def test_as_strided_out_of_bounds_names_the_element() -> None:
    error = last_error((6,), [".as_strided((4, 3), (1, 2))"])
    assert error.code == "as_strided_out_of_bounds"
    # (2, 2) reads 0 + 2·1 + 2·2 = 6, the first element past the 6 cells (row-major order)
    assert error.params["element"] == "(2, 2)" and error.params["cell"] == 6
    assert "element (2, 2) would read storage cell 6" in error.message
    assert "out of bounds" in error.torch_message


@pytest.mark.parametrize(
    ("shape", "op", "code"),
    [
        ((2, 3), ".as_strided((2, 2), (-1, 1))", "negative_stride"),
        ((2, 3), ".transpose(0, 3)", "dim_out_of_range"),
        ((2, 3), "[5]", "index_out_of_range"),
        ((2, 3), ".expand(4, 4)", "expand_mismatch"),
        ((2, 3), ".view(5)", "shape_invalid"),
        ((2, 3), ".view(torch.float64)", "view_dtype"),
        ((2, 3), ".to(memory_format=torch.channels_last)", "channels_last_rank"),
        ((6, 4), ".chunk(3)[7]", "piece_out_of_range"),
        ((2, 3), ".chunk(2)", "pick_piece"),
        ((2, 3), ".t", "not_called"),
        ((2, 3), ".t().contiguous()", "one_op"),
        ((2, 3), ".view(2.5)", "bad_argument"),
        ((2, 3), ".transpose(dim=1)", "bad_keyword"),
        ((2, 3), "einsum('ij->ji', 1)", "einsum_one_operand"),
        ((2, 3), ".t(", "syntax"),
        ((2, 3), ".cuda()", "unsupported"),
        ((1, 1), ".expand(2048, 2048)", "too_large"),
    ],
)
def test_errors_have_codes_and_plain_messages(shape, op, code) -> None:
    error = last_error(shape, [op])
    assert error.code == code, error
    assert error.text == op.strip() and op.strip() in error.message


def test_error_stops_the_chain() -> None:
    steps = trace((3, 4), "float32", [".t()", ".view(-1)", ".clone()"])
    assert len(steps) == 3 and steps[-1].error is not None


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "x.__class__",
        "[().__class__.__base__]",
        ".view(x)",
        ".view(open('f'))",
        ".permute(*range(2))",
        "[lambda: 0]",
        ".to('cpu')",
        ".__dict__",
        "eval('1')",
        ".view(1 + 1)",
        ".reshape(torch.Size([6]))",
        "; import os",
        ".t()\nimport os",
    ],
)
def test_parser_refuses_anything_but_literals_on_the_allow_list(text: str) -> None:
    with pytest.raises(OpParseError):
        parse_op(text)


def test_parser_accepts_user_spellings() -> None:
    for text in ("x.t()", ".t()", "t()", " .T ", "x[1:, ::2]", "[...,0]", "view(torch.half)"):
        parse_op(text)
    assert parse_op("[1:, ::2]").code("y") == "y[1:, ::2]"
    assert parse_op("einsum('ij->ji')").code("y") == "torch.einsum('ij->ji', y)"


def test_shape_input() -> None:
    assert parse_shape("2, 3, 4") == (2, 3, 4)
    assert parse_shape("(2,3)") == (2, 3) == parse_shape("2x3") == parse_shape("2 × 3")
    for text, code in [("", "shape_empty"), ("2, a", "shape_not_ints"), ("2, x", "shape_not_ints"),
                       ("1,1,1,1,1,1,1", "shape_rank"), ("2, 0", "shape_zero"),
                       (f"{MAX_ELEMENTS + 1}", "shape_too_big")]:  # fmt: skip
        with pytest.raises(ShapeInputError) as raised:
            parse_shape(text)
        assert raised.value.code == code


def test_no_deprecation_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace((2, 3, 2, 2), "float32", [".to(memory_format=torch.channels_last)", ".view(-1)"])
        write_through((3,), "float32", [".unsqueeze(0)"], 1, "fill_(1)")


# ---------------------------------------------------------------------------- write-through


def test_write_through_views_change_copies_do_not() -> None:
    result = write_through((2, 3), "float32", [".t()", ".contiguous()", "[0]"], 1, "fill_(7)")
    assert result.error is None
    assert result.changed_steps == [0, 1]
    assert result.values_after[0] == [[7, 7, 7], [7, 7, 7]]
    assert result.values_after[2] == [[0, 3], [1, 4], [2, 5]]
    assert sorted(result.changed_bytes) == ["S0"]


def test_index_assignment_through_an_expanded_view() -> None:
    result = write_through((3,), "float32", [".unsqueeze(0)", ".expand(4, 3)"], 2, "[0, 1] = 9")
    assert result.error is None
    assert result.changed_elements[2] == [1, 4, 7, 10]  # one cell, four readers
    assert result.values_after[0] == [0, 9, 2]


def test_overlapping_write_shows_pytorchs_error() -> None:
    result = write_through((3,), "float32", [".unsqueeze(0)", ".expand(4, 3)"], 2, "add_(1)")
    assert result.error is not None and result.error.code == "overlap_write"
    assert "refers to a single memory location" in result.error.torch_message
    assert "clone()" in result.error.message


def test_write_parser_refuses_code() -> None:
    for text in ("import os", "x.fill_(y)", "fill_(__import__('os'))", "[0] = x", "add_()"):
        result = write_through((3,), "float32", [], 0, text)
        assert result.error is not None


# ------------------------------------------------------------------------------ quiz & code


@pytest.mark.parametrize("kind", KINDS)
def test_quiz_questions_are_graded_by_live_torch(kind: str) -> None:
    for seed in range(6):
        question = make_question(seed, kind)
        assert make_question(seed, kind) == question  # seeded: the same link, the same question
        prefix_ok = trace(question.shape, "float32", list(question.ops))[-1].error is None
        right = grade(question, "")
        assert not right.correct
        if kind == "view_or_copy":
            last = run_chain(question.shape, "float32", question.ops)
            previous, result = last.tensors[-2], last.tensors[-1]
            shared = previous.untyped_storage().data_ptr() == result.untyped_storage().data_ptr()
            assert right.expected == ("view" if shared else "copy")
        elif kind == "view_works":
            assert right.expected == ("yes" if prefix_ok else "no")
        elif kind == "new_stride":
            tensor = run_chain(question.shape, "float32", question.ops).tensors[-1]
            assert right.expected == "(" + ", ".join(map(str, tensor.stride())) + ")"
        else:
            tensor = run_chain(question.shape, "float32", question.ops).tensors[-1]
            element = tensor[question.element]
            cell = (element.data_ptr() - tensor.untyped_storage().data_ptr()) // 4
            assert right.expected == str(cell)
        assert grade(question, right.expected).correct


def test_examples_run_and_generated_code_matches_the_trace(tmp_path) -> None:
    for key, example in EXAMPLES.items():
        steps = trace(example.shape, example.dtype, list(example.ops))
        if key == "view_fails":
            assert steps[-1].error is not None
        else:
            assert all(step.error is None for step in steps), key
    steps = trace((3, 4), "float32", [".t()", "[1:, ::2]", ".contiguous()", "[::-1]"])
    code = chain_code((3, 4), "float32", steps)
    script = tmp_path / "chain.py"
    script.write_text(code)
    output = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    for line, step in zip(output, [s for s in steps if s.error is None], strict=True):
        assert line.startswith(f"{step.name} {step.size} {step.stride} {step.storage_offset}")
    assert "# The next op fails in PyTorch: y3[::-1]" in code


# ---------------------------------------------------------------------------- bounds


def test_steps_list_elements_only_up_to_the_callers_limit() -> None:
    steps = trace((64, 64), "float32", [".t()", "[:2]"], listed_up_to=4096)
    assert steps[1].storage_indices is not None and len(steps[1].storage_values) == 4096
    assert steps[2].values == reference((64, 64)).t()[:2].tolist()
    small = trace((64, 64), "float32", [".t()", "[:2]"], listed_up_to=128)
    assert small[1].storage_indices is None and small[1].values is None
    assert small[1].storage_values is None
    assert small[2].values is not None  # 128 elements, reading a 4,096-cell storage
    for kept, summarised in zip(steps, small, strict=True):  # the numbers stay exact
        assert kept.stride == summarised.stride and kept.byte_range == summarised.byte_range
        assert kept.footprint == summarised.footprint


def test_a_page_sized_chain_weighs_megabytes_not_hundreds() -> None:
    # measured as the room's cache holds them: the steps themselves, and as plain data
    ops = [".permute(3, 2, 1, 0)", ".contiguous()"] * 12
    steps = tuple(trace((16, 16, 16, 16), "float64", ops, listed_up_to=4096))
    big = [s.to_dict() for s in steps]
    assert len(big) == 25 and big[-1]["error"] is None
    assert deep_size(big) < 2**20  # listed in full, this chain holds about 200 MB
    assert deep_size(steps) < 2**20
    drawn = tuple(trace((64, 64), "float64", [".t()", ".contiguous()"] * 12, listed_up_to=4096))
    assert deep_size([s.to_dict() for s in drawn]) < 16 * 2**20  # the heaviest drawable chain
    assert deep_size(drawn) < 16 * 2**20


def test_write_through_lists_up_to_the_limit_and_counts_exactly() -> None:
    full = write_through((64, 64), "float32", [".t()"], 1, "fill_(-1)")
    short = write_through((64, 64), "float32", [".t()"], 1, "fill_(-1)", listed_up_to=10)
    assert full.changed_counts == short.changed_counts == {0: 4096, 1: 4096}
    assert len(full.changed_elements[0]) == 4096 and len(short.changed_elements[0]) == 10
    assert short.values_after == {0: None, 1: None}
    assert len(short.changed_bytes["S0"]) == 10


def test_over_long_texts_are_refused_before_they_are_read() -> None:
    with pytest.raises(ShapeInputError) as shape:
        parse_shape("2, " * MAX_SHAPE_TEXT)
    assert shape.value.code == "shape_too_long" and shape.value.params["limit"] == MAX_SHAPE_TEXT
    with pytest.raises(OpParseError) as chain:
        parse_chain(".t()\n" * MAX_CHAIN_TEXT)
    assert chain.value.code == "chain_too_long"
    assert parse_chain(" .t() \n\n[0]\n") == [".t()", "[0]"]
    with pytest.raises(OpParseError) as write:
        parse_write("fill_(" + "1" * 300 + ")")
    assert write.value.code == "write_too_long" and len(str(write.value.params["text"])) < 50
    result = write_through((2, 3), "float32", [], 0, "fill_(" + "1" * 300 + ")")
    assert result.error is not None and result.error.code == "write_too_long"
    with pytest.raises(OpParseError) as answer:
        grade(make_question(1), "1, " * MAX_ANSWER_TEXT)
    assert answer.value.code == "answer_too_long"
    assert not grade(make_question(1, "new_stride"), "9" * 50).correct  # read, never int()-ed


def test_typed_element_index() -> None:
    assert parse_index("(1, 2)", (2, 3)) == (1, 2) == parse_index("[1,2]", (2, 3))
    for text, code in [("1", "not_an_index"), ("2, 0", "not_an_index"), ("a, b", "not_an_index"),
                       ("1, " * 40, "index_too_long")]:  # fmt: skip
        with pytest.raises(OpParseError) as raised:
            parse_index(text, (2, 3))
        assert raised.value.code == code
