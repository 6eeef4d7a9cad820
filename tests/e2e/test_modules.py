"""The nn.Module room in a real browser: the two MyLinear presets, a training run with its curve
and step control, Korean, dark, a phone, and a shared link.

Screenshots: modules-light, modules-dark, modules-ko, modules-phone (and the training panel).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    assert_no_error,
    save_element_screenshot,
    save_screenshot,
    wait_for_app,
)
from torchatlas.i18n import translate
from torchatlas.links import encode_source
from torchatlas.modules import PRESETS


def _sandbox_installed() -> bool:
    try:
        from torchatlas.sandbox import run_job  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _sandbox_installed(), reason="no sandbox for pasted code")


def _open(app_page, *args, **kwargs):
    """Open the room and wait for the inspection (the first one also warms the sandbox)."""
    page = app_page("modules", *args, **kwargs)
    if "nn_section" not in kwargs.get("query", ""):
        page.wait_for_selector(
            ".st-key-modules_summary [data-testid='stMetric'], .st-key-modules_error",
            timeout=120_000,
        )
    wait_for_app(page)
    return page


def _section(page, section: str, lang: str = "en") -> None:
    """Pick a section and wait until the page draws it."""
    label = translate(f"modules.sections.{section}", lang)
    page.locator(".st-key-modules_section button").filter(has_text=label).first.click()
    # The link changes before the click's rerun has drawn the section: wait for its header.
    table = "training" if section == "train" else section
    header = translate(f"modules.{table}.header", lang)
    expect(page.locator("h2").filter(has_text=header)).to_be_visible(timeout=60_000)
    wait_for_app(page)


def _metric(page, label: str) -> str:
    metric = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return metric.locator("[data-testid='stMetricValue']").inner_text()


def _body(page) -> str:
    return page.locator("body").inner_text()


def _choose(page, key: str, option: str) -> None:
    """Pick ``option`` in the keyed selectbox."""
    box = page.locator(f".st-key-{key} input").first
    box.click()
    box.fill(option[:24])  # filter the menu, as a user would, so the option is on screen
    page.get_by_role("option", name=option).first.click()
    wait_for_app(page)


def test_the_two_mylinear_presets_light_and_dark(app_page) -> None:
    page = _open(app_page)
    assert_no_error(page)
    assert _metric(page, translate("modules.summary.parameters")) == "0"
    assert "self.W is a plain tensor" in _body(page)
    assert "optimizer got an empty parameter list" in _body(page)
    save_screenshot(page, "modules-light")
    _choose(page, "modules_preset", translate("modules.presets.mylinear_parameter"))
    page.locator(".st-key-modules_inspect button").click()
    page.wait_for_function(
        "() => !document.body.innerText.includes('self.W is a plain tensor')", timeout=60_000
    )
    wait_for_app(page)
    assert_no_error(page)
    assert _metric(page, translate("modules.summary.parameters")) == "8"
    assert _metric(page, translate("modules.summary.optimizer")) == "2"
    dark = _open(app_page, dark=True)
    assert_no_error(dark)
    save_screenshot(dark, "modules-dark")
    _section(dark, "save")
    assert_no_error(dark)
    # The section's rerun may start after wait_for_app looked: wait on the page's own state.
    expect(dark.locator(".st-key-modules_download button")).to_have_count(1, timeout=60_000)
    save_element_screenshot(dark, ".st-key-modules_save_panel", "modules-save-dark")
    _section(dark, "memory")
    save_element_screenshot(dark, ".st-key-modules_memory_panel", "modules-memory-dark")


def test_a_training_run_draws_its_curve(app_page) -> None:
    page = _open(app_page, query="nn_section=train")
    page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=60_000)
    before = page.locator("[data-testid='stPlotlyChart']").first.inner_html()
    for phase in ("loss", "backward", "step"):  # forward → loss → backward → step()
        page.locator(".st-key-modules_next button").click()
        words = translate(f"modules.training.explain.{phase}", step=1, loss="", lr="0.1")
        page.get_by_text(words.split(":**")[0].strip("*"), exact=False).first.wait_for(
            timeout=60_000
        )
        wait_for_app(page)
    lr = page.locator(".st-key-modules_lr input[type='range']").first
    lr.focus()
    page.keyboard.press("End")  # the largest learning rate
    page.get_by_text("Diverging", exact=False).first.wait_for(timeout=60_000)
    wait_for_app(page)
    assert_no_error(page)
    assert page.locator("[data-testid='stPlotlyChart']").first.inner_html() != before
    assert "nn_lr=2.0" in page.url and "nn_section=train" in page.url
    save_screenshot(page, "modules-training")


def test_korean(app_page) -> None:
    page = _open(app_page, lang="ko")
    assert_no_error(page)
    body = _body(page)
    assert translate("modules.inspect.header", "ko") in body
    assert "self.W은(는) 평범한 텐서입니다" in body
    save_screenshot(page, "modules-ko")
    _section(page, "train", "ko")
    assert translate("modules.training.header", "ko") in _body(page)


def test_phone(app_page) -> None:
    page = _open(app_page, width=400, height=900)
    assert_no_error(page)
    assert translate("modules.inspect.header") in _body(page)
    save_screenshot(page, "modules-phone")


def test_a_shared_link(app_page) -> None:
    source = PRESETS["list_bug"].source.replace("depth=3", "depth=2")
    query = f"nn_preset=list_bug&nn_src={encode_source(source)}&nn_train=mlp&nn_steps=40"
    page = _open(app_page, query=query)
    assert_no_error(page)
    assert "self.layers keeps layers in a Python list" in _body(page)
    editor = page.get_by_role("textbox", name=translate("modules.inspect.code"))
    assert "depth=2" in editor.input_value()
    _section(page, "train")
    assert_no_error(page)
    page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=60_000)
    chosen = page.locator(".st-key-modules_train_model input").first.input_value()
    assert chosen == translate("modules.models.mlp")
    assert "nn_section=train" in page.url and "nn_src=" in page.url
