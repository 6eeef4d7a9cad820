"""The basics room in a real browser: every section with its live answer, English and
Korean, light and dark, a phone-sized screen, a shared link, the predict-then-reveal
question, and the link into the strides room arriving with its state."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
import torch
from playwright.sync_api import expect

from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from torchatlas.basics.quiz import answer, make_question
from torchatlas.i18n import translate


def _body(page) -> str:
    return page.locator("body").inner_text()


def _section(page, name: str, lang: str = "en") -> None:
    """Pick a section in the segmented control and wait for the run."""
    label = translate(f"basics.sections.{name}", lang)
    page.locator(".st-key-basics_section button").filter(has_text=label).first.click()
    # the click's rerun starts a moment later: wait for the section's own header
    header = {"broadcasting": "broadcast", "indexing": "index", "saving": "save"}.get(name, name)
    expect(page.locator("h2").filter(has_text=translate(f"basics.{header}.header", lang))
           ).to_be_visible(timeout=60_000)  # fmt: skip
    wait_for_app(page)


def _type(page, key: str, text: str, then_shows: str) -> None:
    """Type into a keyed box and wait for the text its rerun produces (the rerun starts a
    moment after Enter, so the app's idle state alone can be the previous run's)."""
    box = page.locator(f".st-key-{key} input").first
    box.fill(text)
    box.press("Enter")
    page.get_by_text(then_shows).first.wait_for(timeout=60_000)
    wait_for_app(page)


def _show(page, selector: str) -> None:
    page.locator(selector).first.evaluate(
        "el => { el.scrollIntoView({block: 'start'});"
        " return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }"
    )


def test_every_section_light(app_page) -> None:
    page = app_page("basics", height=1200)
    assert_no_error(page)
    body = _body(page)
    # int8 100 + 1000: torch's wrapped value and the exact one
    assert "76" in body and "1100" in body
    assert translate("basics.types.outcome.wrapped", dtype="int8") in body
    expect(page.locator("table").filter(has_text="bfloat16").first).to_be_visible()
    save_screenshot(page, "basics-light")

    _section(page, "broadcasting")
    page.locator(".st-key-basics_broadcast_example_weights_wrong button").click()
    wait_for_app(page)
    body = _body(page)
    assert "The size of tensor a (5) must match the size of tensor b (3)" in body
    assert "b[:, None, None]" in body
    page.locator(".st-key-basics_apply_fix button").click()
    wait_for_app(page)
    expect(page.get_by_text("1 → 5").first).to_be_visible()  # the stretched dimensions
    assert "(0, 1, 0, 0)" in _body(page)
    save_screenshot(page, "basics-broadcasting-light")

    _section(page, "einsum")
    assert "total += x0[e0, c, h, w] * x1[c]" in _body(page)
    with pytest.raises(RuntimeError) as real:  # torch's own words reach the page
        torch.einsum("ij,jk->iz", torch.zeros(2, 3, 5, 5), torch.zeros(3))
    _type(page, "basics_equation", "ij,jk->iz", then_shows=str(real.value))
    assert_no_error(page)

    _section(page, "indexing")
    _type(page, "basics_index", "x[:, [0, 2]]", then_shows="y = x[:, [0, 2]]")
    body = _body(page)
    assert translate("basics.index.verdict_copy", expression="x[:, [0, 2]]").split("**")[1] in body
    save_screenshot(page, "basics-indexing-light")

    _section(page, "saving")
    body = _body(page)
    assert "H5T_IEEE_F32LE" in body and "15.6 KiB" in body
    save_screenshot(page, "basics-saving-light")
    assert_no_error(page)


def test_shared_link_restores_the_section(app_page) -> None:
    page = app_page("basics", query="b_sec=indexing&b_ishape=2,3,4&b_ix=x%5B...,%201%5D")
    assert_no_error(page)
    assert page.locator(".st-key-basics_index input").input_value() == "x[..., 1]"
    body = _body(page)
    assert "view" in body and "(2, 3)" in body
    # the URL follows an edit (only this room's keys change)
    _type(page, "basics_index", "x[x > 5]", then_shows="y = x[x > 5]")
    query = parse_qs(urlparse(page.url).query)
    assert query["b_ix"] == ["x[x > 5]"] and query["b_sec"] == ["indexing"]


def test_link_into_strides_arrives_with_its_state(app_page) -> None:
    page = app_page("basics", query="b_sec=broadcasting", height=1200)
    link = page.locator("a", has_text=translate("basics.broadcast.see_in_strides")).first
    expect(link).to_be_visible()
    link.click()
    page.wait_for_url("**/strides?**", timeout=60_000)
    wait_for_app(page)
    assert_no_error(page)
    query = parse_qs(urlparse(page.url).query)
    assert query["s_shape"] == ["3,1,1"] and query["s_ops"] == [".expand(2, 3, 5, 5)"]
    # the strides room shows that state: its setup boxes and the expand's zero strides
    expect(page.locator(".st-key-strides_shape input")).to_have_value("3,1,1")
    assert page.locator(".st-key-strides_ops textarea").input_value() == ".expand(2, 3, 5, 5)"
    page.get_by_text("y1 = x.expand(2, 3, 5, 5)").first.wait_for(timeout=60_000)
    assert "(0, 1, 0, 0)" in _body(page)


def test_quiz_reveals_torchs_answer(app_page) -> None:
    page = app_page("basics", query="b_sec=indexing", height=1400)
    question = make_question("indexing", 1)
    right = translate(f"basics.quiz.choices.{answer(question)}")
    radio = page.locator(".st-key-basics_q_indexing_1_given")
    radio.get_by_text(right, exact=True).click()
    page.get_by_role("button", name=translate("kit.reveal.button")).click()
    wait_for_app(page)
    body = _body(page)
    assert translate("kit.reveal.right", expected=right).replace("**", "") in body
    assert translate("basics.quiz.score", right=1, answered=1) in body


@pytest.mark.parametrize(("lang", "dark", "name"), [("en", True, "basics-dark"),
                                                    ("ko", False, "basics-ko")])  # fmt: skip
def test_themes_and_korean(app_page, lang: str, dark: bool, name: str) -> None:
    page = app_page("basics", lang=lang, dark=dark, query="b_sec=broadcasting", height=1200)
    assert_no_error(page)
    assert translate("basics.broadcast.header", lang) in _body(page)
    save_screenshot(page, name)
    _section(page, "indexing", lang)
    assert translate("basics.index.header", lang) in _body(page)
    save_screenshot(page, f"{name}-indexing")


def test_phone_width(app_page) -> None:
    page = app_page("basics", width=400, height=900, query="b_sec=einsum")
    assert_no_error(page)
    assert translate("basics.einsum.header") in _body(page)
    save_screenshot(page, "basics-phone")
