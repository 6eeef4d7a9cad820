"""Pure builders for lessons: progress, option labels, the end summary. No Streamlit."""

from __future__ import annotations

from dataclasses import dataclass

from torchatlas.i18n import translate
from torchatlas.lessons import Lesson

# Values facts return that read better as words than as code.
WORDS = ("error", "ok", "True", "False", "None", "TypeError")


def option_label(option: str, lang: str) -> str:
    """An option as the student reads it: code in backticks, or a few words for ``error``,
    ``ok``, ``True``…, with the value itself beside them."""
    if option in WORDS:
        return translate(f"lessons.value.{option}", lang)
    return f"`{option}`"


def progress_text(lesson: Lesson, number: int, lang: str) -> str:
    return translate("lessons.banner.progress", lang, step=number, total=len(lesson.steps))


@dataclass(frozen=True)
class Summary:
    right: int
    asked: int  # questions in the lesson
    answered: int
    revisit: tuple[int, ...]  # steps whose question was missed or left unanswered

    @property
    def percent(self) -> int:
        return round(100 * self.right / self.asked) if self.asked else 100


def summary(lesson: Lesson, answers: dict[int, int]) -> Summary:
    """Score and steps to revisit, from the options picked (step number → option index)."""
    right = answered = 0
    revisit: list[int] = []
    for step in lesson.steps:
        if step.question is None:
            continue
        picked = answers.get(step.number)
        if picked is not None:
            answered += 1
        if picked == step.question.answer:
            right += 1
        else:
            revisit.append(step.number)
    return Summary(right, lesson.questions, answered, tuple(revisit))


def verdict_text(lesson: Lesson, number: int, picked: int, lang: str) -> tuple[bool, str]:
    """Whether the pick was right, and the sentence saying so with torch's answer."""
    question = lesson.step(number).question
    assert question is not None
    right = picked == question.answer
    key = "lessons.question.right" if right else "lessons.question.wrong"
    return right, translate(key, lang, answer=option_label(question.value, lang))
