"""Real-browser harness: one `streamlit run app.py` server per test session, driven by
Python Playwright in Debian's Chromium (Playwright cannot download its own browser here).

Rooms' e2e tests use the ``app_page`` fixture: ``app_page("strides")`` opens a deep link
and waits until the script has finished running.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
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
        # Tracebacks in the server log mean a page crashed, even if the browser hid it.
        assert "Traceback" not in server_log, server_log[-4000:]


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_app(tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


def wait_for_app(page: object, timeout_ms: int = 120_000) -> None:
    """Wait until the app view is there and the script run has finished."""
    page.wait_for_selector("[data-testid='stAppViewContainer']", timeout=timeout_ms)
    # Every page starts with st.title: its h1 means the script has produced output.
    page.wait_for_selector("[data-testid='stMain'] h1", timeout=timeout_ms)
    # The status widget shows "Running..." while a script runs.
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget'] "
        "[data-testid='stStatusWidgetRunningIcon']\")",
        timeout=timeout_ms,
    )
    page.wait_for_timeout(300)
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget'] "
        "[data-testid='stStatusWidgetRunningIcon']\")",
        timeout=timeout_ms,
    )


def assert_no_error(page: object) -> None:
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()
    toasts = page.locator("[data-testid='stToast']")
    for index in range(toasts.count()):
        assert "error" not in toasts.nth(index).inner_text().lower()


@pytest.fixture
def app_page(app_server: str, browser: object) -> Iterator[Callable[..., object]]:
    """``app_page(path, lang="en", dark=False, query="")`` opens a deep link in a fresh
    browser context and returns the Playwright page once the script run has finished."""
    contexts = []

    def open_page(
        path: str = "", lang: str = "en", dark: bool = False, query: str = "",
        width: int = 1400, height: int = 1000,
    ) -> object:  # fmt: skip
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


def save_screenshot(page: object, name: str, max_height: int = 5000) -> Path:
    """Screenshot of the whole page. Streamlit scrolls an inner container, so Playwright's
    full_page sees only the window: grow the viewport to the content first, then restore it."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    viewport = page.viewport_size
    content_height = page.evaluate(
        "() => { const m = document.querySelector(\"[data-testid='stMain']\");"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    if viewport and content_height > viewport["height"]:
        page.set_viewport_size(
            {"width": viewport["width"], "height": min(content_height + 40, max_height)}
        )
        page.wait_for_timeout(400)
    page.screenshot(path=str(path))
    if viewport:
        page.set_viewport_size(viewport)
    return path
