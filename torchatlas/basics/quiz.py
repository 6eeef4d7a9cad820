"""Predict, then reveal: one question kind per section, drawn from a seed, graded by torch.

A question keeps its inputs and its choices; :func:`answer` runs torch again to find which
choice is right, so no answer is stored or hard-coded; :func:`grade` grades a picked choice
with the kit's :func:`torchatlas.quiz.grade_choice` (the page asks through
``components.kit.predict_reveal``).

Every question is answered by torch before it is shown (:func:`make_question`): where torch
raises (a dtype pair with no kernel, shapes that do not broadcast), the answer is
:data:`ERROR_CHOICE` and it is among the choices; whatever torch answers is always one of
them. Each section has :data:`SEED_COUNT` questions: a seed outside ``range(SEED_COUNT)``
draws the question of ``seed % SEED_COUNT``, so a test can ask every one of them.
"""

from __future__ import annotations

import contextlib
import io
import math
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode
from torchatlas.basics.indexing import index
from torchatlas.basics.promotion import DTYPES, TABLE_COLUMNS, DTypeSpec, OperandKind, own_dtype
from torchatlas.basics.saving import saved_bytes
from torchatlas.quiz import Grade, grade_choice


class Section(StrEnum):
    TYPES = "types"
    BROADCASTING = "broadcasting"
    EINSUM = "einsum"
    INDEXING = "indexing"
    SAVING = "saving"


ERROR_CHOICE = "error"
VIEW, COPY = "view", "copy"
SEED_COUNT = 512  # questions per section; seeds wrap around
# What torch raises for an op it refuses (NotImplementedError: no kernel for the dtype).
TORCH_ERRORS = (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError)
QUIZ_SECTIONS = (Section.TYPES, Section.BROADCASTING, Section.EINSUM, Section.INDEXING,
                 Section.SAVING)  # fmt: skip

_INDEX_TEMPLATES = (
    "x[1]", "x[:, 0]", "x[::2]", "x[None]", "x[..., 1]", "x[[0, 1]]", "x[x > 3]",
    "x[:, [0, 2]]", "x[1:, None]", "x[x % 2 == 0]", "x[0, 1]", "x[[True, False]]",
)  # fmt: skip
_EINSUM_TEMPLATES = (
    ("ij,jk->ik", 2),
    ("ij->ji", 1),
    ("ii->i", 1),
    ("bij,bjk->bik", 2),
    ("i,j->ij", 2),
    ("ij->", 1),
    ("...chw,c->...hw", 2),
)


@dataclass(frozen=True)
class Question:
    section: Section
    seed: int
    code: str  # what the student reads
    choices: tuple[str, ...]
    # the inputs, kept to grade with torch
    operands: tuple[DTypeSpec, ...] = ()
    shapes: tuple[tuple[int, ...], ...] = ()
    text: str = ""  # an index expression or an einsum equation


def _shape_args(shape: tuple[int, ...]) -> str:
    return ", ".join(map(str, shape)) if len(shape) != 1 else f"{shape[0]}"


def make_question(section: Section | str, seed: int) -> Question:
    """The question ``seed`` draws in ``section``, answered by torch before it is returned:
    its answer (:data:`ERROR_CHOICE` where torch raises) is always among its choices."""
    section = Section(section)
    rng = random.Random(f"{section}:{seed % SEED_COUNT}")
    if section is Section.TYPES:
        question = _types(rng, seed)
    elif section is Section.BROADCASTING:
        question = _broadcasting(rng, seed)
    elif section is Section.EINSUM:
        question = _einsum(rng, seed)
    elif section is Section.INDEXING:
        question = _indexing(rng, seed)
    else:
        question = _saving(rng, seed)
    return _answerable(question)


def _answerable(question: Question) -> Question:
    """The question with torch's answer among its choices (added when a generator's guesses
    missed it): no question is shown that its own grading could not grade."""
    truth = answer(question)
    if truth in question.choices:
        return question
    return replace(question, choices=_ordered({*question.choices, truth}))


def _ordered(choices: set[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Dtypes in the room's order, then other names, then the error choice last."""
    order = list(DTYPES)

    def key(choice: str) -> tuple[int, int, str]:
        if choice == ERROR_CHOICE:
            return (2, 0, choice)
        return (0, order.index(choice), choice) if choice in order else (1, 0, choice)

    return tuple(sorted(choices, key=key))


# Every (left dtype, right operand) pair of the promotion table, in an order of their own:
# the first len(TYPE_PAIRS) seeds ask each pair once.
TYPE_PAIRS: tuple[tuple[str, OperandKind, str], ...] = tuple(
    random.Random("types:pairs").sample(
        [(left, kind, right) for left in DTYPES for kind, right in TABLE_COLUMNS],
        len(DTYPES) * len(TABLE_COLUMNS),
    )
)


def types_question(left: str, kind: OperandKind | str, right: str, seed: int = 0) -> Question:
    """``(left_tensor + right).dtype``: the choices are guesses a student might make (each
    operand's own dtype, torch.result_type's name, common dtypes, "torch raises") and torch's
    real answer, which is :data:`ERROR_CHOICE` where the op raises (the guesses then include
    the dtype torch.result_type names, which no kernel computes)."""
    kind = OperandKind(kind)
    a = DTypeSpec(OperandKind.TENSOR, left, True if left == "bool" else 1)
    b = DTypeSpec(kind, right, True if right == "bool" else 1)
    left_operand, right_operand = a.make(), b.make()
    # "torch raises" is always offered: shown only where it is the truth, it would give it away
    guesses = {left, own_dtype(kind, right), "float32", "float64", "int64", ERROR_CHOICE}
    with contextlib.suppress(*TORCH_ERRORS):
        guesses.add(_dtype_name(torch.result_type(left_operand, right_operand)))  # type: ignore[arg-type]
    question = Question(Section.TYPES, seed, f"({a.code} + {b.code}).dtype", (), (a, b))
    return replace(question, choices=_ordered({*guesses, answer(question)}))


def _types(rng: random.Random, seed: int) -> Question:
    del rng  # the seed walks the pairs: every pair of the table is asked
    left, kind, right = TYPE_PAIRS[seed % SEED_COUNT % len(TYPE_PAIRS)]
    return types_question(left, kind, right, seed)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _random_shape(rng: random.Random, rank: int) -> tuple[int, ...]:
    return tuple(rng.choice((1, 1, 2, 3, 4)) for _ in range(rank))


def _broadcasting(rng: random.Random, seed: int) -> Question:
    first = _random_shape(rng, rng.randint(1, 4))
    second = list(first[-rng.randint(1, len(first)) :])
    for position in range(len(second)):
        if rng.random() < 0.4:
            second[position] = rng.choice((1, 2, 3))
    shapes = (first, tuple(second))
    if rng.random() < 0.5:
        shapes = shapes[::-1]
    try:
        correct = str(tuple(torch.broadcast_shapes(*shapes)))
    except RuntimeError:
        correct = ERROR_CHOICE
    wrong = str(tuple(max(a, b) for a, b in zip(first, first, strict=True)))
    choices = {correct, ERROR_CHOICE, wrong, str(shapes[0]), str(shapes[1])}
    code = (f"a = torch.ones({_shape_args(shapes[0])})\nb = torch.ones({_shape_args(shapes[1])})\n"
            "(a + b).shape")  # fmt: skip
    return Question(Section.BROADCASTING, seed, code, tuple(sorted(choices)), shapes=shapes)


def _einsum(rng: random.Random, seed: int) -> Question:
    equation, count = rng.choice(_EINSUM_TEMPLATES)
    sizes = {letter: rng.choice((2, 3, 4)) for letter in "bchijkw"}
    left = equation.split("->")[0].split(",")
    shapes = []
    for term in left:
        prefix = (2,) if term.startswith("...") else ()
        shapes.append(prefix + tuple(sizes[c] for c in term.replace("...", "")))
    tensors = [torch.empty(shape, device="meta") for shape in shapes[:count]]
    try:
        correct = str(tuple(torch.einsum(equation, *tensors).shape))
    except TORCH_ERRORS:
        correct = ERROR_CHOICE
    everything = tuple(sorted({s for shape in shapes for s in shape}, reverse=True))
    choices = {correct, str(shapes[0]), str(shapes[0][::-1]), str(everything[:2]), ERROR_CHOICE}
    names = ", ".join(f"torch.ones({_shape_args(s)})" for s in shapes)
    code = f"torch.einsum({equation!r}, {names}).shape"
    return Question(Section.EINSUM, seed, code, tuple(sorted(choices)), shapes=tuple(shapes),
                    text=equation)  # fmt: skip


def _indexing(rng: random.Random, seed: int) -> Question:
    shape = (rng.choice((2, 3)), rng.choice((3, 4)))
    expression = rng.choice(_INDEX_TEMPLATES)
    if expression == "x[[True, False]]":
        # a bool list must be as long as the dimension it masks (torch refuses otherwise)
        mask = ", ".join("True" if i % 2 == 0 else "False" for i in range(shape[0]))
        expression = f"x[[{mask}]]"
    numel = math.prod(shape)
    code = f"x = torch.arange({numel}).reshape({_shape_args(shape)})\ny = {expression}"
    choices = (VIEW, COPY, ERROR_CHOICE)  # torch refuses some (answer() asks it)
    return Question(Section.INDEXING, seed, code, choices, shapes=(shape,), text=expression)


def _saving(rng: random.Random, seed: int) -> Question:
    rows, columns = rng.choice((1000, 2000, 5000)), rng.choice((2, 4, 8))
    keep = rng.choice((1, 2, 10))
    clone = rng.random() < 0.4
    expression = f"x[:{keep}]" + (".clone()" if clone else "")
    # the two sizes a student weighs, asked of torch: the slice's own bytes, x's storage
    x = torch.zeros(rows, columns)
    part = x[:keep]
    view_bytes = part.numel() * part.element_size()
    storage = x.untyped_storage().nbytes()
    choices = (_about(view_bytes), _about(storage))
    code = (f"x = torch.zeros({rows}, {columns})\nbuffer = io.BytesIO()\n"
            f"torch.save({expression}, buffer)\nbuffer.getbuffer().nbytes")  # fmt: skip
    return Question(Section.SAVING, seed, code, choices, shapes=((rows, columns),),
                    text=f"{keep}:{int(clone)}")  # fmt: skip


def _about(size: int) -> str:
    """A size choice, the data alone: "≈ 32 B" (the file adds a small header to it)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"≈ {size / scale:.3g} {unit}"
    return f"≈ {size} B"


def answer(question: Question) -> str:
    """The right choice, asked of torch now: :data:`ERROR_CHOICE` where torch raises."""
    try:
        return _torch_answer(question)
    except TORCH_ERRORS:
        return ERROR_CHOICE


def _torch_answer(question: Question) -> str:
    if question.section is Section.TYPES:
        a, b = (operand.make() for operand in question.operands)
        with warnings.catch_warnings():  # half-precision complex is "experimental"
            warnings.simplefilter("ignore", UserWarning)
            return _dtype_name((a + b).dtype)  # type: ignore[operator,union-attr]
    if question.section is Section.BROADCASTING:
        a, b = (torch.empty(shape, device="meta") for shape in question.shapes)
        return str(tuple((a + b).shape))
    if question.section is Section.EINSUM:
        count = question.text.count(",") + 1
        tensors = [torch.ones(shape) for shape in question.shapes[:count]]
        return str(tuple(torch.einsum(question.text, *tensors).shape))
    if question.section is Section.INDEXING:
        result = index(question.shapes[0], question.text)
        if not result.ok:
            return ERROR_CHOICE
        return VIEW if result.is_view else COPY
    keep, clone = (int(part) for part in question.text.split(":"))
    x = torch.zeros(question.shapes[0])
    part = x[:keep].clone() if clone else x[:keep]
    measured = saved_bytes(part)
    buffer = io.BytesIO()
    torch.save(torch.zeros(0), buffer)  # the header alone, to compare the data part
    data = measured - buffer.getbuffer().nbytes
    view_bytes, storage = part.numel() * part.element_size(), x.untyped_storage().nbytes()
    closer = 0 if abs(data - view_bytes) <= abs(data - storage) else 1
    return question.choices[closer]


def grade(question: Question, picked: int | str, shown: Sequence[str] | None = None) -> Grade:
    """Grade a prediction: ``picked`` is a choice's position (or the choice itself), graded
    against torch's answer asked now. ``shown`` words the choices as the page shows them (the
    grade then carries those words); by default the choices themselves."""
    choices = question.choices
    if isinstance(picked, str):
        if picked not in choices:
            raise BasicsValueError(ErrorCode.NOT_A_CHOICE, given=picked[:40])
        picked = choices.index(picked)
    if not 0 <= picked < len(choices):
        raise BasicsValueError(ErrorCode.NOT_A_CHOICE, given=str(picked)[:40])
    labels = tuple(choices if shown is None else shown)
    if len(labels) != len(choices):
        raise ValueError("one shown label per choice")
    return grade_choice(labels, picked, labels[choices.index(answer(question))])
