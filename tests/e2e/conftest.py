"""Real-browser harness: one `streamlit run app.py` server per test session (started by
bench/server.py, as the classroom benchmark starts it), driven by Python Playwright in
Debian's Chromium (Playwright cannot download its own browser here).

Rooms' e2e tests use the ``app_page`` fixture: ``app_page("strides")`` opens a deep link
and waits until the script has finished running.

Screenshots are assertions. ``save_screenshot`` / ``save_element_screenshot`` write each one
to a temporary output folder (printed at the end of the session) and compare it with its
reference, ``tests/e2e/references/<name>.png``: a thumbnail (``REFERENCE_WIDTH`` pixels wide),
compared as smaller thumbnails with a tolerance that passes font and antialiasing noise but
fails a changed, blank, broken or unthemed page. A screenshot without a reference fails (a
renamed or new picture must be looked at). ``--update-screenshots`` writes the references
from this run instead of comparing, and copies the pictures over the README's images in
``docs/screenshots/`` as before: both to be looked at and committed on purpose.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pytest
from playwright.sync_api import Browser, Page, expect

from bench.server import running_server

if TYPE_CHECKING:
    from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
# What each screenshot is compared with (thumbnails), and the README's pictures.
REFERENCES = Path(__file__).resolve().parent / "references"
README_SCREENSHOTS = ROOT / "docs" / "screenshots"
REFERENCE_WIDTH = 160  # pixels: wide enough for the strictest comparison below (120)
COMPARE_WIDTH = 48
# A page: the mean absolute difference of 48-pixel-wide thumbnails (0–1). Measured: the same
# page in two runs differs by 0.000–0.003 (fonts, antialiasing, a cursor); a page whose
# layout or content changed by 0.01–0.09, a swapped theme by 0.4.
TOLERANCE = 0.03
# Pictures of numbers measured on the spot (the transfer benchmark's bars vary run to run).
MEASURED_TOLERANCE = {"devices-bench-light": 0.06, "devices-bench-dark-ko": 0.06}
# A page's height may change this much (relative) before it is a different page.
HEIGHT_TOLERANCE = 0.1
# Set for the session by the ``screenshot_output`` fixture: a temporary folder, never the repo.
_screenshot_dir: Path | None = None
_update_references = False
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
            # In CI (.ci/run installs Chromium) a missing browser must fail, not skip.
            if CHROMIUM is None and not os.environ.get("CI"):
                item.add_marker(
                    pytest.mark.skip(
                        reason="no Chromium binary on PATH (apt-get install chromium); "
                        "the e2e layer needs a real browser"
                    )
                )


# How the server reports a browser that went away while a message was on its way.
DISCONNECTS = ("WebSocketDisconnect", "ClientDisconnected", "ConnectionClosed")


@contextlib.contextmanager
def running_app(log_path: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free port, as README command 1 starts it; yields its URL.
    Its class database is its own (beside the log), not the default file in the home folder:
    classes a run leaves behind would count against the next run's per-client limit of live
    classes (every test browser is one client, 127.0.0.1)."""
    env = {"ATLAS_DATA_DIR": str(log_path.parent / "class-data")}
    with running_server(log_path, env=env) as server:
        try:
            yield server.url
        finally:
            server.stop()
            # Tracebacks in the server log mean a page crashed, even if the browser hid it; a
            # browser closing its websocket mid-message is the browser leaving, not a crash.
            crashes = server.crashes(ignoring=DISCONNECTS)
            assert not crashes, crashes[0][-4000:]


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_app(tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


def wait_for_app(page: Page, timeout_ms: int = 120_000) -> None:
    """Wait until the app is connected, has produced output and its script run has finished.

    Streamlit marks its root element with the script's state; a run the script itself
    requests (``st.rerun``, a query-parameter change) flips it back to running, so the state
    is read again after the first title has arrived.
    """
    app = page.locator("[data-testid='stApp']")
    expect(app).to_have_attribute("data-test-connection-state", "CONNECTED", timeout=timeout_ms)
    # Every page starts with st.title: its h1 means the script has produced output.
    expect(page.locator("[data-testid='stMain'] h1").first).to_be_visible(timeout=timeout_ms)
    for _ in range(2):
        expect(app).to_have_attribute("data-test-script-state", "notRunning", timeout=timeout_ms)
        expect(page.locator("[data-testid='stStatusWidgetRunningIcon']")).to_have_count(
            0, timeout=timeout_ms
        )
    expect(page.locator("[data-stale='true']")).to_have_count(0, timeout=timeout_ms)
    # Streamlit loads each element type's code on first use and shows a skeleton meanwhile.
    expect(
        page.locator("[data-testid='stSkeleton'], [data-testid='stSkeletonElement']")
    ).to_have_count(0, timeout=timeout_ms)


def assert_no_error(page: Page) -> None:
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()
    toasts = page.locator("[data-testid='stToast']")
    for index in range(toasts.count()):
        assert "error" not in toasts.nth(index).inner_text().lower()


class OpenPage(Protocol):
    """The ``app_page`` fixture: open a deep link in a fresh browser context."""

    def __call__(
        self, path: str = "", lang: str = "en", dark: bool = False, query: str = "",
        width: int = 1400, height: int = 1000,
    ) -> Page: ...  # fmt: skip


@pytest.fixture
def app_page(app_server: str, browser: Browser) -> Iterator[OpenPage]:
    """``app_page(path, lang="en", dark=False, query="")`` opens a deep link in a fresh
    browser context and returns the Playwright page once the script run has finished."""
    contexts = []

    def open_page(
        path: str = "", lang: str = "en", dark: bool = False, query: str = "",
        width: int = 1400, height: int = 1000,
    ) -> Page:  # fmt: skip
        context = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme="dark" if dark else "light",
            locale="ko-KR" if lang == "ko" else "en-US",
        )
        contexts.append(context)
        page = context.new_page()
        params = "&".join(p for p in (f"lang={lang}" if lang != "en" else "", query) if p)
        page.goto(f"{app_server}/{path}" + (f"?{params}" if params else ""))
        wait_for_app(page)
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(scope="session", autouse=True)
def screenshot_output(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """Where this session's screenshots go (a temporary folder), and whether the references
    (and the README's images) are to be rewritten from them (``--update-screenshots``)."""
    global _screenshot_dir, _update_references
    _screenshot_dir = tmp_path_factory.mktemp("screenshots")
    _update_references = bool(request.config.getoption("--update-screenshots"))
    yield _screenshot_dir
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and any(_screenshot_dir.iterdir()):
        reporter.write_line(f"screenshots written to {_screenshot_dir}")
        if _update_references:
            reporter.write_line(
                f"references rewritten in {REFERENCES}, README images in "
                f"{README_SCREENSHOTS}: look at them before committing"
            )


def _output_path(name: str) -> Path:
    output = _screenshot_dir or Path(os.environ.get("TMPDIR", "/tmp")) / "torchatlas-screenshots"
    output.mkdir(parents=True, exist_ok=True)
    return output / f"{name}.png"


def save_element_screenshot(
    page: Page, selector: str, name: str, tolerance: float = TOLERANCE, width: int = COMPARE_WIDTH
) -> Path:
    """Screenshot of one element (a figure) into this session's output folder, compared with
    its reference like :func:`save_screenshot`."""
    path = _output_path(name)
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    element.screenshot(path=str(path), animations="disabled")
    _check_or_store(path, tolerance, width)
    return path


def save_screenshot(
    page: Page,
    name: str,
    max_height: int = 5000,
    tolerance: float = TOLERANCE,
    width: int = COMPARE_WIDTH,
) -> Path:
    """Screenshot of the whole page into this session's output folder, compared with its
    reference (or stored as the reference, and over the README's image, with
    ``--update-screenshots``). Streamlit scrolls an inner container, so Playwright's full_page
    sees only the window: grow the viewport to the content first, then restore it."""
    path = _output_path(name)
    viewport = page.viewport_size
    content_height = page.evaluate(
        "() => { const m = document.querySelector(\"[data-testid='stMain']\");"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    if viewport and content_height > viewport["height"]:
        page.set_viewport_size(
            {"width": viewport["width"], "height": min(content_height + 40, max_height)}
        )
        # The layout settles to the new height in a frame or two: wait for two animation frames.
        page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
    page.screenshot(path=str(path))
    if viewport:
        page.set_viewport_size(viewport)
    _check_or_store(path, tolerance, width)
    return path


def thumbnail(image: Image.Image, width: int, height: int | None = None) -> Image.Image:
    """``image`` in RGB, shrunk to ``width`` pixels (box filter: each pixel the mean of the
    pixels it covers), ``height`` by default in proportion."""
    from PIL import Image

    if height is None:
        height = max(1, round(width * image.height / image.width))
    return image.convert("RGB").resize((width, height), Image.Resampling.BOX)


def reference_thumbnail(path: Path) -> Image.Image:
    """A screenshot as its reference is stored: :data:`REFERENCE_WIDTH` pixels wide."""
    from PIL import Image

    with Image.open(path) as image:
        return thumbnail(image, REFERENCE_WIDTH)


def image_distance(first: Image.Image, second: Image.Image, width: int = COMPARE_WIDTH) -> float:
    """Mean absolute difference (0–1) of two reference thumbnails shrunk to the same ``width``
    (and the first one's height): fine text blurs away, layout, colours and themes remain."""
    one = thumbnail(first, width)
    two = thumbnail(second, width, one.height)
    pixels = zip(one.tobytes(), two.tobytes(), strict=True)
    return sum(abs(a - b) for a, b in pixels) / (255 * 3 * one.width * one.height)


def _check_or_store(path: Path, tolerance: float, width: int) -> None:
    if _update_references:
        REFERENCES.mkdir(parents=True, exist_ok=True)
        reference_thumbnail(path).save(REFERENCES / path.name, optimize=True)
        README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_SCREENSHOTS / path.name)
        return
    assert_looks_like_reference(path, tolerance, width)


def assert_looks_like_reference(
    path: Path, tolerance: float = TOLERANCE, width: int = COMPARE_WIDTH
) -> None:
    """The screenshot at ``path`` resembles its reference (``tests/e2e/references/``, same
    name), compared as ``width``-pixel-wide thumbnails: a whole page at the default width and
    tolerance catches a changed page, a swapped theme or a page that lost its layout; a figure
    compared wider and tighter catches wrong colours or cells. No reference: a failure."""
    from PIL import Image

    if _update_references:
        return  # this run writes the references
    reference = REFERENCES / path.name
    if not reference.exists():
        pytest.fail(
            f"{path.name} has no reference in {REFERENCES}: look at the new "
            f"image in {path.parent}, then run with --update-screenshots and commit it"
        )
    new = reference_thumbnail(path)
    with Image.open(reference) as stored:
        old = stored.convert("RGB")
    new_ratio, old_ratio = new.height / new.width, old.height / old.width
    assert abs(new_ratio - old_ratio) <= HEIGHT_TOLERANCE * old_ratio, (
        f"{path.name}: page height changed from {old_ratio:.2f} to {new_ratio:.2f} widths "
        f"(new image in {path.parent}; run with --update-screenshots if that is intended)"
    )
    distance = image_distance(new, old, width)
    tolerance = max(tolerance, MEASURED_TOLERANCE.get(path.stem, 0.0))
    assert distance <= tolerance, (
        f"{path.name} differs from its reference by {distance:.3f} (> {tolerance}); new image "
        f"in {path.parent}; run with --update-screenshots if intended"
    )
