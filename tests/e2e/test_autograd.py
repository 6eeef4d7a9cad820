"""The autograd room in a real browser: run an example, step backward to the end, read a
leaf's .grad on the graph and in the table, Korean, dark, phone, and a shared link."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from torchatlas.autograd import backward, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.i18n import translate


def _click(page, key: str) -> None:
    page.locator(f".st-key-{key} button").first.click()
    wait_for_app(page)


def _next(page, step: int, total: int) -> None:
    """Press "next step" and wait until the page says it shows ``step`` (a fragment rerun:
    its own text is the sign it finished)."""
    _click(page, "autograd_next")
    expect(page.get_by_text(f"Step {step} of {total}").first).to_be_visible(timeout=30_000)


def _step_to_end(page, start: int, total: int) -> None:
    for step in range(start + 1, total + 1):
        _next(page, step, total)
    expect(page.locator(".st-key-autograd_next button").first).to_be_disabled()


def _graph_text(page) -> str:
    svg = page.locator(".st-key-autograd_graph svg g.graph").first
    expect(svg).to_be_visible(timeout=60_000)
    return svg.text_content() or ""


def _show(page, selector: str) -> None:
    page.locator(selector).first.evaluate(
        "el => { el.scrollIntoView({block: 'start'});"
        " return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }"
    )


def test_step_backward_to_the_end_and_read_the_leaf_grad(app_page) -> None:
    page = app_page("autograd", height=1400)
    assert_no_error(page)
    expected = backward(trace(EXAMPLES["propagation"].program), "loss")
    assert "AccumulateGrad" in _graph_text(page)
    assert ".grad" not in _graph_text(page)
    total = len(expected.steps)
    _next(page, 1, total)
    expect(page.get_by_text("SumBackward0").first).to_be_visible()
    _step_to_end(page, 1, total)
    assert_no_error(page)
    grad = expected.grad("z").grad
    assert f".grad {grad.short()}" in _graph_text(page).replace("\n", " ")
    expect(page.get_by_text(translate("autograd.graph.done", total=4))).to_be_visible()
    _show(page, ".st-key-autograd_graph")
    save_screenshot(page, "autograd-light")


def test_dark_theme_and_the_freezing_tab(app_page) -> None:
    page = app_page("autograd", dark=True, height=1400, query="a_ex=mlp&a_step=6")
    assert_no_error(page)
    expect(page.get_by_text("Step 6 of 10").first).to_be_visible()
    _show(page, ".st-key-autograd_graph")
    save_screenshot(page, "autograd-dark")
    page.get_by_role("tab", name=translate("autograd.tabs.freeze")).click()
    wait_for_app(page)
    label = translate("autograd.freeze.trainable_params")
    expect(page.get_by_text(label, exact=True)).to_be_visible()
    expect(page.get_by_text("51,300").first).to_be_visible()
    page.locator(".st-key-autograd_train_layer4 label").first.click()
    wait_for_app(page)
    expect(page.get_by_text("8,445,028").first).to_be_visible()
    assert_no_error(page)
    _show(page, ".st-key-autograd_train_stem")
    save_screenshot(page, "autograd-freeze-dark")


def test_korean(app_page) -> None:
    page = app_page("autograd", lang="ko", height=1400)
    assert_no_error(page)
    expect(page.get_by_text(translate("autograd.graph.header", "ko"))).to_be_visible()
    _click(page, "autograd_all")
    expect(page.get_by_text(translate("autograd.graph.done", "ko", total=4))).to_be_visible()
    _show(page, ".st-key-autograd_graph")
    save_screenshot(page, "autograd-ko")


def test_phone_width(app_page) -> None:
    page = app_page("autograd", width=400, height=900)
    assert_no_error(page)
    _next(page, 1, 4)
    _next(page, 2, 4)
    assert_no_error(page)
    _graph_text(page)
    save_screenshot(page, "autograd-phone")


def test_share_a_link(app_page) -> None:
    page = app_page("autograd", query="a_ex=retain_grad")
    _next(page, 1, 4)
    _next(page, 2, 4)
    link = page.locator(".st-key-autograd_share code").first.inner_text().strip()
    assert "a_ex=retain_grad" in link and "a_step=2" in link
    assert link.startswith("http")
    other = page.context.new_page()
    other.goto(link)
    wait_for_app(other)
    assert_no_error(other)
    expect(other.get_by_text("Step 2 of 4").first).to_be_visible()
    expect(other.get_by_text("h.retain_grad()").first).to_be_visible()
