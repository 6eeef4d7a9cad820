"""Lessons as data: one TOML file per lesson in ``assets/lessons/``, read and checked here.

A lesson has an id (its file name), the curriculum note it follows, minutes, a title and
summary in every language, and 1 to :data:`MAX_STEPS` steps. A step names a room and that
room's state as the fields of the room's shared link (:mod:`torchatlas.lessons.rooms`), each
value checked with the room's own link declaration (a value the room would not read from a
link is an error here, not a broken link in a classroom),
a title and a narrative per language, optionally a predict-then-reveal question, and the
values its room must show (``expect``). A step with a question keeps its answer off the
screen until the reveal: ``hide = ["room"]`` when the room shows torch's answer (the room
opens at the reveal), and a per-language ``after`` text for what the narrative says once
the answer is known. A question's right option is never written down: the loader computes
the question's fact with torch (:mod:`torchatlas.lessons.facts`) and finds the option equal
to it; a file whose options do not contain torch's answer (exactly
once) does not load. Problems raise :class:`LessonError` with a code and parameters.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from torchatlas.lessons.kinds import AnyQuestion, Context, parse_question
from torchatlas.lessons.kinds.fact import Question, fact_value
from torchatlas.lessons.parsing import (
    LANGUAGES,
    MAX_OPTIONS,
    MAX_TEXT,
    MAX_TITLE,
    LessonError,
    args_of,
    only,
    texts,
)
from torchatlas.lessons.promises import CHECKS, Promise
from torchatlas.lessons.rooms import PROBES, ROOMS
from torchatlas.links import encode_source

LESSONS_DIR = Path(__file__).resolve().parents[2] / "assets" / "lessons"
MAX_STEPS = 12
MAX_FILE_BYTES = 256 * 1024
MAX_FIELD = 2000  # characters in one link value
MAX_SOURCE = 4000
# What a step may keep hidden until its question is revealed: "room", the room itself (it
# shows torch's answer: the value asked, torch's error). The narrative's own telling of the
# answer is its ``after`` text instead.
HIDEABLE = ("room",)
__all__ = ["MAX_OPTIONS", "MAX_TEXT", "MAX_TITLE", "LessonError", "Question"]  # re-exported


@dataclass(frozen=True)
class Expectation:
    """A value the step's room must show: fact ``fact`` with ``args`` is ``value`` (torch's
    answer now), read off the page by probe ``probe`` (at ``at``)."""

    fact: str
    args: tuple[tuple[str, Any], ...]
    probe: str
    at: str | None
    value: str


@dataclass(frozen=True)
class Step:
    number: int  # 1-based, as in links ("step=5")
    room: str
    link: tuple[tuple[str, str | tuple[str, ...]], ...]  # the room's own fields
    source: str | None  # pasted code for a room with a source field (encoded by the room)
    title: dict[str, str]
    text: dict[str, str]
    question: AnyQuestion | None
    expect: tuple[Expectation, ...]
    promises: tuple[Promise, ...] = ()  # what the narrative says the room shows, each checked
    # Kept off the screen until the step's question is revealed (see HIDEABLE), and the
    # narrative's sentences that tell the answer, shown from the reveal on (language → text;
    # empty when the narrative tells nothing).
    hide: tuple[str, ...] = ()
    after: dict[str, str] = field(default_factory=dict)

    @property
    def hides_room(self) -> bool:
        """The room shows torch's answer: it opens once the question is revealed."""
        return "room" in self.hide

    def narrative(self, lang: str, revealed: bool) -> str:
        """The step's text as a reader sees it: the ``after`` text joins it at the reveal."""
        after = self.after.get(lang, "") if revealed else ""
        return f"{self.text[lang]}\n\n{after}" if after else self.text[lang]

    def fields(self) -> dict[str, str | list[str]]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.link}


@dataclass(frozen=True)
class Lesson:
    id: str
    note: str  # the curriculum note it follows
    minutes: int
    order: int  # place on the Lessons page (then the id)
    title: dict[str, str]
    summary: dict[str, str]
    steps: tuple[Step, ...]
    # The languages it is written in (the repository's lessons: all of the app's); a page in
    # another language shows the first of these.
    languages: tuple[str, ...] = LANGUAGES

    def step(self, number: int) -> Step:
        return self.steps[number - 1]

    @property
    def questions(self) -> int:
        return sum(step.question is not None for step in self.steps)


# --------------------------------------------------------------------------- checks


def _link(room: str, node: Any, where: str) -> tuple[tuple[str, str | tuple[str, ...]], ...]:
    spec = ROOMS[room]
    if node is None:
        return ()
    if not isinstance(node, dict):
        raise LessonError("bad_link", where=where)
    out: list[tuple[str, str | tuple[str, ...]]] = []
    for key, value in node.items():
        if key not in spec.fields:
            raise LessonError("not_a_link_field", where=where, room=room, field=key)
        if isinstance(value, list) and key in spec.multi:
            if not all(isinstance(v, str) and len(v) <= MAX_FIELD for v in value):
                raise LessonError("bad_link_value", where=where, field=key)
            out.append((key, tuple(value)))
        elif isinstance(value, str) and len(value) <= MAX_FIELD:
            out.append((key, value))
        else:
            raise LessonError("bad_link_value", where=where, field=key)
    _check_values(room, dict(out), where)
    return tuple(out)


def _check_values(room: str, query: dict[str, str | tuple[str, ...]], where: str) -> None:
    """Every value as the room reads it from a link (its declaration's rules): a value it
    would not use is the lesson's error, named by its field."""
    spec = ROOMS[room].spec
    if spec is None:
        return
    read = spec.read({key: list(value) if isinstance(value, tuple) else value
                      for key, value in query.items()})  # fmt: skip
    if read.broken:
        raise LessonError("bad_link_value", where=where, field=read.broken[0])


def _expect(room: str, node: Any, where: str) -> tuple[Expectation, ...]:
    if node is None:
        return ()
    if not isinstance(node, list):
        raise LessonError("bad_expect", where=where)
    out = []
    for index, item in enumerate(node):
        here = f"{where}.expect[{index}]"
        if not isinstance(item, dict):
            raise LessonError("bad_expect", where=here)
        only(item, here, {"fact", "args", "probe", "at"})
        probe = str(item.get("probe", ""))
        if probe not in PROBES or PROBES[probe][0] not in (None, room):
            raise LessonError("bad_probe", where=here, probe=probe, room=room)
        at = item.get("at")
        if PROBES[probe][1] != isinstance(at, str):
            raise LessonError("bad_probe_at", where=here, probe=probe)
        fact = str(item.get("fact", ""))
        args = args_of(item.get("args"), here)
        out.append(Expectation(fact, args, probe, at, fact_value(fact, args, here)))
    return tuple(out)


def _promises(
    node: Any, written: dict[str, str], where: str, languages: tuple[str, ...]
) -> tuple[Promise, ...]:
    """``promises = [{ check, args, en, ko }]``: each phrase a part of its language's
    narrative, each check one of :data:`~torchatlas.lessons.promises.CHECKS`."""
    if node is None:
        return ()
    if not isinstance(node, list):
        raise LessonError("bad_promises", where=where)
    out = []
    for index, item in enumerate(node):
        here = f"{where}.promises[{index}]"
        if not isinstance(item, dict):
            raise LessonError("bad_promises", where=here)
        only(item, here, {"check", "args"})
        check = str(item.get("check", ""))
        if check not in CHECKS:
            raise LessonError("unknown_check", where=here, check=check)
        phrase = {}
        for lang in languages:
            words = item.get(lang)
            if not isinstance(words, str) or not words or words not in written[lang]:
                raise LessonError("promise_not_in_text", where=here, lang=lang)
            phrase[lang] = words
        for lang in LANGUAGES:  # a language the lesson is not written in reads the first one's
            phrase.setdefault(lang, phrase[languages[0]])
        out.append(Promise(check, args_of(item.get("args"), here), phrase))
    return tuple(out)


def _step(number: int, node: Any, lesson: str, context: Context) -> Step:
    where = f"{lesson}.steps[{number}]"
    if not isinstance(node, dict):
        raise LessonError("bad_step", where=where)
    only(node, where, {"room", "link", "source", "question", "expect", "promises", "hide"})
    room = node.get("room")
    if room not in ROOMS:
        raise LessonError("unknown_room", where=where, room=str(room))
    source = node.get("source")
    if source is not None and (
        ROOMS[room].source_field is None or not isinstance(source, str) or len(source) > MAX_SOURCE
    ):
        raise LessonError("bad_source", where=where, room=room)
    source_field = ROOMS[room].source_field
    if source is not None and source_field is not None:
        _check_values(room, {source_field: encode_source(source)}, where)
    written = texts(
        node, where, ("title", "text"), {"title": MAX_TITLE}, context.languages, ("after",)
    )
    question = parse_question(node.get("question"), f"{where}.question", context)
    hide = _hide(node.get("hide"), where)
    if (hide or written["after"]) and question is None:
        raise LessonError("hide_without_question", where=where)
    # A promise may sit in the text or in what it says after the reveal.
    narrative = {
        lang: f"{text}\n\n{written['after'].get(lang, '')}"
        for lang, text in written["text"].items()
    }
    return Step(
        number=number,
        room=room,
        link=_link(room, node.get("link"), where),
        source=source,
        title=written["title"],
        text=written["text"],
        question=question,
        expect=_expect(room, node.get("expect"), where),
        promises=_promises(node.get("promises"), narrative, where, context.languages),
        hide=hide,
        after=written["after"],
    )


def _hide(node: Any, where: str) -> tuple[str, ...]:
    """``hide = ["room"]``: what stays off the screen until the question's reveal."""
    if node is None:
        return ()
    if not isinstance(node, list) or not all(item in HIDEABLE for item in node) or not node:
        raise LessonError("bad_hide", where=where, allowed=list(HIDEABLE))
    return tuple(dict.fromkeys(node))


def _languages(data: dict[str, Any], lesson_id: str, all_languages: bool) -> tuple[str, ...]:
    if all_languages:
        return LANGUAGES
    written = tuple(lang for lang in LANGUAGES if lang in data)
    if not written:
        raise LessonError("missing_language", where=lesson_id, lang=LANGUAGES[0])
    return written


def parse_lesson(
    text: str, lesson_id: str, *, all_languages: bool = True, context: Context | None = None
) -> Lesson:
    """A lesson from its TOML text; ``lesson_id`` is its file name without ``.toml``.

    ``all_languages``: every text in each of the app's languages (the repository's lessons);
    else in the languages the file has a title for (a teacher's: at least one). ``context``:
    how questions whose answers need the sandbox are read (:class:`~.kinds.Context`)."""
    if not (lesson_id.isascii() and lesson_id.replace("_", "a").isalnum() and len(lesson_id) < 40):
        raise LessonError("bad_id", id=lesson_id)
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise LessonError("file_too_big", id=lesson_id)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LessonError("not_toml", id=lesson_id, detail=str(error)[:200]) from None
    only(data, lesson_id, {"note", "minutes", "order", "steps"})
    order = data.get("order", 100)
    if not isinstance(order, int) or not 0 <= order <= 1000:
        raise LessonError("bad_order", id=lesson_id)
    minutes = data.get("minutes")
    if not isinstance(minutes, int) or not 1 <= minutes <= 120:
        raise LessonError("bad_minutes", id=lesson_id)
    note = data.get("note")
    if not isinstance(note, str) or not note:
        raise LessonError("bad_note", id=lesson_id)
    steps = data.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise LessonError("bad_steps", id=lesson_id, limit=MAX_STEPS)
    languages = _languages(data, lesson_id, all_languages)
    context = Context(languages=languages) if context is None else context
    context = replace(context, languages=languages)
    written = texts(data, lesson_id, ("title", "summary"), {"title": MAX_TITLE}, languages)
    return Lesson(
        id=lesson_id,
        note=note,
        minutes=minutes,
        order=order,
        title=written["title"],
        summary=written["summary"],
        steps=tuple(_step(n, node, lesson_id, context) for n, node in enumerate(steps, start=1)),
        languages=languages,
    )


def load_lesson(path: Path) -> Lesson:
    return parse_lesson(path.read_text(encoding="utf-8"), path.stem)


def load_all(folder: Path = LESSONS_DIR) -> tuple[Lesson, ...]:
    """Every lesson in ``folder``, in their ``order`` (torch answers each question once per
    process). A file that does not load raises: lessons are checked by the test suite."""
    return _load_all(folder)


# Cached on the folder as passed here: ``load_all()`` and ``find(...)`` (which passes the
# default folder on) are one entry, so the lessons are computed once per process, and the
# server's start-up warm-up (components/classmode/warm.py) warms what class mode reads.
@cache
def _load_all(folder: Path) -> tuple[Lesson, ...]:
    lessons = (load_lesson(path) for path in folder.glob("*.toml"))
    return tuple(sorted(lessons, key=lambda lesson: (lesson.order, lesson.id)))


def lesson_ids(folder: Path = LESSONS_DIR) -> tuple[str, ...]:
    return tuple(lesson.id for lesson in load_all(folder))


def find(lesson_id: str, folder: Path = LESSONS_DIR) -> Lesson | None:
    return next((lesson for lesson in load_all(folder) if lesson.id == lesson_id), None)
