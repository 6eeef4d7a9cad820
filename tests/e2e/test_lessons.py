"""Lessons in a real browser: a student opens a lesson from the Lessons page, predicts and
reveals every question, presses Next through the rooms to the end, and reads the right
summary, on a desktop and on a phone; screenshots of a lesson step (light, dark, Korean,
phone) for the README."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import Page, expect

from components.lessons.draw import option_label
from tests.e2e.conftest import (
    assert_looks_like_reference,
    assert_no_error,
    save_screenshot,
    wait_for_app,
)
from torchatlas.i18n import translate
from torchatlas.lessons import ROOMS, Lesson, Step, find
from torchatlas.links import encode_source

LESSON = "linear_layer"


def _shown(option: str, lang: str) -> str:
    """An option's text as the browser shows it (markdown code loses its backticks)."""
    return option_label(option, lang).replace("`", "")


def _press(page: Page, key: str) -> None:
    page.locator(f".st-key-{key} button").first.click()
    wait_for_app(page)


def _answer(page: Page, lesson: Lesson, step: Step, right: bool, lang: str) -> None:
    question = step.question
    assert question is not None
    picked = question.answer if right else (question.answer + 1) % len(question.options)
    radio = page.locator(f".st-key-lessons_q_{lesson.id}_{step.number}_given")
    sizes = radio.evaluate(
        """(box) => Array.from(box.querySelectorAll("[role='radiogroup'] label")).map(label => {
             const text = label.querySelector('code') || label.querySelector('p');
             return [label.getBoundingClientRect().height,
                     parseFloat(getComputedStyle(text).fontSize)]; })"""
    )
    # Readable and tappable on a phone too: 16 px text (code included) in 44 px rows.
    assert sizes and all(row >= 44 and font >= 16 for row, font in sizes), sizes
    radio.get_by_text(_shown(question.options[picked], lang), exact=True).click()
    wait_for_app(page)
    _press(page, f"lessons_q_{lesson.id}_{step.number}_reveal")
    banner = page.locator(".st-key-lessons_banner")
    verdict = translate("lessons.question.right" if right else "lessons.question.wrong", lang,
                        answer=_shown(question.value, lang))  # fmt: skip
    expect(banner.get_by_text(verdict, exact=False)).to_be_visible(timeout=60_000)


@pytest.mark.parametrize(("width", "height"), [(1400, 1000), (400, 900)], ids=["desktop", "phone"])
def test_a_student_follows_a_lesson_to_its_summary(app_page, width: int, height: int) -> None:
    lesson = find(LESSON)
    assert lesson is not None
    wrong = {2}
    page = app_page("lessons", width=width, height=height)
    assert_no_error(page)
    card = page.locator(f".st-key-lessons_card_{lesson.id}")
    expect(card.get_by_text(lesson.title["en"])).to_be_visible()
    card.get_by_role("button", name=translate("lessons.card.start", "en")).click()
    wait_for_app(page)
    for step in lesson.steps:
        banner = page.locator(".st-key-lessons_banner")
        heading = banner.get_by_role("heading", name=step.title["en"])
        expect(heading).to_be_visible(timeout=60_000)
        # Each step opens with its banner on screen, wherever the last page was scrolled.
        expect(heading).to_be_in_viewport()
        hidden = page.get_by_text(translate("lessons.banner.room_hidden", "en"))
        expect(hidden).to_have_count(1 if step.hides_room and step.question else 0)
        progress = translate("lessons.banner.progress", "en", step=step.number,
                             total=len(lesson.steps))  # fmt: skip
        expect(banner.get_by_text(progress, exact=False)).to_be_visible()
        assert f"/{step.room}" in page.url and f"step={step.number}" in page.url
        assert_no_error(page)
        if step.question is not None:
            _answer(page, lesson, step, step.number not in wrong, "en")
        key = "lessons_next" if step.number < len(lesson.steps) else "lessons_finish"
        _press(page, key)
    summary = page.locator(".st-key-lessons_summary")
    expect(summary).to_be_in_viewport(timeout=60_000)  # not mid-list: the page is scrolled to it
    score = translate("lessons.summary.score_value", "en", right=lesson.questions - len(wrong),
                      total=lesson.questions)  # fmt: skip
    expect(summary.get_by_text(score)).to_be_visible(timeout=60_000)
    revisit = translate("lessons.summary.go", "en", step=2, title=lesson.step(2).title["en"],
                        room=translate("app.rooms.modules.title", "en"))  # fmt: skip
    expect(summary.get_by_role("button", name=revisit)).to_be_visible()
    assert_no_error(page)


def _step_link(lesson: Lesson, step: Step) -> tuple[str, str]:
    query = dict(step.fields())
    spec = ROOMS[step.room]
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    query |= {"lesson": lesson.id, "step": str(step.number)}
    return step.room, urlencode(query, doseq=True)


@pytest.mark.parametrize(
    ("name", "lang", "dark", "width", "number"),
    [("lesson-light", "en", False, 1400, 9), ("lesson-dark", "en", True, 1400, 9),
     ("lesson-ko", "ko", False, 1400, 9), ("lesson-phone", "en", False, 400, 8)],
)  # fmt: skip
def test_screenshots_of_a_lesson_step(
    app_page, name: str, lang: str, dark: bool, width: int, number: int
):
    # Step 9 (the second exercise: `a.cos_()` on int64) shows its room as the student
    # predicts; step 8 (c = a.view(3, 3)[1:, 1:]) keeps its room, which shows c's strides,
    # for the reveal: the phone's picture shows the question and the note in its place.
    lesson = find("dlwp_tensors")
    step = lesson.step(number)
    room, query = _step_link(lesson, step)
    page = app_page(room, lang=lang, dark=dark, query=query, width=width, height=1000)
    banner = page.locator(".st-key-lessons_banner")
    expect(banner.get_by_role("heading", name=step.title[lang])).to_be_visible()
    title = page.locator("[data-testid='stMain'] h1").first
    expect(title).to_have_text(translate(f"app.rooms.{room}.title", lang))
    hidden = page.get_by_text(translate("lessons.banner.room_hidden", lang))
    expect(hidden).to_have_count(1 if step.hides_room else 0)
    assert_no_error(page)
    shot = save_screenshot(page, name, max_height=1500 if width > 500 else 2600)
    assert_looks_like_reference(shot)
