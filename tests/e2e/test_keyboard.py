"""The keyboard alone: a student completes a lesson step with a question, and joins a class
and answers its question, in Chromium with Tab, Enter, Space and the arrow keys
(``page.keyboard`` only: no mouse, no ``click()``). ``page.goto`` opens the first page;
everything after it is a key press, and the test only looks (``expect``, and where the focus
is) in between.

A control the keyboard cannot reach, or a press that does nothing, fails here: :func:`tab_to`
walks the focus through the page in Tab order, as a keyboard user does, until it is on the
control, and never more than :data:`MAX_TABS` presses.

The class is started through the store (the teacher's side is not what is tested), on a
server of this module's own whose class mode keeps its SQLite file in a temporary folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from bench.server import Server
from components.classmode.state import step_query
from components.lessons.draw import option_label
from tests.e2e.conftest import DISCONNECTS, assert_no_error, wait_for_app
from torchatlas.classmode import ClassStore
from torchatlas.i18n import translate
from torchatlas.lessons import Lesson, find

LESSON = "broadcasting"  # three basics and strides steps, each with a question
# Enough for the sidebar's links and the language switch, then the page down to its last
# control: a page that needs more presses to reach a control is broken for a keyboard user.
MAX_TABS = 120
FOLLOW_TIMEOUT_MS = 15_000  # class mode's promise is 2 s; a loaded CI machine gets slack


@pytest.fixture(scope="module")
def keyboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server of this module's own; yields its URL and class mode's data folder."""
    base = tmp_path_factory.mktemp("keyboard")
    data = base / "data"
    with pytest.MonkeyPatch.context() as patch:  # the server inherits this environment
        patch.setenv("ATLAS_DATA_DIR", str(data))
        patch.delenv("ATLAS_DATABASE_URL", raising=False)
        server = Server(0, base / "server.log")
        server.start()
    try:
        yield server.url, data
    finally:
        server.stop()
        crashes = server.crashes(ignoring=DISCONNECTS)
        assert not crashes, crashes[0][-4000:]


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        yield context.new_page()
    finally:
        context.close()


def focused_in(target: Locator) -> bool:
    """Whether the keyboard's focus is on ``target`` (its first match) or inside it."""
    with contextlib.suppress(Exception):  # not there (yet): not focused
        return bool(
            target.first.evaluate("(node) => node.contains(document.activeElement)", timeout=500)
        )
    return False


def tab_to(page: Page, target: Locator) -> None:
    """Press Tab until the focus is on ``target``; fails after :data:`MAX_TABS` presses."""
    expect(target.first).to_be_visible()
    for _ in range(MAX_TABS):
        if focused_in(target):
            return
        page.keyboard.press("Tab")
    where = page.evaluate("() => document.activeElement?.outerHTML.slice(0, 200)")
    raise AssertionError(f"{MAX_TABS} Tabs did not reach {target}; the focus is on {where}")


def press(page: Page, key: str) -> None:
    """A key, then the script run it started (if any) to its end."""
    page.keyboard.press(key)
    wait_for_app(page)


def pick(page: Page, options: Locator, index: int) -> None:
    """Choose option ``index`` of a radio group none of whose options is chosen yet: Tab puts
    the focus on the first option; Space chooses it, each arrow down the next one."""
    tab_to(page, options.first)
    if index == 0:
        page.keyboard.press("Space")
    for _ in range(index):
        page.keyboard.press("ArrowDown")
    expect(options.nth(index)).to_be_checked()
    wait_for_app(page)


def shown(option: str) -> str:
    """An option's text as the browser shows it (markdown code loses its backticks)."""
    return option_label(option, "en").replace("`", "")


def lesson() -> Lesson:
    found = find(LESSON)
    assert found is not None
    return found


def test_a_lesson_step_with_a_question_by_keyboard(
    keyboard_server: tuple[str, Path], page: Page
) -> None:
    url, _ = keyboard_server
    taught = lesson()
    first, second = taught.step(1), taught.step(2)
    assert first.question is not None
    page.goto(f"{url}/lessons")
    wait_for_app(page)

    # The lesson's card: its Start button, by Tab, pressed with Enter.
    card = page.locator(f".st-key-lessons_card_{taught.id}")
    tab_to(page, card.get_by_role("button", name=translate("lessons.card.start", "en")))
    press(page, "Enter")
    banner = page.locator(".st-key-lessons_banner")
    expect(banner.get_by_role("heading", name=first.title["en"])).to_be_visible(timeout=60_000)
    assert f"/{first.room}" in page.url

    # The question: an option by arrow keys, then Reveal (Space this time).
    radios = page.locator(f".st-key-lessons_q_{taught.id}_1_given input[type='radio']")
    pick(page, radios, first.question.answer)
    reveal = page.locator(f".st-key-lessons_q_{taught.id}_1_reveal button")
    expect(reveal).to_be_enabled()  # a disabled button takes no focus: Tab would pass it
    tab_to(page, reveal)
    press(page, "Space")
    verdict = translate("lessons.question.right", "en", answer=shown(first.question.value))
    expect(banner.get_by_text(verdict, exact=False)).to_be_visible(timeout=60_000)

    # Next: the second step opens in its room.
    tab_to(page, page.locator(".st-key-lessons_next button"))
    press(page, "Enter")
    expect(banner.get_by_role("heading", name=second.title["en"])).to_be_visible(timeout=60_000)
    assert f"/{second.room}" in page.url and "step=2" in page.url
    assert_no_error(page)


def test_joining_a_class_and_answering_by_keyboard(
    keyboard_server: tuple[str, Path], page: Page
) -> None:
    url, data = keyboard_server
    taught = lesson()
    step = taught.step(1)
    assert step.question is not None
    store = ClassStore(f"sqlite:///{data / 'classes.sqlite3'}")
    teacher = store.start(taught.id, "en", client="test:teacher")
    page.goto(f"{url}/class")
    wait_for_app(page)

    # The code, Tab, the nickname, Tab: the focus is on Join, and Enter presses it.
    join = page.locator(".st-key-classmode_join")
    tab_to(page, join.locator("input").first)
    page.keyboard.type(teacher.code)
    page.keyboard.press("Tab")
    expect(join.locator("input").nth(1)).to_be_focused()
    page.keyboard.type("Ada")
    page.keyboard.press("Tab")
    join_button = page.locator(".st-key-classmode_join_button button")
    expect(join_button).to_be_focused()
    expect(join_button).to_be_enabled()
    press(page, "Enter")
    leave = page.get_by_role("button", name=translate("classmode.student.leave", "en"))
    expect(leave).to_be_visible(timeout=60_000)
    roster = store.roster(teacher.code, teacher.teacher_key)
    assert [entry.nickname for entry in roster] == ["Ada"]

    # The teacher opens step 1 and its question; the student's page follows by itself, and
    # the answer goes by arrow keys and Enter on Send.
    store.move(teacher.code, teacher.teacher_key, step=1, room=step.room,
               query=step_query(taught, step))  # fmt: skip
    store.ask(teacher.code, teacher.teacher_key)
    question = page.locator(".st-key-classmode_question")
    expect(question).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    wait_for_app(page)
    pick(page, question.locator("input[type='radio']"), step.question.answer)
    send = page.locator(f".st-key-classmode_q_{teacher.code}_1_send button")
    expect(send).to_be_enabled()
    tab_to(page, send)
    press(page, "Enter")
    answer = shown(step.question.options[step.question.answer])
    sent = translate("classmode.question.sent", "en", answer=answer)
    expect(question.get_by_text(sent, exact=False)).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    tally = store.tally(teacher.code, teacher.teacher_key)
    assert tally.answered == 1
    assert_no_error(page)
