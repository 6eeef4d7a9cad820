"""Every page's headings form an outline, read from the DOM Chromium renders: exactly one h1
(the page's title), and no heading more than one level deeper than the heading before it,
starting from h1, so a screen reader's list of headings reads as a table of contents with no
level missing (st.title is h1, st.header h2, st.subheader h3, markdown ``###`` h3...).

Only the main content counts (``stMain``: the sidebar's navigation is a list of links, not
headings). Headings drawn above a page's title (a lesson's step in its banner, a class's bar)
come before the h1; starting from h1, they can be h2 at most. Hidden parts (other tabs, a
closed expander) are read too: the outline must hold whichever one is open.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page

from components.rooms import built_rooms
from tests.e2e.conftest import assert_no_error, wait_for_app
from torchatlas.lessons import ROOMS, find
from torchatlas.links import encode_source

# Pages the navigation must list (more are read from it: a new page is checked by itself).
KNOWN_PAGES = ["", "lessons", "class", *(room.key for room in built_rooms())]
NAV_PATHS_JS = """() => Array.from(document.querySelectorAll("[data-testid='stSidebarNav'] a"))
  .map(link => new URL(link.href).pathname.replace(/^\\//, ""))"""
# Level and text of each heading in stMain, in document order (role=heading with aria-level
# too, as a screen reader reads it); aria-hidden ones are not read, so not counted.
HEADINGS_JS = """() => Array.from(document.querySelectorAll(
    "[data-testid='stMain'] :is(h1, h2, h3, h4, h5, h6, [role='heading'])"))
  .filter(node => !node.closest("[aria-hidden='true']"))
  .map(node => [
    Number(node.getAttribute("aria-level")) || Number(node.tagName.slice(1)) || 2,
    (node.innerText || node.textContent || "").trim().slice(0, 80),
  ])"""


def outline_problems(headings: list[tuple[int, str]]) -> list[str]:
    """What keeps ``headings`` ((level, text) in page order) from being an outline."""
    problems = []
    titles = [text for level, text in headings if level == 1]
    if len(titles) != 1:
        problems.append(f"{len(titles)} h1 (want exactly one): {titles}")
    previous = 1  # the page's title level: nothing may start deeper than h2
    for level, text in headings:
        if level > previous + 1:
            problems.append(f"h{previous} → h{level} ({text!r}): h{previous + 1} skipped")
        previous = level
    return problems


@pytest.mark.parametrize(
    ("headings", "problems"),
    [([(1, "T"), (2, "a"), (3, "b"), (2, "c")], 0), ([(2, "step"), (1, "T"), (2, "a")], 0),
     ([(1, "T"), (3, "a")], 1), ([(3, "step"), (1, "T")], 1), ([(1, "T"), (1, "U")], 1),
     ([(2, "a")], 1), ([(1, "T"), (2, "a"), (4, "b"), (3, "c")], 1)],
)  # fmt: skip
def test_the_outline_rule(headings: list[tuple[int, str]], problems: int) -> None:
    assert len(outline_problems(headings)) == problems


@pytest.fixture
def page(app_server: str, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    try:
        yield context.new_page()
    finally:
        context.close()


def headings_of(page: Page, url: str) -> list[tuple[int, str]]:
    page.goto(url)
    wait_for_app(page)
    assert_no_error(page)
    return [(int(level), str(text)) for level, text in page.evaluate(HEADINGS_JS)]


def test_every_pages_headings_form_an_outline(app_server: str, page: Page) -> None:
    """Each page as a first visit shows it, then a lesson's step (its banner above a room);
    all the problems at once, so one run shows every page to fix."""
    found: dict[str, list[str]] = {}
    page.goto(app_server)
    wait_for_app(page)
    pages = list(dict.fromkeys(page.evaluate(NAV_PATHS_JS)))
    assert set(KNOWN_PAGES) <= set(pages), pages
    for path in pages:
        headings = headings_of(page, f"{app_server}/{path}")
        problems = outline_problems(headings)
        if headings and headings[0][0] != 1:  # nothing is drawn above a plain page's title
            problems.append(f"the first heading is h{headings[0][0]} {headings[0][1]!r}")
        found[path or "home"] = problems
    lesson = find("broadcasting")
    assert lesson is not None
    step = lesson.step(2)  # in the strides room: the banner's step above the room's panels
    query = dict(step.fields())
    spec = ROOMS[step.room]
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    query |= {"lesson": lesson.id, "step": str(step.number)}
    headings = headings_of(page, f"{app_server}/{step.room}?{urlencode(query, doseq=True)}")
    assert (2, step.title["en"]) in headings, headings  # the banner's step is a heading
    found[f"{step.room} in a lesson"] = outline_problems(headings)
    broken = {name: problems for name, problems in found.items() if problems}
    assert not broken, broken
