"""Question kinds, one module each, declared once here: every part that reads a question
(the loader and its export, solo lessons, class mode, its CSV, the author page, the load tool)
asks :data:`KINDS` what a kind is. To add a kind, see docs/CONTRIBUTING.md "Add a question
kind": its module, its translations (``lessons.kind.<name>.*``) and its tests.

>>> KINDS["predict"].answered_with  # doctest: +SKIP
'option'
"""

from __future__ import annotations

from typing import Any

from torchatlas.lessons.kinds import exercise, fact, predict
from torchatlas.lessons.kinds.base import (
    CODE,
    OPTION,
    TEXT_KEYS,
    AnyQuestion,
    Context,
    QuestionKind,
)
from torchatlas.lessons.parsing import LessonError, only

KINDS: dict[str, QuestionKind] = {
    kind.name: kind for kind in (fact.KIND, predict.KIND, exercise.KIND)
}
DEFAULT_KIND = "fact"  # the repository's lessons were written before kinds had names


def kind_of(question: AnyQuestion) -> QuestionKind:
    return KINDS[question.kind]


PASSED, NOT_PASSED = 1, 0  # what a lesson records for a question answered with code


def is_right(question: AnyQuestion, picked: int | None) -> bool:
    """Whether a recorded answer is right: the right option, or a code answer that passed."""
    if picked is None:
        return False
    if kind_of(question).answered_with == CODE:
        return picked == PASSED
    return picked == question.answer


def parse_question(node: Any, where: str, context: Context) -> AnyQuestion | None:
    """A step's question table as its kind's question (None when the step asks nothing)."""
    if node is None:
        return None
    if not isinstance(node, dict):
        raise LessonError("bad_question", where=where)
    name = node.get("kind", DEFAULT_KIND)
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise LessonError("unknown_kind", where=where, kind=str(name)[:40])
    only(node, where, set(kind.keys) | {"kind"})
    return kind.parse(node, where, context)


def export_question(question: AnyQuestion, languages: tuple[str, ...]) -> dict[str, Any]:
    """The question's table as :func:`parse_question` reads it (a round trip is exact)."""
    table: dict[str, Any] = {}
    if question.kind != DEFAULT_KIND:
        table["kind"] = question.kind
    table.update(kind_of(question).export(question))
    for lang in languages:
        table[lang] = {key: getattr(question, key)[lang] for key in TEXT_KEYS}
    return table


__all__ = [
    "CODE",
    "DEFAULT_KIND",
    "KINDS",
    "NOT_PASSED",
    "OPTION",
    "PASSED",
    "AnyQuestion",
    "Context",
    "QuestionKind",
    "export_question",
    "is_right",
    "kind_of",
    "parse_question",
]
