"""Predict, then reveal: one grade for every room's questions, with torch's answer.

A room asks a question whose answer torch computes (a stride after a view, a result dtype, a
``.grad`` after backward); the visitor predicts first, then sees torch's answer. The room
computes ``expected`` with torch and compares with :func:`grade_text` (typed answers, with
the room's own reading of them) or :func:`grade_choice` (one of a few options).

>>> grade_text(" (3, 1) ", "(3, 1)").correct
True
>>> ints = lambda s: tuple(int(p) for p in s.strip("() ").split(","))
>>> grade_text("3,1", "(3, 1)", read=ints).correct
True
>>> grade_choice(("float32", "float64"), 1, "float64")
Grade(correct=True, expected='float64', given='float64')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_ANSWER_CHARS = 200  # a typed prediction; longer text is refused before it is read


@dataclass(frozen=True)
class Grade:
    """A prediction and torch's answer: ``given`` as the visitor wrote or picked it,
    ``expected`` as torch computed it (both as shown)."""

    correct: bool
    expected: str
    given: str


def _plain(text: str) -> str:
    return " ".join(text.strip().lower().split())


def grade_text(given: str, expected: str, *, read: Callable[[str], Any] | None = None) -> Grade:
    """Grade a typed answer: equal once ``read`` (default: case and spacing ignored) turns
    both into values; an answer ``read`` cannot read is wrong. ``given`` longer than
    :data:`MAX_ANSWER_CHARS` is wrong without being read."""
    given = given.strip()
    if len(given) > MAX_ANSWER_CHARS:
        return Grade(False, expected, given[:MAX_ANSWER_CHARS] + "…")
    reader = read or _plain
    try:
        correct = reader(given) == reader(expected)
    except (ValueError, TypeError, OverflowError):
        correct = False
    return Grade(correct, expected, given)


def grade_choice(options: Sequence[str], picked: int, expected: str) -> Grade:
    """Grade a picked option (an index into ``options``) against torch's answer, which must
    be one of the options."""
    if expected not in options:
        raise ValueError(f"torch's answer {expected!r} is not among the options")
    given = options[picked] if 0 <= picked < len(options) else ""
    return Grade(given == expected, expected, given)
