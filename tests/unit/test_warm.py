"""The server's start-up: rooms imported once, start-up objects frozen, no post-run collection.

Streamlit's default full collection after every script run walks the whole heap with the GIL
held; with torch loaded that serialised a classroom (bench/bench_rerun.py measures it). These
tests hold the three parts of the replacement in place.
"""

from __future__ import annotations

import gc
import tomllib
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
    monkeypatch.setattr(warm, "_malloc_trim", lambda: lambda: trims.append(1))
    with pytest.raises(Stop):
        warm._collect_periodically()
    assert len(calls) == 3
    assert len(trims) == 2  # after each collection that returned


def test_malloc_trim_is_glibcs_here() -> None:
    assert warm._malloc_trim()() in (0, 1)  # glibc returns whether memory was released


def test_malloc_arenas_can_be_capped_here() -> None:
    assert warm.limit_malloc_arenas(8) is True  # glibc: mallopt answers 1
