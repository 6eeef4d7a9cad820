"""Writing a lesson in a real browser: a teacher fills the author page (a step whose question
is a code exercise), torch checks it in the sandbox, saving gives a code; a phone opens the
lesson's link and answers with code that fails, raises and passes; the exported file read
back is the same lesson. Screenshots: the author page, the exercise on a phone."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import (
    assert_looks_like_reference,
    assert_no_error,
    save_screenshot,
    wait_for_app,
)
from torchatlas.i18n import translate
from torchatlas.lessons import parse_lesson


def _type(page: Page, key_prefix: str, text: str, *, area: bool = False) -> None:
    """Type into the widget whose key starts with ``key_prefix`` and commit it (Tab: a
    Streamlit box sends its value when it loses focus)."""
    box = page.locator(f"[class*='st-key-{key_prefix}'] {'textarea' if area else 'input'}").first
    box.fill(text)
    box.press("Tab")
    wait_for_app(page)


def _pick(page: Page, key_prefix: str, option: str) -> None:
    page.locator(f"[class*='st-key-{key_prefix}']").first.get_by_role("combobox").click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_app(page)


def _write_exercise_lesson(page: Page) -> None:
    _type(page, "aw_title_en", "Views without copies")
    _type(page, "aw_summary_en", "Make a view, and let torch check it.", area=True)
    _type(page, "aw_st_", "Your turn: a view")
    _type(page, "aw_sx_", "A view shares its storage: no number is copied.", area=True)
    _pick(page, "aw_kind_", translate("kinds.exercise.label", "en"))
    _type(page, "aw_setup_", "x = torch.arange(12.)", area=True)
    _type(page, "aw_solution_", "y = x.view(2, 6)", area=True)
    _pick(page, "aw_ct_", translate("kinds.exercise.template.shape", "en"))
    _type(page, "aw_cn_", "y")
    _type(page, "aw_ce_", "(2, 6)", area=True)
    _type(page, "aw_qp_", "Make `y`, a (2, 6) view of `x`.", area=True)
    _type(page, "aw_qe_", "`x.view(2, 6)` reads the same storage.", area=True)


def test_a_teacher_writes_an_exercise_and_a_phone_answers_it(app_page) -> None:
    page = app_page("author", width=1400, height=1000)
    assert_no_error(page)
    _write_exercise_lesson(page)
    page.locator(".st-key-author_save button").click()
    wait_for_app(page)
    saved = page.get_by_text(re.compile(r"Saved\. Lesson code: [A-Z2-9]{7}"))
    expect(saved).to_be_visible(timeout=60_000)
    code = re.search(r"[A-Z2-9]{7}", saved.inner_text()).group(0)
    expect(page.get_by_text(f"/author?edit={code}&key=")).to_be_visible()
    assert_no_error(page)
    with page.expect_download() as download:
        page.locator(".st-key-author_export button").click()
    exported = download.value.path().read_text(encoding="utf-8")
    lesson = parse_lesson(exported, "exported", all_languages=False)
    assert lesson.title["en"] == "Views without copies"
    assert lesson.step(1).question.kind == "exercise"
    page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    assert_looks_like_reference(save_screenshot(page, "author-light", max_height=2600))

    phone = app_page("lessons", query=f"lesson=u_{code.lower()}&step=1", width=390, height=844)
    assert_no_error(phone)
    key = f"lessons_q_u_{code.lower()}_1"
    box = phone.locator(f".st-key-{key}_code textarea")
    for source, verdict in [
        ("y = x.clone().view(3, 4)", "y has shape (3, 4); the goal is (2, 6)."),
        ("y = x.view(5, 5)", "RuntimeError on line 1"),
        ("y = x.view(2, 6)", translate("kinds.exercise.verdict.passed", "en")),
    ]:
        box.fill(source)
        phone.locator(f".st-key-{key}_run button").click()
        wait_for_app(phone)
        expect(phone.get_by_text(verdict, exact=False).first).to_be_visible(timeout=60_000)
        assert_no_error(phone)
    assert_looks_like_reference(save_screenshot(phone, "author-exercise-phone", max_height=2600))
