"""Expired reconnect windows end on time (components/upkeep.py), on Streamlit's own classes."""

from __future__ import annotations

from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.session_manager import SessionInfo
from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

from components import upkeep


class FakeSession:
    def __init__(self, session_id: str) -> None:
        self.id = session_id
        self.ended = False

    def shutdown(self) -> None:
        self.ended = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _manager(ttl_s: int, clock: Clock) -> tuple[WebsocketSessionManager, MemorySessionStorage]:
    """Streamlit's session manager over its reconnect store (the store kept, to write to it
    as the manager does when a visitor disconnects)."""
    storage = MemorySessionStorage(ttl_seconds=ttl_s)
    # The store's own clock, made controllable (Streamlit builds its TTL cache itself).
    storage._cache._timer = clock
    manager = WebsocketSessionManager(
        session_storage=storage,
        uploaded_file_manager=None,
        script_cache=None,
        message_enqueued_callback=None,
    )
    return manager, storage


def test_a_session_past_its_window_is_ended_and_forgotten() -> None:
    clock = Clock()
    manager, storage = _manager(120, clock)
    old, recent = FakeSession("old"), FakeSession("recent")
    storage.save(SessionInfo(client=None, session=old))
    clock.now += 100
    storage.save(SessionInfo(client=None, session=recent))
    clock.now += 30  # old: 130 s since it left; recent: 30 s
    # Streamlit alone keeps the expired one until the store is next written to.
    assert len(storage._cache._data) == 2  # (len() itself would expire it: read the raw store)
    assert upkeep.end_expired(manager) == 1
    assert old.ended and not recent.ended
    assert storage.get("old") is None
    assert storage.get("recent") is not None
    assert upkeep.end_expired(manager) == 0


def test_a_failing_session_does_not_keep_the_others() -> None:
    clock = Clock()
    manager, storage = _manager(10, clock)

    class Broken(FakeSession):
        def shutdown(self) -> None:
            raise RuntimeError("broken")

    fine = FakeSession("fine")
    storage.save(SessionInfo(client=None, session=Broken("broken")))
    storage.save(SessionInfo(client=None, session=fine))
    clock.now += 11
    assert upkeep.end_expired(manager) == 2
    assert fine.ended


def test_without_the_internals_it_does_nothing() -> None:
    assert upkeep.end_expired(object()) == 0
    assert upkeep.end_expired(None) == 0
    # No runtime in a unit test: nothing to do, no error, and nothing scheduled.
    assert upkeep.end_expired_sessions(then=lambda manager: None) is False
