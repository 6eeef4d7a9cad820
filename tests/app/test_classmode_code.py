"""Class mode with a teacher's own lesson (``u_<code>``) and a code exercise, under AppTest:
three students answer with code (one passes, one copies, one raises), the teacher's tally
counts passed / not yet / errors with the commonest error, a student sees only their own
verdict, the reveal shows the explanation, and the CSV has each student's verdict."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from bench.harness import new_session
from components.author import state as author_state
from components.classmode import state
from components.visitor import CLIENT_KEY
from tests.app.apptest import rendered_text
from tests.app.test_author import CODE_LESSON
from torchatlas.classmode import ClassStore
from torchatlas.classmode.authored import LessonStore

PAGE = "views/classmode.py"
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch) -> Iterator[ClassStore]:
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    state.store.clear()
    yield state.store()
    state.store.clear()


def _said(at: AppTest) -> str:
    boxes = [str(b.value) for kind in ("success", "error", "warning", "info") for b in at.get(kind)]
    return "\n".join([rendered_text(at), *boxes])


def _student(code: str, nickname: str, client: str) -> AppTest:
    at = new_session("en")
    at.session_state[CLIENT_KEY] = client
    at.run()
    at.switch_page(PAGE).run()
    at._page_hash = ""
    at.text_input(key=state.JOIN_CODE_KEY).input(code)
    at.text_input(key=state.JOIN_NAME_KEY).input(nickname)
    at.button(key="classmode_join_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_class_answers_a_teachers_exercise_with_code(fresh_store: ClassStore) -> None:
    saved = LessonStore(fresh_store.url).create(
        author_state.toml_of(copy.deepcopy(CODE_LESSON)), client="ip:192.0.2.1"
    )
    lesson_id = f"u_{saved.code.lower()}"
    teacher = fresh_store.start(lesson_id, "en", client="ip:192.0.2.1")
    code, key = teacher.code, teacher.teacher_key
    students = {
        name: _student(code, name, f"ip:198.51.100.{n}")
        for n, name in enumerate(("Ada", "Grace", "Alan"), start=1)
    }
    fresh_store.move(code, key, step=2, room="strides", query={})
    fresh_store.ask(code, key)
    box = f"classmode_code_{code}_2"
    for name, source in [
        ("Ada", "y = x.view(2, 6)"),
        ("Grace", "y = x.clone().view(2, 6)"),
        ("Alan", "y = x.view(5, 5)"),
    ]:
        at = students[name]
        at.run()
        at.text_area(key=f"{box}_code").input(source)
        at.button(key=f"{box}_run").click().run()
        assert not at.exception, [e.value for e in at.exception]
    assert "Every check passed." in _said(students["Ada"])
    assert "it is a copy" in _said(students["Grace"])
    assert "RuntimeError" in _said(students["Alan"])
    assert "x.view(5, 5)" not in _said(students["Ada"])  # nobody sees another's code
    tally = fresh_store.tally(code, key)
    assert tally.counts == (1, 1, 1) and tally.answered == 3
    assert tally.errors == (("RuntimeError", 1),)
    projector = new_session("en", {"class": code, "teacher": key})
    projector.run()
    projector.switch_page(PAGE).run()
    assert not projector.exception
    shown = _said(projector)
    assert "1 passed · 1 not yet · 1 with an error · 3 of 3 answered" in shown
    assert "RuntimeError: 1" in shown
    assert "x.view" not in shown  # the teacher sees counts, never a student's code
    fresh_store.reveal(code, key)
    students["Grace"].run()
    assert "`view` copies nothing." in _said(students["Grace"])
    csv = fresh_store.summary_csv(code, key)
    rows = {line.split(",")[0]: line for line in csv.splitlines()}
    assert rows["Ada"].startswith("Ada,pass,1") and rows["Alan"].startswith("Alan,error,0")
