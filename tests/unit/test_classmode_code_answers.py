"""Class mode keeps code answers (torchatlas.classmode.store): a verdict per student and step,
changeable until the reveal, read back only with the student's key; the teacher's tally counts
passed / not yet / error with the commonest errors; the CSV has each student's verdict. The
grading itself (the sandbox) is tested in test_code_questions.py and, end to end, in
tests/e2e/test_own_lesson_class.py."""

from __future__ import annotations

import pytest

from tests.app.test_author import CODE_LESSON
from torchatlas.classmode import ClassError, ClassStore, CodeVerdict
from torchatlas.classmode.authored import ID_PREFIX, LessonStore

PASS = CodeVerdict("pass", "passed")
FAIL = CodeVerdict("fail", "not_shared", (("name", "y"), ("expected", "x")))
RAISE = CodeVerdict("error", "raised", (), "RuntimeError", "shape '[5, 5]' is invalid", 1)


@pytest.fixture
def store(tmp_path) -> ClassStore:
    found = ClassStore(f"sqlite:///{tmp_path}/classes.sqlite3")
    found.expire_idle()  # creates the database
    return found


def test_code_answers_are_tallied_kept_per_student_and_in_the_csv(store: ClassStore) -> None:
    import copy

    from components.author.state import toml_of

    lesson = toml_of(copy.deepcopy(CODE_LESSON))
    saved = LessonStore(store.url).create(lesson, client="ip:192.0.2.1")
    teacher = store.start(ID_PREFIX + saved.code.lower(), "en", client="ip:192.0.2.1")
    code, key = teacher.code, teacher.teacher_key
    pupils = {
        name: store.join(code, name, client=f"ip:198.51.100.{n}")
        for n, name in enumerate(("Ada", "Bo", "Cy", "Di"), start=1)
    }
    store.move(code, key, step=2, room="strides", query={})
    with pytest.raises(ClassError) as early:
        store.answer_code(code, pupils["Ada"].student_key, "y = x", PASS)
    assert early.value.code.value == "not_asked"
    store.ask(code, key)
    with pytest.raises(ClassError) as picked:  # a code question takes no option
        store.answer(code, pupils["Ada"].student_key, 0)
    assert picked.value.code.value == "bad_option"
    store.answer_code(code, pupils["Ada"].student_key, "y = x.clone()", FAIL)
    store.answer_code(code, pupils["Ada"].student_key, "y = x.view(2, 6)", PASS)  # changed
    store.answer_code(code, pupils["Bo"].student_key, "y = x.clone().view(2, 6)", FAIL)
    store.answer_code(code, pupils["Cy"].student_key, "y = x.view(5, 5)", RAISE)
    store.answer_code(code, pupils["Di"].student_key, "y = x.view(5, 5)", RAISE)
    tally = store.tally(code, key)
    assert tally.counts == (1, 1, 2) and tally.answered == 4 and tally.joined == 4
    assert tally.errors == (("RuntimeError", 2),)
    assert store.my_code_answer(code, pupils["Cy"].student_key, 2) == RAISE
    assert store.my_code_answer(code, pupils["Ada"].student_key, 2) == PASS
    assert store.my_code_answer(code, pupils["Ada"].student_key, 1) is None
    with pytest.raises(ClassError):  # another student's key reads nothing of Cy's
        store.my_code_answer(code, "x" * 24, 2)
    store.reveal(code, key)
    with pytest.raises(ClassError) as late:
        store.answer_code(code, pupils["Bo"].student_key, "y = x.view(2, 6)", PASS)
    assert late.value.code.value == "already_revealed"
    rows = {line.split(",")[0]: line for line in store.summary_csv(code, key).splitlines()}
    assert rows["Ada"].startswith("Ada,pass,1") and rows["Cy"].startswith("Cy,error,0")
