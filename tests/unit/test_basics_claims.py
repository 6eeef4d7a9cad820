"""Issue 34: every sentence of the basics room is a reading of what torch just did, searched
over the space each kind of sentence covers (hypothesis), with the truth computed here.

- the types caption, for every operand kind and dtype pair: its result dtype, category and
  precision against the real op (``torch.result_type`` where the op raises);
- the quiz: every question's right option against torch, raises included;
- einsum: the loop nest's multiplies and adds against a brute-force count of its own code
  run on counting numbers, and the FLOP sentence against ``FlopCounterMode`` here;
- HDF5: the sentence about a slice against the slice's shape and a byte count made here.
"""

from __future__ import annotations

import io
import itertools
import math
import types
import warnings

import h5py
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from components.basics.draw import derivation_text, einsum_markdown, save_markdown
from torchatlas.basics import DTYPES, SCALAR_TYPES, DTypeSpec, derive, einsum, promote
from torchatlas.basics.promotion import TABLE_COLUMNS, promotion_table
from torchatlas.basics.quiz import (
    ERROR_CHOICE,
    QUIZ_SECTIONS,
    SEED_COUNT,
    answer,
    grade,
    make_question,
    types_question,
)
from torchatlas.basics.saving import CountingReader, hdf5_read, serialize
from torchatlas.i18n import translate

SCALAR_ONES = {"bool": True, "int": 1, "float": 1.0, "complex": complex(1, 0)}


# ------------------------------------------------------------------ the truth, computed here
def _operand(kind: str, name: str) -> object:
    if kind == "scalar":
        return SCALAR_ONES[name]
    return torch.ones(() if kind == "zero_dim" else (2,), dtype=DTYPES[name])


def _result(left: str, kind: str, right: str) -> tuple[torch.dtype, bool]:
    """The real op's dtype, or (where it raises) the one torch.result_type names."""
    a, b = torch.ones(2, dtype=DTYPES[left]), _operand(kind, right)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return (a + b).dtype, False
        except (RuntimeError, NotImplementedError):
            return torch.result_type(a, b), True  # type: ignore[arg-type]


def _category(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    if dtype.is_complex:
        return "complex"
    return "floating" if dtype.is_floating_point else "integer"


def _part(dtype: torch.dtype) -> torch.dtype:
    """The dtype of one part of a value: what ``.real`` of such a tensor holds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.empty(1, dtype=dtype).real.dtype


def _alone(kind: str, right: str) -> torch.dtype:
    return torch.tensor(SCALAR_ONES[right]).dtype if kind == "scalar" else DTYPES[right]


def _whose(value: object, left: object, right: object) -> str:
    if value == left == right:
        return "both"
    return "left" if value == left else "right" if value == right else "neither"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def expected_caption(left: str, kind: str, right: str, lang: str = "en") -> str:
    """The caption, written here from torch's result alone."""
    result, raised = _result(left, kind, right)
    a, b = DTYPES[left], _alone(kind, right)

    def say(key: str, **params: object) -> str:
        return translate(f"basics.types.why.{key}", lang, **params)

    names = {"left": left, "right": _name(b), "result": _name(result)}
    source = _whose(result, a, b)
    if source == "neither":
        category = _category(result)
        clause = say(f"category.{_whose(category, _category(a), _category(b))}",
                     category=translate(f"basics.types.categories.{category}", lang))  # fmt: skip
        group = "part_complex" if result.is_complex else "part_real"
        part = _part(result)
        origin = _whose(part, _part(a), _part(b))
        clause_part = say(f"{group}.{origin}", part=_name(part), bits=part.itemsize * 8)
        text = say("neither", category=clause, part=clause_part, **names)
    else:
        text = say(source, **names)
    if kind == "scalar":
        code = repr(SCALAR_ONES[right]).strip("()")
        text += " " + say("scalar_alone", type=right, code=code, alone=_name(b))
    return (say("raised") + " " + text) if raised else text


# ------------------------------------------------------------------ 1. the types caption
CELLS = [(left, str(kind), right) for left in DTYPES for kind, right in TABLE_COLUMNS]


@pytest.mark.parametrize(("left", "kind", "right"), CELLS)
def test_every_table_cell_caption_is_read_off_torch(left: str, kind: str, right: str) -> None:
    """Every cell of the table, every operand kind: the caption's dtype, category and
    precision are torch's result's, and its comparisons are the operands' own dtypes'."""
    result, raised = _result(left, kind, right)
    cell = promotion_table().cell(left, kind, right)
    found = cell.derivation
    assert found.result == _name(result)
    assert (cell.op_dtype is None) is raised
    assert found.category == _category(result)
    assert found.part == _name(_part(result))
    assert found.part_bits == _part(result).itemsize * 8
    assert found.right_alone == _name(_alone(kind, right))
    for lang in ("en", "ko"):
        assert derivation_text(found, lang, raised=raised) == expected_caption(
            left, kind, right, lang
        )


@settings(max_examples=300, deadline=None)
@given(
    left=st.sampled_from(list(DTYPES)),
    right=st.one_of(
        st.tuples(st.sampled_from(["tensor", "zero_dim"]), st.sampled_from(list(DTYPES))),
        st.tuples(st.just("scalar"), st.sampled_from(list(SCALAR_TYPES))),
    ),
    value=st.integers(0, 1),
    op=st.sampled_from(["add", "mul"]),
)
def test_random_explorer_pairs_caption_is_torchs(left: str, right: tuple, value: int, op: str):
    """The explorer's own result (promote, as the page runs it): its caption names the dtype
    torch's real op gave (or torch.result_type's, where the op raised)."""
    kind, name = right
    found = promote(DTypeSpec("tensor", left, value), DTypeSpec(kind, name, value), op)
    a, b = _operand("tensor", left), _operand(kind, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dtype = (a * b if op == "mul" else a + b).dtype  # type: ignore[operator]
            raised = False
        except (RuntimeError, NotImplementedError):
            dtype, raised = torch.result_type(a, b), True  # type: ignore[arg-type]
    assert found.derivation is not None and found.derivation.result == _name(dtype)
    assert (found.op_dtype is None) is raised
    text = derivation_text(found.derivation, "en", raised=raised)
    assert text == expected_caption(left, kind, name)


def test_the_issues_complex_case_and_its_kin() -> None:
    """A 0-dim operand of a higher category does not always give its own dtype: float16 with
    a 0-dim complex128 is complex32 (category from the right, precision from the left)."""
    found = derive("float16", "zero_dim", "complex128", "complex32")
    assert (found.source, found.category_from, found.part_from) == ("neither", "right", "left")
    text = derivation_text(found, "en")
    assert "its own dtype" not in text and "float16, the left tensor's precision" in text
    # the same class elsewhere: a complex tensor with a real one of more precision
    kin = derive("complex64", "tensor", "float64", "complex128")
    assert (kin.source, kin.category_from, kin.part_from) == ("neither", "left", "right")
    # and where it is the right operand's own dtype, the caption says so
    own = derive(
        "int8", "zero_dim", "complex128", _name(_result("int8", "zero_dim", "complex128")[0])
    )
    assert own.source == "right"


# ------------------------------------------------------------------ 2. the quiz
def _run(code: str) -> object:
    """The question's code as the student reads it, with plain torch: its last line's value,
    or ERROR_CHOICE where torch raises."""
    *body, last = code.strip().split("\n")
    scope: dict = {"torch": torch, "io": io}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec("\n".join(body), scope)
            return eval(last, scope)
        except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
            return ERROR_CHOICE


@settings(max_examples=200, deadline=None)
@given(pair=st.sampled_from(CELLS))
def test_random_type_questions_are_answered_by_torch(pair: tuple[str, str, str]) -> None:
    question = types_question(*pair)
    ran = _run(question.code)
    truth = ran if ran == ERROR_CHOICE else _name(ran)  # type: ignore[arg-type]
    assert answer(question) == truth, question.code
    assert truth in question.choices
    assert grade(question, truth).correct


def test_type_questions_where_torch_raises_offer_the_error() -> None:
    raising = [cell for cell in CELLS if _result(*cell)[1]]
    assert raising  # this torch has dtype pairs with no kernel
    for cell in raising:
        question = types_question(*cell)
        assert answer(question) == ERROR_CHOICE
        assert ERROR_CHOICE in question.choices
        assert grade(question, ERROR_CHOICE).correct
        named = _name(
            torch.result_type(*(_operand(k, n) for k, n in (("tensor", cell[0]), cell[1:])))
        )
        assert not grade(question, named).correct  # torch.result_type's name is a wrong guess


@settings(max_examples=150, deadline=None)
@given(section=st.sampled_from(QUIZ_SECTIONS), seed=st.integers(-(10**12), 10**12))
def test_any_seed_draws_a_question_torch_answers(section, seed: int) -> None:
    question = make_question(section, seed)
    same = make_question(section, seed % SEED_COUNT)
    assert (question.code, question.choices) == (same.code, same.choices)
    truth = answer(question)
    assert truth in question.choices
    assert grade(question, truth).correct


# ------------------------------------------------------------------ 3. einsum work
class _Counted:
    """A number that counts the arithmetic done with it."""

    def __init__(self, tally: dict[str, int]) -> None:
        self.tally = tally

    def __mul__(self, other: object) -> _Counted:
        self.tally["mul"] += 1
        return _Counted(self.tally)

    __rmul__ = __mul__

    def __add__(self, other: object) -> _Counted:
        self.tally["add"] += 1
        return _Counted(self.tally)

    __radd__ = __add__


def brute_force_count(loop_code: str, shapes: list[tuple[int, ...]]) -> tuple[int, int]:
    """(multiplies, additions) the page's loop code performs, run on counting numbers."""
    tally = {"mul": 0, "add": 0}

    def filled(shape: tuple[int, ...]) -> object:
        if not shape:
            return _Counted(tally)
        array = np.empty(shape, dtype=object)
        for position in itertools.product(*map(range, shape)):
            array[position] = _Counted(tally)
        return array

    def zeros(*shape: object) -> np.ndarray:
        size = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return np.empty(size, dtype=object)

    scope = {"torch": types.SimpleNamespace(zeros=zeros)}
    scope.update({f"x{i}": filled(shape) for i, shape in enumerate(shapes)})
    exec(loop_code, scope)
    return tally["mul"], tally["add"]


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ran: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if not func._schema.returns or not any(
            r.alias_info is not None for r in func._schema.returns
        ):
            name = str(func.overloadpacket)
            self.ran[name] = self.ran.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def measured(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, dict[str, int]]:
    """FlopCounterMode's total around the real torch.einsum, and the non-view ops it ran."""
    tensors = [torch.randn(shape) for shape in shapes]
    ops = _Ops()
    with FlopCounterMode(display=False) as counter, ops:
        torch.einsum(equation, *tensors)
    return int(counter.get_total_flops()), ops.ran


def expected_work(equation: str, shapes: list[tuple[int, ...]], lang: str = "en") -> str:
    """The comparison sentence, written here from the brute-force count and the counter."""
    plan = einsum(equation, shapes)
    multiplies, additions = brute_force_count(plan.loop_code, shapes)
    loops = multiplies + additions
    counted, _ = measured(equation, shapes)
    if counted == loops:
        return translate("basics.einsum.compare_equal", lang, total=f"{loops:,}")
    key = "compare_fewer" if counted < loops else "compare_more"
    return translate(f"basics.einsum.{key}", lang, difference=f"{abs(counted - loops):,}",
                     total=f"{loops:,}")  # fmt: skip


@st.composite
def equations(draw) -> tuple[str, list[tuple[int, ...]]]:
    """1 to 4 operands of random letters (repeats allowed: diagonals) and sizes, and an
    output of any of them: products with and without sums, sums without products."""
    letters = "abcde"
    sizes = {k: draw(st.integers(0, 3)) for k in letters}
    count = draw(st.integers(1, 4))
    terms = [draw(st.lists(st.sampled_from(letters), max_size=3)) for _ in range(count)]
    used = sorted({k for term in terms for k in term})
    order = draw(st.permutations(used))
    output = order[: draw(st.integers(0, len(order)))]
    equation = ",".join("".join(t) for t in terms) + "->" + "".join(output)
    return equation, [tuple(sizes[k] for k in term) for term in terms]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=equations())
def test_random_einsum_work_is_counted_not_assumed(case) -> None:
    equation, shapes = case
    plan = einsum(equation, shapes)
    assert plan.ok, plan.torch_message
    multiplies, additions = brute_force_count(plan.loop_code, shapes)
    assert (plan.multiplies, plan.additions) == (multiplies, additions), equation
    counted, ran = measured(equation, shapes)
    assert plan.counted_flops == counted
    assert dict(plan.torch_ops) == ran
    text = einsum_markdown(plan, "en")
    assert f"**{multiplies + additions:,}**" in text
    assert expected_work(equation, shapes) in text


EINSUM_WORK = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # one matrix product: the same work
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),  # three operands: torch does less
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("ij->", [(3, 4)]),  # a sum without a product: FlopCounterMode counts nothing
    ("i,j,k->", [(2,), (3,), (4,)]),
    ("ij,jk->", [(2, 3), (3, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),  # a product without a sum
    ("ii->i", [(3, 3)]),  # views only
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUM_WORK)
def test_einsum_work_sentences(equation: str, shapes: list[tuple[int, ...]]) -> None:
    plan = einsum(equation, shapes)
    for lang in ("en", "ko"):
        assert expected_work(equation, shapes, lang) in einsum_markdown(plan, lang)
    _, ran = measured(equation, shapes)
    counted_for = {name for name, flops in plan.flop_ops if flops}
    assert set(plan.uncounted_ops) == set(ran) - counted_for


# ------------------------------------------------------------------ 4. the HDF5 sentence
def _image(array: np.ndarray) -> bytes:
    with h5py.File("t.h5", "w", driver="core", backing_store=False) as out:
        out.create_dataset("coords", data=array)
        out.flush()
        return bytes(out.id.get_file_image())


class _Spans(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.buffer, self.spans = io.BytesIO(data), []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.buffer.seek(offset, whence)

    def tell(self) -> int:
        return self.buffer.tell()

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def,override]
        start = self.buffer.tell()
        count = self.buffer.readinto(buffer)
        self.spans.append((start, start + count))
        return count


def _covered(spans: list[tuple[int, int]], low: int = 0, high: int = 2**62) -> int:
    """Bytes in [low, high) that any span covers, each once (a set, not a sweep)."""
    seen: set[int] = set()
    for start, end in spans:
        seen.update(range(max(start, low), min(end, high)))
    return len(seen)


def _slice_text(start: int | None, stop: int | None, step: int | None) -> str:
    parts = ["" if v is None else str(v) for v in (start, stop)]
    return ":".join(parts + ([] if step is None else [str(step)]))


@settings(max_examples=120, deadline=None)
@given(
    shape=st.lists(st.integers(1, 12), min_size=1, max_size=3).map(tuple),
    start=st.none() | st.integers(-14, 14),
    stop=st.none() | st.integers(-14, 14),
    step=st.none() | st.integers(1, 3),
)
def test_random_hdf5_slices_are_described_by_their_shapes(shape, start, stop, step) -> None:
    x = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    array = x.numpy()
    text = _slice_text(start, stop, step)
    report = hdf5_read(x, text)
    data = _image(array)
    reader = _Spans(data)
    with h5py.File(reader, "r") as inp:
        dataset = inp["coords"]
        offset = dataset.id.get_offset()
        opened = len(reader.spans)
        read = dataset[slice(start, stop, step)]
    part = array[slice(start, stop, step)]
    assert report.tail_shape == part.shape == read.shape
    assert report.whole is (part.shape == array.shape)
    assert report.file_bytes == len(data)
    assert report.open_bytes == _covered(reader.spans[:opened]) <= len(data)
    assert report.tail_bytes == _covered(reader.spans[opened:]) <= len(data)
    assert offset is not None and report.data_offset == offset
    in_data = _covered(reader.spans[opened:], offset, offset + array.nbytes)
    assert report.tail_data_bytes == in_data
    sentences = _hdf5_text(report)
    whole = translate("basics.save.slice_whole", tail=text, shape=str(part.shape))
    assert (whole in sentences) is (part.shape == array.shape)
    rest = array.nbytes - in_data
    if rest:
        assert translate("basics.save.rest", rest=f"{rest:,}") in sentences
    else:
        assert translate("basics.save.rest_none") in sentences


def _hdf5_text(hdf) -> str:
    """The saving text around an HdfReport (the draw function takes a whole SaveReport)."""
    base = serialize((4, 2), "x[:2]", "float32")
    return save_markdown(types.SimpleNamespace(**{**base.__dict__, "hdf5": hdf}), "en")


@pytest.mark.parametrize("shape", [(2, 3), (1, 5), (2,), (3, 3), (1000, 4), (2, 2, 2)])
def test_saving_sentence_follows_the_shape(shape: tuple[int, ...]) -> None:
    """``dset[-2:]`` of a dataset with at most two rows is the whole dataset: the sentence
    says so, and never that the rest was not read; every byte figure fits in the file."""
    report = serialize(shape, "x[:1]", "float32")
    hdf = report.hdf5
    whole = shape[0] <= 2
    assert hdf.whole is whole
    text = save_markdown(report, "en")
    assert (
        translate("basics.save.slice_whole", tail="-2:", shape=str(hdf.tail_shape)) in text
    ) is whole
    assert hdf.open_bytes <= hdf.file_bytes and hdf.tail_bytes <= hdf.file_bytes
    if whole:
        assert translate("basics.save.rest_none") in text


def test_counting_reader_counts_distinct_bytes() -> None:
    reader = CountingReader(bytes(100))
    for start in (0, 10, 0, 50):
        reader.seek(start)
        reader.read(20)
    assert reader.bytes_read == 80 and reader.distinct() == 50  # [0, 30) and [50, 70)
    assert reader.distinct(2) == 40 and reader.distinct(0, 2) == 30
    assert reader.distinct(within=(15, 55)) == 20
