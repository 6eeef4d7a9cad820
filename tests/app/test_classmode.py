"""Class mode's pages under AppTest: a teacher starts a class and sees its code, students join
by code and by link, follow the teacher's steps, answer, and see the reveal; teacher-only
controls need the teacher key; hostile link values are refused with an explanation.

Every test gets its own SQLite database (``ATLAS_DATA_DIR`` in a temp dir) and a fresh
process-wide store. A second ``ClassStore`` on the same file stands for "another session or
another server" where a test needs the teacher's side without a second page.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from bench.harness import new_session
from components.classmode import draw, panels, state
from components.visitor import CLIENT_KEY
from tests.app.apptest import rendered_text
from tests.app.hostile import Visit, measured_visit, open_page_once
from torchatlas.classmode import ALPHABET, ClassStore
from torchatlas.i18n import translate
from torchatlas.lessons import find

PAGE = "views/classmode.py"
LESSON = "broadcasting"  # three steps: basics, strides, basics; each asks a question


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch) -> Iterator[ClassStore]:
    """A database of this test's own, and the page's store on it: the test acts through the
    same store as the pages, as a class on one server does (two replicas: the e2e tests)."""
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    state.store.clear()
    yield state.store()
    state.store.clear()


def _said(at: AppTest) -> str:
    boxes = [str(b.value) for kind in ("success", "error", "warning", "info") for b in at.get(kind)]
    return "\n".join([rendered_text(at), *boxes])


def _html(at: AppTest) -> str:
    return "\n".join(str(element.proto.body) for element in at.get("html"))


def _open(query: dict | None = None, lang: str = "en", client: str | None = None) -> AppTest:
    """The Class page opened by a link. AppTest's first run is the app's default page (a
    page with its own url_path cannot be named before it), so the link's query is set for
    the second run, the Class page's: the page reads it as a visitor's first load would.
    ``client``: the machine this session comes from (else the session is its own client)."""
    at = new_session(lang)
    if client is not None:
        at.session_state[CLIENT_KEY] = client
    at.run()
    for name, value in (query or {}).items():
        at.query_params[name] = value
    _switch(at, PAGE)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _switch(at: AppTest, page: str) -> None:
    """Open ``page`` once. AppTest keeps asking for the page its ``switch_page`` named on
    every later run; a browser stays where the app's own last ``st.switch_page`` took it
    (a student following the teacher), so the request is dropped after this run."""
    at.switch_page(page).run()
    at._page_hash = ""


def _teacher(
    lang: str = "en", lesson: str | None = LESSON, client: str | None = None
) -> tuple[AppTest, str, str]:
    at = _open(lang=lang, client=client)
    at.selectbox(key=state.lesson_pick_widget(lang)).set_value(lesson).run()
    at.button(key="classmode_start_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    code, key = at.session_state[state.TEACHER_KEY]
    return at, code, key


def _join(code: str, nickname: str = "", lang: str = "en", client: str | None = None) -> AppTest:
    at = _open(lang=lang, client=client)
    at.text_input(key=state.JOIN_CODE_KEY).input(code)
    at.text_input(key=state.JOIN_NAME_KEY).input(nickname)
    at.button(key="classmode_join_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _has_button(at: AppTest, key: str) -> bool:
    return any(button.key == key for button in at.button)


def _send(student: AppTest, step: int) -> None:
    """Press Send (or Change) under the class's question at ``step`` (the kit's button)."""
    found = [b for b in student.button if str(b.key).startswith(f"{state.PICK_KEY}_")
             and str(b.key).endswith(f"_{step}_send")]  # fmt: skip
    assert len(found) == 1, [b.key for b in student.button]
    found[0].click().run()


def _room_waits(at: AppTest) -> bool:
    """The class's room keeps its place for the reveal: its note stands in for it."""
    return translate("classmode.question.room_hidden", "en") in [i.value for i in at.info]


def _kind(at: AppTest, key: str) -> str:
    """A button's type: "primary", "secondary" or "tertiary"."""
    return at.button(key=key).proto.type


# --------------------------------------------------------------------------- teacher


def test_start_shows_the_code_the_qr_and_the_join_link() -> None:
    at, code, key = _teacher()
    assert re.fullmatch(f"[{ALPHABET}]{{6}}", code)
    html = _html(at)
    assert f"{code[:3]}&#8201;{code[3:]}" in html  # the projected code, spaced
    join = [m.value for m in at.markdown if "classmode-join-url" in m.value]
    assert join and f"class={code}" in join[0]
    # The QR is the join link's own code (an SVG image; AppTest runs without a browser URL).
    qr = at.image[0].proto.imgs[0].url
    assert qr.startswith("data:image/svg+xml;base64,")
    shown = base64.b64decode(qr.split(",", 1)[1]).decode()
    modules = re.compile(r'class="qrline"[^>]* d="([^"]+)"')
    expected = modules.search(draw.qr_svg(f"/class?class={code}")).group(1)
    assert modules.search(shown).group(1) == expected
    # The key drives the class: it is in the session and the private expander only, never
    # in the address bar of a projected screen.
    assert key not in json.dumps(dict(at.query_params))
    assert at.query_params.get("class") in (code, [code])
    assert _has_button(at, "classmode_next") and _has_button(at, "classmode_end")


def test_the_teacher_link_resumes_the_class_and_leaves_the_address_bar() -> None:
    _, code, key = _teacher()
    at = _open({"class": code, "teacher": key})
    assert at.session_state[state.TEACHER_KEY] == (code, key)
    assert "teacher" not in at.query_params
    assert _has_button(at, "classmode_next")


# --------------------------------------------------------------------------- joining


def test_join_by_code_with_a_nickname_that_is_shown_as_text(fresh_store: ClassStore) -> None:
    _, code, _ = _teacher()
    student = _join(code.lower()[:3] + " " + code.lower()[3:], "**Ada** :red[x]")
    stored_code, key = student.session_state[state.STUDENT_KEY]
    assert stored_code == code
    # Their own link stays in their address bar: a reload brings them back.
    assert student.query_params.get("student") in (key, [key])
    bar = [m.value for m in student.markdown]  # the bar's one element: who, then the step
    assert any(f"Class {code}" in m and r"\*\*Ada\*\* \:red\[x\]" in m for m in bar), bar
    assert fresh_store.state(code).students == 1


def test_the_join_link_fills_the_code() -> None:
    _, code, _ = _teacher()
    at = _open({"class": code})
    assert at.text_input(key=state.JOIN_CODE_KEY).value == code
    at.text_input(key=state.JOIN_NAME_KEY).input("Bo")
    at.button(key="classmode_join_button").click().run()
    assert at.session_state[state.STUDENT_KEY][0] == code


def test_the_students_own_link_brings_back_their_answer(fresh_store: ClassStore) -> None:
    _, code, teacher_key = _teacher()
    student = _join(code, "Cy")
    _, student_key = student.session_state[state.STUDENT_KEY]
    fresh_store.move(code, teacher_key, step=1, room="basics", query=_step_query(1))
    fresh_store.ask(code, teacher_key)
    fresh_store.answer(code, student_key, 1)
    again = _open({"class": code, "student": student_key})  # a reload: a new session
    assert again.session_state[state.STUDENT_KEY] == (code, student_key)
    picked = find(LESSON).step(1).question.options[1]
    assert picked in _said(again)  # "Your answer: …" (they followed to basics on the way)


def test_a_wrong_code_is_refused_with_the_fix() -> None:
    at = _join("ZZZZZZ")
    assert state.STUDENT_KEY not in at.session_state
    assert "There is no class with this code" in _said(at)


# --------------------------------------------------------------------------- following


def _step_query(number: int) -> dict:
    return state.step_query(find(LESSON), find(LESSON).step(number))


def test_students_follow_the_teacher_answer_and_see_the_reveal(fresh_store: ClassStore) -> None:
    teacher, code, key = _teacher()
    students = [_join(code, f"S{n}") for n in range(2)]
    teacher.button(key="classmode_next").click().run()  # start the lesson: step 1 (basics)
    assert fresh_store.state(code).step == 1 and fresh_store.state(code).room == "basics"
    for student in students:
        student.run()  # what the follow fragment's run does (pushed by a server)
        assert student.query_params.get("class") in (code, [code])
        assert student.session_state[state.PLACE_KEY][1] == "basics"
        assert student.title[0].value == translate("app.rooms.basics.title", "en")
        # Step 1's room shows torch's answer: it waits for the reveal (the room never ran).
        assert _room_waits(student)
    teacher.button(key="classmode_ask").click().run()
    question = find(LESSON).step(1).question
    wrong = next(i for i in range(len(question.options)) if i != question.answer)
    for student, pick in zip(students, (question.answer, wrong), strict=True):
        student.run()
        radio = next(r for r in student.radio if str(r.key).startswith(state.PICK_KEY))
        radio.set_value(pick).run()
        _send(student, 1)
        assert not student.exception
    tally = fresh_store.tally(code, key)
    assert tally.answered == 2 and tally.counts[question.answer] == 1 and tally.counts[wrong] == 1
    teacher.run()
    chart = json.loads(teacher.get("plotly_chart")[0].proto.spec)
    assert [int(x) for x in chart["data"][0]["x"]] == list(tally.counts)
    teacher.button(key="classmode_reveal").click().run()
    right_student, wrong_student = students
    right_student.run()
    wrong_student.run()
    assert not _room_waits(right_student), "the room opens with the reveal"
    assert "basics_" in " ".join(str(k) for k in right_student.session_state)  # it ran
    # The room's own quiz is left out for a student: the class's question is the one asked.
    quiz = translate("basics.quiz.header", "en")
    assert quiz not in [h.value for h in right_student.subheader]
    assert right_student.success and "Right!" in right_student.success[0].value
    assert wrong_student.error and "Not this time" in wrong_student.error[0].value
    assert question.explain["en"][:30] in _said(wrong_student)
    # Step 2 is in another room: the students' screens switch to it.
    teacher.button(key="classmode_next").click().run()
    for student in students:
        student.run()
        assert student.session_state[state.PLACE_KEY][1] == "strides"
        assert student.title[0].value == translate("app.rooms.strides.title", "en")


def _has_widget(at: AppTest, key: str) -> bool:
    return any(getattr(widget, "key", None) == key for widget in at.main)


def test_a_following_student_sees_the_room_folded_on_the_teachers_example(
    fresh_store: ClassStore,
) -> None:
    """On the class's room page a student sees the teacher's example and torch's answer, with
    the room's inputs, section picker and reference tables folded behind one button; pressed,
    the whole room is theirs for the rest of the step; the next step opens folded again. The
    teacher's room view, and the room a student wanders into, are never folded."""
    from components.basics import state as basics

    teacher, code, _ = _teacher(lesson="dlwp_tensors")
    student = _join(code, "Folded")
    for _ in range(2):  # step 2: the indexing section, its room open
        teacher.button(key="classmode_next").click().run()
    student.run()
    assert student.session_state[state.PLACE_KEY][1] == "basics"
    assert not student.exception
    example = find("dlwp_tensors").step(2).fields()["b_ix"]
    assert any(example in code_block.value for code_block in student.code), "the example shown"
    assert student.html, "with its picture"
    folded = [basics.SECTION_KEY, basics.INDEX_KEY, basics.INDEX_SHAPE_KEY]
    assert not any(_has_widget(student, key) for key in folded)
    unfold = student.button(key=basics.UNFOLD_KEY)
    assert unfold.label == translate("kit.follow.unfold", "en")
    unfold.click().run()
    assert all(_has_widget(student, key) for key in folded)
    assert student.text_input(key=basics.INDEX_KEY).value == example  # the teacher's values
    student.run()
    assert all(_has_widget(student, key) for key in folded), "unfolded for the whole step"
    assert not _has_button(student, basics.UNFOLD_KEY)
    teacher.button(key="classmode_next").click().run()  # step 3: einsum, same room
    student.run()
    assert not _has_widget(student, basics.EQUATION_KEY), "the next step opens folded"
    assert _has_button(student, basics.UNFOLD_KEY)
    # The teacher's own view of the room (the projector) keeps every input.
    teacher.button(key="classmode_open_room").click().run()
    assert _has_widget(teacher, basics.EQUATION_KEY) and _has_widget(teacher, basics.SECTION_KEY)
    assert not _has_button(teacher, basics.UNFOLD_KEY)
    # A student who wanders into the room while the class is in another has the whole room.
    for _ in range(2):  # step 5: the strides room
        teacher.button(key="classmode_next").click().run()
    student.run()
    assert student.session_state[state.PLACE_KEY][1] == "strides"
    _switch(student, "views/basics.py")
    assert _has_widget(student, basics.SECTION_KEY)
    assert not _has_button(student, basics.UNFOLD_KEY)


def _student_at_the_reveal(number: int, room: str) -> AppTest:
    """A student following a ``dlwp_tensors`` class to step ``number`` (whose room, ``room``,
    waits for the reveal), once the teacher asked and revealed its question: the room open."""
    teacher, code, _ = _teacher(lesson="dlwp_tensors")
    student = _join(code, "Folded")
    for _ in range(number):
        teacher.button(key="classmode_next").click().run()
        if _has_button(teacher, "classmode_move_anyway"):
            teacher.button(key="classmode_move_anyway").click().run()
    teacher.button(key="classmode_ask").click().run()
    teacher.button(key="classmode_reveal").click().run()
    student.run()
    student.run()
    assert student.session_state[state.PLACE_KEY][1] == room
    assert not student.exception and not _room_waits(student)
    return student


def test_a_following_student_sees_the_classify_room_folded_after_the_reveal(
    fresh_store: ClassStore,
) -> None:
    """The classify step keeps its room for the reveal; at the reveal it opens on the
    teacher's example: the predictions and the photo's pipeline, with the model, the photos'
    inputs and the inspector's other tabs folded behind one button (the teacher's model and
    top-k kept for when it is pressed). A student with photos of their own is never folded:
    the uploader a folded room leaves out would drop them."""
    from components.classify import state as classify

    student = _student_at_the_reveal(1, "classify")
    texts = [h.value for h in student.header]
    assert translate("classify.results.header", "en") in texts, "the predictions"
    assert any("CenterCrop" in block.value for block in student.code), "the pipeline"
    assert student.dataframe, "with its tensors' statistics"
    folded = [classify.MODEL_KEY, classify.TOPK_KEY, classify.SAMPLES_KEY, classify.INSPECT_KEY]
    assert not any(_has_widget(student, key) for key in folded)
    assert not student.get("file_uploader")
    student.run()  # folded runs keep the teacher's model and top-k for the unfolded room
    student.button(key=classify.UNFOLD_KEY).click().run()
    assert not student.exception
    assert all(_has_widget(student, key) for key in folded)
    model = find("dlwp_tensors").step(1).fields()["c_model"]
    assert student.selectbox(key=classify.MODEL_KEY).value == model
    assert student.get("file_uploader")
    # Photos of their own: the room stays whole (the next step's classify room would too).
    student.session_state[classify.KEPT_KEY] = {"file": ("mine.png", None)}
    from components.kit import follow

    del student.session_state[follow.UNFOLDED_KEY]
    student.run()
    assert _has_widget(student, classify.MODEL_KEY)


def test_a_following_student_sees_the_strides_room_folded_after_the_reveal(
    fresh_store: ClassStore,
) -> None:
    """A strides step opens at the reveal on the teacher's chain: the step picker, the
    explorer, the facts and the chain's code, with the setup box (shape, dtype, op chain)
    and the other tabs folded behind one button, which brings them back with the teacher's
    values."""
    from components.strides import state as strides

    student = _student_at_the_reveal(5, "strides")
    fields = find("dlwp_tensors").step(5).fields()
    assert any(op in block.value for block in student.code for op in fields["s_ops"])
    folded = [strides.SHAPE_KEY, strides.DTYPE_KEY, strides.OPS_KEY]
    assert not any(_has_widget(student, key) for key in folded)
    assert _has_widget(student, strides.STEP_KEY), "the step picker stays"
    student.run()
    student.button(key=strides.UNFOLD_KEY).click().run()
    assert not student.exception
    assert all(_has_widget(student, key) for key in folded)
    assert student.text_input(key=strides.SHAPE_KEY).value == fields["s_shape"]
    assert student.text_area(key=strides.OPS_KEY).value == "\n".join(fields["s_ops"])


def test_students_never_see_the_tally_before_the_reveal(fresh_store: ClassStore) -> None:
    teacher, code, _ = _teacher()
    student = _join(code, "Di")
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_ask").click().run()
    student.run()
    assert not student.get("plotly_chart")
    assert not any(
        str(b.key).startswith(("classmode_next", "classmode_reveal")) for b in student.button
    )


# --------------------------------------------------------------------------- refusals


def test_teacher_controls_are_refused_without_the_key(fresh_store: ClassStore) -> None:
    _, code, key = _teacher()
    wrong = key[:-2] + ("AA" if not key.endswith("AA") else "BB")
    at = _open({"class": code, "teacher": wrong})
    assert state.TEACHER_KEY not in at.session_state
    assert "cannot drive the class" in _said(at)
    assert "teacher" not in at.query_params
    assert not _has_button(at, "classmode_next") and not _has_button(at, "classmode_reveal")
    # A student's key is not a teacher's either.
    student = _join(code, "Ed")
    _, student_key = student.session_state[state.STUDENT_KEY]
    at = _open({"class": code, "teacher": student_key})
    assert state.TEACHER_KEY not in at.session_state
    assert "cannot drive the class" in _said(at)
    assert fresh_store.state(code).step == 0  # nothing moved the class


def _hostile_visit(query: dict) -> Visit:
    """:func:`tests.app.hostile.open_hostile_link`, with the link's query given to the Class
    page's run (see :func:`_open`), measured the same way."""
    at = new_session("en")
    at.run()
    for name, value in query.items():
        at.query_params[name] = value
    return measured_visit(at, PAGE)


JUNK = [
    {"class": "'; DROP TABLE classes;--", "student": "x' OR '1'='1", "teacher": "<script>"},
    {"class": "A" * 5000, "student": "B" * 100_000, "teacher": "C" * 100_000},
    {"class": ["ABCDEF", "ZZZZZZ"], "student": ["\x00", "é"], "teacher": ["²", "%00"]},
    {"class": "ＡＢＣＤＥＦ", "student": "\u202e", "teacher": "{{7*7}}"},
]


@pytest.mark.parametrize("query", JUNK, ids=["sql", "huge", "repeated", "unicode"])
def test_hostile_class_links_are_refused_and_explained(query: dict) -> None:
    open_page_once(PAGE)
    visit = _hostile_visit(query)
    visit.assert_contained()
    assert state.TEACHER_KEY not in visit.at.session_state
    assert state.STUDENT_KEY not in visit.at.session_state
    assert "teacher" not in visit.at.query_params
    said = _said(visit.at)
    assert "cannot drive the class" in said or "no class with this code" in said, said[:2000]


def test_a_student_link_of_another_class_is_refused() -> None:
    _, code_a, _ = _teacher()
    student = _join(code_a, "Fa")
    _, key_a = student.session_state[state.STUDENT_KEY]
    _, code_b, _ = _teacher()
    at = _open({"class": code_b, "student": key_a})
    assert state.STUDENT_KEY not in at.session_state
    assert "does not open a class" in _said(at)


def _error_cards(at: AppTest) -> list[str]:
    return [str(box.value) for box in at.error]


def test_a_wrong_key_and_an_unknown_code_get_the_same_card() -> None:
    """A student link (or a teacher's) tells nothing about whether its code exists."""
    _, code, teacher_key = _teacher()
    student = _join(code, "Ida")
    _, key = student.session_state[state.STUDENT_KEY]
    unknown = next(c for c in ("ABCDEF", "ABCDEG") if c != code)
    forged = key[:-1] + ("x" if key[-1] != "x" else "y")
    cards = [
        _error_cards(_open({"class": c, "student": k})) for c, k in ((code, forged), (unknown, key))
    ]
    assert cards[0] == cards[1] and len(cards[0]) == 1, cards
    assert "does not open a class" in cards[0][0]
    forged = teacher_key[:-1] + ("x" if teacher_key[-1] != "x" else "y")
    cards = [
        _error_cards(_open({"class": c, "teacher": k}))
        for c, k in ((code, forged), (unknown, teacher_key))
    ]
    assert cards[0] == cards[1] and len(cards[0]) == 1, cards
    assert "cannot drive the class" in cards[0][0]


def _roster_labels(at: AppTest) -> list[str]:
    return [e.label for e in at.expander if e.label.startswith("Students (")]


def test_the_teacher_sees_the_roster_removes_a_student_and_locks_the_class(
    fresh_store: ClassStore,
) -> None:
    teacher, code, teacher_key = _teacher()
    ada, bob = _join(code, "Ada"), _join(code, "Bob")
    teacher.run()
    assert _roster_labels(teacher) == ["Students (2)"]
    # Closed, the roster draws no rows (a projector's polls skip a hundred of them).
    assert not any(str(b.key).startswith("classmode_remove_") for b in teacher.button)
    assert "**Ada**" not in _said(teacher)
    teacher.session_state[panels.ROSTER_KEY] = True  # the teacher opens it
    teacher.run()
    said = _said(teacher)
    assert "**Ada**" in said and "**Bob**" in said and "joined just now" in said
    people = fresh_store.roster(code, teacher_key)
    _, bob_key = bob.session_state[state.STUDENT_KEY]
    assert all(bob_key not in str(b.key) for b in teacher.button)  # ids, never keys
    teacher.button(key=f"classmode_remove_{people[1].student_id}").click().run()
    assert not teacher.exception
    assert _roster_labels(teacher) == ["Students (1)"]
    assert not _has_button(teacher, f"classmode_remove_{people[1].student_id}")
    assert [p.nickname for p in fresh_store.roster(code, teacher_key)] == ["Ada"]
    # Bob's screen says so, kindly, and forgets the class (his key no longer works).
    bob.run()
    assert not bob.exception
    assert state.STUDENT_KEY not in bob.session_state
    assert "student" not in bob.query_params
    assert any("Your teacher has taken you out of this class" in c for c in _error_cards(bob))
    ada.run()
    assert ada.session_state[state.STUDENT_KEY][0] == code and not _error_cards(ada)
    # Locked: a late student is told why; unlocked: they get in.
    teacher.button(key="classmode_lock").click().run()
    assert fresh_store.state(code).locked
    assert "The class is locked" in _said(teacher)
    late = _join(code, "Late")
    assert state.STUDENT_KEY not in late.session_state
    assert any(
        "The class is locked: ask your teacher to unlock it" in c for c in _error_cards(late)
    )
    teacher.button(key="classmode_lock").click().run()
    assert not fresh_store.state(code).locked
    late.button(key="classmode_join_button").click().run()
    assert late.session_state[state.STUDENT_KEY][0] == code
    teacher.run()
    assert _roster_labels(teacher) == ["Students (2)"]


def test_starts_count_the_client_not_the_session() -> None:
    """Fresh sessions of one machine share its start budget (three a minute); another
    machine is not held back by it."""
    for _ in range(3):
        _teacher(client="ip:203.0.113.7")
    at = _open(client="ip:203.0.113.7")
    at.button(key="classmode_start_button").click().run()
    assert state.TEACHER_KEY not in at.session_state
    assert any("Too many tries from here" in c for c in _error_cards(at))
    _teacher(client="ip:198.51.100.9")


def test_start_asks_for_the_servers_password(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ATLAS_START_SECRET", "correct horse")
    state.store.clear()
    at = _open()
    box = at.text_input(key=state.START_SECRET_KEY)
    assert box.proto.type == box.proto.PASSWORD
    at.button(key="classmode_start_button").click().run()
    assert state.TEACHER_KEY not in at.session_state
    assert any("start password" in c for c in _error_cards(at))
    at.text_input(key=state.START_SECRET_KEY).input("correct horse")
    at.button(key="classmode_start_button").click().run()
    assert not at.exception
    assert state.TEACHER_KEY in at.session_state
    assert "correct horse" not in json.dumps(dict(at.query_params))
    # Without the setting there is no box.
    monkeypatch.delenv("ATLAS_START_SECRET")
    state.store.clear()
    plain = _open()
    assert not any(box.key == state.START_SECRET_KEY for box in plain.text_input)


# --------------------------------------------------------------------------- Korean


def test_korean_teacher_and_student() -> None:
    teacher, code, _ = _teacher(lang="ko")
    assert "수업 페이지에서 이 코드로 참여하세요" in _html(teacher)
    assert teacher.button(key="classmode_next").label == "레슨 시작"
    student = _join(code, "민지", lang="ko")
    assert any(f"수업 {code}" in m.value and "민지" in m.value for m in student.markdown)
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_ask").click().run()
    student.run()
    assert any(b.label == "답 보내기" for b in student.button)
    bad = _open({"class": "ZZZZZZ", "student": "x" * 24}, lang="ko")
    assert "이 학생 링크로는 수업에 들어갈 수 없습니다" in _said(bad)
    late = _join("ZZZZZZ", lang="ko")
    assert "이 코드의 수업이 없습니다" in _said(late)


# --------------------------------------------------------------------------- free mode


def test_free_mode_brings_the_class_to_the_teachers_room(fresh_store: ClassStore) -> None:
    teacher, code, _ = _teacher(lesson=None)
    student = _join(code, "Gu")
    # The teacher opens the strides room with a state of their own and brings the class.
    for name, value in {"s_shape": "4,6", "s_ops": [".t()"]}.items():
        teacher.query_params[name] = value
    _switch(teacher, "views/strides.py")
    assert not teacher.exception
    assert not _has_button(teacher, "classmode_next")  # no lesson: no steps
    teacher.button(key="classmode_bring").click().run()
    moved = fresh_store.state(code)
    assert moved.room == "strides"
    assert dict(moved.fields())["s_shape"] == "4,6"
    student.run()
    assert student.session_state[state.PLACE_KEY][1] == "strides"
    assert student.query_params.get("s_shape") in ("4,6", ["4,6"])
    assert student.query_params.get("student") is not None


def test_a_student_who_wanders_keeps_their_link_in_the_address_bar() -> None:
    _, code, _ = _teacher()
    student = _join(code, "Ha")
    _, key = student.session_state[state.STUDENT_KEY]
    student.query_params.clear()  # the sidebar's navigation starts a page with no query
    _switch(student, "views/strides.py")
    assert not student.exception
    assert student.query_params.get("student") in (key, [key])
    assert f"Class {code}" in " ".join(m.value for m in student.markdown)


# --------------------------------------------------------------------------- error texts

# The parameters the engine raises each code with (torchatlas/classmode/__init__.py).
ERROR_PARAMS = {
    "too_many_classes": {"limit": 200},
    "too_many_seats": {"limit": 60},
    "too_many_own_classes": {"limit": 5},
    "class_full": {"limit": 120},
    "bad_nickname": {"limit": 24},
    "rate_limited": {"limit": 20, "seconds": 42},
    "bad_option": {"options": 4},
    "not_asked": {"step": 2},
    "already_revealed": {"step": 2},
    "bad_place": {"room": "strides", "field": "s_shape"},
    "no_such_lesson": {"lesson": "nope"},
    "no_question": {"step": 2},
    "lesson_too_big": {"limit": 64},
    "too_many_lessons": {"limit": 30},
    "lessons_full": {"limit": 5000},
    "lessons_per_hour": {"limit": 20},
}


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_engine_refusal_has_its_cause_and_fix(lang: str) -> None:
    from torchatlas.classmode import ErrorCode
    from torchatlas.i18n import has_key, translate

    for code in ErrorCode:
        key = f"classmode.errors.{code.value}"
        assert has_key(key, lang), key
        text = translate(key, lang, **ERROR_PARAMS.get(code.value, {}))
        assert "{" not in text and len(text) > 30, (code, text)
        if code.value in ("not_asked", "already_revealed"):
            continue  # the step is the one on the student's screen: not repeated
        for value in ERROR_PARAMS.get(code.value, {}).values():
            assert str(value) in text, (code, text)


def test_the_teacher_drives_the_lesson_from_the_rooms(fresh_store: ClassStore) -> None:
    teacher, code, key = _teacher()
    teacher.button(key="classmode_next").click().run()  # step 1 (basics), from the Class page
    teacher.button(key="classmode_open_room").click().run()  # show it on the projector
    assert not teacher.exception
    assert teacher.query_params.get("class") in (code, [code])
    assert key not in json.dumps(dict(teacher.query_params))  # never in a projected URL
    assert "lesson" not in teacher.query_params  # the class's question, not the lesson's
    assert _has_button(teacher, "classmode_to_page")  # the class bar above the room
    # The room view has the question, its tally and the controls, ending included.
    assert _room_waits(teacher), "the projected room would show the answer: it waits"
    teacher.button(key="classmode_ask").click().run()
    question = find(LESSON).step(1).question
    assert any(question.prompt["en"] in m.value for m in teacher.markdown)
    assert teacher.get("plotly_chart"), "the tally, above the room"
    assert _has_button(teacher, "classmode_reveal") and _has_button(teacher, "classmode_end")
    teacher.button(key="classmode_reveal").click().run()
    assert not _room_waits(teacher) and "basics_" in " ".join(map(str, teacher.session_state))
    # The teacher's room keeps its own quiz (only a following student's leaves it out).
    assert translate("basics.quiz.header", "en") in [h.value for h in teacher.subheader]
    chart = json.loads(teacher.get("plotly_chart")[0].proto.spec)
    assert draw.RIGHT_MARK in chart["data"][0]["y"][question.answer], "the right option marked"
    teacher.button(key="classmode_next").click().run()  # step 2 is in the strides room
    assert fresh_store.state(code).step == 2 and fresh_store.state(code).room == "strides"
    assert teacher.title[0].value == translate("app.rooms.strides.title", "en")
    teacher.button(key="classmode_to_page").click().run()
    assert _has_button(teacher, "classmode_end")  # back on the projector view


# --------------------------------------------------------------------------- issue 35: the hall


def _asked_class(fresh_store: ClassStore, students: int = 1) -> tuple[AppTest, str, str, list]:
    """A teacher at step 1 (its question open) and ``students`` who joined."""
    teacher, code, key = _teacher()
    joined = [_join(code, f"P{n}") for n in range(students)]
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_ask").click().run()
    return teacher, code, key, joined


def test_one_primary_action_at_a_time_and_the_question_before_next(
    fresh_store: ClassStore,
) -> None:
    teacher, _, _ = _teacher()
    assert _kind(teacher, "classmode_next") == "primary"  # "Start the lesson": the only one
    teacher.button(key="classmode_next").click().run()
    # Step 1 asks a question: Open the question is the one to press, before Next step.
    assert _kind(teacher, "classmode_ask") == "primary"
    assert _kind(teacher, "classmode_next") == "secondary"
    keys = [b.key for b in teacher.button if b.key in ("classmode_ask", "classmode_next")]
    assert keys == ["classmode_ask", "classmode_next"], "the question's action comes first"
    teacher.button(key="classmode_ask").click().run()
    assert _kind(teacher, "classmode_reveal") == "primary"
    assert _kind(teacher, "classmode_next") == "secondary"
    teacher.button(key="classmode_reveal").click().run()
    assert _kind(teacher, "classmode_next") == "primary"
    # (the end's own "yes" waits in its closed popover)
    primaries = [b.key for b in teacher.button if b.proto.type == "primary"]
    assert primaries == ["classmode_next", "classmode_end"], primaries


def test_moving_on_from_an_open_question_asks_once_and_an_unrevealed_one_is_not_scored(
    fresh_store: ClassStore,
) -> None:
    teacher, code, key, (student,) = _asked_class(fresh_store)
    question = find(LESSON).step(1).question
    student.run()
    next(r for r in student.radio if str(r.key).startswith(state.PICK_KEY)).set_value(
        question.answer
    ).run()
    _send(student, 1)
    teacher.button(key="classmode_next").click().run()
    assert fresh_store.state(code).step == 1, "nothing moved yet: the teacher is asked"
    assert translate("classmode.teacher.confirm_open", "en") in [w.value for w in teacher.warning]
    assert _kind(teacher, "classmode_reveal_go") == "primary"
    assert _kind(teacher, "classmode_reveal") == "secondary", "one primary at a time"
    teacher.button(key="classmode_stay").click().run()
    assert not teacher.warning and fresh_store.state(code).step == 1
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_go_unrevealed").click().run()
    moved = fresh_store.state(code)
    assert moved.step == 2 and not moved.asked
    # Step 2: open, then Next again; this time reveal and continue.
    teacher.button(key="classmode_ask").click().run()
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_reveal_go").click().run()
    assert fresh_store.state(code).step == 3
    summary = {item.step: item for item in fresh_store.summary(code, key)}
    assert not summary[1].revealed and summary[2].revealed


def _csv(teacher: AppTest) -> bytes:
    """The CSV the download button hands out (from the media file it registered)."""
    from streamlit.runtime import Runtime

    url = teacher.get("download_button")[0].proto.url
    file_id = url.rsplit("/", 1)[-1].split(".")[0]
    manager = Runtime.instance().media_file_mgr if Runtime.exists() else None
    if manager is not None:
        return manager._storage.get_file(file_id).content
    from streamlit.runtime.media_file_manager import MediaFileManager  # noqa: F401

    raise AssertionError("no media file storage")


def test_the_csv_says_what_students_saw_with_each_question_and_the_totals_apart(
    fresh_store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[bytes] = []
    real = draw.csv_bytes
    monkeypatch.setattr(draw, "csv_bytes", lambda text: made.append(real(text)) or made[-1])
    teacher, _, _, students = _asked_class(fresh_store, 2)
    first = find(LESSON).step(1).question
    error = first.options.index("error")  # a wrong pick whose words differ from its value
    for student, pick in zip(students, (first.answer, error), strict=True):
        student.run()
        next(r for r in student.radio if str(r.key).startswith(state.PICK_KEY)).set_value(
            pick
        ).run()
        _send(student, 1)
    teacher.button(key="classmode_reveal").click().run()
    teacher.button(key="classmode_next").click().run()  # step 2: opened, one answer, skipped
    teacher.button(key="classmode_ask").click().run()
    students[0].run()
    next(r for r in students[0].radio if str(r.key).startswith(state.PICK_KEY)).set_value(
        find(LESSON).step(2).question.answer
    ).run()
    _send(students[0], 2)
    teacher.button(key="classmode_next").click().run()
    teacher.button(key="classmode_go_unrevealed").click().run()
    teacher.run()
    data = made[-1]
    assert data.startswith(b"\xef\xbb\xbf"), "UTF-8 with a byte order mark"
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    header, ada, bo, blank, totals_head, *totals = rows
    assert header[0] == "Nickname" and header[-1] == "Right answers (of 1 revealed)"
    assert header[1] == "Step 1: What shape does batch_t * unsqueezed_weights have?"
    assert "`" not in "".join(header), "plain text, no Markdown"
    assert ada[:3] == ["P0", "(2, 3, 5, 5)", "1"] and bo[:3] == ["P1", "torch raises an error", "0"]
    assert ada[3:] == ["(0, 1)", "", "1"], "step 2 was not revealed: shown, not scored"
    assert bo[-1] == "0" and blank == []
    assert totals_head[0] == "Totals per question"
    assert totals[0][1:] == ["(2, 3, 5, 5)", "yes", "2", "1", "50 %"]
    assert totals[1][1:] == ["(0, 1)", "no: not scored", "1", "", ""]
    # The table on the page says the same, in plain text.
    table = teacher.dataframe[0].value
    assert "`" not in table.to_string() and "not revealed: not scored" in table.to_string()


def _student_says(at: AppTest) -> str:
    """Every string a student's page shows: text, labels, options, buttons, HTML."""
    parts = [_said(at), _html(at)]
    parts += [b.label for b in at.button]
    parts += [e.label for e in at.expander]
    parts += [str(o) for r in at.radio for o in r.options]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    parts += [w.label for w in at.text_input]
    return "\n".join(parts)


def _teacher_only() -> list[str]:
    """The teacher's own sentences (the words before each template's first field)."""
    from torchatlas.i18n import table

    words = table("en")  # flat: "classmode.teacher.next" → "Next step"
    sections = ("teacher", "tally", "roster", "start", "summary", "csv")
    found = [
        str(text)
        for key, text in words.items()
        if key.startswith(tuple(f"classmode.{section}." for section in sections))
    ]
    found += [words[f"classmode.{key}"] for key in ("intro", "step.not_started", "free.how")]
    pieces = (
        draw.plain_text(piece).replace("*", "").strip()
        for text in found
        for piece in re.split(r"\{[^}]*\}", text)
    )
    return sorted({piece for piece in pieces if len(piece) >= 12})


def test_a_student_never_sees_the_teachers_words(fresh_store: ClassStore) -> None:
    teacher, code, key = _teacher()
    said: list[tuple[str, str]] = []
    student = _open({"class": code})
    said.append(("join link", _student_says(student)))
    student.text_input(key=state.JOIN_NAME_KEY).input("Ada")
    student.button(key="classmode_join_button").click().run()
    said.append(("joined, before the start", _student_says(student)))
    for press in ("classmode_next", "classmode_ask", "classmode_reveal", "classmode_next"):
        teacher.button(key=press).click().run()
        student.run()
        said.append((press, _student_says(student)))
    fresh_store.end(code, key)
    student.run()
    said.append(("ended", _student_says(student)))
    teacher_words = _teacher_only()
    assert any("Press “Start the lesson”" in words for words in teacher_words)  # the teacher's
    for phase, text in said:
        leaked = [words for words in teacher_words if words in text]
        assert leaked == [], (phase, leaked)


def test_the_join_link_shows_joining_first_and_starting_a_class_one_click_away() -> None:
    _, code, _ = _teacher()
    at = _open({"class": code})
    assert at.text_input(key=state.JOIN_CODE_KEY).value == code
    assert not _has_button(at, "classmode_start_button"), "no teacher's form on a join link"
    assert [b.key for b in at.button if b.proto.type == "primary"] == ["classmode_join_button"]
    assert translate("classmode.join.intro", "en") in _said(at)
    assert translate("classmode.intro", "en") not in _said(at)
    at.button(key="classmode_show_start").click().run()  # a teacher who came by the link
    assert _has_button(at, "classmode_start_button") and _has_button(at, "classmode_join_button")


def test_the_lesson_picker_speaks_the_language_just_chosen() -> None:
    at = _open()
    at.selectbox(key=state.lesson_pick_widget("en")).set_value(LESSON).run()
    at.radio(key="lang").set_value("ko").run()  # the sidebar's switch
    box = at.selectbox(key=state.lesson_pick_widget("ko"))
    assert box.value == LESSON, "the pick is kept"
    assert find(LESSON).title["ko"] in box.options and find(LESSON).title["en"] not in box.options


def test_a_reload_of_the_teachers_tab_keeps_the_class(
    fresh_store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher, code, key = _teacher()
    assert state.TEACHER_COOKIE in _html(teacher) and f"{code}.{key}" in _html(teacher)
    kept = {state.TEACHER_COOKIE: f"{code}.{key}"}
    monkeypatch.setattr(state, "browser_cookie", kept.get)
    again = _open({"class": code})  # the projector's tab reloaded: a new session
    assert again.session_state[state.TEACHER_KEY] == (code, key)
    assert _has_button(again, "classmode_next") and "teacher" not in again.query_params
    other = _open({"class": "ABCDEF" if code != "ABCDEF" else "ABCDEG"})
    assert state.TEACHER_KEY not in other.session_state, "another class's link is not taken"
    kept[state.TEACHER_COOKIE] = f"{code}.{'x' * 32}"  # a key the store refuses
    stale = _open({"class": code})
    assert state.TEACHER_KEY not in stale.session_state and not _error_cards(stale)
    assert f"{json.dumps(state.TEACHER_COOKIE)} + '=; path=/; max-age=0" in _html(stale)
    assert _has_button(stale, "classmode_join_button")


def test_students_see_their_score_at_the_end(fresh_store: ClassStore) -> None:
    teacher, code, key, (student,) = _asked_class(fresh_store)
    lesson = find(LESSON)
    for number, right in ((1, True), (2, False)):
        question = lesson.step(number).question
        pick = question.answer if right else (question.answer + 1) % len(question.options)
        student.run()
        next(r for r in student.radio if str(r.key).startswith(state.PICK_KEY)).set_value(
            pick
        ).run()
        _send(student, number)
        teacher.button(key="classmode_reveal").click().run()
        teacher.button(key="classmode_next").click().run()
        if number == 1:
            teacher.button(key="classmode_ask").click().run()
    teacher.button(key="classmode_ask").click().run()  # step 3: opened, never revealed
    fresh_store.end(code, key)
    student.run()
    score = {m.label: m.value for m in student.metric}
    assert score == {"Your score": "1 of 2 right"}, score
