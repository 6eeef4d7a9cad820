"""Lessons: each curriculum note as a guided path through the rooms.

``loader`` reads and checks ``assets/lessons/<id>.toml`` (steps, narratives in every
language, questions whose answers torch computes), ``facts`` is the registry of named facts
a question or an expectation may ask about, ``rooms`` the link fields and probes of each room.
No Streamlit here: a notebook can load a lesson and ask its facts.

>>> from torchatlas.lessons import find  # doctest: +SKIP
>>> find("strides_exercises").step(2).question.value  # doctest: +SKIP
'(3, 1)'
"""

from __future__ import annotations

from torchatlas.lessons.facts import FACTS, FactError, evaluate
from torchatlas.lessons.loader import (
    LESSONS_DIR,
    Expectation,
    Lesson,
    LessonError,
    Question,
    Step,
    find,
    lesson_ids,
    load_all,
    load_lesson,
    parse_lesson,
)
from torchatlas.lessons.rooms import PROBES, ROOMS, RoomLink

__all__ = [
    "FACTS",
    "LESSONS_DIR",
    "PROBES",
    "ROOMS",
    "Expectation",
    "FactError",
    "Lesson",
    "LessonError",
    "Question",
    "RoomLink",
    "Step",
    "evaluate",
    "find",
    "lesson_ids",
    "load_all",
    "load_lesson",
    "parse_lesson",
]
