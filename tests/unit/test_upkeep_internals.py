"""The Streamlit internals components/upkeep.py relies on, pinned to the version in
requirements.txt.

upkeep.py reads each of them defensively (a missing one makes its feature do nothing rather
than fail a page), so an upgrade that moves one would otherwise go unnoticed: expired sessions
would stay in memory, or uploads would no longer be charged before they are stored. Each test
here names one thing upkeep.py uses and the shape it expects; when Streamlit is upgraded, the
test that fails says which part of upkeep.py to revisit.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import NamedTuple

import pytest
import streamlit
from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.session_manager import SessionInfo
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

from components import upkeep

ROOT = Path(__file__).resolve().parents[2]
UPKEEP_SOURCE = (ROOT / "components" / "upkeep.py").read_text()


def _parameters(function: object) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


def _assigned_in_init(cls: type, attribute: str) -> bool:
    return re.search(rf"self\.{attribute}\s*[:=]", inspect.getsource(cls.__init__)) is not None


def test_the_installed_streamlit_is_the_pinned_one() -> None:
    """Everything below was checked against this version: an upgrade starts here."""
    pins = re.findall(
        r"^streamlit==([\w.]+)\s*$", (ROOT / "requirements.txt").read_text(), flags=re.M
    )
    assert pins == [streamlit.__version__], (pins, streamlit.__version__)


def test_only_upkeep_reads_streamlits_runtime() -> None:
    """One module owns the internals: no other server module imports streamlit.runtime (the
    language memo's get_script_run_ctx in components/i18n.py excepted, a documented helper)."""
    readers = []
    for path in [*sorted((ROOT / "components").rglob("*.py")), ROOT / "app.py"]:
        if path.name in ("upkeep.py", "i18n.py"):
            continue
        text = path.read_text()
        if "streamlit.runtime" in text or "streamlit.web" in text:
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []


# --------------------------------------------------------------------------- the runtime


def test_runtime_is_a_singleton_with_exists_and_instance() -> None:
    assert callable(Runtime.exists) and callable(Runtime.instance)
    assert _parameters(Runtime.exists) == [] and _parameters(Runtime.instance) == []


def test_runtime_keeps_its_event_loop_in_async_objs() -> None:
    """end_expired_sessions schedules its work with ``runtime._async_objs.eventloop``."""
    assert "_async_objs" in UPKEEP_SOURCE and "eventloop" in UPKEEP_SOURCE
    assert _assigned_in_init(Runtime, "_async_objs")
    from streamlit.runtime.runtime import AsyncObjects

    assert issubclass(AsyncObjects, tuple) and "eventloop" in AsyncObjects._fields
    assert "AbstractEventLoop" in str(AsyncObjects.__annotations__["eventloop"])
    loop = asyncio.new_event_loop()
    try:  # what upkeep calls on it: is_closed() and call_soon_threadsafe()
        assert loop.is_closed() is False and callable(loop.call_soon_threadsafe)
    finally:
        loop.close()


def test_runtime_keeps_its_session_manager_in_session_mgr() -> None:
    assert "_session_mgr" in UPKEEP_SOURCE
    assert _assigned_in_init(Runtime, "_session_mgr")


def test_runtime_answers_for_sessions_and_uploads() -> None:
    assert isinstance(inspect.getattr_static(Runtime, "uploaded_file_mgr"), property)
    assert _parameters(Runtime.is_active_session) == ["session_id"]
    assert _parameters(Runtime.get_app_session) == ["session_id"]


def test_the_session_manager_can_look_a_session_up() -> None:
    assert _parameters(WebsocketSessionManager.get_session_info) == ["session_id"]


# --------------------------------------------------------------------------- the reconnect store


def test_the_session_manager_guards_its_store_with_a_lock() -> None:
    """end_expired holds ``manager._storage_lock`` while it expires ``_session_storage``."""
    assert _assigned_in_init(WebsocketSessionManager, "_session_storage")
    assert _assigned_in_init(WebsocketSessionManager, "_storage_lock")
    manager = WebsocketSessionManager(
        session_storage=MemorySessionStorage(ttl_seconds=10),
        uploaded_file_manager=None,
        script_cache=None,
        message_enqueued_callback=None,
    )
    assert hasattr(manager._storage_lock, "__enter__")
    assert isinstance(manager._session_storage, MemorySessionStorage)


def test_the_reconnect_store_expires_into_session_id_and_info_pairs() -> None:
    """``_session_storage._cache.expire()`` removes the expired entries and returns them as
    ``(session_id, SessionInfo)`` pairs, whose ``session`` has ``shutdown()``."""

    class Session:
        id = "gone"

    now = [0.0]
    storage = MemorySessionStorage(ttl_seconds=5)
    storage._cache._timer = lambda: now[0]
    info = SessionInfo(client=None, session=Session())  # type: ignore[arg-type]
    storage.save(info)
    assert storage._cache.expire() == []
    now[0] = 6.0
    assert storage._cache.expire() == [("gone", info)]
    assert storage.get("gone") is None
    assert "session" in SessionInfo.__dataclass_fields__
    assert _parameters(AppSession.shutdown) == []


# --------------------------------------------------------------------------- uploads


def test_the_upload_manager_has_the_three_methods_upkeep_hooks() -> None:
    assert _parameters(MemoryUploadedFileManager.add_file) == ["session_id", "file"]
    assert _parameters(MemoryUploadedFileManager.remove_file) == ["session_id", "file_id"]
    assert _parameters(MemoryUploadedFileManager.remove_session_files) == ["session_id"]


def test_the_upload_manager_keeps_files_by_session_in_file_storage() -> None:
    manager = MemoryUploadedFileManager("/upload")
    manager.add_file(session_id="a", file=UploadedFileRec("f", "f.png", "image/png", b"x"))
    assert isinstance(manager.file_storage, dict) and list(manager.file_storage) == ["a"]
    assert upkeep.stored_upload_sessions(manager) == ["a"]


def test_an_upload_record_is_a_named_tuple_whose_bytes_can_be_replaced() -> None:
    """A refused upload is stored as ``file._replace(data=b"")``."""
    assert issubclass(UploadedFileRec, tuple) and UploadedFileRec.__mro__[1] is tuple
    assert UploadedFileRec._fields == ("file_id", "name", "type", "data")
    assert NamedTuple in getattr(UploadedFileRec, "__orig_bases__", ())
    record = UploadedFileRec("f", "f.png", "image/png", b"bytes")
    assert record._replace(data=b"") == UploadedFileRec("f", "f.png", "image/png", b"")


def test_a_script_run_context_names_its_session_and_upload_manager() -> None:
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert get_script_run_ctx() is None  # outside a script run: upkeep answers None
    assert upkeep.script_run_uploads() is None
    fields = ScriptRunContext.__dataclass_fields__
    assert "session_id" in fields and "uploaded_file_mgr" in fields


def test_hooked_methods_shadow_the_class_ones_and_can_be_undone() -> None:
    """Hooks are instance attributes over the class's methods: hooking for a new owner drops
    the old ones first, so two owners never both charge one upload."""
    manager = MemoryUploadedFileManager("/upload")
    seen: list[str] = []

    def hook(owner: str) -> bool:
        return upkeep.hook_upload_manager(
            manager,
            owner=owner,
            admit=lambda session, file: seen.append(owner) or True,
            removed=lambda session, file_id: None,
            session_removed=lambda session: None,
        )

    assert hook("first") and hook("first") and hook("second")
    manager.add_file(session_id="a", file=UploadedFileRec("f", "f", "x", b"1"))
    assert seen == ["second"]
    assert upkeep.hook_upload_manager(
        object(), owner="x", admit=bool, removed=print, session_removed=print
    ) is False  # fmt: skip


def test_upkeep_uses_no_private_name_this_file_does_not_pin() -> None:
    used = set(re.findall(r"[\"'.](_[a-z][a-z_]+)", UPKEEP_SOURCE))
    own = {"_torchatlas_upload_hooks"}  # upkeep's own attribute on the manager
    pinned = {"_async_objs", "_session_mgr", "_session_storage", "_storage_lock", "_cache",
              "_replace", "_client_state", "_scriptrunner", "_populate_theme_msg"}  # fmt: skip
    assert used - own - pinned == set(), "pin the new internal in this file"


# --------------------------------------------------------------------------- waking a fragment


def test_a_fragment_run_names_its_fragment_in_the_thread_state() -> None:
    """``script_run_fragment`` reads ``ThreadState.get().fragment_id`` (set while a fragment's
    function runs, in its own run or drawn in place by a page run)."""
    import dataclasses

    from streamlit.runtime import fragment
    from streamlit.runtime.scriptrunner_utils.script_run_context import (
        FragmentThreadState,
        ThreadState,
    )

    assert "fragment_id" in {f.name for f in dataclasses.fields(FragmentThreadState)}
    assert callable(ThreadState.get)
    assert "ThreadState.scoped(" in inspect.getsource(fragment)
    assert "fragment_id=fragment_id" in inspect.getsource(fragment)
    assert upkeep.script_run_fragment() is None  # no script run here


def test_an_idle_session_can_be_asked_for_a_fragment_run() -> None:
    """``wake_fragment`` looks the session up with ``get_active_session_info``, reads the
    client state its last run left (``_client_state``) and whether a script runner is alive
    (``_scriptrunner``: None once a run chain ended), then calls ``request_rerun`` with a
    ClientState naming the fragment, as the browser's timer does."""
    from streamlit.proto.ClientState_pb2 import ClientState

    assert _parameters(WebsocketSessionManager.get_active_session_info) == ["session_id"]
    assert _assigned_in_init(AppSession, "_client_state")
    assert _assigned_in_init(AppSession, "_scriptrunner")
    assert "self._scriptrunner = None" in inspect.getsource(AppSession)
    assert _parameters(AppSession.request_rerun) == ["client_state"]
    fields = set(ClientState.DESCRIPTOR.fields_by_name)
    wanted = {"query_string", "page_script_hash", "fragment_id", "is_auto_rerun", "context_info"}
    assert wanted <= fields
    assert "fragment_id" in inspect.getsource(AppSession.request_rerun)
    assert upkeep.can_wake_sessions() is False  # no server here
    assert upkeep.wake_fragment("no-session", "no-fragment") is False
    assert upkeep.run_page("no-session", "no-page", "a=1") is False
    # The class's wave (components/classmode/push.py) reads the same ``_scriptrunner`` to
    # tell when a run it asked for is over.
    assert upkeep.session_running("no-session") is False


def test_a_requested_run_says_whether_it_started_and_when_it_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the class's wave relies on: ``answered(True)`` once the loop asked an idle session
    for a run, ``answered(False)`` for a session busy with a run of its own or disconnected;
    ``session_running`` is True while the session's script runner lives."""
    from types import SimpleNamespace

    from streamlit.proto.ClientState_pb2 import ClientState

    session = AppSession.__new__(AppSession)  # the attributes the wake reads, no server
    session._client_state = ClientState(query_string="a=1", page_script_hash="page")
    session._scriptrunner = None
    asked: list[ClientState] = []

    def request_rerun(state: ClientState) -> None:
        asked.append(state)
        session._scriptrunner = object()  # a run going, as Streamlit's request_rerun starts

    session.request_rerun = request_rerun
    connected = {"s"}
    info = SimpleNamespace(session=session)
    runtime = SimpleNamespace(
        _async_objs=SimpleNamespace(
            eventloop=SimpleNamespace(is_closed=lambda: False, call_soon_threadsafe=lambda f: f())
        ),
        _session_mgr=SimpleNamespace(
            get_active_session_info=lambda sid: info if sid in connected else None,
            get_session_info=lambda sid: info if sid == "s" else None,
        ),
        is_active_session=lambda sid: sid in connected,
    )
    monkeypatch.setattr(upkeep, "_runtime", lambda: runtime)
    answers: list[bool] = []
    assert upkeep.session_running("s") is False
    assert upkeep.run_page("s", "other", "b=2", answered=answers.append) is True
    assert answers == [True] and upkeep.session_running("s") is True
    assert (asked[0].page_script_hash, asked[0].query_string) == ("other", "b=2")
    assert upkeep.wake_fragment("s", "poll", answers.append) is True  # busy: not asked
    assert answers == [True, False] and len(asked) == 1
    session._scriptrunner = None  # the run chain ended
    assert upkeep.session_running("s") is False
    connected.clear()  # disconnected, kept for a reconnect
    assert upkeep.wake_fragment("s", "poll", answers.append) is True
    assert answers == [True, False, False] and upkeep.session_running("s") is False


def test_a_script_run_names_its_pages_by_url_path() -> None:
    """``script_run_pages`` reads the run context's ``pages_manager.get_pages()``: page
    script hash → a page's info, whose ``url_pathname`` ``st.navigation`` fills in; a
    ClientState naming that hash runs that page (what ``st.switch_page`` asks for)."""
    import dataclasses

    from streamlit.commands import navigation
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert "pages_manager" in {f.name for f in dataclasses.fields(ScriptRunContext)}
    assert _parameters(PagesManager.get_pages) == []
    assert '"url_pathname": page.url_path' in inspect.getsource(navigation)
    assert "page_script_hash=client_state.page_script_hash" in inspect.getsource(
        AppSession.request_rerun
    )
    assert upkeep.script_run_pages() == {}  # no script run here


# --------------------------------------------------------------------------- the peer


def test_the_runtime_hands_out_a_sessions_client_with_its_handshake() -> None:
    """``script_run_peer`` asks the runtime for the session's client, and the client's
    context for the raw TCP peer and the handshake's headers."""
    from streamlit.web.server.starlette.starlette_websocket import StarletteClientContext

    assert "session_id" in _parameters(Runtime.get_client)
    assert isinstance(inspect.getattr_static(StarletteClientContext, "remote_ip"), property)
    assert isinstance(inspect.getattr_static(StarletteClientContext, "headers"), property)
    # The peer is the websocket's client address as the server hands it over.
    assert "client.host" in inspect.getsource(StarletteClientContext.__init__)


def test_uvicorn_wraps_the_app_in_its_proxy_headers_middleware_after_importing_it() -> None:
    """``keep_tcp_peers`` replaces uvicorn's ``ProxyHeadersMiddleware`` in its config module
    while the app is being imported: uvicorn must look the name up there after the import."""
    import uvicorn.config

    assert hasattr(uvicorn.config, "ProxyHeadersMiddleware")
    load = inspect.getsource(uvicorn.config.Config.load)
    assert load.index("self.load_app()") < load.index("ProxyHeadersMiddleware(self.loaded_app")
    # Left on, it trusts loopback peers by default: the reason for switching it off.
    assert "127.0.0.1" in inspect.getsource(uvicorn.config.Config.__init__)


def test_keep_tcp_peers_makes_uvicorn_hand_the_app_over_unwrapped() -> None:
    import uvicorn.config

    original = uvicorn.config.ProxyHeadersMiddleware
    try:
        assert upkeep.keep_tcp_peers() is True
        app = object()
        assert uvicorn.config.ProxyHeadersMiddleware(app, trusted_hosts="127.0.0.1") is app
    finally:
        uvicorn.config.ProxyHeadersMiddleware = original


# --------------------------------------------------------------------------- theme messages

THEME_SECTIONS = ("theme", "theme.light", "theme.dark", "theme.sidebar", "theme.light.sidebar",
                  "theme.dark.sidebar")  # fmt: skip


def test_a_new_session_message_builds_its_theme_with_populate_theme_msg() -> None:
    """``cache_theme_messages`` replaces ``app_session._populate_theme_msg``, which the
    message every run starts with calls once per theme section, by name, at call time."""
    from streamlit.runtime import app_session

    made = inspect.getsource(AppSession._create_new_session_message)
    assert made.count("_populate_theme_msg(") == len(THEME_SECTIONS)
    assert _parameters(app_session._populate_theme_msg) == ["msg", "section"]
    assert "get_options_for_section(section)" in inspect.getsource(app_session._populate_theme_msg)


def test_cached_theme_messages_equal_built_ones_and_scan_the_config_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamlit import config
    from streamlit.proto.NewSession_pb2 import CustomThemeConfig
    from streamlit.runtime import app_session

    original = app_session._populate_theme_msg
    monkeypatch.setattr(app_session, "_populate_theme_msg", original)
    real = config.get_options_for_section
    scans: list[str] = []

    def themed(section: str) -> dict[str, object]:
        """The installed config's options, with a theme of this test's own in each section
        (so no message is empty), counted."""
        scans.append(section)
        found = dict(real(section))
        found["primaryColor"] = "#ff8a65" if "dark" in section else "#bf3e1e"
        found["textColor"] = "#111318"
        return found

    monkeypatch.setattr(config, "get_options_for_section", themed)
    expected = {}
    for section in THEME_SECTIONS:
        msg = CustomThemeConfig()
        original(msg, section)
        expected[section] = msg.SerializeToString()
        assert expected[section], section
    scans.clear()
    assert upkeep.cache_theme_messages() is True
    assert upkeep.cache_theme_messages() is True  # once only
    for _ in range(3):
        for section in THEME_SECTIONS:
            msg = CustomThemeConfig()
            app_session._populate_theme_msg(msg, section)
            assert msg.SerializeToString() == expected[section], section
    assert sorted(scans) == sorted(THEME_SECTIONS)  # each section read once, not per message
    app_session._populate_theme_msg.forget()  # a config file parsed again: read anew
    app_session._populate_theme_msg(CustomThemeConfig(), "theme")
    assert scans.count("theme") == 2
