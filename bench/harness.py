"""What every benchmark shares: a timer, medians over repeats, and the app run headless.

Benchmarks compare against a baseline measured in the same run, so these helpers only time;
the ratios and targets live in each benchmark.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
# The first run imports torch (seconds on a small machine); keep a wide margin.
APPTEST_TIMEOUT_S = 180


def timed(function: Callable[[], object]) -> float:
    """Seconds one call of ``function`` takes."""
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def median_time(function: Callable[[], object], runs: int) -> float:
    """The median of ``runs`` timed calls (the machine is noisy: never one sample)."""
    return statistics.median(timed(function) for _ in range(runs))


def open_page(
    script: str,
    lang: str = "en",
    query: dict[str, str | list[str]] | None = None,
    **session: object,
):
    """Run one page of the real app through app.py's navigation under AppTest; ``query`` is a
    link's query string (set before the first run, as a visitor arriving by a link)."""
    at = new_session(lang, query, **session)
    at.run()
    if script != "views/home.py":
        at.switch_page(script).run()
    return at


def new_session(
    lang: str = "en", query: dict[str, str | list[str]] | None = None, **session: object
):
    """A fresh AppTest session of the real app, not run yet: its language, a link's query
    string and session values set."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=APPTEST_TIMEOUT_S)
    at.session_state["lang"] = lang
    for key, value in (query or {}).items():
        at.query_params[key] = value
    for key, value in session.items():
        at.session_state[key] = value
    return at
