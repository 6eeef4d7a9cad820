"""Accessibility in a real browser: axe-core's WCAG 2.0/2.1 A and AA rules find no critical
or serious violation in the app's own markup (tests/e2e/a11y.py; only Streamlit's own markup
is left out, each piece by a named entry of its ``EXCLUDED``).

Every page of the navigation (tests/e2e/a11y_report.py ``PAGES``, checked against
components/navigation.py here) and one lesson step with its question, in English and in
Korean. Each page is loaded once and checked four times without a reload: light desktop, light
phone (390×844), dark phone, dark desktop. Width is the viewport's; the theme is the browser's
colour scheme, which Streamlit follows (no ``theme.base`` is set), and a rerun so the app's
own pictures redraw in the dark palette (Streamlit does not rerun when the scheme changes: the
app would keep its light-palette HTML until the next rerun). ``python -m
tests.e2e.a11y_report`` prints the same check as a report with every element, for work on a
finding.
"""

from __future__ import annotations

import threading
from urllib.parse import urlencode

from playwright.sync_api import Browser, Page, expect

from components.rooms import ROOMS
from tests.e2e.a11y import EXCLUDED, Violation, axe_violations, detail, readable
from tests.e2e.a11y_report import PAGES, app_url_paths
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, assert_no_error, wait_for_app
from torchatlas.lessons import ROOMS as LESSON_ROOMS
from torchatlas.lessons import Lesson, Step, find
from torchatlas.links import encode_source

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# A lesson step whose banner asks a question (radio options, a reveal button) over its room.
LESSON, STEP = "linear_layer", 1
SHOWN_PER_RULE = 8  # elements named in a failure message, per rule and view


def _step_link(lesson: Lesson, step: Step) -> str:
    """The step's deep link, as the Lessons page opens it (components/lessons/state.py)."""
    query = dict(step.fields())
    spec = LESSON_ROOMS[step.room]
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    query |= {"lesson": lesson.id, "step": str(step.number)}
    return f"{step.room}?{urlencode(query, doseq=True)}"


def _views() -> dict[str, str]:
    """Name -> path and query (no language) of every view this test loads."""
    lesson = find(LESSON)
    assert lesson is not None and lesson.step(STEP).question is not None
    views = dict(PAGES)
    views[f"lesson-{LESSON}-{STEP}"] = _step_link(lesson, lesson.step(STEP))
    return views


def _settle(page: Page) -> None:
    """Two animation frames: the layout has followed a new viewport or colour scheme."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def _rerun(page: Page) -> None:
    """Rerun the script (Streamlit's "r" shortcut) and wait until that run has finished: the
    app reads the browser's theme at each run, so its pictures follow a new colour scheme."""
    page.evaluate(
        """() => {
            window.__atlasReran = false;
            const app = document.querySelector("[data-testid='stApp']");
            const seen = new MutationObserver(() => {
                if (app.getAttribute('data-test-script-state') !== 'notRunning') {
                    window.__atlasReran = true;
                    seen.disconnect();
                }
            });
            seen.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
            if (document.activeElement) document.activeElement.blur();
        }"""
    )
    page.keyboard.press("r")
    page.wait_for_function("() => window.__atlasReran === true", timeout=30_000)
    wait_for_app(page)


def _set_theme(page: Page, dark: bool) -> None:
    """Switch the browser's colour scheme, wait until Streamlit shows it (its background turns
    dark or light: it really follows the scheme), then rerun: a rerun sent before that would
    still tell the app the old theme."""
    page.emulate_media(color_scheme="dark" if dark else "light")
    page.wait_for_function(
        """(dark) => {
            const app = document.querySelector("[data-testid='stApp']");
            const [r, g, b] = getComputedStyle(app).backgroundColor.match(/\\d+/g).map(Number);
            const luminance = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
            return dark ? luminance < 0.2 : luminance > 0.8;
        }""",
        arg=dark,
        timeout=10_000,
    )
    _rerun(page)
    theme = "dark" if dark else "light"
    # components/theme.py names the theme it drew the page for in its style sheet.
    drawn = page.evaluate(
        "(mark) => [...document.querySelectorAll('style')].some(s => s.textContent.includes(mark))",
        f"atlas-theme: {theme} ",
    )
    assert drawn, f"the app did not redraw the page for the {theme} theme"


def _set_width(page: Page, size: dict[str, int]) -> None:
    page.set_viewport_size(size)
    _settle(page)
    if size["width"] < 640:  # Streamlit folds the sidebar away at a phone's width
        expect(page.get_by_test_id("stSidebar")).to_have_attribute("data-collapsed", "true")
    _settle(page)


def _message(found: list[tuple[str, Violation]]) -> str:
    lines = [f"{len(found)} critical/serious axe violation(s) (excluded: "
             f"{'; '.join(map(str, EXCLUDED))}):"]  # fmt: skip
    for view, violation in found:
        lines.append(f"- {violation.rule} ({violation.impact}) on {view}: {violation.help}")
        for index, target in enumerate(violation.targets[:SHOWN_PER_RULE]):
            lines.append(f"    {readable(target)}  [{detail(violation, index)}]")
        if len(violation.targets) > SHOWN_PER_RULE:
            lines.append(f"    ... {len(violation.targets) - SHOWN_PER_RULE} more")
    return "\n".join(lines)


def test_every_page_of_the_navigation_is_checked() -> None:
    """A page added to the navigation (components/navigation.py, or a room) is in the check
    without an edit here."""
    assert app_url_paths() <= set(PAGES.values())
    assert {room.key for room in ROOMS} <= set(PAGES.values())
    assert "" in PAGES.values()  # home, the navigation's default page


def _check_language(browser: Browser, url: str, lang: str) -> list[tuple[str, Violation]]:
    """Every view in ``lang``, each loaded once and checked in its four variants."""
    context = browser.new_context(
        viewport=DESKTOP, color_scheme="light", locale="ko-KR" if lang == "ko" else "en-US"
    )
    found: list[tuple[str, Violation]] = []
    try:
        page = context.new_page()
        for name, path in _views().items():
            page.emulate_media(color_scheme="light")
            page.set_viewport_size(DESKTOP)
            separator = "&" if "?" in path else "?"
            page.goto(f"{url}/{path}" + (f"{separator}lang=ko" if lang == "ko" else ""))
            wait_for_app(page)
            assert_no_error(page)
            if name.startswith("lesson-"):  # the step's banner is up, with its question
                banner = page.locator(".st-key-lessons_banner")
                expect(banner.get_by_test_id("stRadio").first).to_be_visible()
            dark_now = False
            for dark, size in ((False, DESKTOP), (False, PHONE), (True, PHONE), (True, DESKTOP)):
                if dark != dark_now:
                    _set_theme(page, dark)
                    dark_now = dark
                _set_width(page, size)
                device = "phone" if size is PHONE else "desktop"
                view = f"{name}/{lang}/{device}/{'dark' if dark else 'light'}"
                found += [(view, violation) for violation in axe_violations(page)]
    finally:
        context.close()
    return found


def test_no_serious_axe_violation(app_server: str, browser: Browser) -> None:
    """English in this thread, Korean at the same time in a thread with a browser of its own
    (Playwright's sync API is per thread): the page views are many, and most of each view's
    time is the browser's (axe, layout) or the server's, so two at once take about half as
    long again as one, not twice."""
    from playwright.sync_api import sync_playwright

    korean: list[tuple[str, Violation]] = []
    failed: list[BaseException] = []

    def check_korean() -> None:
        try:
            with sync_playwright() as playwright:
                own = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                try:
                    korean.extend(_check_language(own, app_server, "ko"))
                finally:
                    own.close()
        except BaseException as error:  # re-raised in the test's own thread below
            failed.append(error)

    worker = threading.Thread(target=check_korean, name="a11y-ko")
    worker.start()
    try:
        found = _check_language(browser, app_server, "en")
    finally:
        worker.join()
    if failed:
        raise failed[0]
    found += korean
    assert not found, _message(found)
