"""Pure text builders of the author page (no Streamlit): where a refusal is, what a step's
link shows, what a code question asks, a repository step's name, and torch's answers after a
check."""

from __future__ import annotations

import re
from typing import Any

from torchatlas.i18n import translate
from torchatlas.lessons import Lesson

_WHERE = re.compile(r"steps\[(\d+)\](\.question)?")


def where_words(where: str, lang: str = "en") -> str:
    """``u_draft00.steps[3].question`` as "Step 3, question" (the teacher's words)."""
    found = _WHERE.search(where)
    if found is None:
        return translate("author.lesson.header", lang)
    words = translate("author.steps.step", lang, number=found.group(1), title="").rstrip(": ")
    if found.group(2):
        words += " · " + translate("author.question.kind", lang)
    return words


def link_summary(link: dict[str, Any], source: str | None, lang: str = "en") -> str:
    """What a step's room shows, as its link's fields (a pasted-code field by its first line)."""
    parts = [f"{key}={value if isinstance(value, str) else ', '.join(value)}"
             for key, value in sorted(link.items())]  # fmt: skip
    if source:
        first = next((line for line in source.splitlines() if line.strip()), "")
        parts.append(f"code: {first[:40]}")
    if not parts:
        return translate("author.steps.link_none", lang)
    return translate("author.steps.link_fields", lang, fields="; ".join(parts)[:300])


def ask_words(what: str, lang: str = "en") -> str:
    """What a predict question asks, with placeholder names (``x``, ``y``)."""
    return translate(f"kinds.predict.ask.{what}", lang, name="x", other="y")


def builtin_step_words(lessons: tuple[Lesson, ...], pair: tuple[str, int], lang: str) -> str:
    lesson_id, number = pair
    lesson = next(lesson for lesson in lessons if lesson.id == lesson_id)
    return f"{lesson.title[lang]} · {number}. {lesson.step(number).title[lang]}"


def answers_lines(lesson: Lesson, lang: str) -> list[str]:
    """Torch's answer to each option question (the teacher sees what students will)."""
    lines = []
    for step in lesson.steps:
        question = step.question
        if question is None or not question.options:
            continue
        options = " · ".join(f"`{option}`" for option in question.options)
        lines.append(
            f"{step.number}. "
            + translate(
                "author.question.answer", lang, answer=f"`{question.value}`", options=options
            )
        )
    return lines
