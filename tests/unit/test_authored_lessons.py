"""Teachers' own lessons in the class database (torchatlas.classmode.authored): a code and an
author key shown once (only its hash kept), one refusal for an unknown code and a wrong key,
and every limit (bytes, per author, per client, per hour, per database) refused by code."""

from __future__ import annotations

import pytest

from torchatlas.classmode import ClassError, ClassStore
from torchatlas.classmode.authored import (
    ID_PREFIX,
    AuthorLimits,
    LessonStore,
    code_of_lesson_id,
    resolve_lesson,
)
from torchatlas.classmode.db import engine_for
from torchatlas.classmode.schema import authored
from torchatlas.lessons import load_all
from torchatlas.lessons.export import export_lesson

LESSON = """note = "teacher"
minutes = 5

[en]
title = "Views"
summary = "A view shares storage."

[[steps]]
room = "strides"

[steps.en]
title = "A view"
text = "Look at the strides."
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def url(tmp_path) -> str:
    found = f"sqlite:///{tmp_path}/classes.sqlite3"
    ClassStore(found).expire_idle()  # creates and migrates the database
    return found


def test_a_lesson_is_saved_read_by_anyone_and_edited_only_with_its_key(url: str) -> None:
    store = LessonStore(url)
    passed = store.create(LESSON, client="ip:192.0.2.1")
    assert store.get(passed.code).toml == LESSON
    assert store.get(passed.code.lower()).code == passed.code  # codes are read case-blind
    with engine_for(url).connect() as conn:
        row = conn.execute(authored.select()).one()
    assert passed.author_key not in (row.author_hash, row.toml, row.client)
    assert store.is_author(passed.code, passed.author_key)
    store.update(passed.code, passed.author_key, LESSON.replace("Views", "Strides"))
    assert "Strides" in store.get(passed.code).toml
    # A wrong key, another lesson's key, an unknown code and a malformed one: one answer.
    other = store.create(LESSON, client="ip:192.0.2.2")
    for code, key in [
        (passed.code, "x" * 32),
        (passed.code, other.author_key),
        ("ZZZZZZZ", passed.author_key),
        ("<script>", passed.author_key),
    ]:
        assert not store.is_author(code, key)
        with pytest.raises(ClassError) as refused:
            store.update(code, key, LESSON)
        assert refused.value.code.value == "not_author" and refused.value.params == {}
    store.delete(passed.code, passed.author_key)
    with pytest.raises(ClassError) as gone:
        store.get(passed.code)
    assert gone.value.code.value == "no_such_lesson"


def test_one_author_key_keeps_several_lessons(url: str) -> None:
    store = LessonStore(url, limits=AuthorLimits(per_author=2))
    first = store.create(LESSON, client="ip:192.0.2.1")
    second = store.create(LESSON, client="ip:192.0.2.9", author_key=first.author_key)
    assert second.author_key == first.author_key and second.code != first.code
    assert store.is_author(second.code, first.author_key)
    with pytest.raises(ClassError) as refused:
        store.create(LESSON, client="ip:192.0.2.7", author_key=first.author_key)
    assert refused.value.code.value == "too_many_lessons" and refused.value.params == {"limit": "2"}


def test_every_limit_is_refused_by_its_code(url: str) -> None:
    clock = Clock()
    limits = AuthorLimits(max_bytes=1024, per_client=3, created_per_hour=2, max_lessons=5)
    store = LessonStore(url, clock=clock, limits=limits)
    with pytest.raises(ClassError) as big:
        store.create("x" * 1025, client="ip:192.0.2.1")
    assert big.value.code.value == "lesson_too_big"
    store.create(LESSON, client="ip:192.0.2.1")
    store.create(LESSON, client="ip:192.0.2.1")
    with pytest.raises(ClassError) as hourly:
        store.create(LESSON, client="ip:192.0.2.1")
    assert hourly.value.code.value == "lessons_per_hour"
    clock.now += 3601
    store.create(LESSON, client="ip:192.0.2.1")
    with pytest.raises(ClassError) as kept:
        store.create(LESSON, client="ip:192.0.2.1")
    assert kept.value.code.value == "too_many_lessons"
    store.create(LESSON, client="ip:192.0.2.2")
    store.create(LESSON, client="ip:192.0.2.3")
    with pytest.raises(ClassError) as full:
        store.create(LESSON, client="ip:192.0.2.4")
    assert full.value.code.value == "lessons_full"


def test_a_saved_lesson_is_resolved_by_its_id_and_a_broken_one_is_none(url: str) -> None:
    store = LessonStore(url)
    builtin = load_all()[-1]
    passed = store.create(export_lesson(builtin), client="ip:192.0.2.1")
    lesson_id = ID_PREFIX + passed.code.lower()
    assert code_of_lesson_id(lesson_id) == passed.code
    found = resolve_lesson(lesson_id, url)
    assert found is not None and found.id == lesson_id
    assert found.steps == builtin.steps  # the same lesson, under the teacher's id
    assert resolve_lesson(builtin.id, url) == builtin
    broken = store.create(LESSON.replace('room = "strides"', 'room = "nowhere"'), client="ip:x")
    assert resolve_lesson(ID_PREFIX + broken.code.lower(), url) is None
    assert resolve_lesson(ID_PREFIX + "zzzzzzz", url) is None


def test_a_teachers_texts_may_not_fetch_outside_images() -> None:
    from torchatlas.classmode.authored import parse_authored
    from torchatlas.lessons import LessonError

    image = LESSON.replace(
        'text = "Look at the strides."', 'text = "![x](https://evil.test/x.png)"'
    )
    with pytest.raises(LessonError) as refused:
        parse_authored(image, "AAAAAAA")
    assert refused.value.code == "image_in_text" and refused.value.params["key"] == "text"
    assert "steps[1]" in refused.value.params["where"]
    assert parse_authored(LESSON, "AAAAAAA").step(1).text["en"] == "Look at the strides."
