"""Every dtype torch can build a start tensor in works in the strides room, end to end: the
trace, the values shown, the figures, the quiz and write-through (a write a dtype cannot take
is PyTorch's refusal, explained in both languages). Also: the room's error codes all have
their text in the tables, and the index helpers are NumPy's."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

from components.strides.draw import (
    format_value,
    ravel,
    storage_figure,
    tensor_figure,
    unravel,
)
from components.theme import LIGHT
from torchatlas.i18n import LANGUAGES, placeholders, table, translate
from torchatlas.strides import (
    DTYPES,
    EXACT_UP_TO,
    START_DTYPES,
    ErrorCode,
    OpParseError,
    ShapeInputError,
    StepError,
    StorageKind,
    parse_shape,
    run_chain,
    start_values_exact,
    trace,
)
from torchatlas.strides.quiz import KINDS, grade, make_question
from torchatlas.strides.writes import write_through

COMMON = ("float32", "int64", "bool", "complex64", "complex128")


def _buildable(dtype: torch.dtype) -> bool:
    """Whether torch builds a start tensor (arange, then the dtype) and reads it back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.arange(6).to(dtype).reshape(2, 3).t().contiguous().tolist()
        except (RuntimeError, NotImplementedError, TypeError):
            return False
    return True


def test_every_dtype_torch_can_build_is_a_start_dtype() -> None:
    declared = {value for value in vars(torch).values() if isinstance(value, torch.dtype)}
    buildable = {dtype for dtype in declared if _buildable(dtype)}
    assert {torch.bool, torch.complex64, torch.complex128} <= buildable
    assert set(DTYPES.values()) == buildable
    assert list(DTYPES) == list(START_DTYPES)
    assert START_DTYPES[0] == "float32"  # the default stays first


@pytest.mark.parametrize("dtype", START_DTYPES)
def test_exact_up_to_is_the_first_whole_number_the_dtype_loses(dtype: str) -> None:
    limit = EXACT_UP_TO[dtype]
    if limit > 1 << 16:  # wide dtypes: every integer the room can build is exact
        assert limit >= 1 << 24 or dtype == "int16"
        return
    numbers = torch.arange(limit + 2, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = numbers.to(DTYPES[dtype])
    back = (back.real if back.is_complex() else back).to(torch.float64)
    exact = (back == numbers).tolist()
    assert all(exact[: limit + 1]) and not exact[limit + 1], dtype
    assert start_values_exact(limit + 1, dtype) and not start_values_exact(limit + 2, dtype)


CHAIN = [".t()", "[1:]", ".contiguous()", ".unsqueeze(0)", ".expand(2, -1, -1)"]


@pytest.mark.parametrize("dtype", START_DTYPES)
def test_trace_and_figures_in_every_start_dtype(dtype: str) -> None:
    steps = trace((2, 3), dtype, CHAIN)
    assert all(step.error is None for step in steps), [s.error for s in steps if s.error]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.arange(6).to(DTYPES[dtype]).reshape(2, 3)
    expected = [x, x.t(), x.t()[1:], x.t()[1:].contiguous()]
    expected += [expected[-1].unsqueeze(0), expected[-1].unsqueeze(0).expand(2, -1, -1)]
    floats = trace((2, 3), "float32", CHAIN)
    for step, tensor, reference in zip(steps, expected, floats, strict=True):
        assert step.dtype == dtype and step.values == tensor.tolist()
        assert step.element_size == tensor.element_size()
        # the layout does not depend on the dtype: strides count elements, not bytes
        assert (step.size, step.stride, step.storage_offset) == (
            reference.size,
            reference.stride,
            reference.storage_offset,
        )
        assert step.storage_indices == reference.storage_indices
        assert step.storage_kind == reference.storage_kind
        assert step.stride_bytes == tuple(s * tensor.element_size() for s in step.stride)
    for step in steps:
        for figure in (
            tensor_figure(step, {0}, 0, LIGHT, False),
            storage_figure(step, {1}, 1, LIGHT, False),
        ):
            texts = [text for trace_ in figure.to_dict()["data"] for text in trace_["text"] or []]
            assert texts and all(isinstance(text, str) and text for text in texts)


def test_bool_and_complex_values_read_plainly() -> None:
    start = trace((2, 3), "bool", [])[0]
    assert start.values == [[False, True, True], [True, True, True]]  # index ≠ 0 is True
    assert [format_value(v) for v in start.storage_values] == ["F", "T", "T", "T", "T", "T"]
    assert not start_values_exact(3, "bool") and start_values_exact(2, "bool")
    start = trace((3,), "complex64", [".view(torch.float32)"])
    assert start[0].values == [0j, 1 + 0j, 2 + 0j] and start[0].element_size == 8
    assert start[1].values == [0.0, 0.0, 1.0, 0.0, 2.0, 0.0]  # real, imaginary, real, …
    assert start[1].stride == (1,) and start[1].storage_kind is StorageKind.VIEW
    assert [format_value(v) for v in (0j, 1.5 - 2j, complex(3, 0.25))] == [
        "0+0j",
        "1.5-2j",
        "3+0.25j",
    ]


def test_write_through_in_bool_and_complex() -> None:
    ops = [".t()", ".contiguous()"]
    result = write_through((2, 3), "bool", ops, 1, "fill_(7)")  # nonzero is True
    assert result.error is None and result.changed_steps == [0, 1]
    assert result.values_after[0] == [[True] * 3] * 2 and result.values_after[2][0][0] is False
    cleared = write_through((2, 3), "bool", ops, 0, "zero_()")
    assert cleared.values_after[0] == [[False] * 3] * 2
    assert write_through((2, 3), "bool", ops, 0, "[0, 0] = 1").changed_counts == {0: 1, 1: 1}
    added = write_through((2, 3), "complex64", ops, 1, "add_(0.5)")
    assert added.error is None and added.values_after[0][0] == [0.5 + 0j, 1.5 + 0j, 2.5 + 0j]
    assert sorted(added.changed_bytes) == ["S0"]


@pytest.mark.parametrize(
    ("dtype", "write", "code", "params"),
    [
        ("bool", "add_(1)", ErrorCode.WRITE_CAST, {"result": "int64", "dtype": "bool"}),
        ("bool", "mul_(2)", ErrorCode.WRITE_CAST, {"result": "int64", "dtype": "bool"}),
        ("int64", "add_(0.5)", ErrorCode.WRITE_CAST, {"result": "float32", "dtype": "int64"}),
        ("int8", "fill_(300)", ErrorCode.WRITE_OVERFLOW, {"low": "-128", "high": "127"}),
        ("float16", "fill_(1e9)", ErrorCode.WRITE_OVERFLOW, {"dtype": "float16"}),
        ("float8_e4m3fn", "add_(1)", ErrorCode.DTYPE_UNSUPPORTED, {"dtype": "float8_e4m3fn"}),
        ("uint16", "add_(1)", ErrorCode.DTYPE_UNSUPPORTED, {"dtype": "uint16"}),
    ],
)
def test_a_write_the_dtype_cannot_take_is_explained(
    dtype: str, write: str, code: ErrorCode, params: dict[str, str]
) -> None:
    if dtype not in DTYPES:
        pytest.skip(f"this torch has no {dtype}")
    result = write_through((2, 3), dtype, [".t()"], 1, write)
    assert result.error is not None and result.error.code is code, result.error
    assert params.items() <= result.error.params.items()
    assert result.error.torch_message  # PyTorch's own words travel along
    for lang in LANGUAGES:
        text = translate(f"strides.errors.{code}", lang, **result.error.params)
        assert write in text and "{" not in text, (lang, text)


@pytest.mark.parametrize("dtype", COMMON)
def test_quiz_in_other_dtypes_is_graded_by_live_torch(dtype: str) -> None:
    for kind, seed in itertools.product(KINDS, (1, 2)):
        question = make_question(seed, kind, dtype=dtype)
        assert question.dtype == dtype and make_question(seed, kind, dtype=dtype) == question
        right = grade(question, "").expected
        assert grade(question, right).correct
        tensor = run_chain(question.shape, dtype, question.ops).tensors[-1]
        if kind == "new_stride":
            assert right == "(" + ", ".join(map(str, tensor.stride())) + ")"
        elif kind == "which_cell":
            element = tensor[question.element]
            cell = (element.data_ptr() - tensor.untyped_storage().data_ptr()) // (
                tensor.element_size()
            )
            assert right == str(cell)


@pytest.mark.parametrize("dtype", START_DTYPES)
def test_every_start_dtype_draws_a_question(dtype: str) -> None:
    for kind in KINDS:
        assert make_question(7, kind, dtype=dtype).ops


# ------------------------------------------------------------------------------ error codes


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_error_code_has_its_text_in_every_language(lang: str) -> None:
    texts = table(lang)
    missing = [code.value for code in ErrorCode if f"strides.errors.{code}" not in texts]
    assert missing == []
    english = table("en")
    for code in ErrorCode:
        key = f"strides.errors.{code}"
        assert placeholders(texts[key]) == placeholders(english[key]), key


def test_errors_carry_codes_and_read_their_text_from_the_tables() -> None:
    with pytest.raises(ShapeInputError) as raised:
        parse_shape("2, x")
    error = raised.value
    assert error.code is ErrorCode.SHAPE_NOT_INTS and error.params == {"text": "2, x"}
    assert (
        str(error) == error.message == translate("strides.errors.shape_not_ints", "en", text="2, x")
    )
    step = trace((3, 4), "float32", [".t()", ".view(-1)"])[-1]
    assert isinstance(step.error, StepError) and step.error.params["text"] == ".view(-1)"
    assert step.error.message == translate(
        "strides.errors.view_incompatible", "en", **step.error.params
    )
    korean = translate(f"strides.errors.{step.error.code}", "ko", **step.error.params)
    assert korean != step.error.message and ".view(-1)" in korean
    with pytest.raises(ValueError):
        OpParseError("no_such_code")  # a code the tables do not know cannot be raised


def test_parse_errors_survive_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(OpParseError(ErrorCode.TOO_LONG, text="x…", limit=200)))
    assert error.code is ErrorCode.TOO_LONG and error.params == {"text": "x…", "limit": 200}


# ------------------------------------------------------------------------------ index helpers


@pytest.mark.parametrize("size", [(), (1,), (7,), (2, 3), (4, 1, 5), (2, 3, 2, 2, 1, 3)])
def test_ravel_and_unravel_are_row_major_inverses(size: tuple[int, ...]) -> None:
    grid = np.arange(int(np.prod(size))).reshape(size)
    for flat in range(grid.size):
        index = unravel(flat, size)
        assert isinstance(index, tuple) and all(type(i) is int for i in index)
        assert grid[index] == flat and ravel(index, size) == flat
