"""The classification room in a real browser: the sample's label on first load, an upload
through the file input (with a broken file beside it), the heatmap tab, Korean, dark theme and
a phone-width viewport. Screenshots go to the session's output folder (conftest) and are
compared with the README's pictures of the room, with a tolerance.

Every wait is on the app's own state (its script run, the text it rendered, a chart drawn, the
pictures loaded), never a fixed sleep.
"""

from __future__ import annotations

import io

from PIL import Image
from playwright.sync_api import Page, expect

from tests.e2e.conftest import (
    OpenPage,
    assert_looks_like_reference,
    assert_no_error,
    save_screenshot,
    wait_for_app,
)
from tests.unit.test_images import png_header_only
from torchatlas.classify import sample_bytes
from torchatlas.i18n import translate

CAT_CLASSES = ("tabby", "tiger cat", "Egyptian cat")
HEIC = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64


MAIN = "[data-testid='stMain']"
TIMEOUT_MS = 90_000


def body_text(page: Page) -> str:
    return page.locator(MAIN).inner_text()


def wait_for_text(page: Page, text: str, timeout_ms: int = TIMEOUT_MS) -> None:
    """wait_for_app can return before a slow run has even started; wait for the content."""
    expect(page.locator(MAIN)).to_contain_text(text, timeout=timeout_ms)
    wait_for_app(page)


def wait_for_pictures(page: Page) -> None:
    """Every picture on the page has arrived and is decoded, and the layout has settled."""
    page.wait_for_function(
        "() => [...document.images].every(image => image.complete && image.naturalWidth > 0)",
        timeout=TIMEOUT_MS,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def settle(page: Page) -> None:
    """Charts, highlighted code and pictures render after the script run: wait for each."""
    expect(page.locator("[data-testid='stPlotlyChart'] .main-svg").first).to_be_visible(
        timeout=TIMEOUT_MS
    )
    expect(page.locator("[data-testid='stCode'] pre").first).to_be_visible(timeout=TIMEOUT_MS)
    wait_for_app(page)
    wait_for_pictures(page)


def shoot(page: Page, name: str) -> None:
    """Save the page's picture and check that it still looks like the README's."""
    assert_looks_like_reference(save_screenshot(page, name))


def test_sample_is_classified_on_first_load(app_page: OpenPage) -> None:
    page = app_page("classify", height=2600)
    wait_for_text(page, translate("classify.pipeline.before_after"))
    assert_no_error(page)
    text = body_text(page)
    assert any(f"{label}\n" in text or f"{label} ·" in text for label in CAT_CLASSES), text[:1500]
    assert translate("classify.pipeline.steps.normalized") in text
    settle(page)
    shoot(page, "classify-sample")


def test_upload_reads_the_predicted_label_and_reports_the_bad_file(app_page: OpenPage) -> None:
    page = app_page("classify", height=2600)
    wait_for_text(page, translate("classify.pipeline.before_after"))
    # deselect (exact: the photos' fullscreen buttons are named after them too)
    page.get_by_role("button", name=translate("classify.samples.cat"), exact=True).click()
    wait_for_text(page, translate("classify.inputs.none"))
    jpeg = io.BytesIO()
    Image.open(io.BytesIO(sample_bytes("coffee"))).save(jpeg, "JPEG", quality=90)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        [
            {"name": "my-coffee.jpg", "mimeType": "image/jpeg", "buffer": jpeg.getvalue()},
            {"name": "broken.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\nnope"},
            {
                "name": "bomb.png",
                "mimeType": "image/png",
                "buffer": png_header_only(50_000, 50_000),
            },
            {"name": "IMG_0001.heic", "mimeType": "image/heic", "buffer": HEIC},
        ]
    )
    wait_for_text(page, "broken.png:")
    wait_for_text(page, "espresso · ")
    assert_no_error(page)
    text = body_text(page)
    assert "espresso · " in text, text[:2000]
    assert "my-coffee.jpg" in text
    alerts = page.locator("[data-testid='stAlert']")
    assert (
        translate("classify.errors.not_image") in alerts.filter(has_text="broken.png").inner_text()
    )
    assert "decompression bomb" in alerts.filter(has_text="bomb.png").inner_text()
    assert "HEIC" in alerts.filter(has_text="IMG_0001.heic").inner_text()
    settle(page)
    shoot(page, "classify-upload")

    page.get_by_role("tab", name=translate("classify.inspect.heatmap")).click()
    wait_for_text(page, "Grad-CAM for espresso")
    expect(page.get_by_text(translate("classify.heatmap.model_view"))).to_be_visible()
    wait_for_pictures(page)
    shoot(page, "classify-heatmap")

    page.get_by_role("tab", name=translate("classify.inspect.latency")).click()
    first_run = translate("classify.latency.first_run")
    # Opening a tab builds it (a rerun): the cached timings of the first run, so far.
    wait_for_text(page, first_run)
    page.get_by_role("button", name=translate("classify.latency.again")).click()
    # "ms per image" is on the page before the click too: wait for the fragment's new run
    expect(page.locator(MAIN)).not_to_contain_text(first_run, timeout=TIMEOUT_MS)
    wait_for_app(page)
    assert_no_error(page)
    assert "ms per image for a batch of 1" in body_text(page)  # a fresh timing
    expect(page.locator(".st-key-classify_latency .main-svg").first).to_be_visible(
        timeout=TIMEOUT_MS
    )
    shoot(page, "classify-latency")


def test_korean_dark_and_phone(app_page: OpenPage) -> None:
    page = app_page("classify", lang="ko", height=2600)
    wait_for_text(page, translate("classify.pipeline.before_after", "ko"))
    assert_no_error(page)
    assert translate("classify.inputs.header", "ko") in body_text(page)
    settle(page)
    shoot(page, "classify-ko")

    dark = app_page("classify", dark=True, height=2600)
    wait_for_text(dark, translate("classify.pipeline.before_after"))
    assert_no_error(dark)
    settle(dark)
    shoot(dark, "classify-dark-full")

    phone = app_page("classify", width=400, height=3000)
    wait_for_text(phone, translate("classify.pipeline.before_after"))
    assert_no_error(phone)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 420  # no sideways scroll
    settle(phone)
    shoot(phone, "classify-phone")


def test_camera_photo_is_classified(app_page: OpenPage) -> None:
    """Chromium's fake camera (launch flags in conftest) stands in for a real one."""
    page = app_page("classify")
    wait_for_text(page, translate("classify.pipeline.before_after"))
    expect(page.locator("[data-testid='stCameraInput']")).to_have_count(0)  # no prompt on load
    page.get_by_text(translate("classify.inputs.camera_toggle"), exact=True).click()
    # the fake camera streams once the video element has its first frame
    page.wait_for_function(
        "() => { const v = document.querySelector(\"[data-testid='stCameraInput'] video\");"
        " return v && v.readyState >= 2; }",
        timeout=TIMEOUT_MS,
    )
    page.locator("[data-testid='stCameraInput'] button").filter(has_text="Take").click()
    wait_for_text(page, translate("classify.inputs.camera_name") + " · ")
    assert_no_error(page)
    assert "classified 2 of 2 file(s)" in body_text(page)
