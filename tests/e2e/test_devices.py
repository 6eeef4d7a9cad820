"""The devices room in a real browser: run demonstrations and the benchmark, in English and
Korean, light and dark, and on a phone-sized screen; screenshots for the README."""

from __future__ import annotations

import contextlib

from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from torchatlas.i18n import translate


def _click(page, key: str, then_shows: str | None = None) -> None:
    """Click a keyed button; wait for the text its run produces (fragment reruns are quick
    enough to finish before the status widget would show them)."""
    page.locator(f".st-key-{key} button").first.click()
    if then_shows is not None:
        page.get_by_text(then_shows).first.wait_for(timeout=60_000)
    wait_for_app(page)


def _show(page, selector: str) -> None:
    """Scroll Streamlit's inner scroll area so the selected element is on the screenshot."""
    page.locator(selector).first.evaluate(
        "el => { el.scrollIntoView({block: 'start'});"
        " return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }"
    )


def _body(page) -> str:
    return page.locator("body").inner_text()


def test_run_demonstrations_and_benchmark(app_page) -> None:
    page = app_page("devices", height=1500)
    assert_no_error(page)
    _click(page, "devices_run_tensor_to", "no copy was made")
    _show(page, ".st-key-devices_run_tensor_to")
    save_screenshot(page, "devices-demo-light")
    _click(page, "devices_run_mix_devices", "raises RuntimeError")
    body = _body(page)
    # The real exception text, shown on the page, not a crash.
    assert "Tensor on device meta is not on the expected device cpu!" in body or "cuda" in body
    _click(page, "devices_bench_run")
    page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=120_000)
    wait_for_app(page)
    assert_no_error(page)
    body = _body(page)
    assert translate("devices.bench.download") in body
    assert translate("devices.bench.paths.cpu_to_cpu") in body
    _show(page, "[data-testid='stPlotlyChart']")
    save_screenshot(page, "devices-bench-light")


def test_korean_dark_with_results(app_page) -> None:
    page = app_page("devices", lang="ko", dark=True, height=1500)
    _click(page, "devices_run_numpy_bridge", "메모리를 공유합니다")
    _click(page, "devices_run_module_to", "제자리에서 바뀐 같은 모듈")
    _show(page, ".st-key-devices_variant_module_to")
    save_screenshot(page, "devices-demo-dark-ko")
    assert_no_error(page)
    body = _body(page)
    assert translate("devices.demo.header", "ko") in body
    _click(page, "devices_bench_run")
    page.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=120_000)
    wait_for_app(page)
    assert_no_error(page)
    _show(page, "[data-testid='stPlotlyChart']")
    save_screenshot(page, "devices-bench-dark-ko")


def test_phone_width(app_page) -> None:
    page = app_page("devices", width=400, height=900)
    _click(page, "devices_run_tensor_to", "no copy was made")
    assert_no_error(page)
    assert translate("devices.demos.tensor_to.title").split(":")[0] in _body(page)
    save_screenshot(page, "devices-phone")


def test_stop_a_long_benchmark(app_page) -> None:
    """The largest size and the longest budget: "stop" ends the run, keeps what was measured,
    and gives the controls back. Since sizes stop at the memory budget's 64 MiB, a run on a
    fast CPU may finish before the press lands: then it ends as a complete run, and the stop
    itself is covered by the benchmark's own cancel tests (tests/unit/test_devices_board.py)."""
    page = app_page("devices", height=1500)
    for key in ("devices_bench_max", "devices_bench_budget"):
        page.locator(f".st-key-{key} input[type='range']").first.press("End")
        wait_for_app(page)
    page.locator(".st-key-devices_bench_run button").first.click()
    stop = page.locator(".st-key-devices_bench_stop button").first
    stop.wait_for(timeout=30_000)
    with contextlib.suppress(PlaywrightTimeoutError):  # the run may end (and the button go) first
        stop.click(timeout=5_000)
    ended = page.get_by_text("Stopped after").or_(page.locator("[data-testid='stDownloadButton']"))
    expect(ended.first).to_be_visible(timeout=60_000)
    wait_for_app(page)
    assert_no_error(page)
    assert page.locator(".st-key-devices_bench_stop").count() == 0
    assert page.locator(".st-key-devices_bench_run button").first.is_enabled()


def _largest_and_longest(page) -> None:
    for key in ("devices_bench_max", "devices_bench_budget"):
        page.locator(f".st-key-{key} input[type='range']").first.press("End")
        wait_for_app(page)


def _run_and_wait_for_its_end(page) -> None:
    """Press "run", then wait until no run is watched any more (a page left polling a run
    when its browser closes is not a clean end) and the result is shown."""
    page.locator(".st-key-devices_bench_run button").first.click()
    wait_for_app(page)
    for watching in ("[data-testid='stProgress']", ".st-key-devices_bench_stop",
                     ".st-key-devices_bench_leave"):  # fmt: skip
        expect(page.locator(watching)).to_have_count(0, timeout=120_000)
    wait_for_app(page)
    expect(page.locator(".st-key-devices_bench_run button").first).to_be_enabled()
    page.get_by_text("by this server").first.wait_for(timeout=30_000)


def test_a_second_visitor_sees_the_servers_result_at_once(app_page) -> None:
    """The benchmark measures the server: a visitor who never pressed "run" sees the latest
    result, with its age and settings, as the page opens. (Presses during a run, joining and
    queueing are tested under AppTest, where the test decides when a run ends.)"""
    first = app_page("devices", height=1500)
    _largest_and_longest(first)
    _run_and_wait_for_its_end(first)

    second = app_page("devices", height=1500)  # fresh: no press, no waiting for a run
    # The chart draws in the browser after the run: wait for it, never for a measurement.
    second.wait_for_selector("[data-testid='stPlotlyChart'] .main-svg", timeout=30_000)
    second.get_by_text(translate("devices.bench.download")).first.wait_for(timeout=30_000)
    wait_for_app(second)
    assert_no_error(second)
    body = _body(second)
    assert "by this server" in body and "budget" in body
    assert translate("devices.bench.not_run") not in body
