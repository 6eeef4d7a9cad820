"""Predict, then reveal: one question kind per section, drawn from a seed, graded by torch.

A question keeps its inputs and its choices; :func:`answer` runs torch again to find which
choice is right, so no answer is stored or hard-coded; :func:`grade` grades a picked choice
with the kit's :func:`torchatlas.quiz.grade_choice` (the page asks through
``components.kit.predict_reveal``).
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode
from torchatlas.basics.indexing import index
from torchatlas.basics.promotion import DTYPES, TABLE_COLUMNS, DTypeSpec, OperandKind
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
    section = Section(section)
    rng = random.Random(f"{section}:{seed}")
    if section is Section.TYPES:
        return _types(rng, seed)
    if section is Section.BROADCASTING:
        return _broadcasting(rng, seed)
    if section is Section.EINSUM:
        return _einsum(rng, seed)
    if section is Section.INDEXING:
        return _indexing(rng, seed)
    return _saving(rng, seed)


def _types(rng: random.Random, seed: int) -> Question:
    left = rng.choice([name for name in DTYPES if name != "bool"])
    kind, right = rng.choice(TABLE_COLUMNS)
    a = DTypeSpec(OperandKind.TENSOR, left, 1)
    b = DTypeSpec(kind, right, True if right == "bool" else 1)
    scalar_default = {"bool": "bool", "int": "int64", "float": "float32", "complex": "complex64"}
    natural = scalar_default.get(right, right)
    choices = {left, natural, "float32", "float64", "int64"}
    choices.add(str(torch.result_type(a.make(), b.make())).removeprefix("torch."))  # type: ignore[arg-type]
    ordered = sorted(choices, key=list(DTYPES).index if all(c in DTYPES for c in choices) else str)
    return Question(Section.TYPES, seed, f"({a.code} + {b.code}).dtype", tuple(ordered), (a, b))


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
    correct = str(tuple(torch.einsum(equation, *tensors).shape))
    everything = tuple(sorted({s for shape in shapes for s in shape}, reverse=True))
    choices = {correct, str(shapes[0]), str(shapes[0][::-1]), str(everything[:2])}
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
    choices = (VIEW, COPY)
    if not index(shape, expression).ok:  # never a question whose code torch refuses
        choices = (VIEW, COPY, ERROR_CHOICE)
    return Question(Section.INDEXING, seed, code, choices, shapes=(shape,), text=expression)


def _saving(rng: random.Random, seed: int) -> Question:
    rows, columns = rng.choice((1000, 2000, 5000)), rng.choice((2, 4, 8))
    keep = rng.choice((1, 2, 10))
    clone = rng.random() < 0.4
    expression = f"x[:{keep}]" + (".clone()" if clone else "")
    view_bytes = keep * columns * 4
    storage = rows * columns * 4
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
    """The right choice, asked of torch now."""
    if question.section is Section.TYPES:
        a, b = (operand.make() for operand in question.operands)
        return str((a + b).dtype).removeprefix("torch.")  # type: ignore[operator,union-attr]
    if question.section is Section.BROADCASTING:
        a, b = (torch.empty(shape, device="meta") for shape in question.shapes)
        try:
            return str(tuple((a + b).shape))
        except RuntimeError:
            return ERROR_CHOICE
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
    view_bytes, storage = part.numel() * 4, x.numel() * 4
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
