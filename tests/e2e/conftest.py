"""Real-browser harness: one `streamlit run app.py` server per test session, driven by
Python Playwright in Debian's Chromium (Playwright cannot download its own browser here).

Rooms' e2e tests use the ``app_page`` fixture: ``app_page("strides")`` opens a deep link
and waits until the script has finished running.

Screenshots never touch the repository during a normal run: ``save_screenshot`` writes them to
a temporary output folder (printed at the end of the session). ``--update-screenshots`` also
copies them over the README's images in ``docs/screenshots/``, to be committed on purpose.
``assert_looks_like_reference`` compares a screenshot with its stored README image, with a
tolerance that passes font and timing differences but fails a blank, broken or unthemed page.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from playwright.sync_api import Browser, Page, expect

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_SCREENSHOTS = ROOT / "docs" / "screenshots"
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not healthy after {timeout_s}s")


@contextlib.contextmanager
def running_app(log_path: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free port, as README command 1 starts it; yields its URL."""
    port = _free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "streamlit", "run", "app.py",
                "--server.headless", "true",
                "--server.port", str(port),
                "--server.address", "127.0.0.1",
                "--server.fileWatcherType", "none",
                "--browser.gatherUsageStats", "false",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        server_log = log_path.read_text(errors="replace")
        # Tracebacks in the server log mean a page crashed, even if the browser hid it; a
        # browser closing its websocket mid-message is the browser leaving, not a crash.
        crashes = [
            block
            for block in server_log.split("Traceback")[1:]
            if not any(word in block for word in DISCONNECTS)
        ]
        assert not crashes, "Traceback" + crashes[0][-4000:]


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
    """Where this session's screenshots go (a temporary folder), and whether the README's
    images are to be replaced (``--update-screenshots``)."""
    global _screenshot_dir, _update_references
    _screenshot_dir = tmp_path_factory.mktemp("screenshots")
    _update_references = bool(request.config.getoption("--update-screenshots"))
    yield _screenshot_dir
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and any(_screenshot_dir.iterdir()):
        where = REFERENCE_SCREENSHOTS if _update_references else _screenshot_dir
        reporter.write_line(f"screenshots written to {where}")


def save_element_screenshot(page: Page, selector: str, name: str) -> Path:
    """Screenshot of one element (a figure) into this session's output folder, like
    :func:`save_screenshot`."""
    output = _screenshot_dir or Path(os.environ.get("TMPDIR", "/tmp")) / "torchatlas-screenshots"
    output.mkdir(parents=True, exist_ok=True)
    path = output / f"{name}.png"
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    element.screenshot(path=str(path), animations="disabled")
    if _update_references:
        REFERENCE_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, REFERENCE_SCREENSHOTS / path.name)
    return path


def save_screenshot(page: Page, name: str, max_height: int = 5000) -> Path:
    """Screenshot of the whole page into this session's output folder (and over the README's
    image with ``--update-screenshots``). Streamlit scrolls an inner container, so
    Playwright's full_page sees only the window: grow the viewport to the content first, then
    restore it."""
    output = _screenshot_dir or Path(os.environ.get("TMPDIR", "/tmp")) / "torchatlas-screenshots"
    output.mkdir(parents=True, exist_ok=True)
    path = output / f"{name}.png"
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
    if _update_references:
        REFERENCE_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, REFERENCE_SCREENSHOTS / path.name)
    return path


def image_distance(first: Path, second: Path, width: int = 48) -> float:
    """Mean absolute difference (0–1) of two screenshots shrunk to small RGB thumbnails of the
    same width: fine text blurs away, layout, colours and themes remain."""
    from PIL import Image

    thumbnails = []
    with Image.open(first) as one, Image.open(second) as two:
        height = max(1, round(width * one.height / one.width))
        for image in (one, two):
            thumbnails.append(image.convert("RGB").resize((width, height), Image.Resampling.BOX))
    pixels = zip(thumbnails[0].tobytes(), thumbnails[1].tobytes(), strict=True)
    return sum(abs(a - b) for a, b in pixels) / (255 * 3 * width * height)


def assert_looks_like_reference(path: Path, tolerance: float = 0.08, width: int = 48) -> None:
    """The screenshot at ``path`` resembles the stored image of the same name, compared as
    ``width``-pixel-wide thumbnails: a whole page at the default width and tolerance catches a
    swapped theme or a page that lost its layout; a figure compared wider and tighter catches
    wrong colours or cells."""
    reference = REFERENCE_SCREENSHOTS / path.name
    if _update_references or not reference.exists():
        return  # a new picture has no reference yet: --update-screenshots stores one
    from PIL import Image

    with Image.open(path) as new, Image.open(reference) as old:
        new_ratio, old_ratio = new.height / new.width, old.height / old.width
    assert abs(new_ratio - old_ratio) <= 0.35 * old_ratio, (
        f"{path.name}: page height changed from {old_ratio:.2f} to {new_ratio:.2f} widths "
        f"(new image in {path.parent}; run with --update-screenshots if that is intended)"
    )
    distance = image_distance(path, reference, width)
    assert distance <= tolerance, (
        f"{path.name} differs from docs/screenshots/{path.name} by {distance:.3f} "
        f"(> {tolerance}); new image in {path.parent}; run with --update-screenshots if intended"
    )
