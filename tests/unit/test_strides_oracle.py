"""The strides room's claims against torch itself (issue 34.5, 34.6, 34.2).

- A ``view(dtype)`` refusal names the condition torch names (read here, in the test only,
  from torch's own message: the oracle), and the fix it offers runs in torch and reads the
  intended bytes.
- Each step's outcome (a new view, a copy, or its input itself) is what identity and storage
  say, and the quiz uses the same word.
- Every quiz question, over a wide draw of its seed range, has torch's answer among its
  options: "PyTorch raises an error" included where torch refuses.
"""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchatlas.strides import ErrorCode, run_chain, trace
from torchatlas.strides.dtypes import DTYPES
from torchatlas.strides.link import MAX_SEED
from torchatlas.strides.quiz import (
    CHOICES,
    ERROR,
    KINDS,
    Question,
    QuestionKind,
    expected,
    make_question,
)
from torchatlas.strides.reinterpret import Condition, apply_ops, failing, find_fix

# ----------------------------------------------------------------------------- the oracle


def torch_names(message: str) -> tuple[Condition, int | None]:
    """The condition torch's message names (the test's oracle, never the room's)."""
    if "self.dim() cannot be 0" in message:
        return Condition.RANK, None
    if "self.stride(-1) must be 1" in message:
        return Condition.LAST_STRIDE, None
    if "self.size(-1) must be divisible" in message:
        return Condition.LAST_SIZE, None
    if "self.storage_offset() must be divisible" in message:
        return Condition.OFFSET, None
    if match := re.search(r"self\.stride\((\d+)\) must be divisible", message):
        return Condition.STRIDE, int(match.group(1))
    raise AssertionError(f"a view(dtype) refusal the oracle does not know: {message}")


def torch_outcome(result: torch.Tensor, source: torch.Tensor) -> str:
    """Identity first, then the untyped storage: the three outcomes."""
    if result is source:
        return "same"
    shared = result.untyped_storage().data_ptr() == source.untyped_storage().data_ptr()
    return "view" if shared and result.untyped_storage().data_ptr() else "copy"


def _intended_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """(The test's own.) The elements, row-major, as raw bytes: viewed as bytes before
    any copy (a bool copy may normalise bytes), else copied contiguous once first."""
    shaped = tensor.reshape(1) if tensor.dim() == 0 else tensor
    try:
        raw = shaped.view(torch.uint8)
    except RuntimeError:
        raw = shaped.clone(memory_format=torch.contiguous_format).view(torch.uint8)
    return raw.reshape(-1)


SIZED = list(DTYPES)


def _check_view_dtype(shape, stride, offset, start_dtype, target) -> None:
    cells = 1 + offset + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    as_strided = f".as_strided({tuple(shape)}, {tuple(stride)}, {offset})"
    view = f".view(torch.{target})"
    base = torch.arange(cells).to(DTYPES[start_dtype])
    tensor = base.as_strided(tuple(shape), tuple(stride), offset)
    dtype = DTYPES[target]
    steps = trace((cells,), start_dtype, [as_strided, view])
    assert steps[1].error is None, steps[1].error
    try:
        tensor.view(dtype)
    except RuntimeError as exc:
        condition, dim = torch_names(str(exc))
        error = steps[-1].error
        assert error is not None and error.code is ErrorCode.VIEW_DTYPE, error
        first = failing(tensor, dtype)[0]
        assert (first.condition, first.dim if first.condition is Condition.STRIDE else None) == (
            condition,
            dim,
        )
        name, got, *_ = error.params["condition"].split(":")
        assert name == condition.value and int(got) == first.got
        fix = find_fix(tensor, dtype)
        if fix is None:
            assert error.params["fix"] == ""
            assert tensor.numel() * tensor.element_size() < dtype.itemsize
            return
        assert error.params["fix"] == " → ".join(f"`{op}`" for op in fix)
        fixed = apply_ops(tensor, fix)  # torch accepts the fix …
        result = fixed.view(dtype)
        assert result.dtype == dtype
        # … and the result reads the bytes of the tensor's elements (all, or the first ones
        # the message says it keeps), row-major
        kept = error.params["kept"]
        assert fixed.numel() == kept
        intended = _intended_bytes(tensor)
        reread = _intended_bytes(result)
        if kept == tensor.numel():
            assert torch.equal(reread, intended)
        else:
            assert torch.equal(reread, _intended_bytes(fixed))
        # the room itself runs the fixed chain to the view
        again = trace((cells,), start_dtype, [as_strided, *fix, view])
        assert again[-1].error is None and again[-1].dtype == target
    else:
        assert failing(tensor, dtype) == []
        assert steps[-1].error is None


@pytest.mark.parametrize(
    ("shape", "stride", "offset", "start", "target"),
    [
        ((4, 3), (1, 4), 0, "float32", "float16"),  # transposed: last stride
        ((4, 3), (1, 4), 0, "float32", "float64"),  # last size (and last stride)
        ((3, 4), (5, 1), 1, "float32", "float64"),  # offset, then a row stride
        ((3, 4), (5, 1), 0, "float32", "complex128"),  # a row stride
        ((2, 3, 4), (13, 4, 1), 0, "float32", "float64"),  # stride(0) of three dims
        ((3,), (1,), 1, "float32", "float64"),  # offset alone
        ((1,), (1,), 0, "float32", "float64"),  # too few bytes: no fix
        ((2, 2), (0, 1), 0, "int8", "int32"),  # expanded rows: fine
        ((4, 4), (1, 0), 0, "float32", "int8"),  # expanded last dim: last stride 0
        ((4, 3), (3, 1), 1, "bool", "int16"),  # bool grows too
        ((3, 3), (3, 1), 0, "float64", "int8"),  # shrinking never needs divisibility
    ],
)
def test_view_dtype_refusal_names_torchs_condition_and_a_fix_that_runs(
    shape, stride, offset, start, target
) -> None:
    _check_view_dtype(shape, stride, offset, start, target)


def test_a_zero_dimensional_view_dtype() -> None:
    steps = trace((4,), "float32", ["[1]", ".view(torch.int8)"])
    error = steps[-1].error
    assert error.params["condition"] == "rank:0" and error.params["fix"] == "`.unsqueeze(0)`"
    assert trace((4,), "float32", ["[1]", ".unsqueeze(0)", ".view(torch.int8)"])[-1].ok
    grow = trace((4,), "float32", ["[1]", ".view(torch.float64)"])[-1].error
    assert grow.params["fix"] == "" and "less than one float64" in grow.message


@st.composite
def strided(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    stride = tuple(draw(st.integers(0, 9)) for _ in range(rank))
    offset = draw(st.integers(0, 5))
    start = draw(st.sampled_from(["float32", "float64", "int16", "int8", "bool", "float16"]))
    target = draw(st.sampled_from(SIZED))
    return shape, stride, offset, start, target


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strided())
def test_view_dtype_conditions_and_fixes_against_torch(case) -> None:
    _check_view_dtype(*case)


# ----------------------------------------------------------------------------- three outcomes

OPS = [
    ".contiguous()", ".clone()", ".t()", ".reshape(-1)", ".flatten()", ".detach()",
    ".to(torch.float32)", ".to(torch.float64)", "[...]", ".view(torch.float32)",
    ".unsqueeze(0)", ".squeeze()", ".contiguous(memory_format=torch.contiguous_format)",
    ".flip(0)", "[::2]", ".mT", ".expand(2, -1)",
]  # fmt: skip


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from([(2, 3), (3,), (1, 4), (4, 1)]),
    st.lists(st.sampled_from(OPS), min_size=1, max_size=5),
)
def test_every_step_label_is_what_identity_and_storage_say(shape, ops) -> None:
    chain = run_chain(shape, "float32", ops)
    for index, step in enumerate(chain.steps[1:], start=1):
        if step.error is not None:
            assert step.storage_kind is None
            break
        truth = torch_outcome(chain.tensors[index], chain.tensors[index - 1])
        assert step.storage_kind.value == truth, (ops[:index], step.storage_kind, truth)
        # the quiz's word for this op is the label's word
        question = Question(QuestionKind.VIEW_OR_COPY, 0, shape, "float32", tuple(ops[:index]))
        assert expected(question, chain.steps[: index + 1]) == truth


@pytest.mark.parametrize(
    ("ops", "outcome"),
    [
        ([".contiguous()"], "same"),
        ([".to(torch.float32)"], "same"),
        ([".flatten()"], "view"),  # 2-D: a new view
        ([".reshape(-1)", ".flatten()"], "same"),  # 1-D: flatten returns its input
        ([".reshape(2, 3)"], "view"),
        ([".t()", ".contiguous()"], "copy"),
        ([".t()", ".view(-1)"], ERROR),
    ],
)
def test_the_three_outcomes_and_the_refusal(ops: list[str], outcome: str) -> None:
    steps = trace((2, 3), "float32", ops)
    question = Question(QuestionKind.VIEW_OR_COPY, 0, (2, 3), "float32", tuple(ops))
    assert expected(question, steps) == outcome
    assert outcome in CHOICES[QuestionKind.VIEW_OR_COPY]


# ----------------------------------------------------------------------------- the quiz

SEEDS = [*range(0, 120), 4_321, 99_999, 123_456_789, MAX_SEED - 1, MAX_SEED]


def torch_answer(question: Question) -> str:
    """The right answer, from live torch directly (the chain re-run; the truth read from
    the tensors, not from the room's steps)."""
    chain = run_chain(question.shape, question.dtype, list(question.ops))
    failed = chain.steps[-1].error is not None
    if question.kind is QuestionKind.VIEW_WORKS:
        return "no" if failed else "yes"
    if question.kind is QuestionKind.VIEW_OR_COPY:
        return ERROR if failed else torch_outcome(chain.tensors[-1], chain.tensors[-2])
    assert not failed
    last = chain.tensors[-1]
    if question.kind is QuestionKind.NEW_STRIDE:
        return "(" + ", ".join(map(str, last.stride())) + ")"
    cell = last.storage_offset() + sum(
        i * s for i, s in zip(question.element, last.stride(), strict=True)
    )
    return str(cell)


@pytest.mark.parametrize("kind", KINDS)
def test_every_question_over_the_seed_range_has_torchs_answer_among_its_options(
    kind: QuestionKind,
) -> None:
    answers = set()
    for seed in SEEDS:
        question = make_question(seed, kind)
        right = torch_answer(question)
        steps = trace(question.shape, question.dtype, list(question.ops))
        assert expected(question, steps) == right, (seed, question)
        if kind in CHOICES:
            assert right in CHOICES[kind], (seed, right)
        answers.add(right if kind in CHOICES else "typed")
    if kind is QuestionKind.VIEW_WORKS:
        assert answers == {"yes", "no"}  # torch refuses some: "it fails" is then the answer
    if kind is QuestionKind.VIEW_OR_COPY:
        assert {"view", "copy", "same"} <= answers
