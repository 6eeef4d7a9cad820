"""The author page under AppTest: a teacher writes a lesson, saves it (a code, an editing link
shown once), edits it from the link on another device, runs it solo, adds a room's view as a
step, imports and exports it; refusals are explained cards naming the step, never a traceback.

Every test gets its own class database (``ATLAS_DATA_DIR`` in a temp dir)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from bench.harness import new_session, open_page
from components.author import state
from tests.app.apptest import rendered_text
from torchatlas.classmode.authored import LessonStore
from torchatlas.lessons import load_all, parse_lesson
from torchatlas.lessons.export import export_lesson

PAGE = "views/author.py"


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch) -> Iterator[LessonStore]:
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    state.lesson_store.clear()
    yield state.lesson_store()
    state.lesson_store.clear()


def _said(at: AppTest) -> str:
    boxes = [str(b.value) for kind in ("success", "error", "warning", "info") for b in at.get(kind)]
    return "\n".join([rendered_text(at), *boxes])


def _write_one_step(at: AppTest, lang: str = "en") -> None:
    at.text_input(key=f"aw_title_{lang}").input("Views and copies")
    at.text_area(key=f"aw_summary_{lang}").input("When does torch copy?")
    uid = at.session_state[state.DRAFT]["steps"][0]["_uid"]
    at.text_input(key=f"aw_st_{uid}_{lang}").input("A transpose")
    at.text_area(key=f"aw_sx_{uid}_{lang}").input("Look at the **strides**.")
    at.run()


def test_a_teacher_saves_a_lesson_and_edits_it_from_the_link(fresh_store: LessonStore) -> None:
    at = open_page(PAGE)
    assert not at.exception
    at.multiselect(key="aw_languages").set_value(["ko"]).run()  # written in Korean only
    _write_one_step(at, "ko")
    at.button(key="author_save").click().run()
    assert not at.exception and not at.error
    code, key, first = at.session_state[state.SAVED]
    assert first and f"/author?edit={code}&key={key}" in [c.value for c in at.code]
    lesson = parse_lesson(fresh_store.get(code).toml, "mine", all_languages=False)
    assert lesson.languages == ("ko",) and lesson.title["ko"] == "Views and copies"
    assert lesson.step(1).text["ko"] == "Look at the **strides**."
    # Another device: the editing link opens the lesson and leaves the address bar.
    other = new_session("en", {"edit": code, "key": key})
    other.run()
    other.switch_page(PAGE).run()
    assert not other.exception
    assert "key" not in other.query_params and "edit" not in other.query_params
    assert other.session_state[state.EDITING] == (code, key)
    assert f"**{code}**" in _said(other)
    other.text_input(key="aw_title_ko").input("Views, copies and strides").run()
    other.button(key="author_save").click().run()
    assert "Views, copies and strides" in fresh_store.get(code).toml
    assert other.session_state[state.SAVED] == (code, key, False)
    assert not [c for c in other.code if key in c.value]  # the key is shown only at first save


def test_every_question_kind_has_its_boxes_on_the_author_page() -> None:
    """A kind added to the registry and forgotten here could not be written in the browser."""
    from components.author.panels import KIND_FIELDS
    from torchatlas.lessons.kinds import KINDS

    assert set(KIND_FIELDS) == set(KINDS)


def test_a_wrong_editing_link_is_explained_and_opens_nothing(fresh_store: LessonStore) -> None:
    saved = fresh_store.create(export_lesson(load_all()[-1]), client="ip:192.0.2.1")
    at = new_session("en", {"edit": saved.code, "key": "x" * 32})
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert "does not open a lesson" in _said(at)
    assert state.EDITING not in at.session_state


def test_an_incomplete_lesson_is_refused_with_the_step_and_the_fix() -> None:
    at = open_page(PAGE)
    at.text_input(key="aw_title_en").input("Only a title")
    at.text_area(key="aw_summary_en").input("And a summary").run()
    at.button(key="author_save").click().run()
    assert not at.exception
    said = "\n".join(str(e.value) for e in at.error)
    assert "Step 1" in said and "empty" in said
    assert state.SAVED not in at.session_state


def test_a_repository_lesson_copied_saves_as_the_same_lesson(fresh_store: LessonStore) -> None:
    builtin = load_all()[-1]
    at = open_page(PAGE)
    at.selectbox(key="author_builtin").set_value(builtin.id).run()
    at.button(key="author_builtin_copy").click().run()
    assert not at.exception
    at.button(key="author_save").click().run()
    assert not at.exception and not at.error
    code = at.session_state[state.SAVED][0]
    saved = parse_lesson(fresh_store.get(code).toml, builtin.id)
    assert saved == builtin  # widgets drawn over the copy changed nothing


def test_a_saved_lesson_runs_solo_from_its_link(fresh_store: LessonStore) -> None:
    builtin = load_all()[-1]
    saved = fresh_store.create(export_lesson(builtin), client="ip:192.0.2.1")
    lesson_id = f"u_{saved.code.lower()}"
    at = new_session("en", {"lesson": lesson_id, "step": "1"})
    at.run()
    assert not at.exception
    assert builtin.step(1).title["en"] in _said(at)


def test_a_rooms_view_is_added_as_a_step_from_the_sidebar() -> None:
    at = new_session("en", author_draft=state.blank_draft("en"))
    at.run()
    assert not [b for b in at.button if b.key == "author_add_view"]  # the home page is no room
    at.query_params["s_shape"] = "4, 2"  # the room as the teacher set it up (its link)
    at.switch_page("views/strides.py").run()
    at.button(key="author_add_view").click().run()
    assert not at.exception
    steps = at.session_state[state.DRAFT]["steps"]
    assert len(steps) == 2 and steps[1]["room"] == "strides"
    assert steps[1]["link"]["s_shape"] == "4, 2"


def test_a_room_address_pasted_becomes_the_steps_room_and_fields() -> None:
    at = open_page(PAGE)
    uid = at.session_state[state.DRAFT]["steps"][0]["_uid"]
    at.text_input(key=f"aw_link_{uid}").input("https://x.streamlit.app/basics?b_sec=indexing").run()
    step = at.session_state[state.DRAFT]["steps"][0]
    assert step["room"] == "basics" and step["link"] == {"b_sec": "indexing"}
    at.text_input(key=f"aw_link_{uid}").input("https://x.streamlit.app/nowhere?a=1").run()
    assert "does not open a room" in _said(at)


CODE_LESSON = {
    "note": "teacher",
    "order": 100,
    "minutes": 10,
    "en": {"title": "Strides by hand", "summary": "Predict, then write it."},
    "steps": [
        {
            "_uid": "a1",
            "room": "strides",
            "link": {"s_shape": "3, 4"},
            "en": {"title": "A transpose", "text": "Look at the strides."},
            "question": {
                "kind": "predict",
                "code": "x = torch.arange(12).view(3, 4)\ny = x.t()",
                "ask": "stride",
                "name": "y",
                "en": {"prompt": "What is `y.stride()`?", "explain": "A transpose swaps them."},
            },
        },
        {
            "_uid": "a2",
            "room": "strides",
            "en": {"title": "Your turn", "text": "Write a view."},
            "question": {
                "kind": "exercise",
                "setup": "x = torch.arange(12.)",
                "solution": "y = x.view(2, 6)",
                "checks": [
                    {"template": "shape", "name": "y", "expected": "(2, 6)"},
                    {"template": "shares_storage", "name": "y", "expected": "x"},
                ],
                "en": {
                    "prompt": "Make `y`, a (2, 6) view of `x`.",
                    "explain": "`view` copies nothing.",
                },
            },
        },
    ],
}


@pytest.mark.slow
def test_code_questions_are_answered_by_torch_and_graded_in_the_sandbox(
    fresh_store: LessonStore,
) -> None:
    import copy

    at = open_page(PAGE, author_draft=copy.deepcopy(CODE_LESSON))
    at.button(key="author_save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = _said(at)
    assert "`(1, 4)`" in said  # torch's answer to the predict question, shown to the author
    code = at.session_state[state.SAVED][0]
    lesson_id = f"u_{code.lower()}"
    solo = new_session("en", {"lesson": lesson_id, "step": "2"})
    solo.run()
    assert not solo.exception
    box = f"lessons_q_{lesson_id}_2_code"
    for source, verdict in [
        ("y = x.clone().view(2, 6)", "it is a copy"),
        ("y = x.view(5, 5)", "RuntimeError on line 1"),
        ("y = x.view(2, 6)", "Every check passed."),
    ]:
        solo.text_area(key=box).input(source)
        solo.button(key=f"lessons_q_{lesson_id}_2_run").click().run()
        assert not solo.exception
        assert verdict in _said(solo), _said(solo)
