"""Open a room through a link the way a visitor would, and measure what it cost the server.

The attack tests of every room use :func:`open_hostile_link`: it runs the page under AppTest
(the page runs in this process, as it would in the server's), while a heartbeat thread in this
same process wakes every few milliseconds. A page that holds the GIL (a C loop formatting a
huge value) or fills memory shows up as a late heartbeat and a risen resident set: what every
other visitor's session would feel. Sandbox children are other processes: their memory is
theirs, limited by the sandbox, and not counted here.

>>> visit = open_hostile_link("views/autograd.py", {"a_prog": "..."})  # doctest: +SKIP
>>> visit.assert_contained()  # doctest: +SKIP
"""

from __future__ import annotations

import gc
import resource
import threading
import time
from dataclasses import dataclass

from streamlit.testing.v1 import AppTest

from bench.harness import new_session
from tests.app.apptest import open_page, rendered_text

MAX_RSS_RISE_MB = 200.0
MAX_STALL_S = 0.5
MAX_ANSWER_S = 3.0
HEARTBEAT_S = 0.005
PAGE_MB = resource.getpagesize() / 2**20


def rss_mb() -> float:
    """This process's resident set now, in MB (Linux)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * PAGE_MB


class Heartbeat:
    """A thread that wakes every :data:`HEARTBEAT_S` and notes the longest it was late and the
    highest resident set it saw: another visitor's session, as far as this process goes.

    A beat is late either because something in this process kept it from running (work that
    holds the GIL: what these tests look for) or because the machine ran other processes
    instead of this one (a loaded CI machine: two cores, a test run's browsers and servers
    starting). Only the first is the page's doing, so a late beat counts for no more than the
    CPU time this process used meanwhile: work holding the GIL uses about as much CPU as the
    beat was late, a process the machine left waiting uses next to none.

    For as long as it beats, everything alive in the process is left out of full collections
    (``gc.freeze``), as the server does after its start-up (components/warm.py): else the app's
    collector thread, which runs every few seconds in a test process too, walks every object
    the whole test run has left behind while the beat waits (0.7–1.3 s late after three
    thousand tests, and never alone), and the stall measured would be the test run's, not the
    page's. Collect first (``gc.collect``) so that no garbage is frozen with it."""

    def __init__(self) -> None:
        self.worst_stall_s = 0.0
        self.peak_rss_mb = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        last, last_cpu = time.perf_counter(), time.process_time()
        while not self._stop.is_set():
            time.sleep(HEARTBEAT_S)
            now, cpu = time.perf_counter(), time.process_time()
            late = now - last - HEARTBEAT_S
            self.worst_stall_s = max(self.worst_stall_s, min(late, cpu - last_cpu))
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb())
            last, last_cpu = now, cpu

    def __enter__(self) -> Heartbeat:
        gc.freeze()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        gc.unfreeze()


@dataclass
class Visit:
    """One hostile link's visit: the page, what it cost, and how long the answer took."""

    at: AppTest
    answer_s: float
    rss_rise_mb: float
    worst_stall_s: float

    @property
    def said(self) -> str:
        """Everything the page wrote: text, captions, and its info/warning/error/success boxes."""
        boxes = [
            str(box.value)
            for kind in ("success", "error", "warning", "info")
            for box in getattr(self.at, kind)
        ]
        return "\n".join([rendered_text(self.at), *boxes])

    def assert_contained(self) -> None:
        """The issue's bar: no uncaught exception, the server's memory rose by at most
        :data:`MAX_RSS_RISE_MB`, no other session stalled more than :data:`MAX_STALL_S`, and
        the visitor had an answer within :data:`MAX_ANSWER_S`."""
        assert not self.at.exception, [e.value for e in self.at.exception]
        assert self.rss_rise_mb <= MAX_RSS_RISE_MB, f"RSS rose {self.rss_rise_mb:.0f} MB"
        assert self.worst_stall_s <= MAX_STALL_S, f"a heartbeat was {self.worst_stall_s:.2f} s late"
        assert self.answer_s <= MAX_ANSWER_S, f"the answer took {self.answer_s:.2f} s"

    def assert_refused_with(self, *fragments: str) -> None:
        """The page explained itself: every fragment appears in what it said."""
        said = self.said
        for fragment in fragments:
            assert fragment in said, f"{fragment!r} not in the page's text:\n{said[:3000]}"


def open_page_once(script: str, lang: str = "en") -> AppTest:
    """The page opened once with no link (warms imports, caches and the sandbox)."""
    return open_page(script, lang)


def open_hostile_link(script: str, query: dict[str, str | list[str]], lang: str = "en") -> Visit:
    """Open ``script`` with the query string ``query`` (as a visitor's link would), measured.

    Call :func:`open_page_once` for the same page first (once per test module), so the
    measurement sees the link's cost, not the first import of the room."""
    at = new_session(lang, query)
    at.run()
    return measured_visit(at, script)


def measured_visit(at: AppTest, script: str) -> Visit:
    """Open ``script`` in the session ``at`` (its link already set), measured: the answer's
    time, the resident set's rise and the longest stall of the :class:`Heartbeat`."""
    gc.collect()
    before = rss_mb()
    with Heartbeat() as beat:
        started = time.perf_counter()
        at.switch_page(script).run()
        answer_s = time.perf_counter() - started
    return Visit(at, answer_s, beat.peak_rss_mb - before, beat.worst_stall_s)
