"""Class mode in real browsers: a teacher's projector page and three students' pages (one a
phone) on servers of this module's own, each with its own data folder or database.

- One class end to end: join by code and by the join link, follow two steps, answer, the live
  tally counts the answers, reveal, a student reloads and keeps their answer; screenshots of
  the projector view (1920×1080), a phone and the Korean page.
- Restart: the server is killed with SIGKILL mid-class and started again on the same port and
  data folder; the teacher comes back with the "resume" link, the students with their own
  links, and the class, its step and every answer are there.
- Replicas: two servers on one PostgreSQL; the teacher on one, students on both; the students
  on the other replica follow and their answers reach the teacher's tally.

Waits are Playwright ``expect()`` on what the page shows, never sleeps.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from bench.server import Server
from components.lessons.draw import option_label
from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from torchatlas.lessons import find

LESSON = find("broadcasting")
FOLLOW_TIMEOUT_MS = 15_000  # the page's promise is 2 s; a loaded CI machine gets slack
PHONE = {"width": 390, "height": 844}
PROJECTOR = {"width": 1920, "height": 1080}


# --------------------------------------------------------------------------- servers

# A browser that leaves mid-message is not a crash (as tests/e2e/conftest.py ignores it).
DISCONNECTS = ("WebSocketDisconnect", "ClientDisconnected", "ConnectionClosed")


@contextlib.contextmanager
def running(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], log: Path) -> Iterator[Server]:
    """A server of this module's own with class mode's storage set by ``env`` (the server
    inherits this process's environment); its log must end without a page's traceback."""
    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        if "ATLAS_DATABASE_URL" not in env:
            patch.delenv("ATLAS_DATABASE_URL", raising=False)
        server = Server(0, log)
        server.start()
    try:
        yield server
    finally:
        server.stop()
        crashes = server.crashes(ignoring=DISCONNECTS)
        assert not crashes, crashes[0][-4000:]


def kill_and_restart(server: Server, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """SIGKILL to the server's whole process group (no shutdown of any kind), then the same
    command on the same port and data: what a crashed and restarted host does."""
    crashes = server.crashes(ignoring=DISCONNECTS)
    assert not crashes, crashes[0][-4000:]
    server.crash()
    with monkeypatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        server.start()


# --------------------------------------------------------------------------- people


class Class:
    """The browsers of one class: a teacher and students, each in a context of their own."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.contexts: list = []

    def open(
        self,
        url: str,
        viewport: dict | None = None,
        lang: str = "en",
        cookies: list[dict] | None = None,
    ) -> Page:
        """A new person at ``url``, in a context of their own holding ``cookies``."""
        context = self.browser.new_context(
            viewport=viewport or {"width": 1280, "height": 900},
            locale="ko-KR" if lang == "ko" else "en-US",
        )
        self.contexts.append(context)
        if cookies:
            context.add_cookies(cookies)
        page = context.new_page()
        page.goto(url)
        wait_for_app(page)
        return page

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def people(browser: Browser) -> Iterator[Class]:
    group = Class(browser)
    yield group
    group.close()


def start_class(page: Page, lesson_title: str | None) -> tuple[str, str, str]:
    """Start a class from the Class page; returns (code, join link, resume link)."""
    if lesson_title is not None:
        page.get_by_test_id("stSelectbox").first.click()
        page.get_by_role("option", name=lesson_title).click()
        wait_for_app(page)
    page.get_by_role("button", name="Start the class").click()
    code_box = page.get_by_test_id("classmode-code")
    expect(code_box).to_be_visible(timeout=60_000)
    wait_for_app(page)
    code = re.sub(r"\W", "", code_box.inner_text())
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{6}", code), code
    join = page.get_by_test_id("classmode-join-url").inner_text().strip()
    page.get_by_text("Resume on another device").click()
    resume = page.locator("code", has_text="teacher=").first.inner_text().strip()
    page.get_by_text("Resume on another device").click()  # closed again: never projected
    expect(page.locator("code", has_text="teacher=")).to_be_hidden()
    return code, join, resume


def join_by_code(page: Page, code: str, nickname: str) -> str:
    """Fill the join form; returns the student's own link (their address bar)."""
    page.get_by_label("Class code").fill(code.lower())
    page.get_by_label("Nickname (optional)").fill(nickname)
    page.get_by_label("Nickname (optional)").press("Enter")
    page.get_by_role("button", name="Join", exact=True).click()
    expect(page.get_by_text(f"Class {code} · you are {nickname}")).to_be_visible(timeout=60_000)
    wait_for_app(page)
    assert "student=" in page.url
    return page.url


def press(page: Page, name: str) -> None:
    page.get_by_role("button", name=name).first.click()
    wait_for_app(page)


def expect_room(page: Page, room: str) -> None:
    expect(page).to_have_url(re.compile(rf"/{room}\?"), timeout=FOLLOW_TIMEOUT_MS)
    wait_for_app(page)
    assert_no_error(page)


def move_and_follow(teacher: Page, button: str, students: list[Page], room: str) -> float:
    """The teacher presses ``button``; every student's page switches to ``room``. Returns the
    seconds from the click until the last student's address bar named the room."""
    started = time.monotonic()
    teacher.get_by_role("button", name=button).first.click()
    for page in students:
        expect(page).to_have_url(re.compile(rf"/{room}\?"), timeout=FOLLOW_TIMEOUT_MS)
    lag = time.monotonic() - started
    wait_for_app(teacher)
    for page in students:
        expect_room(page, room)
    return lag


def answer(page: Page, option: int, step: int = 1) -> None:
    radio = page.locator(".st-key-classmode_question [data-testid='stRadio']")
    expect(radio).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    shown = option_label(LESSON.step(step).question.options[option], "en").replace("`", "")
    radio.get_by_text(shown, exact=True).click()
    wait_for_app(page)
    page.locator(".st-key-classmode_question").get_by_role("button").click()
    expect(page.get_by_text("Your answer:")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)


def expect_tally(page: Page, joined: int, answered: int | None = None) -> None:
    """The teacher's live counts (answered: only shown on a step with a question)."""
    metrics = page.get_by_test_id("stMetric")
    expect(metrics.filter(has_text="Joined").get_by_test_id("stMetricValue")).to_have_text(
        str(joined), timeout=FOLLOW_TIMEOUT_MS
    )
    if answered is not None:
        expect(metrics.filter(has_text="Answered").get_by_test_id("stMetricValue")).to_have_text(
            str(answered), timeout=FOLLOW_TIMEOUT_MS
        )


# --------------------------------------------------------------------------- one class


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    env = {"ATLAS_DATA_DIR": str(tmp_path / "data")}
    with running(monkeypatch, env, tmp_path / "server.log") as one:
        yield one


def in_view(page: Page, selector: str) -> bool:
    """Whether the element's top is on screen (what a reader sees without scrolling)."""
    box = page.locator(selector).first.bounding_box()
    viewport = page.viewport_size
    return box is not None and viewport is not None and 0 <= box["y"] < viewport["height"] - 40


def scroll_to_bottom(page: Page) -> None:
    """A reader far down a long page (Streamlit scrolls its main block, not the window)."""
    page.evaluate(
        "() => { const m = document.querySelector(\"[data-testid='stMain']\");"
        " m.scrollTop = m.scrollHeight; }"
    )


def assert_projector_fits(teacher: Page) -> None:
    """At 1920×1080 the step, the moves, the question and the whole chart are above the
    fold: nothing of what the room reads is below the screen's edge."""
    for selector in ("[data-testid='stMain'] h2", ".st-key-classmode_page_moves"):
        assert in_view(teacher, selector), selector
    chart = teacher.locator("[data-testid='stPlotlyChart']").first.bounding_box()
    assert chart is not None and chart["y"] + chart["height"] <= PROJECTOR["height"], chart
    code = teacher.get_by_test_id("classmode-code").bounding_box()
    assert code is not None and code["y"] < 200, "the code stays readable, in its corner"


def assert_options_readable(phone: Page) -> None:
    """A phone's options: 16 px text (code too) in rows a thumb can hit (44 px)."""
    sizes = phone.evaluate(
        """() => Array.from(document.querySelectorAll(
             ".st-key-classmode_question [role='radiogroup'] label")).map(label => {
             const text = label.querySelector('code') || label.querySelector('p');
             return [label.getBoundingClientRect().height,
                     parseFloat(getComputedStyle(text).fontSize)]; })"""
    )
    assert sizes and all(row >= 44 and font >= 16 for row, font in sizes), sizes


def test_a_class_follows_answers_and_sees_the_reveal(server: Server, people: Class) -> None:
    teacher = people.open(f"{server.url}/class", PROJECTOR)
    code, join_link, _ = start_class(teacher, LESSON.title["en"])
    assert join_link.endswith(f"/class?class={code}")
    phone = people.open(f"{server.url}/class", PHONE)
    join_by_code(phone, code, "Ada")
    # The QR's target on a phone: only how to join this class, above the fold.
    by_link = people.open(join_link, PHONE)
    expect(by_link.get_by_label("Class code")).to_have_value(code)
    assert in_view(by_link, ".st-key-classmode_join_button")
    expect(by_link.get_by_role("button", name="Start the class")).to_have_count(0)
    save_screenshot(by_link, "classmode_join_phone", max_height=PHONE["height"])
    join_by_code(by_link, code, "Bo")
    third = people.open(f"{server.url}/class")
    join_by_code(third, code, "Cy")
    students = [phone, by_link, third]
    expect_tally(teacher, joined=3)

    # Step 1 (basics): the students' screens follow; its room waits for the reveal.
    follow_s = move_and_follow(teacher, "Start the lesson", students, "basics")
    expect(phone.get_by_text("This room shows torch's answer")).to_be_visible()
    # The phone's student wanders to another room from the sidebar (which closes, so "Back
    # to the class" shows) and reads far down it: the question still reaches their screen.
    phone.get_by_test_id("stExpandSidebarButton").click()
    phone.locator("[data-testid='stSidebarNavLink'][href*='/strides']").click()
    expect(phone).to_have_url(re.compile(r"/strides\?"), timeout=FOLLOW_TIMEOUT_MS)
    wait_for_app(phone)
    expect(phone.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "true")
    expect(phone.get_by_role("button", name="Back to the class")).to_be_in_viewport()
    scroll_to_bottom(phone)
    assert not in_view(phone, ".st-key-classmode_bar")
    press(teacher, "Open the question")
    expect(phone.locator(".st-key-classmode_question")).to_be_in_viewport(timeout=FOLLOW_TIMEOUT_MS)
    assert_options_readable(phone)
    save_screenshot(phone, "classmode_phone", max_height=PHONE["height"])
    question = LESSON.step(1).question
    wrong = next(i for i in range(len(question.options)) if i != question.answer)
    picks = [question.answer, wrong, question.answer]
    for page, pick in zip(students, picks, strict=True):
        answer(page, pick)
    expect_tally(teacher, joined=3, answered=3)
    assert_projector_fits(teacher)
    save_screenshot(teacher, "classmode_teacher", max_height=PROJECTOR["height"])

    # A reload keeps the student's answer (their own link is in the address bar).
    by_link.reload()
    wait_for_app(by_link)
    expect(by_link.get_by_text("Your answer:")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)

    press(teacher, "Reveal the answer")
    expect(phone.get_by_text("Right!")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    expect(by_link.get_by_text("Not this time")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    # The room opens with the reveal, folded on the teacher's example (components/kit/follow.py):
    # no inputs until the student asks for them.
    unfold = by_link.get_by_role("button", name="Change the values yourself")
    expect(unfold).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    expect(by_link.get_by_label("Shapes (up to 4)", exact=True)).to_have_count(0)
    save_screenshot(by_link, "classmode_phone_folded", max_height=PHONE["height"] * 2)
    unfold.click()
    expect(by_link.get_by_label("Shapes (up to 4)", exact=True)).to_be_visible(
        timeout=FOLLOW_TIMEOUT_MS
    )
    right = option_label(question.value, "en").replace("`", "")
    expect(teacher.get_by_text(f"✓ B: {right}")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    assert_projector_fits(teacher)
    save_screenshot(teacher, "classmode_teacher_revealed", max_height=PROJECTOR["height"])
    # The projector's tab reloaded (here in the dark theme): the browser kept the class, the
    # address bar never held its key.
    assert "teacher=" not in teacher.url
    teacher.emulate_media(color_scheme="dark")
    teacher.reload()
    wait_for_app(teacher)
    expect(teacher.get_by_role("button", name="Next step")).to_be_visible(timeout=60_000)
    expect(teacher.get_by_text(f"✓ B: {right}")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    save_screenshot(teacher, "classmode_teacher_dark", max_height=PROJECTOR["height"])

    # Step 2 is in another room: everyone follows (the wanderer too).
    second_s = move_and_follow(teacher, "Next step", students, "strides")
    assert_no_error(teacher)
    print(f"\nthe last of 3 students' address bars showed the new room {follow_s:.2f} s and "
          f"{second_s:.2f} s after the teacher's click (woken by the server's push)")  # fmt: skip


def test_korean_class_page(server: Server, people: Class) -> None:
    teacher = people.open(f"{server.url}/class", PROJECTOR)
    # The switch to Korean: the lesson picker is in Korean on its first run after it.
    teacher.get_by_test_id("stSidebar").get_by_text("한국어").click()
    wait_for_app(teacher)
    teacher.get_by_test_id("stSelectbox").first.click()
    teacher.get_by_role("option", name=LESSON.title["ko"]).click()
    wait_for_app(teacher)
    teacher.get_by_role("button", name="수업 시작하기").click()
    expect(teacher.get_by_test_id("classmode-code")).to_be_visible(timeout=60_000)
    wait_for_app(teacher)
    code = re.sub(r"\W", "", teacher.get_by_test_id("classmode-code").inner_text())
    student = people.open(f"{server.url}/class?lang=ko&class={code}", PHONE, lang="ko")
    student.get_by_label("닉네임 (선택)").fill("민지")
    student.get_by_label("닉네임 (선택)").press("Enter")
    student.get_by_role("button", name="참여하기").click()
    expect(student.get_by_text(f"수업 {code} · 내 이름: 민지")).to_be_visible(timeout=60_000)
    expect(teacher.get_by_test_id("stMetricValue").first).to_have_text(
        "1", timeout=FOLLOW_TIMEOUT_MS
    )
    # Korean lines break between words, never inside one: in the page's own paragraphs too
    # (Streamlit sets its own word-break on them).
    for page in (teacher, student):
        breaks = page.evaluate(
            "() => [document.querySelector(\"[data-testid='stMain']\"),"
            " ...document.querySelectorAll(\"[data-testid='stMain'] p\")]"
            ".map(e => getComputedStyle(e).wordBreak)"
        )
        assert len(breaks) > 1 and set(breaks) == {"keep-all"}, breaks
    move_and_follow(teacher, "레슨 시작", [student], "basics")
    press(teacher, "질문 열기")
    expect(student.locator(".st-key-classmode_question")).to_be_in_viewport(
        timeout=FOLLOW_TIMEOUT_MS
    )
    assert_projector_fits(teacher)
    save_screenshot(teacher, "classmode_ko", max_height=PROJECTOR["height"])
    save_screenshot(student, "classmode_phone_ko", max_height=PHONE["height"])


# --------------------------------------------------------------------------- restart


def test_a_class_survives_a_killed_server(
    tmp_path: Path, people: Class, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"ATLAS_DATA_DIR": str(tmp_path / "data")}
    with running(monkeypatch, env, tmp_path / "server.log") as server:
        teacher = people.open(f"{server.url}/class", PROJECTOR)
        code, _, resume = start_class(teacher, LESSON.title["en"])
        students = [people.open(f"{server.url}/class") for _ in range(2)]
        links = [join_by_code(page, code, name) for page, name in zip(students, "AB", strict=True)]
        press(teacher, "Start the lesson")
        for page in students:
            expect_room(page, "basics")
        press(teacher, "Open the question")
        question = LESSON.step(1).question
        for page in students:
            answer(page, question.answer)
        expect_tally(teacher, joined=2, answered=2)

        kill_and_restart(server, monkeypatch, env)  # mid-class

        teacher.goto(resume)
        wait_for_app(teacher)
        expect(teacher.get_by_text("Step 1 of 3")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
        expect_tally(teacher, joined=2, answered=2)
        for page, link in zip(students, links, strict=True):
            page.goto(link)
            wait_for_app(page)
            expect_room(page, "basics")
            expect(page.get_by_text("Your answer:")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
        # The class goes on after the restart.
        press(teacher, "Reveal the answer")
        for page in students:
            expect(page.get_by_text("Right!")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)


# --------------------------------------------------------------------------- replicas


def test_two_replicas_share_a_class(
    tmp_path: Path, people: Class, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.postgres import missing_reason, postgres_cluster

    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster() as url:
        env = {"ATLAS_DATABASE_URL": url, "ATLAS_DATA_DIR": str(tmp_path / "unused")}
        with (
            running(monkeypatch, env, tmp_path / "one.log") as one,
            running(monkeypatch, env, tmp_path / "two.log") as two,
        ):
            teacher = people.open(f"{one.url}/class", PROJECTOR)
            code, _, _ = start_class(teacher, LESSON.title["en"])
            here = people.open(f"{one.url}/class")
            there = [people.open(f"{two.url}/class?class={code}") for _ in range(2)]
            join_by_code(here, code, "One")
            for number, page in enumerate(there):
                join_by_code(page, code, f"Two{number}")
            expect_tally(teacher, joined=3)
            press(teacher, "Start the lesson")
            for page in [here, *there]:
                expect_room(page, "basics")
            press(teacher, "Open the question")
            question = LESSON.step(1).question
            for page in [here, *there]:
                answer(page, question.answer)
            expect_tally(teacher, joined=3, answered=3)
            press(teacher, "Reveal the answer")
            for page in there:
                expect(page.get_by_text("Right!")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
            press(teacher, "Next step")
            for page in there:
                expect_room(page, "strides")
