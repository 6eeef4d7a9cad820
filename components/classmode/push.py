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
for a run of its poll fragment, as the browser's timer would, on the server's event loop, a
few sessions at a time (a wave: see :class:`Watcher`).
That run does what a timed poll does (draw the question, the reveal), so an idle class costs
nothing but a slow safety poll (:data:`FALLBACK_S`: a push that found the session busy is
retried after :data:`RETRY_S`, and the timer catches anything else).

A move of the teacher's is one run per phone, not two: where the poll would only switch the
page (``st.switch_page``, a second, whole run), the watcher asks for that page's run itself
(:func:`page_run`), with the link the poll would have switched to. With a hundred phones on
one server every phone's runs share one interpreter, so a run saved per phone is a hundred
runs off the last phone's wait (bench/classmode_load.py measures it). The reveal of a step
that kept its room closed is the other way round: every phone's poll draws its verdict in
place first (a short run), and only then does the watcher run each page again to open the
room (a whole run), so no phone waits for a hundred rooms to learn whether it was right.

Streamlit has no public way to run a session's fragment from the server; the internals it
takes are in ``components/upkeep.py`` (:func:`~components.upkeep.wake_fragment`), pinned by
its tests. Where they are missing (another Streamlit, AppTest, a script run outside a
server) :func:`available` is False and the page polls as before.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from components import upkeep
from components.classmode.state import place_of
from torchatlas.classmode import ClassError, ClassState, ClassStore
from torchatlas.lessons import ROOMS

_LOG = logging.getLogger(__name__)

TICK_S = 0.2  # how often the watcher reads its classes' versions without a local change
WAVE = 4  # page runs the watcher keeps going at once (see Watcher)
WAVE_CHECK_S = 0.005  # how often it looks whether a run it asked for is over
WAVE_SLOT_S = 0.3  # a run still going after this frees its place in the wave all the same
RETRY_S = 1.0  # a push whose run did not mark the version seen is sent again after this
TRIES = 3  # pushes per version at most; then the timer (a page without the poll any more)
FALLBACK_S = 30.0  # the browser's own timer, for whatever a push missed
FORGET_S = 3 * 3600.0  # a session not heard of for this long is dropped from the watch


Place = tuple[int, str, tuple]  # (step, room, room link) as ClassState carries them


@dataclass
class Follower:
    """One following session: its class, its poll fragment, and what its screen drew.

    For a student the poll also says where the screen follows the class (``place``, None
    before the first place), the student's own part of the address (``link``: class, key,
    language; empty for anyone else), the removals it has seen, and whether it shows the
    class's room page with the room kept closed for the reveal (``kept_room``, as the page's
    last whole run drew it; still so after the poll drew the verdict): what
    :func:`page_run` needs."""

    code: str
    fragment_id: str
    seen: int  # the class version its screen last drew
    place: Place | None = None
    link: tuple[tuple[str, str], ...] = ()
    removals: int = 0
    kept_room: bool = False
    pushed: int = -1  # the version last pushed for
    pushed_at: float = 0.0
    tries: int = 0  # pushes for that version so far
    heard_at: float = 0.0


PageRun = tuple[str | None, str | None]  # (page script hash, query string); None: as it is


def page_run(follower: Follower, current: ClassState, pages: Mapping[str, str]) -> PageRun | None:
    """The whole-page run that shows ``current`` on this follower's screen at once, where its
    poll would only switch to it: the teacher's new place (the room's page, with the class's
    room link and the student's own link, as ``state.follow`` opens it), or, once its poll
    drew the reveal's verdict, the room its screen still keeps closed (the same page again).
    None when the poll decides: a question opened or revealed in place (the verdict first),
    the class ended, a student removed, not a student."""
    if not follower.link or current.ended or current.removals != follower.removals:
        return None
    if place_of(current) != follower.place:  # what state.needs_follow asks, server-side
        if current.room not in ROOMS or current.room not in pages:
            return None
        query = {**current.fields(), **dict(follower.link)}
        return pages[current.room], urlencode(query, doseq=True)
    if follower.kept_room and current.revealed and follower.seen >= current.version:
        return None, None
    return None


@dataclass
class _Asked:
    """A wake in the wave: when it was asked for, and the loop's answer (None: not yet)."""

    at: float
    started: bool | None = None

    def answered(self, started: bool) -> None:
        self.started = started


Wake = Callable[[str, Follower, PageRun | None, Callable[[bool], object]], bool]


class Watcher:
    """The process's following sessions and the thread that wakes them (see the module).

    A move has every phone of a class to wake. Their runs share one interpreter (one core,
    by the GIL), so woken all at once they all finish together, when the last one does: with
    a hundred phones on a room with many widgets, every phone waited the whole second and
    more. The watcher therefore wakes them in a wave: at most :data:`WAVE` runs going at
    a time (``running(session)`` says when each is over), the next phone woken as one ends,
    in a shuffled order per change. The same work then ends at the same moment for the
    last phone, and much sooner for the others (bench/classmode_load.py measures it). Only
    the watcher's own wakes wait their turn, never a visitor's run: a run still going after
    :data:`WAVE_SLOT_S` (waiting for a sandbox job, say) gives its place to the next."""

    def __init__(
        self,
        store: ClassStore,
        wake: Wake,
        running: Callable[[str], bool] | None = None,
        wave: int = WAVE,
    ) -> None:
        self.store = store
        # (session id, follower, its page run or None: its poll, answered(started)) → False
        # when it is gone; answered is called once it is known whether a run started
        self.wake = wake
        self.running = running  # None: no waves, every wake at once (nothing says when done)
        self.wave = max(1, wave)
        self.followers: dict[str, Follower] = {}
        self.pages: dict[str, str] = {}  # url path → page script hash, as the runs saw them
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        # wakes waiting for a place in the wave: session → (class version, page run)
        self.queued: dict[str, tuple[int, PageRun | None]] = {}
        self.asked: dict[str, _Asked] = {}  # the wave: session → its wake

    def watch(
        self, session_id: str, follower: Follower, pages: Mapping[str, str] | None = None
    ) -> None:
        """Record (or update) a session's place; starts the thread on first use."""
        follower.heard_at = time.monotonic()
        with self.lock:
            if pages:
                self.pages.update(pages)
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
        swept = 0.0
        while True:
            busy = bool(self.queued or self.asked)
            changed = self.store.wait_for_change(WAVE_CHECK_S if busy else TICK_S)
            try:
                if changed or time.monotonic() - swept >= TICK_S:
                    swept = time.monotonic()
                    self.sweep()
                else:
                    self.dispatch()
            except Exception:  # the watcher must never stop: the timer still polls
                _LOG.warning("classmode push: a sweep failed", exc_info=True)
                time.sleep(TICK_S)

    def sweep(self) -> int:
        """Ask for a wake of every session whose class moved past what its screen drew; how
        many were woken now or wait for their turn in the wave (not those found gone)."""
        now = time.monotonic()
        with self.lock:
            by_code: dict[str, list[tuple[str, Follower]]] = {}
            for session_id, follower in list(self.followers.items()):
                if now - follower.heard_at > FORGET_S:
                    del self.followers[session_id]
                    continue
                by_code.setdefault(follower.code, []).append((session_id, follower))
        asked: list[str] = []
        for code, group in by_code.items():
            try:
                version = self.store.version(code)  # cached: one read per class
            except ClassError:  # gone, or the database is away: the timer asks
                continue
            current: ClassState | None = None
            random.shuffle(group)  # no phone is always the wave's last
            for session_id, follower in group:
                # Up to date, unless its screen keeps a revealed room closed (page_run).
                if version <= follower.seen and not follower.kept_room:
                    continue
                if current is None or current.version < version:
                    try:
                        current = self.store.current_state(code)  # cached per version
                    except ClassError:
                        current = None
                run = page_run(follower, current, self.pages) if current is not None else None
                if version <= follower.seen and not _room_due(follower, run):
                    continue
                # A session still waiting its turn is woken once, for the newest change.
                if session_id not in self.queued:
                    if follower.pushed >= version and (
                        now - follower.pushed_at < RETRY_S or follower.tries >= TRIES
                    ):
                        continue
                    follower.tries = follower.tries + 1 if follower.pushed >= version else 1
                    follower.pushed, follower.pushed_at = version, now
                    asked.append(session_id)
                self.queued[session_id] = (version, run)
        woken = self._dispatch()
        return sum(session in woken or session in self.queued for session in asked)

    def dispatch(self) -> int:
        """Wake queued sessions while the wave has room; how many were woken."""
        return len(self._dispatch())

    def _dispatch(self) -> set[str]:
        now = time.monotonic()
        for session_id, wake in list(self.asked.items()):
            over = wake.started is False or (wake.started is True and not self._running(session_id))
            if over or now - wake.at >= WAVE_SLOT_S:
                del self.asked[session_id]
        woken: set[str] = set()
        while self.queued and (self.running is None or len(self.asked) < self.wave):
            session_id = next(iter(self.queued))
            version, run = self.queued.pop(session_id)
            follower = self.followers.get(session_id)
            if follower is None or (follower.seen >= version and not _room_due(follower, run)):
                continue  # gone, or its screen drew it meanwhile
            wake = self.asked[session_id] = _Asked(time.monotonic())
            follower.pushed_at = wake.at  # the retry counts from the wake, not the queue
            if self.wake(session_id, follower, run, wake.answered):
                woken.add(session_id)
            else:
                self.asked.pop(session_id, None)
                self.forget(session_id)
        if self.running is None:
            self.asked.clear()
        return woken

    def _running(self, session_id: str) -> bool:
        try:
            return self.running is not None and self.running(session_id)
        except Exception:  # say it is over: the slot timeout is the only other way out
            return False


def _room_due(follower: Follower, run: PageRun | None) -> bool:
    """Is ``run`` the page run that opens the room this follower's screen still keeps closed
    after the verdict (not one its page drew meanwhile)?"""
    return run == (None, None) and follower.kept_room


def _wake(
    session_id: str, follower: Follower, run: PageRun | None, answered: Callable[[bool], object]
) -> bool:
    if run is not None:
        return upkeep.run_page(session_id, *run, answered=answered)
    return upkeep.wake_fragment(session_id, follower.fragment_id, answered)


_watchers: dict[int, Watcher] = {}
_watchers_lock = threading.Lock()


def _watcher(store: ClassStore) -> Watcher:
    with _watchers_lock:
        found = _watchers.get(id(store))
        if found is None or found.store is not store:
            found = _watchers[id(store)] = Watcher(store, _wake, upkeep.session_running)
        return found


def waking() -> bool:
    """Is this process waking a class's phones right now (a wave going, or phones queued for
    one)? Registered with :func:`components.upkeep.busy_while`: the server's timed full
    garbage collection waits until the phones of a move have their pages."""
    with _watchers_lock:
        watchers = list(_watchers.values())
    return any(watcher.queued or watcher.asked for watcher in watchers)


upkeep.busy_while("classmode.waking", waking)


def available() -> bool:
    """Can this server wake sessions (a Streamlit server with the internals this takes)?"""
    return upkeep.can_wake_sessions()


def period(polling_s: float) -> float:
    """The poll fragment's timer: :data:`FALLBACK_S` where the server wakes it, else the
    page's own polling period."""
    return FALLBACK_S if available() else polling_s


def watch(
    store: ClassStore,
    code: str,
    seen: int,
    *,
    place: Place | None = None,
    link: Mapping[str, str] | None = None,
    removals: int = 0,
    kept_room: bool = False,
) -> None:
    """From a poll fragment's run: this session's screen shows ``code`` at version ``seen``;
    wake it when the class moves on. A student's poll adds where the screen follows the
    class (see :class:`Follower`). Does nothing outside a fragment of a served session."""
    if not available():
        return
    running = upkeep.script_run_fragment()
    if running is not None:
        session_id, fragment_id = running
        follower = Follower(
            code,
            fragment_id,
            seen,
            place=place,
            link=tuple((link or {}).items()),
            removals=removals,
            kept_room=kept_room,
        )
        _watcher(store).watch(session_id, follower, upkeep.script_run_pages())
