"""Pure builders for lessons: progress, option labels, torch's answer in a sentence, the end
summary. No Streamlit.

An option is shown three ways: :func:`option_label` as Markdown (a radio's label, where code
renders as code), :func:`option_text` as plain text (a chart's axis, a table cell, a CSV
cell: places that would show a backtick literally), and, for torch's answer,
:func:`answer_key` picks the verdict sentence that reads right for its kind (a value, "it
runs", an error, a named exception) in every language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchatlas.i18n import translate
from torchatlas.lessons import Lesson
from torchatlas.lessons.kinds import is_right

# Values facts return that read better as words than as code.
WORDS = ("error", "ok", "True", "False", "None", "TypeError")
# How torch's answer is said: a value ("torch says `(2, 3)`"), "ok" (it runs), "error" (torch
# refuses) or "raises" (it refuses with a named exception, ``TypeError``). Each kind but a
# value has its own verdict sentences (``<key>_ok``, ``<key>_error``, ``<key>_raises``): "torch
# says torch raises an error" is what one template for all of them read like.
VALUE, RUNS, ERROR, RAISES = "value", "ok", "error", "raises"
_EXCEPTION = re.compile(r"^[A-Z][A-Za-z]*(Error|Exception)$")
_CODE_SPAN = re.compile(r"`([^`]*)`")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")


def option_label(option: str, lang: str) -> str:
    """An option as the student reads it in a radio (Markdown): code in backticks, or a few
    words for ``error``, ``ok``, ``True``…"""
    if option in WORDS:
        return translate(f"lessons.value.{option}", lang)
    return f"`{option}`"


def plain(markdown: str) -> str:
    """``markdown`` as plain text: code spans keep their text without backticks, bold
    loses its asterisks (a chart label, a table cell and a CSV cell show text, not Markdown)."""
    return _EMPHASIS.sub(r"\2", _CODE_SPAN.sub(r"\1", markdown))


def option_text(option: str, lang: str) -> str:
    """An option as plain text (a chart's label, a table or CSV cell)."""
    return plain(option_label(option, lang))


def answer_kind(option: str) -> str:
    """How torch's answer ``option`` is said (:data:`VALUE`, :data:`RUNS`, :data:`ERROR` or
    :data:`RAISES`)."""
    if option == "ok":
        return RUNS
    if option == "error":
        return ERROR
    if _EXCEPTION.match(option):
        return RAISES
    return VALUE


def answer_key(key: str, option: str) -> str:
    """The translation key of verdict sentence ``key`` (``lessons.question.right``…) for torch's
    answer ``option``: the key itself for a value, ``<key>_<kind>`` for the others."""
    kind = answer_kind(option)
    return key if kind == VALUE else f"{key}_{kind}"


def answer_params(option: str, lang: str) -> dict[str, str]:
    """What a verdict sentence fills in: ``answer`` (the option as Markdown) and ``error``
    (a named exception, as code)."""
    return {"answer": option_label(option, lang), "error": f"`{option}`"}


def verdict_sentence(key: str, option: str, lang: str, **params: str) -> str:
    """Verdict sentence ``key`` (e.g. ``lessons.question.right``) about torch's answer
    ``option``, worded for its kind, in Markdown."""
    return translate(answer_key(key, option), lang, **answer_params(option, lang), **params)


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
        if is_right(step.question, picked):
            right += 1
        else:
            revisit.append(step.number)
    return Summary(right, lesson.questions, answered, tuple(revisit))


def verdict_text(lesson: Lesson, number: int, picked: int, lang: str) -> tuple[bool, str]:
    """Whether the pick was right, and the sentence saying so with torch's answer (Markdown,
    worded for the answer's kind in every language)."""
    question = lesson.step(number).question
    assert question is not None and question.answer is not None
    right = picked == question.answer
    key = "lessons.question.right" if right else "lessons.question.wrong"
    return right, verdict_sentence(key, question.options[question.answer], lang)
