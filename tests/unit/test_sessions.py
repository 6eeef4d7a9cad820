"""Expired reconnect windows end on time (components/sessions.py), on Streamlit's own classes."""

from __future__ import annotations

from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.session_manager import SessionInfo
from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

from components import sessions


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


def _manager(ttl_s: int, clock: Clock) -> WebsocketSessionManager:
    storage = MemorySessionStorage(ttl_seconds=ttl_s)
    storage._cache._timer = clock  # the store's own clock, made controllable
    return WebsocketSessionManager(
        session_storage=storage,
        uploaded_file_manager=None,
        script_cache=None,
        message_enqueued_callback=None,
    )


def test_a_session_past_its_window_is_ended_and_forgotten() -> None:
    clock = Clock()
    manager = _manager(120, clock)
    old, recent = FakeSession("old"), FakeSession("recent")
    manager._session_storage.save(SessionInfo(client=None, session=old))
    clock.now += 100
    manager._session_storage.save(SessionInfo(client=None, session=recent))
    clock.now += 30  # old: 130 s since it left; recent: 30 s
    # Streamlit alone keeps the expired one until the store is next written to.
    assert len(manager._session_storage._cache._data) == 2
    assert sessions.end_expired(manager) == 1
    assert old.ended and not recent.ended
    assert manager._session_storage.get("old") is None
    assert manager._session_storage.get("recent") is not None
    assert sessions.end_expired(manager) == 0


def test_a_failing_session_does_not_keep_the_others() -> None:
    clock = Clock()
    manager = _manager(10, clock)

    class Broken(FakeSession):
        def shutdown(self) -> None:
            raise RuntimeError("broken")

    fine = FakeSession("fine")
    manager._session_storage.save(SessionInfo(client=None, session=Broken("broken")))
    manager._session_storage.save(SessionInfo(client=None, session=fine))
    clock.now += 11
    assert sessions.end_expired(manager) == 2
    assert fine.ended


def test_without_the_internals_it_does_nothing() -> None:
    assert sessions.end_expired(object()) == 0
    assert sessions.end_expired(None) == 0
    sessions.end_expired_sessions()  # no runtime in a unit test: nothing to do, no error


def test_the_runtime_internals_it_reaches_exist_in_the_pinned_streamlit() -> None:
    import inspect

    from streamlit.runtime import Runtime

    assert isinstance(inspect.getattr_static(Runtime, "uploaded_file_mgr"), property)
    assert "self._async_objs" in inspect.getsource(Runtime.__init__)
    assert "self._session_mgr" in inspect.getsource(Runtime.__init__)
    assert "self._storage_lock" in inspect.getsource(WebsocketSessionManager.__init__)
