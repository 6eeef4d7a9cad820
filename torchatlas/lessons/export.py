"""A lesson back to the TOML the loader reads (``assets/lessons/`` format): a teacher's lesson
downloaded, a repository lesson copied to edit. The round trip is exact:
``parse_lesson(export_lesson(lesson), lesson.id, ...) == lesson`` for every lesson (the test
suite checks each repository lesson and each question kind).

Only the languages a lesson is written in are written back; torch's answers never are (the
loader computes them again).
"""

from __future__ import annotations

from typing import Any

import tomli_w

from torchatlas.lessons.kinds import export_question
from torchatlas.lessons.loader import Lesson, Step
from torchatlas.lessons.parsing import thawed


def _args(args: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    return {key: thawed(value) for key, value in args}


def step_table(step: Step, languages: tuple[str, ...]) -> dict[str, Any]:
    """One step as its ``[[steps]]`` table."""
    table: dict[str, Any] = {"room": step.room}
    if step.link:
        table["link"] = {key: thawed(value) for key, value in step.link}
    if step.source is not None:
        table["source"] = step.source
    if step.expect:
        table["expect"] = [
            {
                "probe": item.probe,
                **({"at": item.at} if item.at is not None else {}),
                "fact": item.fact,
                **({"args": _args(item.args)} if item.args else {}),
            }
            for item in step.expect
        ]
    if step.promises:
        table["promises"] = [
            {
                "check": promise.check,
                **({"args": _args(promise.args)} if promise.args else {}),
                **{lang: promise.phrase[lang] for lang in languages},
            }
            for promise in step.promises
        ]
    if step.hide:
        table["hide"] = list(step.hide)
    for lang in languages:
        table[lang] = {"title": step.title[lang], "text": step.text[lang]}
        if step.after:
            table[lang]["after"] = step.after[lang]
    if step.question is not None:
        table["question"] = export_question(step.question, languages)
    return table


def lesson_table(lesson: Lesson) -> dict[str, Any]:
    """The lesson as the data of its TOML file."""
    table: dict[str, Any] = {"note": lesson.note, "order": lesson.order, "minutes": lesson.minutes}
    for lang in lesson.languages:
        table[lang] = {"title": lesson.title[lang], "summary": lesson.summary[lang]}
    table["steps"] = [step_table(step, lesson.languages) for step in lesson.steps]
    return table


def export_lesson(lesson: Lesson) -> str:
    """The lesson's TOML text (code and narratives as multi-line strings, for reading)."""
    return tomli_w.dumps(lesson_table(lesson), multiline_strings=True)
