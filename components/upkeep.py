"""Server upkeep: what the server does for every room, once per process, and the one module
that reads Streamlit's internals.

Warm-ups. Rooms register the slow work a first visitor would otherwise wait for (loading a
model, analysing a default example) with :func:`warm_up`; the server runs every registered
warm-up once at start, after the rooms are imported (``components.warm``), each on its own so
one failing room does not keep the others cold.

>>> @warm_up("example")  # doctest: +SKIP
... def _load_default() -> None:
...     ...

Busy moments. A part that has many visitors waiting at once (class mode waking a hundred
phones) registers a check with :func:`busy_while`; the server's timed full garbage collection
(``components.warm``) waits, a few seconds at most, until :func:`busy` says no.

Streamlit's internals. Streamlit has no public API for three things the server needs:

- ending the sessions whose reconnect window has passed (:func:`end_expired_sessions`). When a
  visitor's connection drops, Streamlit keeps their session for a while
  (``server.disconnectedSessionTTL``) so a phone that wakes up finds its page as it left it.
  Its store drops an expired session only when it is next written to (another visitor
  connects or leaves), and drops it without ending it: its uploads and media stay registered
  until the next class arrives. Here they are ended the way Streamlit ends a closed session.
- seeing every upload before it is stored (:func:`hook_upload_manager`), so the upload budget
  (components/uploads.py) can refuse a file before its bytes are kept;
- knowing whether a session still exists (:func:`session_known`), and the current script
  run's session and upload manager (:func:`script_run_uploads`);
- the connection's TCP peer as it is (:func:`script_run_peer`): ``st.context.ip_address``
  hides loopback peers (None for ``127.0.0.1`` and ``::1``), and limits must count every
  client, a reverse proxy on the same host included;
- running a session's fragment from the server, as the browser's ``run_every`` timer asks for
  it (:func:`script_run_fragment`, :func:`wake_fragment`), or a page, as ``st.switch_page``
  does (:func:`script_run_pages`, :func:`run_page`): class mode wakes its followers' polls
  when their class changes instead of having every phone poll, and opens the teacher's new
  room on each phone in one run (components/classmode/push.py).

- the message every script run starts with (``new_session``) carries the server's theme,
  which Streamlit rebuilds for each of its six sections by scanning all of its ~250 config
  options, every run of every session, fragment runs included: a tenth of a busy class
  server's CPU (py-spy, 100 phones following a lesson). :func:`cache_theme_messages` builds
  each section once and copies it in, until the config is parsed again.

Every use of a private name of Streamlit's is in this module, each read defensively (what is
missing makes the feature do nothing, never fail a page), and
tests/unit/test_upkeep_internals.py pins each one against the Streamlit version in
requirements.txt, so an upgrade that moves one fails one clear test.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import DeletedFile, UploadedFile

__all__ = [
    "DeletedFile",
    "UploadedFile",
    "busy",
    "busy_while",
    "can_wake_sessions",
    "end_expired",
    "end_expired_sessions",
    "hook_upload_manager",
    "registered_warm_ups",
    "remove_stored_file",
    "run_page",
    "run_warm_ups",
    "script_run_fragment",
    "script_run_pages",
    "script_run_peer",
    "script_run_uploads",
    "session_known",
    "session_running",
    "stored_upload_sessions",
    "wake_fragment",
    "warm_up",
]

_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_WARM_UPS: dict[str, Callable[[], object]] = {}

# --------------------------------------------------------------------------- warm-ups


def warm_up(name: str) -> Callable[[Callable[[], object]], Callable[[], object]]:
    """Register ``function`` as the warm-up called ``name`` (a room's key, or ``room.part``).
    Registering the same name again replaces it (a module reloaded in a test)."""

    def register(function: Callable[[], object]) -> Callable[[], object]:
        with _LOCK:
            _WARM_UPS[name] = function
        return function

    return register


def registered_warm_ups() -> dict[str, Callable[[], object]]:
    """The warm-ups registered so far, by name (a copy)."""
    with _LOCK:
        return dict(_WARM_UPS)


def run_warm_ups() -> list[str]:
    """Run every registered warm-up once, in registration order; the names of those that
    failed (logged, never raised: each room's page reports its own errors)."""
    failed = []
    for name, function in registered_warm_ups().items():
        try:
            function()
        except Exception:
            _LOG.warning("warm-up %s failed", name, exc_info=True)
            failed.append(name)
    return failed


# --------------------------------------------------------------------------- busy moments


_BUSY_CHECKS: dict[str, Callable[[], bool]] = {}


def busy_while(name: str, check: Callable[[], bool]) -> None:
    """Register ``check``: True while the server is in the middle of something visitors wait
    for together (a class's move, every phone's page run at once), so upkeep that holds the
    interpreter for a while (a full garbage collection) waits for it to end. Registering the
    same name again replaces it."""
    with _LOCK:
        _BUSY_CHECKS[name] = check


def busy() -> bool:
    """Is any registered check saying the server is busy? A check that fails says no."""
    with _LOCK:
        checks = list(_BUSY_CHECKS.values())
    for check in checks:
        try:
            if check():
                return True
        except Exception:  # upkeep must never wait on a broken check
            _LOG.warning("upkeep: a busy check failed", exc_info=True)
    return False


# --------------------------------------------------------------------------- the runtime


def _runtime() -> Any:
    """The server's runtime, or None (a unit test, a notebook, no server yet)."""
    return Runtime.instance() if Runtime.exists() else None


def _event_loop(runtime: Any) -> Any:
    """The loop the runtime runs on (it owns the session registry), or None."""
    loop = getattr(getattr(runtime, "_async_objs", None), "eventloop", None)
    return None if loop is None or loop.is_closed() else loop


def session_known(session_id: str) -> bool:
    """Whether the runtime still knows the session (connected, or kept for a reconnect).
    True without a runtime: nothing then says it is gone."""
    runtime = _runtime()
    if runtime is None:
        return True
    lookup = getattr(getattr(runtime, "_session_mgr", None), "get_session_info", None)
    if lookup is None:
        return bool(runtime.is_active_session(session_id))
    return lookup(session_id) is not None


def end_expired(manager: Any) -> int:
    """End every session in ``manager``'s reconnect store whose window has passed; returns how
    many. Call it on the server's event loop (the thread that owns the session registry)."""
    storage = getattr(manager, "_session_storage", None)
    expire = getattr(getattr(storage, "_cache", None), "expire", None)
    if expire is None:
        return 0
    with getattr(manager, "_storage_lock", None) or contextlib.nullcontext():
        removed = expire()
    for _session_id, info in removed:
        session = getattr(info, "session", None)
        try:
            session.shutdown()  # its uploads, media and script thread, as for a closed session
        except Exception:  # one broken session must not keep the others
            _LOG.warning("upkeep: ending an expired session failed", exc_info=True)
    return len(removed)


def end_expired_sessions(then: Callable[[Any], object] | None = None) -> bool:
    """From any thread: on the server's event loop, end the expired sessions, then call
    ``then(upload_manager)`` (the upload budget's sweep). False when there is no running
    server to ask (nothing was scheduled)."""
    runtime = _runtime()
    loop = _event_loop(runtime)
    if loop is None:
        return False

    def on_loop() -> None:
        end_expired(getattr(runtime, "_session_mgr", None))
        if then is not None:
            then(runtime.uploaded_file_mgr)

    loop.call_soon_threadsafe(on_loop)
    return True


@dataclass(frozen=True)
class Peer:
    """The current session's connection: its TCP peer's address as the server saw it, and
    the ``X-Forwarded-For`` values its handshake carried (only a trusted proxy's count)."""

    address: str | None
    forwarded_for: tuple[str, ...]


def script_run_peer() -> Peer | None:
    """The connection of the current script run's session; None outside a browser session
    (AppTest, a bare script run)."""
    ctx = get_script_run_ctx()
    runtime = _runtime()
    if ctx is None or runtime is None:
        return None
    try:
        client = runtime.get_client(ctx.session_id)
        context = getattr(client, "client_context", None)
    except Exception:  # a session being torn down
        return None
    if context is None:
        return None
    address = getattr(context, "remote_ip", None)
    forwarded = tuple(
        value[:2048]
        for name, value in list(getattr(context, "headers", ()) or ())[:200]
        if isinstance(name, str) and name.lower() == "x-forwarded-for" and isinstance(value, str)
    )
    return Peer(address if isinstance(address, str) else None, forwarded[:8])


# --------------------------------------------------------------------------- waking a fragment


def script_run_fragment() -> tuple[str, str] | None:
    """(session id, fragment id) of the fragment running now in this script run (also when a
    page run draws it in place); None outside a fragment or a script run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

        fragment_id = ThreadState.get().fragment_id
    except Exception:  # another Streamlit, or a thread Streamlit did not start
        return None
    return (ctx.session_id, fragment_id) if isinstance(fragment_id, str) and fragment_id else None


def can_wake_sessions() -> bool:
    """Whether :func:`wake_fragment` can reach sessions: a running server whose runtime has
    the session registry and loop it needs (False under AppTest and outside a server)."""
    runtime = _runtime()
    manager = getattr(runtime, "_session_mgr", None)
    return _event_loop(runtime) is not None and hasattr(manager, "get_active_session_info")


def script_run_pages() -> dict[str, str]:
    """This script run's navigation: each page's url path → its page script hash (what a run
    of that page is asked for by); empty outside a script run."""
    ctx = get_script_run_ctx()
    try:
        pages = ctx.pages_manager.get_pages() if ctx is not None else {}
        return {
            info["url_pathname"]: page_hash
            for page_hash, info in pages.items()
            if isinstance(info.get("url_pathname"), str) and isinstance(page_hash, str)
        }
    except Exception:  # another Streamlit: no page runs from the server, the poll follows
        return {}


Answered = Callable[[bool], object]  # told on the loop whether a run was asked for


def wake_fragment(session_id: str, fragment_id: str, answered: Answered | None = None) -> bool:
    """From any thread: on the server's event loop, rerun ``fragment_id`` in the session as
    its browser's ``run_every`` timer would (the page and query its last run left, no widget
    changes, an automatic rerun), if the session is idle then: a run in progress or queued
    is left alone (it may be leaving the page; the caller asks again later). False when the
    runtime no longer knows the session (gone); True otherwise (asked, or kept for a
    reconnect). ``answered(started)``, when given, is called on the loop once it is decided:
    True when the run was asked for (:func:`session_running` then says when it is over)."""
    return _request_run(session_id, answered, fragment_id=fragment_id)


def run_page(
    session_id: str,
    page_script_hash: str | None = None,
    query_string: str | None = None,
    answered: Answered | None = None,
) -> bool:
    """From any thread: a whole run of a page in the session, as ``st.switch_page`` asks
    for one (``page_script_hash`` with ``query_string``; None: the page or query its last run
    left), if the session is idle then, as :func:`wake_fragment`. The browser follows the
    run's page; its address bar gets the query only if the run sets it (``st.query_params``).
    False when the session is gone."""
    return _request_run(
        session_id, answered, page_script_hash=page_script_hash, query_string=query_string
    )


def _active_session(runtime: Any, session_id: str) -> Any:
    lookup = getattr(getattr(runtime, "_session_mgr", None), "get_active_session_info", None)
    return getattr(lookup(session_id) if lookup is not None else None, "session", None)


def session_running(session_id: str) -> bool:
    """From any thread: whether the session has a script run going (or queued) now. A run
    asked for by :func:`run_page` or :func:`wake_fragment` is going from its ``answered(True)``
    until this is False. False for a session that is gone or without a server."""
    runtime = _runtime()
    if runtime is None:
        return False
    try:
        session = _active_session(runtime, session_id)
    except Exception:  # the registry changing under a read from another thread
        return False
    return isinstance(session, AppSession) and getattr(session, "_scriptrunner", None) is not None


def _request_run(
    session_id: str,
    answered: Answered | None = None,
    *,
    fragment_id: str = "",
    page_script_hash: str | None = None,
    query_string: str | None = None,
) -> bool:
    runtime = _runtime()
    loop = _event_loop(runtime)
    if loop is None:
        return False
    if not runtime.is_active_session(session_id):
        if answered is not None:
            answered(False)  # no run: disconnected (kept for a reconnect) or gone
        return session_known(session_id)

    def on_loop() -> None:
        started = False
        try:
            started = ask()
        finally:
            if answered is not None:
                answered(started)

    def ask() -> bool:
        # The loop owns the session registry and every session's script runner.
        from streamlit.proto.ClientState_pb2 import ClientState

        session = _active_session(runtime, session_id)
        last = getattr(session, "_client_state", None)
        if not isinstance(session, AppSession) or last is None:
            return False
        if getattr(session, "_scriptrunner", True) is not None:
            return False
        state = ClientState(
            query_string=last.query_string if query_string is None else query_string,
            page_script_hash=page_script_hash or last.page_script_hash,
            fragment_id=fragment_id,
            is_auto_rerun=bool(fragment_id),
        )
        if last.HasField("context_info"):
            state.context_info.CopyFrom(last.context_info)
        session.request_rerun(state)
        return True

    loop.call_soon_threadsafe(on_loop)
    return True


# --------------------------------------------------------------------------- uploads


@dataclass(frozen=True)
class ScriptRunUploads:
    """The current script run's session, its upload manager, and its server-side session
    object (None under AppTest, whose sessions are stand-ins)."""

    session_id: str
    manager: Any
    session: AppSession | None


def script_run_uploads() -> ScriptRunUploads | None:
    """This script run's session and upload manager; None outside a script run."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    runtime = _runtime()
    session = None if runtime is None else runtime.get_app_session(ctx.session_id)
    return ScriptRunUploads(
        ctx.session_id, ctx.uploaded_file_mgr, session if isinstance(session, AppSession) else None
    )


# What a hooked manager keeps of itself: the owner (so hooking twice is a no-op) and its
# original remove_file (a page that takes a file in drops the bytes without releasing the
# charge that replaces them).
_HOOKS_ATTRIBUTE = "_torchatlas_upload_hooks"


@dataclass(frozen=True)
class _Hooks:
    owner: object
    remove_file: Callable[..., None]


def hook_upload_manager(
    manager: Any,
    *,
    owner: object,
    admit: Callable[[str, Any], bool],
    removed: Callable[[str, str], object],
    session_removed: Callable[[str], object],
) -> bool:
    """Route every upload ``manager`` stores through ``admit(session_id, file)`` first; a file
    it refuses (False) is stored as an empty stub (its bytes go with the request).
    ``removed(session_id, file_id)`` and ``session_removed(session_id)`` follow Streamlit's own
    removals (the × beside a file, a session's end). ``owner`` names who hooked it: hooking
    again for the same owner changes nothing. Returns False (and changes nothing) for a manager
    without Streamlit's ``add_file``/``remove_file``/``remove_session_files``."""
    with _LOCK:
        hooks = getattr(manager, _HOOKS_ATTRIBUTE, None)
        if hooks is not None and hooks.owner is owner:
            return True
        if hooks is not None:  # another owner's hooks (a test's fresh budget): start over
            manager.__dict__.pop("add_file", None)
            manager.__dict__.pop("remove_file", None)
            manager.__dict__.pop("remove_session_files", None)
        names = ("add_file", "remove_file", "remove_session_files")
        if not all(callable(getattr(manager, name, None)) for name in names):
            return False
        add_file = manager.add_file
        remove_file = manager.remove_file
        remove_session_files = manager.remove_session_files

        def admitted_add_file(session_id: str, file: Any) -> None:
            if not admit(session_id, file):
                file = file._replace(data=b"")  # UploadedFileRec is a NamedTuple
            add_file(session_id=session_id, file=file)

        def followed_remove_file(session_id: str, file_id: str) -> None:
            remove_file(session_id=session_id, file_id=file_id)
            removed(session_id, file_id)

        def followed_remove_session_files(session_id: str) -> None:
            remove_session_files(session_id)
            session_removed(session_id)

        manager.add_file = admitted_add_file
        manager.remove_file = followed_remove_file
        manager.remove_session_files = followed_remove_session_files
        setattr(manager, _HOOKS_ATTRIBUTE, _Hooks(owner, remove_file))
        return True


def remove_stored_file(manager: Any, session_id: str, file_id: str) -> None:
    """Drop one stored file's bytes from ``manager`` without telling the hooks (the caller
    settles its own accounting); a manager without the hooks removes it its own way."""
    hooks = getattr(manager, _HOOKS_ATTRIBUTE, None)
    remove = hooks.remove_file if hooks is not None else getattr(manager, "remove_file", None)
    if remove is not None:
        remove(session_id=session_id, file_id=file_id)


def stored_upload_sessions(manager: Any) -> list[str]:
    """The sessions ``manager`` holds files for (Streamlit's in-memory manager keeps them in
    ``file_storage``); empty for another manager."""
    storage = getattr(manager, "file_storage", None)
    if not isinstance(storage, dict):
        return []
    try:
        return list(storage)
    except RuntimeError:  # changed under us: the next sweep gets it
        return []


# --------------------------------------------------------------------------- the peer


def _peer_as_is(app: Any, trusted_hosts: object = None) -> Any:
    """What uvicorn builds in place of its ``ProxyHeadersMiddleware``: the app itself."""
    return app


def keep_tcp_peers() -> bool:
    """Make the server hand every connection's real TCP peer to the app.

    uvicorn (Streamlit's server) rewrites a connection's client address from
    ``X-Forwarded-For`` whenever the peer is loopback (``FORWARDED_ALLOW_IPS`` defaults to
    ``127.0.0.1,::1``), so any visitor on the same host, or any visitor whose proxy forwards
    the header it was sent, would choose the address the app's limits count. The app decides
    whom to trust itself (``torchatlas.clients``, ``ATLAS_TRUSTED_PROXIES``), so uvicorn's
    rewrite is switched off. Call it when the server imports the app: uvicorn wraps the app in
    that middleware right after the import (``uvicorn.Config.load``). True when it took.
    """
    try:
        import uvicorn.config as uvicorn_config
    except ImportError:  # another server: it does not rewrite the peer
        return False
    if not hasattr(uvicorn_config, "ProxyHeadersMiddleware"):
        _LOG.warning("uvicorn has no ProxyHeadersMiddleware to switch off; peers may be rewritten")
        return False
    uvicorn_config.ProxyHeadersMiddleware = _peer_as_is
    return True


def cache_theme_messages() -> bool:
    """Build the theme part of every run's ``new_session`` message once per config parse
    (see the module's docstring); what a run sends is unchanged, byte for byte. Call it when
    the server imports the app. True when it took."""
    try:
        from streamlit import config
        from streamlit.runtime import app_session
    except ImportError:  # another Streamlit: it pays for the scans, nothing breaks
        return False
    build = getattr(app_session, "_populate_theme_msg", None)
    if build is None:
        _LOG.warning("streamlit has no _populate_theme_msg to cache; themes are rebuilt per run")
        return False
    if getattr(build, "cached_by_upkeep", False):
        return True
    built: dict[str, bytes] = {}
    lock = threading.Lock()

    def cached(msg: Any, section: str = "theme") -> None:
        with lock:
            found = built.get(section)
        if found is None:
            scratch = type(msg)()
            build(scratch, section)
            found = scratch.SerializeToString()
            with lock:
                built[section] = found
        msg.MergeFromString(found)

    def forget() -> None:
        with lock:
            built.clear()

    cached.cached_by_upkeep = True  # type: ignore[attr-defined]
    cached.forget = forget  # type: ignore[attr-defined]
    # A config file read again (Streamlit's watcher) may change the theme: build anew.
    config.on_config_parsed(forget, force_connect=True)
    app_session._populate_theme_msg = cached
    return True
