"""Predict, then reveal: questions drawn from random shapes and chains, graded by live torch.

A question stores only its inputs (shape, ops, element); :func:`grade` runs the chain again
and compares the student's answer with what PyTorch reports, so no answer is ever stored or
hard-coded. The grade is the kit's (:mod:`torchatlas.quiz`): a pick among :data:`CHOICES`
for the outcome and will-it-work questions, typed numbers read as integers otherwise. Every
question is run by torch before it is returned (:func:`answerable`), and the outcome question
offers torch's refusal among its choices.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from torchatlas.quiz import MAX_ANSWER_CHARS, Grade, grade_choice, grade_text
from torchatlas.strides.errors import ErrorCode, OpParseError
from torchatlas.strides.trace import Step, StorageKind, trace


class QuestionKind(StrEnum):
    VIEW_OR_COPY = "view_or_copy"  # does the last op make a new view, a copy, or return its input?
    NEW_STRIDE = "new_stride"  # the stride after the last op
    VIEW_WORKS = "view_works"  # will the last .view() work?
    WHICH_CELL = "which_cell"  # the storage cell one element reads


KINDS = tuple(QuestionKind)
# The questions answered by picking one of a few words (the page shows them translated).
# The last op's outcome is one of the three a step's label uses (its
# :attr:`~torchatlas.strides.trace.Step.storage_kind`: a new view, a copy, or its input
# itself), or torch's refusal.
ERROR = "error"
CHOICES: dict[QuestionKind, tuple[str, ...]] = {
    QuestionKind.VIEW_OR_COPY: (
        StorageKind.VIEW.value,
        StorageKind.COPY.value,
        StorageKind.SAME.value,
        ERROR,
    ),
    QuestionKind.VIEW_WORKS: ("yes", "no"),
}
MAX_TRIES = 60
# The longest answer graded, the kit's answer box's (a stride of rank ≤ 4 or a cell number
# needs far less). Longer answers are refused before they are read.
MAX_ANSWER_TEXT = MAX_ANSWER_CHARS
MAX_ANSWER_DIGITS = 20


@dataclass(frozen=True)
class Question:
    kind: QuestionKind
    seed: int
    shape: tuple[int, ...]
    dtype: str
    ops: tuple[str, ...]
    element: tuple[int, ...] | None = None  # for which_cell

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", QuestionKind(self.kind))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _random_shape(rng: random.Random) -> tuple[int, ...]:
    rank = rng.choice((2, 2, 3, 3, 4))
    return tuple(rng.randint(1 if rank > 2 else 2, 5) for _ in range(rank))


def _random_op(rng: random.Random, size: tuple[int, ...], views_only: bool = False) -> str:
    """One op that fits ``size`` (it may still fail; the caller checks with live torch)."""
    rank = len(size)
    dim = rng.randrange(rank) if rank else 0
    options: list[str] = []
    if rank >= 2:
        a, b = rng.sample(range(rank), 2)
        options += [".t()" if rank == 2 else f".transpose({a}, {b})"] * 2
        perm = list(range(rank))
        rng.shuffle(perm)
        options.append(f".permute({', '.join(map(str, perm))})")
        options.append(".diagonal()")
    if rank:
        n = size[dim]
        step = rng.choice((2, 3))
        start = rng.randrange(n) if n > 1 else 0
        prefix = ":, " * dim
        options += [f"[{prefix}{start}::{step}]", f"[{prefix}{start}:]"]
        options.append(f".narrow({dim}, {start}, {max(1, n - start - 1) if n > 1 else 1})")
        options.append(f".select({dim}, {rng.randrange(n)})")
        options.append(f".unsqueeze({rng.randrange(rank + 1)})")
        if 1 in size:
            target = [str(rng.randint(2, 4)) if s == 1 else "-1" for s in size]
            options.append(f".expand({', '.join(target)})")
        if n >= 2:
            width = rng.randint(1, n)
            options.append(f".unfold({dim}, {width}, {rng.randint(1, 2)})")
    if not views_only:
        options += [".contiguous()", ".clone()", f".flip({dim})", ".reshape(-1)", ".flatten()"]
    return rng.choice(options)


def _chain(
    rng: random.Random, shape: tuple[int, ...], dtype: str, length: int, views_only: bool
) -> list[str]:
    """A chain of ``length`` ops, each checked with live torch (in ``dtype``) as it is drawn:
    an op with no kernel for the dtype is never asked about."""
    ops: list[str] = []
    size = shape
    tries = 0
    while len(ops) < length and tries < MAX_TRIES:
        tries += 1
        op = _random_op(rng, size, views_only)
        last = trace(shape, dtype, [*ops, op])[-1]
        if last.error is None and last.size is not None and 0 < (last.numel or 0) <= 256:
            ops.append(op)
            size = last.size
    return ops


def make_question(
    seed: int, kind: QuestionKind | str | None = None, dtype: str = "float32"
) -> Question:
    """A question for ``seed`` on a start tensor of ``dtype`` (the same seed and dtype always
    give the same question). Sizes, strides and cells count elements, so the answers are
    the same in every dtype whose kernels the chain needs."""
    rng = random.Random(seed)
    kind = QuestionKind(kind or rng.choice(KINDS))  # ValueError for an unknown kind
    for _ in range(MAX_TRIES):
        shape = _random_shape(rng)
        if kind is QuestionKind.VIEW_OR_COPY:
            ops = _chain(rng, shape, dtype, rng.randint(1, 2), views_only=False)
        elif kind is QuestionKind.NEW_STRIDE:
            ops = _chain(rng, shape, dtype, 1, views_only=rng.random() < 0.7)
        elif kind is QuestionKind.VIEW_WORKS:
            ops = _chain(rng, shape, dtype, rng.randint(1, 2), views_only=True)
            ops.append(rng.choice((".view(-1)", ".view(-1)", f".view({shape[0]}, -1)")))
        else:
            ops = _chain(rng, shape, dtype, rng.randint(1, 2), views_only=True)
        if not ops:
            continue
        element = None
        steps = trace(shape, dtype, ops)
        last = steps[-1]
        if kind is QuestionKind.WHICH_CELL:
            if last.error is not None or not last.size or not last.numel:
                continue
            element = tuple(rng.randrange(n) for n in last.size)
        question = Question(kind, seed, shape, dtype, tuple(ops), element)
        if answerable(question, steps):  # torch ran it: its answer is among the options
            return question
    raise RuntimeError(f"could not draw a {kind} question for seed {seed}")


def answerable(question: Question, steps: Sequence[Step]) -> bool:
    """Whether torch's answer for ``steps`` (the question's chain as torch ran it) is one a
    student can give: among the choices, or a typed answer read from a step that ran."""
    try:
        right = expected(question, list(steps))
    except (RuntimeError, IndexError, TypeError):
        return False
    options = CHOICES.get(question.kind)
    return right in options if options is not None else bool(right)


def _parse_ints(text: str) -> tuple[int, ...] | None:
    numbers = re.findall(r"-?\d+", text)
    if not numbers or re.search(r"[^\d\s,()\[\]\-]", text):
        return None
    if any(len(number) > MAX_ANSWER_DIGITS for number in numbers):
        return None  # no stride or cell here has that many digits (and int() would refuse)
    return tuple(int(n) for n in numbers)


def expected(question: Question, steps: list[Step]) -> str:
    """The right answer, read from live torch (``steps`` is the chain traced now)."""
    last = steps[-1]
    if question.kind is QuestionKind.VIEW_WORKS:
        return "no" if last.error is not None else "yes"
    if question.kind is QuestionKind.VIEW_OR_COPY:
        # the step label's own word (identity, then storage), or torch's refusal
        return ERROR if last.storage_kind is None else last.storage_kind.value
    if last.error is not None:
        raise RuntimeError(f"question chain failed: {last.error.code}")
    if question.kind is QuestionKind.NEW_STRIDE:
        return "(" + ", ".join(map(str, last.stride or ())) + ")"
    assert question.element is not None
    cell: Any = last.storage_indices
    for i in question.element:
        cell = cell[i]
    return str(cell)


def grade(question: Question, answer: str, *, max_chars: int | None = MAX_ANSWER_TEXT) -> Grade:
    """Grade ``answer`` against PyTorch, running the question's chain now. An answer longer
    than ``max_chars`` raises :class:`OpParseError` (``answer_too_long``)."""
    if max_chars is not None and len(answer) > max_chars:
        raise OpParseError(ErrorCode.ANSWER_TOO_LONG, length=f"{len(answer):,}", limit=max_chars)
    return grade_steps(question, trace(question.shape, question.dtype, list(question.ops)), answer)


def grade_steps(
    question: Question,
    steps: Sequence[Step],
    answer: str,
    *,
    max_chars: int | None = MAX_ANSWER_TEXT,
) -> Grade:
    """Grade ``answer`` against ``steps``, the question's chain as live torch ran it (in the
    room: once, in a sandbox child, when the question was drawn). Refuses an answer longer
    than ``max_chars`` like :func:`grade`."""
    if max_chars is not None and len(answer) > max_chars:
        raise OpParseError(ErrorCode.ANSWER_TOO_LONG, length=f"{len(answer):,}", limit=max_chars)
    right = expected(question, list(steps))
    options = CHOICES.get(question.kind)
    if options is not None:
        given = answer.strip().lower()
        return grade_choice(options, options.index(given) if given in options else -1, right)
    return grade_text(answer, right, read=_read_ints)


def _read_ints(text: str) -> tuple[int, ...]:
    """A typed stride or cell as integers (``"(3, 1)"``, ``"3,1"``, ``"[3 1]"``); a
    ValueError (a wrong answer) for anything else."""
    parsed = _parse_ints(text)
    if parsed is None:
        raise ValueError(text[:20])
    return parsed
