"""Community Cloud's entry file (deploy/cloud/streamlit_app.py) run as a script under AppTest:
app.py's page part registers the same pages, and every page draws through it, from the entry's
own folder as Cloud's main file (the ``views`` link beside it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bench.harness import APPTEST_TIMEOUT_S
from components.rooms import built_rooms

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "deploy" / "cloud" / "streamlit_app.py"
PAGES = [
    "views/home.py",
    "views/lessons.py",
    "views/classmode.py",
    "views/author.py",
    *(room.script for room in built_rooms()),
]


def assert_drawn(at: AppTest, page: str) -> None:
    assert not at.exception, (page, [e.value for e in at.exception])
    assert not at.error, (page, [e.value for e in at.error])
    assert at.title, f"{page} drew no title"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_cloud_entry_serves_every_page(lang: str) -> None:
    """Each page in a fresh session, opened from the home page as a visitor's first run
    (AppTest evaluates a widget's ``format_func`` outside the script run, so one session
    carried across the Korean pages would read their widgets back in English)."""
    for page in PAGES:
        at = AppTest.from_file(str(ENTRY), default_timeout=APPTEST_TIMEOUT_S)
        at.session_state["lang"] = lang
        at.run()
        assert_drawn(at, "views/home.py")  # its st.page_link to the lessons resolves too
        if page != "views/home.py":
            at.switch_page(page).run()
            assert_drawn(at, page)


def registered(script: Path) -> set[tuple[str, str]]:
    """(url path, resolved page file) of every page a first run of ``script`` registers."""
    at = AppTest.from_file(str(script), default_timeout=APPTEST_TIMEOUT_S)
    at.run()
    assert_drawn(at, "views/home.py")
    pages = at._registered_pages.values()
    return {(str(p.get("url_pathname")), str(Path(str(p["script_path"])).resolve())) for p in pages}


def test_the_cloud_entry_registers_the_roots_page_files() -> None:
    """The entry's navigation names the root's page files (through the link), under the
    same url paths as ``streamlit run app.py``: no copy of a page, no page missing."""
    pages = registered(ENTRY)
    assert pages == registered(ROOT / "app.py")
    assert {file for _, file in pages} == {str(ROOT / page) for page in PAGES}
