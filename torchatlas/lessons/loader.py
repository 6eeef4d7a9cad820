"""Lessons as data: one TOML file per lesson in ``assets/lessons/``, read and checked here.

A lesson has an id (its file name), the curriculum note it follows, minutes, a title and
summary in every language, and 1 to :data:`MAX_STEPS` steps. A step names a room and that
room's state as the fields of the room's shared link (:mod:`torchatlas.lessons.rooms`), each
value checked with the room's own link declaration (a value the room would not read from a
link is an error here, not a broken link in a classroom),
a title and a narrative per language, optionally a predict-then-reveal question, and the
values its room must show (``expect``). A question's right option is never written down:
the loader computes the question's fact with torch (:mod:`torchatlas.lessons.facts`) and
finds the option equal to it; a file whose options do not contain torch's answer (exactly
once) does not load. Problems raise :class:`LessonError` with a code and parameters.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from torchatlas.i18n import LANGUAGES
from torchatlas.lessons.facts import FactError, evaluate
from torchatlas.lessons.promises import CHECKS, Promise
from torchatlas.lessons.rooms import PROBES, ROOMS
from torchatlas.links import encode_source

LESSONS_DIR = Path(__file__).resolve().parents[2] / "assets" / "lessons"
MAX_STEPS = 12
MAX_FILE_BYTES = 256 * 1024
MAX_TEXT = 2000  # characters in one narrative
MAX_TITLE = 120
MAX_FIELD = 2000  # characters in one link value
MAX_SOURCE = 4000
MAX_OPTIONS = 6


class LessonError(ValueError):
    """A lesson file the app will not use: ``code`` and ``params`` (no English)."""

    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(f"{code} {params}")
        self.code = code
        self.params = params


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
class Question:
    fact: str
    args: tuple[tuple[str, Any], ...]
    options: tuple[str, ...]
    answer: int  # index into options: the one equal to torch's value
    prompt: dict[str, str]  # language → text
    explain: dict[str, str]

    @property
    def value(self) -> str:
        return self.options[self.answer]


@dataclass(frozen=True)
class Step:
    number: int  # 1-based, as in links ("step=5")
    room: str
    link: tuple[tuple[str, str | tuple[str, ...]], ...]  # the room's own fields
    source: str | None  # pasted code for a room with a source field (encoded by the room)
    title: dict[str, str]
    text: dict[str, str]
    question: Question | None
    expect: tuple[Expectation, ...]
    promises: tuple[Promise, ...] = ()  # what the narrative says the room shows, each checked

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

    def step(self, number: int) -> Step:
        return self.steps[number - 1]

    @property
    def questions(self) -> int:
        return sum(step.question is not None for step in self.steps)


# --------------------------------------------------------------------------- checks


def _texts(node: Any, where: str, keys: tuple[str, ...], limits: dict[str, int]) -> dict:
    """``{key: {lang: text}}`` for each key, present and non-empty in every language."""
    out: dict[str, dict[str, str]] = {key: {} for key in keys}
    for lang in LANGUAGES:
        table = node.get(lang)
        if not isinstance(table, dict):
            raise LessonError("missing_language", where=where, lang=lang)
        extra = sorted(set(table) - set(keys))
        if extra:
            raise LessonError("unknown_keys", where=f"{where}.{lang}", keys=extra)
        for key in keys:
            text = table.get(key)
            if not isinstance(text, str) or not text.strip():
                raise LessonError("missing_text", where=f"{where}.{lang}", key=key)
            if len(text) > limits.get(key, MAX_TEXT):
                raise LessonError("text_too_long", where=f"{where}.{lang}", key=key)
            out[key][lang] = text.strip()
    return out


def _only(node: dict, where: str, allowed: set[str]) -> None:
    extra = sorted(set(node) - allowed - set(LANGUAGES))
    if extra:
        raise LessonError("unknown_keys", where=where, keys=extra)


def _args(node: Any, where: str) -> tuple[tuple[str, Any], ...]:
    if node is None:
        return ()
    if not isinstance(node, dict):
        raise LessonError("bad_args", where=where)
    return tuple(sorted((str(k), _frozen(v)) for k, v in node.items()))


def _frozen(value: Any) -> Any:
    """Lists as tuples, so args are hashable and immutable; lists again when evaluated."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _thawed(value: Any) -> Any:
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


def fact_value(fact: str, args: tuple[tuple[str, Any], ...], where: str) -> str:
    try:
        return evaluate(fact, {k: _thawed(v) for k, v in args})
    except FactError as error:
        params = {"fact": fact, **error.params}  # the fact's own parameters may name it too
        raise LessonError(f"fact_{error.code}", where=where, **params) from None


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


def _question(node: Any, where: str) -> Question | None:
    if node is None:
        return None
    if not isinstance(node, dict):
        raise LessonError("bad_question", where=where)
    _only(node, where, {"fact", "args", "options"})
    options = node.get("options")
    if (
        not isinstance(options, list)
        or not 2 <= len(options) <= MAX_OPTIONS
        or not all(isinstance(o, str) and 0 < len(o) <= MAX_TITLE for o in options)
        or len(set(options)) != len(options)
    ):
        raise LessonError("bad_options", where=where)
    fact = str(node.get("fact", ""))
    args = _args(node.get("args"), where)
    value = fact_value(fact, args, where)
    if options.count(value) != 1:
        raise LessonError("answer_not_an_option", where=where, fact=fact, value=value)
    texts = _texts(node, where, ("prompt", "explain"), {})
    return Question(
        fact, args, tuple(options), options.index(value), texts["prompt"], texts["explain"]
    )


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
        _only(item, here, {"fact", "args", "probe", "at"})
        probe = str(item.get("probe", ""))
        if probe not in PROBES or PROBES[probe][0] not in (None, room):
            raise LessonError("bad_probe", where=here, probe=probe, room=room)
        at = item.get("at")
        if PROBES[probe][1] != isinstance(at, str):
            raise LessonError("bad_probe_at", where=here, probe=probe)
        fact = str(item.get("fact", ""))
        args = _args(item.get("args"), here)
        out.append(Expectation(fact, args, probe, at, fact_value(fact, args, here)))
    return tuple(out)


def _promises(node: Any, texts: dict[str, str], where: str) -> tuple[Promise, ...]:
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
        _only(item, here, {"check", "args"})
        check = str(item.get("check", ""))
        if check not in CHECKS:
            raise LessonError("unknown_check", where=here, check=check)
        phrase = {}
        for lang in LANGUAGES:
            words = item.get(lang)
            if not isinstance(words, str) or not words or words not in texts[lang]:
                raise LessonError("promise_not_in_text", where=here, lang=lang)
            phrase[lang] = words
        out.append(Promise(check, _args(item.get("args"), here), phrase))
    return tuple(out)


def _step(number: int, node: Any, lesson: str) -> Step:
    where = f"{lesson}.steps[{number}]"
    if not isinstance(node, dict):
        raise LessonError("bad_step", where=where)
    _only(node, where, {"room", "link", "source", "question", "expect", "promises"})
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
    texts = _texts(node, where, ("title", "text"), {"title": MAX_TITLE})
    return Step(
        number=number,
        room=room,
        link=_link(room, node.get("link"), where),
        source=source,
        title=texts["title"],
        text=texts["text"],
        question=_question(node.get("question"), f"{where}.question"),
        expect=_expect(room, node.get("expect"), where),
        promises=_promises(node.get("promises"), texts["text"], where),
    )


def parse_lesson(text: str, lesson_id: str) -> Lesson:
    """A lesson from its TOML text; ``lesson_id`` is its file name without ``.toml``."""
    if not (lesson_id.isascii() and lesson_id.replace("_", "a").isalnum() and len(lesson_id) < 40):
        raise LessonError("bad_id", id=lesson_id)
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise LessonError("file_too_big", id=lesson_id)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LessonError("not_toml", id=lesson_id, detail=str(error)[:200]) from None
    _only(data, lesson_id, {"note", "minutes", "order", "steps"})
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
    texts = _texts(data, lesson_id, ("title", "summary"), {"title": MAX_TITLE})
    return Lesson(
        id=lesson_id,
        note=note,
        minutes=minutes,
        order=order,
        title=texts["title"],
        summary=texts["summary"],
        steps=tuple(_step(n, node, lesson_id) for n, node in enumerate(steps, start=1)),
    )


def load_lesson(path: Path) -> Lesson:
    return parse_lesson(path.read_text(encoding="utf-8"), path.stem)


@cache
def load_all(folder: Path = LESSONS_DIR) -> tuple[Lesson, ...]:
    """Every lesson in ``folder``, in their ``order`` (torch answers each question once per
    process). A file that does not load raises: lessons are checked by the test suite."""
    lessons = (load_lesson(path) for path in folder.glob("*.toml"))
    return tuple(sorted(lessons, key=lambda lesson: (lesson.order, lesson.id)))


def lesson_ids(folder: Path = LESSONS_DIR) -> tuple[str, ...]:
    return tuple(lesson.id for lesson in load_all(folder))


def find(lesson_id: str, folder: Path = LESSONS_DIR) -> Lesson | None:
    return next((lesson for lesson in load_all(folder) if lesson.id == lesson_id), None)
