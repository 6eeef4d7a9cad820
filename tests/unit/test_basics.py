"""The basics engine's types, broadcasting and einsum answers, each checked against torch
itself: the promotion table cell by cell, broadcasting of random shape pairs (hypothesis), and
einsum plans whose loop nest and broadcast-multiply-sum are run beside torch.einsum."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from torchatlas.basics import (
    DTYPES,
    SCALAR_TYPES,
    TABLE_COLUMNS,
    BasicsValueError,
    DTypeSpec,
    ErrorCode,
    OperandKind,
    Outcome,
    broadcast,
    build_table,
    creation,
    einsum,
    parse_index_expression,
    parse_shape,
    parse_shapes,
    parse_value,
    promote,
    promotion_table,
    run_broadcast,
)
from torchatlas.basics.quiz import QUIZ_SECTIONS, answer, grade, make_question
from torchatlas.i18n import table

# ------------------------------------------------------------------ promotion


def _operand(kind: OperandKind, dtype: str) -> object:
    """Built here, independently of the engine, with values other than the engine's."""
    if kind is OperandKind.SCALAR:
        return {"bool": False, "int": 3, "float": 0.5, "complex": 2j}[dtype]
    if kind is OperandKind.ZERO_DIM:
        return torch.zeros((), dtype=DTYPES[dtype])
    return torch.zeros(3, dtype=DTYPES[dtype])


def test_table_has_every_dtype_and_operand_kind() -> None:
    found = promotion_table()
    assert found.rows == tuple(DTYPES)
    assert len(found.columns) == 2 * len(DTYPES) + len(SCALAR_TYPES)
    assert {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16"} <= set(
        DTYPES
    )
    assert promotion_table() is found  # once per process


@pytest.mark.parametrize("row", list(DTYPES))
def test_promotion_table_cell_by_cell(row: str) -> None:
    found = promotion_table()
    left = torch.zeros(3, dtype=DTYPES[row])
    for kind, dtype in TABLE_COLUMNS:
        right = _operand(kind, dtype)
        cell = found.cell(row, kind, dtype)
        expected = str(torch.result_type(left, right)).removeprefix("torch.")  # type: ignore[arg-type]
        assert cell.result_type == expected, (row, kind, dtype)
        try:
            real = str((left + right).dtype).removeprefix("torch.")  # type: ignore[operator]
        except (RuntimeError, NotImplementedError):
            assert cell.op_dtype is None, (row, kind, dtype)
        else:
            assert cell.op_dtype == real == expected, (row, kind, dtype)


def test_category_rule_examples() -> None:
    cell = promotion_table().cell
    assert cell("int8", "scalar", "int").result_type == "int8"  # the scalar's 1000 does not widen
    assert cell("int8", "tensor", "int64").result_type == "int64"
    assert cell("int8", "zero_dim", "int64").result_type == "int8"  # 0-dim: same category
    assert cell("int8", "zero_dim", "float64").result_type == "float64"  # higher: its dtype
    assert cell("int8", "scalar", "float").result_type == "float32"  # a Python float: default
    assert cell("float16", "scalar", "float").result_type == "float16"
    assert cell("uint8", "tensor", "int8").result_type == "int16"


def test_int8_plus_1000_wraps_and_float16_rounds() -> None:
    wrapped = promote(DTypeSpec("tensor", "int8", 100), DTypeSpec("scalar", "int", 1000))
    assert wrapped.result_type == wrapped.op_dtype == "int8"
    expected = (torch.tensor([100], dtype=torch.int8) + 1000).item()
    assert wrapped.value == str(expected) and wrapped.exact == 1100
    assert wrapped.outcome is Outcome.WRAPPED
    rounded = promote(DTypeSpec("tensor", "float16", 2048.0), DTypeSpec("scalar", "float", 1.0))
    assert rounded.op_dtype == "float16" and rounded.outcome is Outcome.ROUNDED
    assert float(rounded.value or "nan") == (torch.tensor([2048.0], dtype=torch.half) + 1).item()
    exact = promote(DTypeSpec("tensor", "int16", 100), DTypeSpec("scalar", "int", 1000))
    assert exact.outcome is Outcome.EXACT and exact.value == "1100"


def test_bool_minus_style_refusal_and_logical_results() -> None:
    both = promote(DTypeSpec("tensor", "bool", True), DTypeSpec("tensor", "bool", True))
    assert both.outcome is Outcome.LOGICAL and both.value == "True"


def test_value_that_does_not_fit_is_torchs_refusal() -> None:
    with pytest.raises(BasicsValueError) as caught:
        promote(DTypeSpec("tensor", "int8", 1000), DTypeSpec("scalar", "int", 1))
    assert caught.value.code is ErrorCode.VALUE_DOES_NOT_FIT
    with pytest.raises(RuntimeError) as torch_refusal:
        torch.tensor([1000], dtype=torch.int8)
    assert str(torch_refusal.value).split("\n")[0] in caught.value.params["torch_message"]


_KINDS = st.sampled_from([(OperandKind.TENSOR, d) for d in DTYPES] + list(TABLE_COLUMNS))


@settings(max_examples=60, deadline=None)
@given(
    left=st.sampled_from(list(DTYPES)),
    right=_KINDS,
    value=st.integers(-3, 3),
    op=st.sampled_from(["add", "mul"]),
)
def test_promote_matches_torch(left: str, right: tuple, value: int, op: str) -> None:
    kind, dtype = right
    a_value = abs(value) if left == "uint8" else value
    a_value = bool(a_value) if left == "bool" else a_value
    b_value = bool(value) if dtype == "bool" else abs(value) if dtype == "uint8" else value
    a = DTypeSpec("tensor", left, a_value)
    b = DTypeSpec(kind, dtype, b_value)
    found = promote(a, b, op)
    x, y = a.make(), b.make()
    assert found.result_type == str(torch.result_type(x, y)).removeprefix("torch.")  # type: ignore[arg-type]
    try:
        real = x + y if op == "add" else x * y  # type: ignore[operator]
    except (RuntimeError, NotImplementedError):
        assert found.outcome is Outcome.RAISED and found.torch_message
        return
    assert found.op_dtype == str(real.dtype).removeprefix("torch.")  # type: ignore[union-attr]
    assert found.value == repr(real.reshape(-1)[0].item())  # type: ignore[union-attr]


def test_parse_value_is_literal_only() -> None:
    assert parse_value("1000") == 1000
    assert parse_value("-2.5") == -2.5
    assert parse_value("1-2j") == 1 - 2j
    assert parse_value("True") is True
    for bad in ("__import__('os')", "1+1", "x", "[1]", "2**64**3", "9" * 30):
        with pytest.raises(BasicsValueError):
            parse_value(bad)
    with pytest.raises(BasicsValueError) as caught:
        parse_value("1" * 100)
    assert caught.value.code is ErrorCode.TEXT_TOO_LONG


def test_table_is_quick_after_the_first_build() -> None:
    import time

    build_table()
    started = time.perf_counter()
    promotion_table()
    cached = time.perf_counter() - started
    started = time.perf_counter()
    build_table()
    built = time.perf_counter() - started
    assert cached < built  # the cache hands back the same object, no torch call


# ------------------------------------------------------------------ broadcasting

shape_strategy = st.lists(st.sampled_from([1, 1, 2, 3, 4]), min_size=0, max_size=4).map(tuple)


@settings(max_examples=60, deadline=None)
@given(first=shape_strategy, second=shape_strategy)
def test_broadcast_matches_torch(first: tuple, second: tuple) -> None:
    found = broadcast([first, second])
    try:
        expected = tuple(torch.broadcast_shapes(first, second))
    except RuntimeError:
        expected = None
    assert found.result == expected
    assert found.rank == max(len(first), len(second))
    if expected is not None:
        assert found.torch_message is None and found.fix is None
        for operand, shape in zip(found.operands, (first, second), strict=True):
            real = torch.zeros(shape).expand(expected)
            assert operand.expanded_strides == tuple(real.stride())
            aligned = (None,) * (len(expected) - len(shape)) + shape
            assert operand.aligned == aligned
            for dim, stretched in enumerate(operand.stretched):
                assert stretched == (expected[dim] != 1 and aligned[dim] != expected[dim])
                if stretched:
                    assert real.stride()[dim] == 0
        return
    with pytest.raises(RuntimeError) as real_error:
        _ = torch.zeros(first) + torch.zeros(second)
    assert found.torch_message == str(real_error.value)
    assert found.failing_dim is not None and found.failing_dim < 0
    sizes = {s for s in found.failing_sizes if s != 1}
    assert len(sizes) > 1
    assert all(len(shape) < -found.failing_dim or shape[found.failing_dim] in found.failing_sizes
               for shape in (first, second))  # fmt: skip
    if found.fix is not None:
        _check_fix(found, [first, second])


def _check_fix(found, shapes) -> None:
    fix = found.fix
    original = shapes[fix.operand]
    tensor = torch.zeros(original)
    reshaped = tensor[parse_index_expression("x" + fix.index).key(tensor)]
    assert tuple(reshaped.shape) == fix.new_shape
    others = [s for i, s in enumerate(shapes) if i != fix.operand]
    assert tuple(torch.broadcast_shapes(fix.new_shape, *others)) == fix.result


def test_image_weights_fix_is_unsqueeze() -> None:
    found = broadcast([(2, 3, 5, 5), (3,)])
    assert not found.ok and found.failing_dim == -1 and found.failing_sizes == (5, 3)
    assert found.fix is not None
    assert found.fix.new_shape == (3, 1, 1) and found.fix.index == "[:, None, None]"
    assert found.fix.result == (2, 3, 5, 5)
    ok = broadcast([(2, 3, 5, 5), found.fix.new_shape])
    assert ok.result == (2, 3, 5, 5) and ok.operands[1].expanded_strides == (0, 1, 0, 0)


def test_three_shapes_and_large_sizes_cost_nothing() -> None:
    found = broadcast([(1000, 1, 1000), (1, 1000, 1), (1000,)])
    assert found.result == (1000, 1000, 1000)
    failed = broadcast([(2, 3), (4, 5), (3,)])
    with pytest.raises(RuntimeError) as real_error:
        torch.broadcast_tensors(torch.zeros(2, 3), torch.zeros(4, 5), torch.zeros(3))
    assert failed.torch_message == str(real_error.value)


def test_shape_parsing() -> None:
    assert parse_shape("2, 3") == (2, 3)
    assert parse_shape("(3,)") == (3,)
    assert parse_shape("()") == ()
    assert parse_shapes("(2, 3, 5, 5) (3, 1, 1)") == [(2, 3, 5, 5), (3, 1, 1)]
    assert parse_shapes("2, 3\n3") == [(2, 3), (3,)]
    refusals = (
        ("2, x", ErrorCode.SHAPE_NOT_INTS),
        ("1,1,1,1,1,1,1", ErrorCode.SHAPE_RANK),
        ("9" * 70, ErrorCode.TEXT_TOO_LONG),
        ("-1", ErrorCode.SHAPE_NEGATIVE),
    )
    for bad, code in refusals:
        with pytest.raises(BasicsValueError) as caught:
            parse_shape(bad)
        assert caught.value.code is code, bad
    with pytest.raises(BasicsValueError):
        parse_shapes("(1) (2) (3) (4) (5)")


# ------------------------------------------------------------------ einsum

EQUATIONS = [
    ("...chw,c->...hw", [(2, 3, 4, 5), (3,)]),
    ("ij,jk->ik", [(2, 3), (3, 5)]),
    ("ij,jk", [(2, 3), (3, 5)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(3,), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ba", [(2, 3)]),
    ("ij,j->i", [(2, 3), (1,)]),
    ("...ij,...jk->...ik", [(4, 2, 3), (3, 5)]),
    ("iij->j", [(2, 2, 3)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS)
def test_einsum_plan_matches_torch(equation: str, shapes: list) -> None:
    plan = einsum(equation, shapes)
    assert plan.ok, plan.torch_message
    generator = torch.Generator().manual_seed(1)
    tensors = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    expected = torch.einsum(equation, *tensors)
    assert plan.output_shape == tuple(expected.shape)
    assert tuple(plan.size_of[label] for label in plan.output) == plan.output_shape
    assert plan.checked is True
    assert torch.allclose(run_broadcast(plan, tensors), expected)
    # the code shown on the page runs, and computes the same
    names = {f"x{i}": t for i, t in enumerate(tensors)}
    for code in (plan.loop_code, plan.broadcast_code, plan.einsum_code):
        scope = {"torch": torch, **names}
        exec(code, scope)
        assert torch.allclose(torch.as_tensor(scope["out"], dtype=torch.float64), expected), code
    assert plan.products == math.prod(plan.size_of.values())
    with FlopCounterMode(display=False) as counter:
        torch.einsum(equation, *tensors)
    assert plan.counted_flops == counter.get_total_flops()


def test_seed_grayscale_example() -> None:
    plan = einsum("...chw,c->...hw", [(2, 3, 5, 5), (3,)])
    assert plan.summed == ("c",) and plan.output_shape == (2, 5, 5)
    assert plan.size_of["c"] == 3 and plan.size_of["h"] == 5
    assert "x1_ = x1[None, None, None, :]" in plan.broadcast_code
    assert ".sum(dim=3)" in plan.broadcast_code
    assert "total += x0[e0, c, h, w] * x1[c]" in plan.loop_code
    # two operands contracted by one matmul: torch counts 2 FLOPs per multiply-add
    assert plan.counted_flops == 2 * plan.products


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(2, 3), (4, 5)]),
        ("ij,jk->iz", [(2, 3), (3, 5)]),
        ("ij", [(2, 3, 4)]),
        ("i,j->ij", [(2, 3), (3,)]),
        ("ij,jk->ik", [(2, 3)]),
        ("i1->i", [(2, 3)]),
    ],
)
def test_bad_equation_gets_torchs_own_words(equation: str, shapes: list) -> None:
    plan = einsum(equation, shapes)
    assert not plan.ok
    with pytest.raises((RuntimeError, ValueError)) as real_error:
        torch.einsum(equation, *[torch.zeros(s) for s in shapes])
    assert plan.torch_message == str(real_error.value).split("\n\n")[0].strip()


def test_einsum_bounds() -> None:
    with pytest.raises(BasicsValueError):
        einsum("i" * 100, [(2,)])
    with pytest.raises(BasicsValueError):
        einsum("i,i,i,i,i->", [(2,)] * 5)
    big = einsum("ij,jk->ik", [(1000, 1000), (1000, 1000)])  # meta only: nothing allocated
    assert big.ok and big.checked is None and big.counted_flops == 2 * 10**9


# ------------------------------------------------------------------ creation, quiz, text


def test_creation_reports_torchs_defaults_and_named_tensor_refusal() -> None:
    found = creation()
    by_code = {made.code: made for made in found.defaults}
    assert by_code["torch.arange(5)"].dtype == str(torch.arange(5).dtype).removeprefix("torch.")
    assert by_code["torch.linspace(0, 1, 5)"].dtype == "float32"
    assert not found.made[0].initialised and found.made[1].values == ("0",) * 6
    casts = {cast.code: cast for cast in found.casts}
    assert casts["points.to(torch.float32)"].same_object  # to() converts only when needed
    assert not casts["points.double()"].same_object
    for attempt in found.named:
        assert attempt.raised == "TypeError" and "names" in (attempt.message or "")


@pytest.mark.parametrize("section", QUIZ_SECTIONS)
def test_quiz_answers_are_choices_and_graded_by_torch(section) -> None:
    for seed in range(8):
        question = make_question(section, seed)
        right = answer(question)
        assert right in question.choices, (question.code, question.choices)
        assert grade(question, right).correct
        wrong = next(choice for choice in question.choices if choice != right)
        assert not grade(question, wrong).correct
        assert make_question(section, seed) == question  # a seed draws the same question


def test_every_error_code_has_text() -> None:
    for lang in ("en", "ko"):
        keys = table(lang)
        for code in ErrorCode:
            assert f"basics.errors.{code}" in keys, (lang, code)


def test_all_pairs_of_small_shapes_agree_with_torch() -> None:
    """Every pair of shapes over {1, 2} up to rank 2: a cheap exhaustive check."""
    shapes = [s for r in range(3) for s in itertools.product((1, 2, 3), repeat=r)]
    for first, second in itertools.product(shapes, repeat=2):
        try:
            expected = tuple(torch.broadcast_shapes(first, second))
        except RuntimeError:
            expected = None
        assert broadcast([first, second]).result == expected


@pytest.mark.parametrize("section", QUIZ_SECTIONS)
def test_a_grade_carries_the_choices_as_the_page_words_them(section) -> None:
    """The kit shows a grade's words as they are: graded by position, torch's answer comes
    back in the page's wording (``"a view"``, not the code ``"view"``), from torch now."""
    from torchatlas.quiz import Grade

    question = make_question(section, 3)
    shown = tuple(f"<{choice}>" for choice in question.choices)
    right = question.choices.index(answer(question))
    assert grade(question, right, shown) == Grade(True, shown[right], shown[right])
    wrong = (right + 1) % len(shown)
    assert grade(question, wrong, shown) == Grade(False, shown[right], shown[wrong])
    with pytest.raises(BasicsValueError):
        grade(question, len(shown), shown)
