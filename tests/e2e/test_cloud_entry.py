"""Community Cloud's entry in a real browser, started as Cloud starts it:
``streamlit run deploy/cloud/streamlit_app.py`` with the repository root as the working
directory, and a secret in a ``secrets.toml`` that Streamlit reads (Cloud hands an app its
secrets the same way; Streamlit puts each top-level one in the process's environment).

One Chromium pass: a deep link as the fresh server's very first visit, then every page, each
with its title and no exception box; then a class started on the Class page lands in the
database the ``ATLAS_DATABASE_URL`` secret names, not in the SQLite file class mode keeps by
default (under ``$HOME``, which Cloud loses when the app sleeps). A SQLite URL stands in for
PostgreSQL here: the secret's way to class mode's store is what is checked (PostgreSQL itself:
tests/e2e/test_classmode.py, replicas). The AppTest twin (no server, no browser):
tests/app/test_cloud_entry.py.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from bench.server import Server
from components.rooms import built_rooms
from tests.e2e.conftest import DISCONNECTS, assert_no_error, wait_for_app
from torchatlas.i18n import translate

ENTRY = "deploy/cloud/streamlit_app.py"  # Cloud's "main file", relative to the root
# Each page's title (its h1) by url path; the navigation's pages must all be here.
TITLES = {
    "": "app.home.title",
    "lessons": "lessons.title",
    "class": "classmode.title",
    "author": "author.title",
    **{room.key: f"app.rooms.{room.key}.title" for room in built_rooms()},
}
NAV_PATHS_JS = """() => Array.from(document.querySelectorAll("[data-testid='stSidebarNav'] a"))
  .map(link => new URL(link.href).pathname.replace(/^\\//, ""))"""


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    """The Cloud entry's server; yields it, the secret database's file and the default one."""
    base = tmp_path_factory.mktemp("cloud")
    home = base / "home"
    (home / ".streamlit").mkdir(parents=True)
    secret_db = base / "secret" / "classes.sqlite3"
    secret_db.parent.mkdir()
    (home / ".streamlit" / "secrets.toml").write_text(
        f'ATLAS_DATABASE_URL = "sqlite:///{secret_db}"\n', encoding="utf-8"
    )
    default_db = home / ".local" / "share" / "torchatlas" / "classes.sqlite3"
    with pytest.MonkeyPatch.context() as patch:  # the server inherits this environment
        patch.setenv("HOME", str(home))  # ~/.streamlit/secrets.toml, ~/.local/share
        for name in ("ATLAS_DATABASE_URL", "ATLAS_DATA_DIR"):
            patch.delenv(name, raising=False)  # only the secret may name the database
        # Cloud's very command: its entry, from the root, with none of README command 1's flags.
        server = Server(0, base / "server.log", script=ENTRY, flags=())
        server.start()
    try:
        yield server, secret_db, default_db
    finally:
        server.stop()
        crashes = server.crashes(ignoring=DISCONNECTS)
        assert not crashes, crashes[0][-4000:]


def test_the_cloud_entry_serves_every_page_and_class_mode_reads_the_secret(
    cloud: tuple[Server, Path, Path], browser: Browser
) -> None:
    server, secret_db, default_db = cloud
    log = server.log_text()
    assert "Traceback" not in log, log[-3000:]
    first = browser.new_context(viewport={"width": 1280, "height": 900}, locale="ko-KR")
    try:
        # The fresh server's first visit is a deep link: navigation, language and page as such.
        page = first.new_page()
        page.goto(f"{server.url}/strides?lang=ko")
        wait_for_app(page)
        assert_no_error(page)
        expect(page.get_by_test_id("stSidebarNav")).to_be_visible()
        expect(page.locator("[data-testid='stMain'] h1").first).to_have_text(
            translate(TITLES["strides"], "ko")
        )
        expect(page).to_have_url(re.compile(r"/strides\?lang=ko"))
    finally:
        first.close()
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        page = context.new_page()
        page.goto(server.url)
        wait_for_app(page)
        assert sorted(set(page.evaluate(NAV_PATHS_JS))) == sorted(TITLES)  # every page, no more
        for path, title in TITLES.items():
            page.goto(f"{server.url}/{path}")
            wait_for_app(page)
            assert_no_error(page)
            expect(page.locator("[data-testid='stMain'] h1").first).to_have_text(
                translate(title, "en")
            )
            if path:
                expect(page).to_have_url(re.compile(rf"/{path}(\?|$)"))

        # Class mode: a class started here is kept in the secret's database.
        page.goto(f"{server.url}/class")
        wait_for_app(page)
        page.get_by_role("button", name=translate("classmode.start.button", "en")).click()
        code_box = page.get_by_test_id("classmode-code")
        expect(code_box).to_be_visible(timeout=60_000)
        wait_for_app(page)
        assert_no_error(page)
        code = re.sub(r"\W", "", code_box.inner_text())
    finally:
        context.close()
    assert secret_db.exists(), "the class went elsewhere than ATLAS_DATABASE_URL"
    assert not default_db.exists(), "class mode used its default SQLite file despite the secret"
    assert code in database_text(secret_db)


def database_text(path: Path) -> str:
    """Every text value of every table of a SQLite file, joined (the class's code is one)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        values = [
            str(value)
            for table in tables
            for row in db.execute(f'SELECT * FROM "{table}"')
            for value in row
            if isinstance(value, str)
        ]
    return "\n".join(values)
