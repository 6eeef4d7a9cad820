"""Ending the sessions whose reconnect window has passed, on time.

When a visitor's connection drops, Streamlit keeps their session for a while
(``server.disconnectedSessionTTL``) so a phone that wakes up finds its page as it left it. The
store it keeps them in drops an expired session only when it is next written to, that is when
another visitor connects or leaves, and drops it without ending it: its uploads and the media
it displayed stay registered. After a class leaves, all of that would stay in memory until the
next class arrives. :func:`end_expired_sessions`, called on a timer by the server's upkeep
(components/warm.py), ends those sessions the way Streamlit ends a closed one.

This reads Streamlit internals (the session manager's store); every step checks that what it
needs is there and does nothing otherwise. tests/unit/test_sessions.py holds the names to the
pinned Streamlit.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from streamlit.runtime import Runtime

from components import uploads

_LOG = logging.getLogger(__name__)


def _event_loop(runtime: Any) -> Any:
    loop = getattr(getattr(runtime, "_async_objs", None), "eventloop", None)
    return None if loop is None or loop.is_closed() else loop


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
            _LOG.warning("sessions: ending an expired session failed", exc_info=True)
    return len(removed)


def end_expired_sessions() -> None:
    """From any thread: end the expired sessions and release their uploads, on the event loop."""
    if not Runtime.exists():
        return
    runtime = Runtime.instance()
    loop = _event_loop(runtime)
    if loop is None:
        return

    def on_loop() -> None:
        end_expired(getattr(runtime, "_session_mgr", None))
        uploads.sweep(getattr(runtime, "uploaded_file_mgr", None))

    loop.call_soon_threadsafe(on_loop)
