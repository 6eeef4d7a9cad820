"""Following without polling: the server wakes a student's poll when their class changes.

A student's screen follows the teacher by a fragment (``panels._poll``). Asked by the
browser's timer every 1.0–1.4 s (as it was before this module, and still is where the server
cannot wake it), it would cost a hundred idle phones a quarter of a core and make every
change wait for each phone's next tick. Here one watcher thread per server process
keeps, for every following session, its class and the version its screen last drew
(:func:`watch`, called at the end of each poll run). It waits on the store
(:meth:`~torchatlas.classmode.store.ClassStore.wait_for_change`: at once for a change this
replica committed) or :data:`TICK_S`, reads each watched class's version (the store's
per-process cache: one database read per class per half second, whatever the number of
sessions; the only news of another replica's change), and asks each session that is behind
for a run of its poll fragment, as the browser's timer would, on the server's event loop.
That run does what a timed poll does (follow the teacher's move, draw the question, the
reveal), so an idle class costs nothing but a slow safety poll (:data:`FALLBACK_S`: a push
that found the fragment replaced by a page run in between is retried after
:data:`RETRY_S`, and the timer catches anything else).

Streamlit has no public way to run a session's fragment from the server; the internals it
takes are in ``components/upkeep.py`` (:func:`~components.upkeep.wake_fragment`), pinned by
its tests. Where they are missing (another Streamlit, AppTest, a script run outside a
server) :func:`available` is False and the page polls as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from components import upkeep
from torchatlas.classmode import ClassError, ClassStore

_LOG = logging.getLogger(__name__)

TICK_S = 0.2  # how often the watcher reads its classes' versions without a local change
RETRY_S = 1.0  # a push whose run did not mark the version seen is sent again after this
TRIES = 3  # pushes per version at most; then the timer (a page without the poll any more)
FALLBACK_S = 30.0  # the browser's own timer, for whatever a push missed
FORGET_S = 3 * 3600.0  # a session not heard of for this long is dropped from the watch


@dataclass
class Follower:
    """One following session: its class, its poll fragment, and what its screen drew."""

    code: str
    fragment_id: str
    seen: int  # the class version its screen last drew
    pushed: int = -1  # the version last pushed for
    pushed_at: float = 0.0
    tries: int = 0  # pushes for that version so far
    heard_at: float = 0.0


class Watcher:
    """The process's following sessions and the thread that wakes them (see the module)."""

    def __init__(self, store: ClassStore, wake: Callable[[str, Follower], bool]) -> None:
        self.store = store
        self.wake = wake  # (session id, follower) → False when the session is gone
        self.followers: dict[str, Follower] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def watch(self, session_id: str, follower: Follower) -> None:
        """Record (or update) a session's place; starts the thread on first use."""
        follower.heard_at = time.monotonic()
        with self.lock:
            held = self.followers.get(session_id)
            if held is not None and held.code == follower.code and held.seen == follower.seen:
                follower.pushed, follower.pushed_at = held.pushed, held.pushed_at
                follower.tries = held.tries
            self.followers[session_id] = follower
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="classmode-push", daemon=True)
                self.thread.start()

    def forget(self, session_id: str) -> None:
        with self.lock:
            self.followers.pop(session_id, None)

    def _run(self) -> None:
        while True:
            self.store.wait_for_change(TICK_S)
            try:
                self.sweep()
            except Exception:  # the watcher must never stop: the timer still polls
                _LOG.warning("classmode push: a sweep failed", exc_info=True)
                time.sleep(TICK_S)

    def sweep(self) -> int:
        """Wake every session whose class moved past what its screen drew; how many."""
        now = time.monotonic()
        with self.lock:
            by_code: dict[str, list[tuple[str, Follower]]] = {}
            for session_id, follower in list(self.followers.items()):
                if now - follower.heard_at > FORGET_S:
                    del self.followers[session_id]
                    continue
                by_code.setdefault(follower.code, []).append((session_id, follower))
        woken = 0
        for code, group in by_code.items():
            try:
                version = self.store.version(code)  # cached: one read per class
            except ClassError:  # gone, or the database is away: the timer asks
                continue
            for session_id, follower in group:
                if version <= follower.seen:
                    continue
                if follower.pushed >= version and (
                    now - follower.pushed_at < RETRY_S or follower.tries >= TRIES
                ):
                    continue
                follower.tries = follower.tries + 1 if follower.pushed >= version else 1
                follower.pushed, follower.pushed_at = version, now
                if self.wake(session_id, follower):
                    woken += 1
                else:
                    self.forget(session_id)
        return woken


def _wake(session_id: str, follower: Follower) -> bool:
    return upkeep.wake_fragment(session_id, follower.fragment_id)


_watchers: dict[int, Watcher] = {}
_watchers_lock = threading.Lock()


def _watcher(store: ClassStore) -> Watcher:
    with _watchers_lock:
        found = _watchers.get(id(store))
        if found is None or found.store is not store:
            found = _watchers[id(store)] = Watcher(store, _wake)
        return found


def available() -> bool:
    """Can this server wake sessions (a Streamlit server with the internals this takes)?"""
    return upkeep.can_wake_sessions()


def period(polling_s: float) -> float:
    """The poll fragment's timer: :data:`FALLBACK_S` where the server wakes it, else the
    page's own polling period."""
    return FALLBACK_S if available() else polling_s


def watch(store: ClassStore, code: str, seen: int) -> None:
    """From a poll fragment's run: this session's screen shows ``code`` at version ``seen``;
    wake it when the class moves on. Does nothing outside a fragment of a served session."""
    if not available():
        return
    running = upkeep.script_run_fragment()
    if running is not None:
        session_id, fragment_id = running
        _watcher(store).watch(session_id, Follower(code, fragment_id, seen))
