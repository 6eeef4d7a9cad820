"""The server's start-up: rooms imported once, start-up objects frozen, no post-run collection.

Streamlit's default full collection after every script run walks the whole heap with the GIL
held; with torch loaded that serialised a classroom (bench/bench_rerun.py measures it). These
tests hold the three parts of the replacement in place.
"""

from __future__ import annotations

import gc
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from components import warm

ROOT = Path(__file__).resolve().parents[2]


def test_the_app_switches_off_streamlits_collection_after_every_run() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False


def test_freezing_leaves_a_full_collection_little_to_walk() -> None:
    import torch  # noqa: F401  (what a server holds: a large heap of long-lived objects)

    gc.unfreeze()
    before = len(gc.get_objects())
    try:
        warm.freeze_long_lived()
        assert gc.get_freeze_count() >= before // 2
        assert len(gc.get_objects()) < before // 10
        # Garbage made later is still collected.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()


def test_the_background_collector_runs_full_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    class Stop(Exception):
        pass

    def fake_collect(*args: int) -> int:
        calls.append(1)
        if len(calls) == 3:
            raise Stop
        return 0

    trims: list[int] = []
    monkeypatch.setattr(warm, "COLLECT_EVERY_S", 0.0)
    monkeypatch.setattr(warm.gc, "collect", fake_collect)
    monkeypatch.setattr(warm, "malloc_trimmer", lambda: lambda: trims.append(1))
    with pytest.raises(Stop):
        warm.collect_periodically()
    assert len(calls) == 3
    assert len(trims) == 2  # after each collection that returned


def test_the_timed_collection_waits_for_a_quiet_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection holds the interpreter: it waits while the server says it is busy
    (a class's move being pushed to every phone), then runs at once."""
    looks: list[float] = []
    order: list[str] = []

    def busy() -> bool:
        looks.append(time.monotonic())
        return len(looks) <= 3

    class Stop(Exception):
        pass

    def fake_collect(*args: int) -> int:
        order.append("collect")
        raise Stop

    monkeypatch.setattr(warm.upkeep, "busy", busy)
    monkeypatch.setattr(warm.upkeep, "end_expired_sessions", lambda then=None: False)
    monkeypatch.setattr(warm, "QUIET_CHECK_S", 0.01)
    monkeypatch.setattr(warm, "COLLECT_EVERY_S", 0.0)
    monkeypatch.setattr(warm.gc, "collect", fake_collect)
    monkeypatch.setattr(warm, "malloc_trimmer", lambda: lambda: None)
    with pytest.raises(Stop):
        warm.collect_periodically()
    assert len(looks) == 4 and order == ["collect"]  # three busy looks, one quiet, then it


def test_the_timed_collection_does_not_wait_for_ever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm.upkeep, "busy", lambda: True)
    monkeypatch.setattr(warm, "QUIET_WAIT_S", 0.2)
    monkeypatch.setattr(warm, "QUIET_CHECK_S", 0.01)
    started = time.monotonic()
    warm._wait_for_a_quiet_moment()
    assert 0.2 <= time.monotonic() - started < 2.0


def test_a_busy_check_that_fails_says_not_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm.upkeep, "_BUSY_CHECKS", {})

    def broken() -> bool:
        raise RuntimeError("a check with a bug")

    warm.upkeep.busy_while("broken", broken)
    assert warm.upkeep.busy() is False
    warm.upkeep.busy_while("broken", lambda: True)  # the same name replaces it
    assert warm.upkeep.busy() is True


@pytest.fixture
def kept_thresholds() -> Iterator[None]:
    """The collector's thresholds as they were before the test (it sets a server's)."""
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.mark.usefixtures("kept_thresholds")
def test_a_server_leaves_full_collections_to_its_timer() -> None:
    # Collections this thread makes, by generation: another thread of the test process (a
    # warmed-up server's timer) may collect meanwhile, and is not what this test is about.
    me = threading.get_ident()
    made: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.get_ident() == me:
            made.append(info["generation"])

    before = gc.get_threshold()
    gc.callbacks.append(note)
    try:
        warm.leave_full_collections_to_the_timer()
        assert gc.get_threshold()[:2] == before[:2]  # young collections as before
        survivors: list[object] = []  # enough to start a full collection otherwise
        for number in range(400_000):
            cycle: list[object] = []
            cycle.append(cycle)
            if number % 4 == 0:
                survivors.append(cycle)
        del survivors
        assert 0 in made and 2 not in made
        gc.collect()  # the timer's kind of collection still collects everything
        assert made[-1] == 2
    finally:
        gc.callbacks.remove(note)


@pytest.mark.usefixtures("kept_thresholds")
def test_a_server_that_warmed_up_leaves_full_collections_to_the_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(warm, "import_rooms", lambda: None)
    monkeypatch.setattr(warm, "_claim_start", lambda: True)
    monkeypatch.setattr(warm, "warm_slow_parts", lambda: None)
    warm.warm_before_serving()
    assert gc.get_threshold()[2] == warm.NO_AUTOMATIC_FULL_COLLECTION


def testmalloc_trimmer_is_glibcs_here() -> None:
    assert warm.malloc_trimmer()() in (0, 1)  # glibc returns whether memory was released


def test_malloc_arenas_can_be_capped_here() -> None:
    assert warm.limit_malloc_arenas(8) is True  # glibc: mallopt answers 1


# --------------------------------------------------------------------------- rooms' warm-ups


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict:
    """An empty warm-up registry for one test (the process-wide one holds the real rooms'),
    and rooms that are already imported."""
    from components import upkeep

    fresh: dict = {}
    monkeypatch.setattr(upkeep, "_WARM_UPS", fresh)
    monkeypatch.setattr(warm, "import_rooms", lambda: None)
    return fresh


def test_warm_runs_every_registered_warm_up_once(registry: dict) -> None:
    from components import upkeep

    ran: list[str] = []
    for name in ("classify", "shapes", "autograd"):
        upkeep.warm_up(name)(lambda name=name: ran.append(name))
    assert warm.warm_rooms() == []
    assert ran == ["classify", "shapes", "autograd"]


def test_a_failing_warm_up_does_not_keep_the_others_cold(registry: dict) -> None:
    from components import upkeep

    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("no model")

    upkeep.warm_up("classify")(broken)
    upkeep.warm_up("shapes")(lambda: ran.append("shapes"))
    assert warm.warm_rooms() == ["classify"]
    assert ran == ["shapes"]


def test_the_rooms_with_a_slow_first_visit_register_their_warm_ups() -> None:
    """warm.py no longer knows any room: the classify and shapes rooms register theirs when
    their state module is imported (as import_rooms does)."""
    import components.classify.state
    import components.shapes.state  # noqa: F401
    from components import upkeep

    assert {"classify", "shapes"} <= set(upkeep.registered_warm_ups())
    source = (ROOT / "components" / "warm.py").read_text()
    assert "torchatlas.classify" not in source and "torchatlas.shapes" not in source
