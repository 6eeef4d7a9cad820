"""One person is one client, as a visitor reaches the real server (issue 32).

Each attempt is a fresh browser session (a new websocket, as a new tab or a scripted client
opens), and each machine is a loopback address of its own: a client socket can bind
127.4.0.x as its source, so one test process stands for several laptops. What the server
counts is the TCP peer: a forged ``X-Forwarded-For`` changes nothing without a trusted proxy.
The protocol-level tabs are the classroom tool's (bench/classroom_client.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import sqlite3
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bench.classmode_load import _button, _refusal, open_page, press, wait_for
from bench.classroom_client import Student
from bench.server import Server
from tests.e2e.test_classmode import running
from torchatlas.classmode import ClassStore, Limits
from torchatlas.classmode.clean import client_hash
from torchatlas.i18n import translate

LAPTOP, OTHER_LAPTOP = "127.4.0.1", "127.4.0.2"
TEACHER = "teacher-machine"  # the class is started beside the server, through its database
LIMITS = Limits()
T = TypeVar("T")
PARALLEL = 8  # fresh sessions in flight at once (a scripted laptop's loop)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Server, Path]]:
    data = tmp_path / "data"
    env = {"ATLAS_DATA_DIR": str(data)}
    with running(monkeypatch, env, tmp_path / "server.log") as one:
        yield one, data


def _sync(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on an event loop of its own thread: Playwright's sync API, used by the
    browser tests before these in one session, keeps a loop running in the main thread."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as own:
        return own.submit(asyncio.run, work).result()


def _store(data: Path) -> ClassStore:
    """The server's own class database, opened beside it (SQLite, one file)."""
    return ClassStore(f"sqlite:///{data / 'classes.sqlite3'}")


def _attempts(data: Path) -> dict[str, int]:
    """The server's own count of attempts, by the client it counted them for."""
    with sqlite3.connect(data / "classes.sqlite3") as db:
        rows = db.execute("SELECT client, count(*) FROM classmode_attempts GROUP BY client")
        return dict(rows.fetchall())


def _text(key: str, **params: object) -> str:
    return " ".join(translate(f"classmode.errors.{key}", "en", **params).replace("*", "").split())


async def _fresh_tab(
    url: str,
    source: str,
    query: str,
    pool: concurrent.futures.Executor,
    *,
    forged_for: str | None = None,
    press_key: str | None = None,
) -> str | None:
    """Open the Class page with ``query`` in a new session from ``source`` (pressing
    ``press_key`` once it is there); the refusal card it ends on, or None."""
    headers = {"X-Forwarded-For": forged_for} if forged_for else None
    tab = Student(url, 0, pool, source=source, headers=headers)
    try:

        def ready() -> bool:  # the page has run once (and drawn the button to press)
            return tab.epoch >= 1 and (press_key is None or _button(tab, press_key) is not None)

        error = await open_page(tab, query, ready)
        if error:  # the refusal card the page opened with
            return error
        if press_key is not None:
            started = tab.epoch
            await press(tab, press_key)
            await wait_for(tab, lambda: tab.epoch > started, 0.0, 60)
        return _refusal(tab)
    finally:
        await tab.close()


async def _many(url: str, source: str, queries: list[str], **kwargs: object) -> list[str | None]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL + 2) as pool:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(query: str) -> str | None:
            async with gate:
                return await _fresh_tab(url, source, query, pool, **kwargs)  # type: ignore[arg-type]

        return await asyncio.gather(*(one(query) for query in queries))


def test_probing_links_from_fresh_sessions_is_counted_per_laptop(server) -> None:
    """A student link for a live class and for no class read alike, and every failed one
    counts against the laptop's join limit however many sessions it opens; another laptop
    still joins."""
    app, data = server
    live = _store(data).start(None, "en", client=TEACHER).code
    unknown = "ZZZZZZ" if live != "ZZZZZZ" else "YYYYYY"
    probes = [
        f"class={code}&student={secrets.token_urlsafe(18)}"
        for code in [live, unknown] * (LIMITS.joins_per_minute // 2)
    ]
    started = time.monotonic()
    answers = _sync(_many(app.url, LAPTOP, probes, forged_for="203.0.113.77"))
    # One answer, word for word, for a live code with a wrong key and for no class at all.
    assert len(set(answers)) == 1, set(answers)
    assert answers[0] is not None and _text("not_student") in answers[0], answers[0]
    # Every probe counted, all for the laptop's own address (not the forged one, not per tab).
    # (Attempts older than the limit's minute are dropped: a loaded machine may take longer.)
    counted = _attempts(data)
    within_a_minute = time.monotonic() - started < 50
    assert client_hash("ip:203.0.113.77") not in counted
    assert set(counted) - {client_hash(TEACHER)} == {client_hash(f"ip:{LAPTOP}")}, counted
    if within_a_minute:
        assert counted[client_hash(f"ip:{LAPTOP}")] == len(probes), counted
        # The next probe, and the laptop's own join, from yet another fresh session: refused.
        after = _sync(_many(app.url, LAPTOP, [f"class={live}&student={secrets.token_urlsafe(18)}"]))
        assert after[0] is not None and "Too many tries from here" in after[0], after
        refused_join = _sync(
            _many(app.url, LAPTOP, [f"class={live}"], press_key="classmode_join_button")
        )
        assert refused_join[0] is not None and "Too many tries from here" in refused_join[0]
    # Another machine is not held back by the first one's probes.
    joined = _sync(
        _many(app.url, OTHER_LAPTOP, [f"class={live}"], press_key="classmode_join_button")
    )
    assert joined == [None]
    assert _store(data).state(live).students == 1


def test_starts_from_fresh_sessions_and_forged_addresses_are_one_laptops(server) -> None:
    """A laptop pressing Start in new sessions, each claiming another address in
    X-Forwarded-For, is one client: past the start limit it is refused; another laptop
    starts a class."""
    app, data = server
    tries = LIMITS.starts_per_minute + 2
    started = time.monotonic()
    answers = []
    for number in range(tries):
        answers += _sync(
            _many(
                app.url,
                LAPTOP,
                [""],
                press_key="classmode_start_button",
                forged_for=f"198.51.100.{number + 1}",
            )
        )
    # Every press counted for the laptop's address, none for the addresses it claimed.
    counted = _attempts(data)
    assert counted.get(client_hash(f"ip:{LAPTOP}"), 0) >= LIMITS.starts_per_minute, counted
    assert not any(client_hash(f"ip:198.51.100.{n + 1}") in counted for n in range(tries))
    allowed = LIMITS.starts_per_minute
    assert answers[:allowed] == [None] * allowed, answers
    if time.monotonic() - started < 50:  # all within the limit's minute (a loaded CI may not be)
        assert all(a is not None and "Too many" in a for a in answers[allowed:]), answers
    other = _sync(_many(app.url, OTHER_LAPTOP, [""], press_key="classmode_start_button"))
    assert other == [None]
