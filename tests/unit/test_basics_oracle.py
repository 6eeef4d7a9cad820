"""The basics room against plain torch (issue 22): every field the room shows, for every
section's default, every quiz question the first seeds draw, and a few dozen operand pairs
chosen to be tricky, computed here with plain torch and exact fractions; then a hypothesis
test of random operand pairs.

The truth is computed in this file, never by the engine: operands are built here, the op is
run here, the exact value is fraction arithmetic here, and a quiz's answer is what its own
code gives when run with torch.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from fractions import Fraction

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from components.basics.draw import derivation_text, einsum_markdown, promotion_notes, save_markdown
from torchatlas.basics import (
    DTYPES,
    BasicsValueError,
    DTypeSpec,
    ErrorCode,
    Outcome,
    broadcast,
    einsum,
    index,
    parse_shape,
    parse_shapes,
    parse_value,
    promote,
    serialize,
)
from torchatlas.basics.exact import complex_text, exact_text
from torchatlas.basics.link import LINK
from torchatlas.basics.quiz import (
    COPY,
    ERROR_CHOICE,
    QUIZ_SECTIONS,
    SEED_COUNT,
    VIEW,
    answer,
    grade,
    make_question,
)
from torchatlas.i18n import translate

INTEGER = {"uint8", "int8", "int16", "int32", "int64", "int"}


# ------------------------------------------------------------------ the truth, computed here
def _operand(kind: str, dtype: str, value: object) -> object:
    if kind == "scalar":
        return {"bool": bool, "int": int, "float": float, "complex": complex}[dtype](value)
    data = value if kind == "zero_dim" else [value]
    return torch.tensor(data, dtype=DTYPES[dtype])


def _held(operand: object) -> object:
    return operand.reshape(-1)[0].item() if isinstance(operand, torch.Tensor) else operand


def _exact_parts(value: object) -> tuple[Fraction, Fraction] | None:
    """(real, imag) as fractions; None when any part is inf or nan."""
    number = complex(value) if isinstance(value, complex) else value
    real = number.real if isinstance(number, complex) else number
    imag = number.imag if isinstance(number, complex) else 0
    if any(isinstance(p, float) and not math.isfinite(p) for p in (real, imag)):
        return None
    return Fraction(real), Fraction(imag)


def truth(left: tuple, right: tuple, op: str) -> dict:
    """What torch does with these operands, and what the exact answer is."""
    a, b = _operand(*left), _operand(*right)
    held_a, held_b = _held(a), _held(b)
    result_type = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result_type = str(torch.result_type(a, b)).removeprefix("torch.")
            out = a + b if op == "add" else a * b
    except (RuntimeError, TypeError, ValueError, OverflowError, NotImplementedError) as exc:
        return {"outcome": Outcome.RAISED, "message": str(exc).split("\n\n")[0]}
    got = _held(out)
    pa, pb = _exact_parts(held_a), _exact_parts(held_b)
    exact = None
    if pa and pb:
        (ar, ai), (br, bi) = pa, pb
        exact = (ar + br, ai + bi) if op == "add" else (ar * br - ai * bi, ar * bi + ai * br)
    got_parts = _exact_parts(got)
    if out.dtype == torch.bool:
        outcome = Outcome.LOGICAL
    elif exact is None:
        outcome = Outcome.NOT_FINITE
    elif got_parts is None:
        outcome = Outcome.OVERFLOWED
    elif got_parts == exact:
        outcome = Outcome.EXACT
    elif out.dtype.is_floating_point or out.dtype.is_complex:
        outcome = Outcome.ROUNDED
    else:
        outcome = Outcome.WRAPPED
    return {
        "outcome": outcome,
        "result_type": result_type,
        "op_dtype": str(out.dtype).removeprefix("torch."),
        "value": repr(got),
        "exact": exact,
        "got": got_parts,
        "held": (held_a, held_b),
    }


def _check(found, expected: dict) -> None:
    assert found.outcome is expected["outcome"], (found.code, found.outcome, expected)
    if expected["outcome"] is Outcome.RAISED:
        assert found.torch_message and found.torch_message in expected["message"]
        return
    assert found.result_type == expected["result_type"]
    assert found.op_dtype == expected["op_dtype"]
    assert found.value == expected["value"]
    imag_shown = expected["exact"] is not None and (
        "complex" in found.op_dtype or found.exact_imag is not None
    )
    if expected["exact"] is None:
        assert found.exact is None
    else:
        real, imag = expected["exact"]
        assert found.exact == real
        assert (found.exact_imag or 0) == imag
        if imag_shown:
            assert found.exact_imag is not None
    if expected["got"] is None:
        assert found.got is None
    else:
        assert (found.got, found.got_imag or 0) == expected["got"]
    held_a, held_b = expected["held"]
    for stored, stored_imag, held in (
        (found.stored_a, found.stored_a_imag, held_a),
        (found.stored_b, found.stored_b_imag, held_b),
    ):
        parts = _exact_parts(held)
        if parts is None:
            assert stored is None
        else:
            assert (stored, stored_imag or 0) == parts


# ------------------------------------------------------------------ tricky operand pairs
PAIRS = [
    # (left (kind, dtype, value), right (kind, dtype, value), op)
    (("tensor", "int8", 100), ("scalar", "int", 1000), "add"),
    (("tensor", "int8", -128), ("scalar", "int", -1), "mul"),
    (("tensor", "uint8", 200), ("tensor", "uint8", 100), "add"),
    (("tensor", "uint8", 0), ("scalar", "int", -1), "add"),
    (("tensor", "uint8", 7), ("tensor", "int8", -8), "mul"),
    (("tensor", "bool", True), ("tensor", "bool", True), "add"),
    (("tensor", "bool", True), ("scalar", "int", 5), "add"),
    (("tensor", "bool", True), ("scalar", "float", 0.5), "mul"),
    (("tensor", "bool", False), ("zero_dim", "bool", True), "mul"),
    (("tensor", "float16", 2048.0), ("scalar", "float", 1.0), "add"),
    (("tensor", "bfloat16", 256.0), ("scalar", "float", 1.0), "add"),
    (("tensor", "float16", 0.1), ("scalar", "float", 0.2), "add"),
    (("tensor", "bfloat16", 0.1), ("tensor", "float16", 0.1), "add"),
    (("tensor", "float16", 60000.0), ("tensor", "float16", 60000.0), "add"),
    (("tensor", "float16", 300.0), ("zero_dim", "float64", 300.0), "mul"),
    (("tensor", "float32", 16777216.0), ("zero_dim", "int64", 1), "add"),
    (("tensor", "int64", 2**53 + 1), ("scalar", "float", 0.0), "add"),
    (("tensor", "int64", 2**53 + 1), ("zero_dim", "float64", 0.0), "add"),
    (("tensor", "int64", 2**53 + 1), ("tensor", "float64", 0.0), "add"),
    (("tensor", "float64", 0.1), ("scalar", "float", 0.2), "add"),
    (("tensor", "float64", 2.0**53), ("scalar", "float", 1.0), "add"),
    (("tensor", "float64", 1e308), ("scalar", "float", 10.0), "mul"),
    (("tensor", "float64", 5e-324), ("tensor", "float64", 5e-324), "mul"),
    (("tensor", "float64", float("inf")), ("scalar", "int", 1), "add"),
    (("tensor", "float32", float("nan")), ("scalar", "float", 1.0), "mul"),
    (("tensor", "complex64", complex(16777216.0, 1.0)), ("scalar", "complex", 1j), "add"),
    (("tensor", "complex128", complex(2.0**53, 1.0)), ("scalar", "complex", 1 + 1j), "mul"),
    (("tensor", "complex64", complex(0.1, 0.2)), ("zero_dim", "complex128", 3j), "mul"),
    (("tensor", "int32", 2_000_000_000), ("tensor", "int32", 2_000_000_000), "add"),
    (("tensor", "int16", 30000), ("zero_dim", "int64", 30000), "add"),
    (("tensor", "int8", 1), ("zero_dim", "float64", 0.5), "add"),
    (("tensor", "int64", 2**62), ("scalar", "int", 2**62), "add"),
    (("tensor", "int64", 1), ("scalar", "int", 2**63), "add"),
    (("tensor", "int64", 1), ("scalar", "int", 2**64), "add"),
    (("tensor", "float16", 1.0), ("scalar", "complex", 1j), "add"),
    (("tensor", "int8", 3), ("scalar", "bool", False), "mul"),
    (("tensor", "float32", 0.1), ("scalar", "float", 0.1), "mul"),
    (("tensor", "float64", -0.0), ("scalar", "float", 0.0), "add"),
]


@pytest.mark.parametrize(("left", "right", "op"), PAIRS)
def test_tricky_pairs_against_torch(left: tuple, right: tuple, op: str) -> None:
    found = promote(DTypeSpec(*left), DTypeSpec(*right), op)
    _check(found, truth(left, right, op))


def test_the_issues_two_lessons_are_not_called_exact() -> None:
    """0.1 + 0.2 in float64 differs from the exact sum; 2**53 + 1.0's exact value is …993."""
    classic = promote(DTypeSpec("tensor", "float64", 0.1), DTypeSpec("scalar", "float", 0.2))
    assert classic.outcome is Outcome.ROUNDED
    assert classic.exact == Fraction(0.1) + Fraction(0.2)
    assert classic.got == Fraction(0.1 + 0.2) and classic.got != classic.exact
    edge = promote(DTypeSpec("tensor", "float64", 2.0**53), DTypeSpec("scalar", "float", 1.0))
    assert exact_text(edge.exact) == "9007199254740993"
    assert edge.outcome is Outcome.ROUNDED and edge.value == repr(2.0**53)


@pytest.mark.parametrize(("left", "right", "op"), PAIRS)
def test_the_notes_claim_what_torch_and_fractions_say(left: tuple, right: tuple, op: str) -> None:
    """The sentences under the explorer: torch's value and the exact one to the last digit,
    the difference (or equality), and each operand that is not the decimal it looks like."""
    found = promote(DTypeSpec(*left), DTypeSpec(*right), op)
    expected = truth(left, right, op)
    notes = "\n".join(promotion_notes(found, "en"))
    if expected["outcome"] is Outcome.RAISED or expected["exact"] is None:
        assert translate("basics.types.same_value") not in notes
        return
    if expected["got"] is None:
        return
    (er, ei), (gr, gi) = expected["exact"], expected["got"]
    complex_result = "complex" in expected["op_dtype"]
    exact_shown = complex_text(er, ei if complex_result or ei else None)
    got_shown = complex_text(gr, gi if complex_result or gi else None)
    assert exact_shown in notes and got_shown in notes
    if (gr, gi) == (er, ei):
        assert translate("basics.types.same_value") in notes
    else:
        difference = complex_text(gr - er, (gi - ei) or None)
        assert translate("basics.types.differs", difference=difference) in notes
    for held, (kind, dtype, typed) in zip(expected["held"], (left, right), strict=True):
        parts = _exact_parts(held)
        if parts is None or isinstance(typed, bool) or not isinstance(typed, float | complex):
            continue
        typed_parts = _exact_parts(typed)
        shown = complex_text(parts[0], parts[1] if isinstance(held, complex) else None)
        if (
            typed_parts != parts or Fraction(repr(typed.real)) != parts[0]
        ):  # storing changed the number
            assert shown in notes, (kind, dtype, typed)


# ------------------------------------------------------------------ where a dtype comes from
CAPTIONS = [
    # (left tensor dtype, right kind, right dtype): the explorer's caption for each
    ("float16", "zero_dim", "complex128"),  # complex32: category right, precision left
    ("bfloat16", "zero_dim", "complex64"),  # bcomplex32, named; the op raises
    ("bfloat16", "scalar", "complex"),
    ("complex64", "tensor", "float64"),  # complex128: category left, precision right
    ("float16", "tensor", "complex64"),
    ("uint8", "tensor", "int8"),  # int16: neither operand's
    ("bfloat16", "tensor", "float16"),  # float32: neither operand's
    ("bool", "scalar", "int"),  # int64: the Python int's own dtype
    ("int64", "zero_dim", "float16"),
    ("int8", "scalar", "int"),  # int8 stays
    ("float32", "scalar", "complex"),
    ("float64", "zero_dim", "complex64"),  # complex128: neither
]


def _scalar_or_tensor(kind: str, dtype: str) -> object:
    return _operand(kind, dtype, True if dtype == "bool" else 1)


@pytest.mark.parametrize(("left", "kind", "right"), CAPTIONS)
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _whose(value: object, left: object, right: object) -> str:
    if value == left == right:
        return "both"
    return "left" if value == left else "right" if value == right else "neither"


def _category_of(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    return "complex" if dtype.is_complex else "floating" if dtype.is_floating_point else "integer"


@pytest.mark.parametrize(("left", "kind", "right"), CAPTIONS)
def test_the_caption_is_a_reading_of_torchs_result(left: str, kind: str, right: str) -> None:
    """The caption under the explorer names torch's result dtype and compares it with each
    operand's own dtype (a Python scalar's: torch.tensor of it), its category and the dtype
    of its parts: each claim checked against torch here."""
    a, b = _scalar_or_tensor("tensor", left), _scalar_or_tensor(kind, right)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result, raised = (a + b).dtype, False
        except RuntimeError:  # NotImplementedError too: no kernel for this dtype
            result, raised = torch.result_type(a, b), True
        alone = torch.tensor(b).dtype if kind == "scalar" else b.dtype
        parts = [torch.empty(1, dtype=d).real.dtype for d in (result, a.dtype, alone)]
    found = promote(DTypeSpec("tensor", left, 1), DTypeSpec(kind, right, 1))
    assert (found.outcome is Outcome.RAISED) is raised
    derivation = found.derivation
    name, alone_name = _dtype_name(result), _dtype_name(alone)
    assert derivation.result == name and derivation.right_alone == alone_name
    assert derivation.category == _category_of(result)
    assert derivation.part == _dtype_name(parts[0])
    caption = derivation_text(derivation, "en", raised=raised)
    assert caption.startswith(translate("basics.types.why.raised")) is raised
    source = _whose(result, a.dtype, alone)
    names = {"result": name, "left": left, "right": alone_name}
    if source != "neither":
        assert translate(f"basics.types.why.{source}", **names) in caption
    else:  # neither operand's dtype: where its category and its precision come from
        category = _category_of(result)
        origin = _whose(category, _category_of(a.dtype), _category_of(alone))
        said = translate(f"basics.types.why.category.{origin}",
                         category=translate(f"basics.types.categories.{category}"))  # fmt: skip
        assert said in caption
        group = "part_complex" if result.is_complex else "part_real"
        origin = _whose(*parts)
        said = translate(f"basics.types.why.{group}.{origin}", part=_dtype_name(parts[0]),
                         bits=parts[0].itemsize * 8)  # fmt: skip
        assert said in caption
    assert "its own dtype" not in caption


# ------------------------------------------------------------------ hypothesis
_REAL = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
_VALUES = st.one_of(
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.complex_numbers(max_magnitude=1e300, allow_nan=False, allow_infinity=False),
    st.booleans(),
)


def _fits(kind: str, dtype: str, value: object) -> bool:
    try:
        _operand(kind, dtype, value)
    except (RuntimeError, TypeError, ValueError, OverflowError):
        return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    left=st.sampled_from(list(DTYPES)),
    right=st.one_of(
        st.tuples(st.sampled_from(["tensor", "zero_dim"]), st.sampled_from(list(DTYPES))),
        st.tuples(st.just("scalar"), st.sampled_from(["bool", "int", "float", "complex"])),
    ),
    a=_VALUES,
    b=_VALUES,
    op=st.sampled_from(["add", "mul"]),
)
def test_random_pairs_engine_vs_torch(left: str, right: tuple, a, b, op: str) -> None:
    kind, dtype = right
    assume(_fits("tensor", left, a) and _fits(kind, dtype, b))
    assume(not (kind == "scalar" and isinstance(b, int) and abs(b) > 2**64))
    found = promote(DTypeSpec("tensor", left, a), DTypeSpec(kind, dtype, b), op)
    _check(found, truth(("tensor", left, a), (kind, dtype, b), op))


def test_value_text_past_64_bits_is_the_rooms_refusal() -> None:
    for text in (str(2**64 + 1), "-" + "9" * 25):
        with pytest.raises(BasicsValueError) as caught:
            parse_value(text)
        assert caught.value.code is ErrorCode.INT_TOO_LARGE


# ------------------------------------------------------------------ every section's default
def _default(key: str) -> str:
    """The default of the input behind session key ``key`` (the link's declaration)."""
    (name,) = [name for name in LINK.names if LINK.session_key(name) == key]
    return LINK.field(name).default


def test_types_default_against_torch() -> None:
    left = ("tensor", _default("basics_left"), parse_value(_default("basics_left_value")))
    right = (
        _default("basics_right_kind").replace("OperandKind.", ""),
        _default("basics_right"),
        parse_value(_default("basics_right_value")),
    )
    found = promote(DTypeSpec(*left), DTypeSpec(*right), _default("basics_op"))
    _check(found, truth(left, right, _default("basics_op")))


def _shapes(text: str) -> list[tuple[int, ...]]:
    return [tuple(shape) for shape in parse_shapes(text)]


BROADCASTS = [
    _default("basics_shapes"),
    "(2, 3, 5, 5) (3,)",
    "(0, 1) (1, 4)",
    "(0,) (3,)",
    "() (2, 1)",
    "(5, 1, 3) (4, 1) (1,)",
]


@pytest.mark.parametrize("text", BROADCASTS)
def test_broadcast_against_torch(text: str) -> None:
    shapes = _shapes(text)
    found = broadcast(shapes)
    tensors = [torch.zeros(shape) for shape in shapes]
    try:
        expected = torch.broadcast_tensors(*tensors)
    except RuntimeError as exc:
        assert found.result is None and found.torch_message == str(exc).split("\n\n")[0]
        return
    assert found.result == tuple(expected[0].shape)
    for operand, tensor, out in zip(found.operands, tensors, expected, strict=True):
        assert operand.strides == tuple(tensor.stride())
        assert operand.expanded_strides == tuple(out.stride())


EINSUMS = [
    (_default("basics_equation"), _default("basics_einsum_shapes")),
    ("ij,jk->ik", "(2, 0) (0, 3)"),
    ("ij->", "(0, 3)"),
    ("ii->i", "(3, 3)"),
    ("bij,bjk->bik", "(2, 2, 3) (2, 3, 4)"),
    ("ij,jk,kl->il", "(2, 3) (3, 4) (4, 5)"),  # three operands: torch contracts in pairs
    ("ab,bc,cd,de->ae", "(2, 3) (3, 2) (2, 4) (4, 3)"),
    ("i,j,k->", "(2,) (3,) (4,)"),  # sums of a product of three
    ("ij->", "(3, 4)"),  # a sum without a product
    ("ij,ij->ij", "(2, 3) (2, 3)"),  # a product without a sum
]


@pytest.mark.parametrize(("equation", "text"), EINSUMS)
def test_einsum_against_torch(equation: str, text: str) -> None:
    shapes = _shapes(text)
    plan = einsum(equation, shapes)
    tensors = [torch.randn(shape, dtype=torch.float64) for shape in shapes]
    out = torch.einsum(equation, *tensors)
    assert plan.output_shape == tuple(out.shape)
    assert plan.checked is True
    terms = math.prod(size for _, size in plan.sizes)
    assert plan.products == terms
    assert plan.additions >= 0 and plan.multiplies == (len(shapes) - 1) * terms
    scope = {"torch": torch, **{f"x{i}": t for i, t in enumerate(tensors)}}
    exec(plan.loop_code, scope)  # the loops the page shows compute torch's result
    assert torch.allclose(torch.as_tensor(scope["out"], dtype=torch.float64), out)
    # the work: the loop code's own * and += (one * per extra operand, one += per summed
    # term), and FlopCounterMode around the real einsum, compared as numbers
    inputs, _, output = equation.partition("->")
    summed = set(inputs) - set(output) - {",", "."}  # letters the output drops
    assert plan.additions == (terms if summed else 0)
    with FlopCounterMode(display=False) as counter:
        torch.einsum(equation, *tensors)
    counted = counter.get_total_flops()
    assert plan.counted_flops == counted
    loops = plan.multiplies + plan.additions
    text = einsum_markdown(plan, "en")
    if counted == loops:
        assert translate("basics.einsum.compare_equal", total=f"{loops:,}") in text
    else:
        key = "compare_fewer" if counted < loops else "compare_more"
        said = translate(f"basics.einsum.{key}", difference=f"{abs(counted - loops):,}",
                         total=f"{loops:,}")  # fmt: skip
        assert said in text
    assert "the same work as the loops" not in text


INDEXES = [
    (_default("basics_index_shape"), _default("basics_index")),
    ("3, 4", "x[:, [0, 2]]"),
    ("3, 4", "x[x % 2 == 0]"),
    ("0, 3", "x[:, 1]"),
    ("0, 3", "x[x > 1]"),
    ("2, 3, 4", "x[1:, None, ..., [0, 2]]"),
    ("4,", "x[-1]"),
]


@pytest.mark.parametrize(("shape_text", "expression"), INDEXES)
def test_index_against_torch(shape_text: str, expression: str) -> None:
    shape = parse_shape(shape_text)
    found = index(shape, expression)
    x = torch.arange(math.prod(shape)).reshape(shape)
    y = eval(expression, {"x": x})  # the test's own reading: plain Python on a real tensor
    assert found.result_shape == tuple(y.shape)
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert found.is_view is shares
    if shares:
        assert found.result_strides == tuple(y.stride())
        assert found.storage_offset == y.storage_offset()
    assert found.picked == tuple(sorted(set(y.reshape(-1).tolist())))


SAVES = [
    (_default("basics_save_shape"), _default("basics_save_view"), _default("basics_save_dtype")),
    ("100, 8", "x[::10]", "float64"),
    ("64,", "x[-2:]", "int16"),
    ("6, 2", "x[:, 0]", "uint8"),
    ("2, 3", "x[:1]", "float32"),  # dset[-2:] is the whole dataset
    ("1, 5", "x[0]", "int32"),
    ("2,", "x[:1]", "float64"),
    ("3, 3", "x[1:]", "float32"),
]


def _saved(obj: object) -> int:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getbuffer().nbytes


@pytest.mark.parametrize(("shape_text", "view", "dtype"), SAVES)
def test_saving_against_torch(shape_text: str, view: str, dtype: str) -> None:
    shape = parse_shape(shape_text)
    report = serialize(shape, view, dtype)
    x = torch.arange(math.prod(shape)).to(DTYPES[dtype]).reshape(shape)
    part = eval(view, {"x": x})
    assert report.saved_full == _saved(x)
    assert report.saved_view == _saved(part)
    assert report.saved_clone == _saved(part.clone())
    assert report.saved_together == _saved({"x": x, "view": part})
    assert report.storage_bytes == x.untyped_storage().nbytes()
    assert report.view_bytes == part.numel() * part.element_size()
    buffer = io.BytesIO()
    torch.save({"x": x, "view": part}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    shares = loaded["x"].untyped_storage().data_ptr() == loaded["view"].untyped_storage().data_ptr()
    assert report.loaded_shares is shares
    assert report.hdf5.data_bytes == x.numpy().nbytes
    assert report.hdf5.tail_rows_bytes == x.numpy()[-2:].nbytes
    # the HDF5 sentence: read off the slice's shape, and byte figures that fit in the file
    whole = x.numpy()[-2:].shape == x.numpy().shape
    assert report.hdf5.whole is whole
    hdf = report.hdf5
    assert max(hdf.open_bytes, hdf.tail_bytes) <= hdf.file_bytes
    text = save_markdown(report, "en")
    said_whole = translate("basics.save.slice_whole", tail="-2:", shape=str(hdf.tail_shape))
    assert (said_whole in text) is whole
    if whole:
        assert translate("basics.save.rest_none") in text
    assert "not the dataset's" not in text


# ------------------------------------------------------------------ every quiz question
def _run_quiz_code(code: str) -> object:
    """The question's code as the student reads it, run with plain torch: the value of its
    last line."""
    lines = code.strip().split("\n")
    scope: dict = {"torch": torch, "io": io}
    exec("\n".join(lines[:-1]), scope)
    try:
        last = compile(lines[-1], "<quiz>", "eval")
    except SyntaxError:  # an assignment: the scope holds the answer
        exec(lines[-1], scope)
        return scope
    return eval(last, scope)


@pytest.mark.parametrize("section", QUIZ_SECTIONS)
def test_every_quiz_answer_is_what_its_code_gives(section) -> None:
    """The whole seed range of every generator: each question's right option is what its
    code gives with plain torch (ERROR_CHOICE where torch raises), and it is an option."""
    raised = 0
    for seed in range(SEED_COUNT):
        question = make_question(section, seed)
        graded = answer(question)
        assert graded in question.choices, question.code
        assert grade(question, graded).correct
        raised += graded == ERROR_CHOICE
        if section == "indexing":
            try:
                scope = _run_quiz_code(question.code)
            except IndexError:
                assert graded == ERROR_CHOICE, question.code
                continue
            x, y = scope["x"], scope["y"]
            same = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            assert graded == (VIEW if same else COPY), question.code
            continue
        result: object = ERROR_CHOICE
        with contextlib.suppress(RuntimeError, NotImplementedError), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # half-precision complex is "experimental"
            result = _run_quiz_code(question.code)
        if section == "types":
            assert graded == str(result).removeprefix("torch."), question.code
        elif section in ("broadcasting", "einsum"):
            assert graded == (result if result == ERROR_CHOICE else str(tuple(result)))
        else:  # saving: the choice nearer the file's data part
            header = _saved(torch.zeros(0))
            data = int(result) - header
            scope = {"torch": torch, "io": io}
            exec(question.code.split("\n")[0], scope)  # x = torch.zeros(rows, columns)
            x = scope["x"]
            keep = int(question.code.split("x[:")[1].split("]")[0])
            view_bytes, storage = x[:keep].numel() * 4, x.numel() * 4
            nearer = 0 if abs(data - view_bytes) <= abs(data - storage) else 1
            assert graded == question.choices[nearer], question.code
    if section in ("types", "broadcasting"):  # this torch refuses some of their questions
        assert raised, section
