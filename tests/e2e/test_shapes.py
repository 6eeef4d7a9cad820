"""The shape explorer in a real browser: a new user with a good, a broken and a hostile model.

Screenshots (docs/screenshots/shapes-*.png): light, dark, Korean, phone, error, symbolic.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from torchatlas.links import encode_source
from torchatlas.presets import PRESETS


def _sandbox_installed() -> bool:
    try:
        from torchatlas.sandbox import run_job  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _sandbox_installed(),
    reason="torchatlas.sandbox is not installed yet: the page cannot analyse pasted code",
)

HOSTILE = """import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        secrets = ().__class__.__base__.__subclasses__()
        return x
"""


def _open(app_page, *args, **kwargs) -> object:
    """Open the room and wait for the analysis itself: the first run of a fresh session also
    warms the sandbox pool, and the run indicator can be missed in between."""
    page = app_page(*args, **kwargs)
    page.wait_for_selector(
        "[data-testid='stMetric'], [data-testid='stAlertContentError']", timeout=120_000
    )
    wait_for_app(page)
    return page


def _metric(page: object, label: str) -> str:
    metric = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return metric.locator("[data-testid='stMetricValue']").inner_text()


def test_default_model_light_and_dark(app_page) -> None:
    page = _open(app_page, "shapes")
    assert_no_error(page)
    assert _metric(page, "Parameters") == "62 k"
    assert page.get_by_text("1024 × 10").count() >= 1
    assert page.get_by_text("Sandbox for pasted code").count() == 1
    save_screenshot(page, "shapes-light")
    dark = _open(app_page, "shapes", dark=True)
    assert_no_error(dark)
    save_screenshot(dark, "shapes-dark")


def test_korean(app_page) -> None:
    page = _open(app_page, "shapes", lang="ko")
    assert_no_error(page)
    save_screenshot(page, "shapes-ko")
    assert page.get_by_text("붙여 넣은 코드용 샌드박스", exact=False).count() == 1
    assert _metric(page, "파라미터") == "62 k"


def test_broken_model_from_a_shared_link(app_page) -> None:
    query = f"m_preset=net_broken&m_src={encode_source(PRESETS['net_broken'].source)}"
    page = _open(app_page, "shapes", query=query + "&m_shapes=1×1×28×28&m_model=Net()")
    assert_no_error(page)
    alert = page.locator("[data-testid='stAlert']").first
    assert "Linear layer gets the wrong number of features" in alert.inner_text()
    assert page.get_by_text("fc1 = nn.Linear(256, 120)", exact=False).count() >= 1
    marker = page.locator("[data-testid='shapes-source-marker']")
    assert "self.fc1(x)" in marker.inner_text()
    save_screenshot(page, "shapes-error")


def test_hostile_code_is_refused_and_the_server_keeps_serving(app_page) -> None:
    page = _open(app_page, "shapes", query=f"m_src={encode_source(HOSTILE)}&m_shapes=1×3")
    assert_no_error(page)
    alert = page.locator("[data-testid='stAlert']").first.inner_text()
    assert "not allowed" in alert or "syntax" in alert.lower()
    save_screenshot(page, "shapes-hostile")
    again = _open(app_page, "shapes")  # the next visitor is served as usual
    assert _metric(again, "Parameters") == "62 k"


STUDENT = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        if x.sum() > 0:
            x = -x
        return self.fc(x)
"""


def test_student_types_a_data_dependent_model(app_page) -> None:
    """Type into the editor, press the button: the listing beside the editor marks the `if`."""
    page = _open(app_page, "shapes")
    editor = page.get_by_role("textbox", name="Model code")
    listing = page.locator("[data-testid='shapes-source-listing']")
    box, listing_box = editor.bounding_box(), listing.bounding_box()
    assert listing_box["x"] > box["x"] + box["width"] - 1, "the listing sits beside the editor"
    assert "1  # The network" in listing.inner_text().replace("\u00a0", " ")
    editor.fill(STUDENT)
    page.get_by_role("textbox", name="Input shapes").fill("4×8")
    page.get_by_role("button", name="Analyse shapes").click()
    page.wait_for_function(
        "() => document.body.innerText.includes('meta tensors have shapes but no values')",
        timeout=60_000,
    )
    wait_for_app(page)
    assert_no_error(page)
    marked = listing.locator("[data-line='11']")
    assert "if x.sum() > 0:" in marked.inner_text()
    assert "transparent" not in marked.get_attribute("style")
    assert "torch.where" in listing.inner_text()  # the fix, inline under the line
    root_line = page.locator("[data-testid='stDataFrame']")
    assert "None" not in root_line.inner_text()
    save_screenshot(page, "shapes-student")


def test_symbolic_view_and_phone(app_page) -> None:
    page = _open(app_page, "shapes", query="m_preset=net&m_shapes=1×3×32×32&m_sym=1", width=400)
    assert_no_error(page)
    assert page.get_by_text("16·((H//4) − 3)·((W//4) − 3) = 400", exact=False).count() >= 1
    save_screenshot(page, "shapes-phone")


def test_why_meta_panel(app_page) -> None:
    page = _open(app_page, "shapes")
    page.get_by_role("tab", name="Why meta?").click()
    page.get_by_role("button", name="Compare real and meta").click()
    page.wait_for_function(
        "() => document.body.innerText.includes('the real run took')", timeout=120_000
    )
    wait_for_app(page)
    assert_no_error(page)
    assert page.locator("[data-testid='stPlotlyChart']").count() >= 1
    save_screenshot(page, "shapes-why-meta")
