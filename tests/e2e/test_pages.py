"""Every page through a deep link, light and dark: no exception, no error toast, and a
screenshot that still resembles the README's picture of that page."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from components.rooms import built_rooms
from tests.e2e.conftest import (
    OpenPage,
    assert_looks_like_reference,
    assert_no_error,
    running_app,
    save_screenshot,
    wait_for_app,
)
from torchatlas.i18n import translate

PATHS = ["", *(room.key for room in built_rooms())]


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p or "home")
def test_every_page_renders(app_page: OpenPage, path: str, dark: bool) -> None:
    page = app_page(path, dark=dark)
    assert_no_error(page)
    title = translate(f"app.rooms.{path}.title") if path else translate("app.home.title")
    assert page.locator("h1").first.inner_text().strip().startswith(title.split(" ")[0])
    # Rooms' own tests save richer "<room>-light" pictures for the README; these are the
    # pages as a first visit shows them.
    name = f"{path}-page" if path else "home"
    # The devices page ends with the server's latest benchmark, which every visitor shares: it
    # is there when another test ran one on this server, so only the part above it is compared.
    height = {"devices": 3400}.get(path, 5000)
    shot = save_screenshot(page, f"{name}-{'dark' if dark else 'light'}", max_height=height)
    assert_looks_like_reference(shot)


def test_home_in_korean_and_language_switch(app_page: OpenPage) -> None:
    page = app_page("")
    if built_rooms():  # the room cards arrive with the script's run: wait for them, then assert
        expect(page.get_by_text(translate("app.home.open_room", "en")).first).to_be_visible(
            timeout=60_000
        )
    page.get_by_text("한국어", exact=True).click()
    expect(page.get_by_text(translate("app.sidebar.your_pytorch", "ko"))).to_be_visible()
    wait_for_app(page)
    body = page.locator("body").inner_text()
    if built_rooms():  # Streamlit shows section labels only when there are several
        assert translate("app.section.start", "ko") in body
    assert translate("app.home.footer", "ko") in body
    assert translate("app.home.footer", "en") not in body
    assert translate("app.sidebar.theme_hint", "ko") in body
    assert translate("app.sidebar.your_pytorch", "en") not in body
    save_screenshot(page, "home-ko")


def test_unknown_path_falls_back_to_home(app_page: OpenPage) -> None:
    page = app_page("no-such-room")
    assert_no_error(page)
    assert translate("app.home.intro").split(".")[0][:20] in page.locator("body").inner_text()


def test_first_visits_of_a_fresh_server_are_deep_links(browser: Browser, tmp_path: Path) -> None:
    """A student's very first request to a just-started server is often a shared deep link,
    and a class's links arrive together. With a ``pages/`` folder Streamlit served them in
    legacy mode without app.py (no language switch, no ``?lang``); the room scripts live in
    ``views/`` so this cannot happen. Every room's link is the first request of its own
    browser, all sent at once to one fresh server that no page has run on yet (and that
    warmed its sandbox before any of them came)."""
    with running_app(tmp_path / "server.log") as url:
        _assert_warm_before_any_visitor(url)
        contexts = [
            browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in built_rooms()
        ]
        try:
            pages = [context.new_page() for context in contexts]
            for page, room in zip(pages, built_rooms(), strict=True):
                page.goto(f"{url}/{room.key}?lang=ko", wait_until="commit")
            for page, room in zip(pages, built_rooms(), strict=True):
                wait_for_app(page)
                assert_no_error(page)
                sidebar = page.locator("[data-testid='stSidebar']")
                # Widgets can land a moment after the run ends on a cold server: wait, then read.
                expect(sidebar.get_by_text("Language · 언어")).to_be_visible(timeout=30_000)
                your_pytorch = translate("app.sidebar.your_pytorch", "ko")
                expect(sidebar.get_by_text(your_pytorch)).to_be_visible(timeout=30_000)
                expect(sidebar.get_by_role("radio", name="한국어")).to_be_checked()
                title = translate(f"app.rooms.{room.key}.title", "ko")
                expect(page.locator("h1").first).to_have_text(title)
        finally:
            for context in contexts:
                context.close()


def _children(pid: int) -> list[int]:
    children = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
        except OSError:  # the process ended meanwhile
            continue
        if fields.get("PPid", "").strip() == str(pid):
            children.append(int(status.parent.name))
    return children


def _assert_warm_before_any_visitor(url: str) -> None:
    """app.py's st.App lifespan starts the sandbox (its zygote is a child of the server) as
    the server starts: no page has been opened yet, and the zygote is there."""
    port = url.rsplit(":", 1)[1]
    servers = [
        int(cmdline.parent.name)
        for cmdline in Path("/proc").glob("[0-9]*/cmdline")
        if _readable(cmdline) and f"\0{port}\0" in cmdline.read_text()
        and "streamlit" in cmdline.read_text()
    ]  # fmt: skip
    assert len(servers) == 1, servers
    deadline = time.monotonic() + 180
    while not _children(servers[0]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _children(servers[0]), "no sandbox zygote started before any visitor came"


def _readable(path: Path) -> bool:
    try:
        path.read_text()
    except OSError:
        return False
    return True
