"""What an idle following student costs the server: its follow fragment and connection.

A student's screen follows the teacher by a fragment that the server wakes when the class
changes (``components/classmode/push.py``: one watcher thread per server); with nothing
happening, only the browser's safety timer asks for it, every ``push.FALLBACK_S`` seconds
(where the server cannot wake sessions, every ``state.poll_period()`` seconds: 1.0–1.4 s).
Each run reads one cached version number and draws nothing. Here real Chromium students
sit in a class with nothing happening, and the server process's CPU time over a window is
compared with the same window with no student connected. The issue's budget: 60 idle
students at most 25 % of one core, i.e. ≤ 4.2 ms of server CPU per student per second.

    python -m pytest tests/e2e/test_classmode_poll.py -s     # prints the figures
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from components.classmode import push
from tests.e2e.test_classmode import Class, join_by_code, running, start_class

STUDENTS = 6
WINDOW_S = 15.0  # each window holds one of the server's 15-s collections (components/warm.py)
BUDGET_MS_PER_STUDENT_S = 1000 * 0.25 / 60  # 60 students ≤ 25 % of one core


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu_over(pid: int, seconds: float) -> float:
    """The server's CPU seconds over a wall-clock window (a measurement: the window is the
    point, nothing is being waited for)."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - before


@pytest.fixture
def people(browser: Browser) -> Iterator[Class]:
    group = Class(browser)
    yield group
    group.close()


def test_an_idle_follower_costs_little(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, people: Class
) -> None:
    env = {"ATLAS_DATA_DIR": str(tmp_path / "data")}
    with running(monkeypatch, env, tmp_path / "server.log") as server:
        teacher = people.open(f"{server.url}/class")
        code, _, _ = start_class(teacher, None)  # free mode: nothing to follow yet
        teacher.context.close()  # the teacher's own tally poll is not a student's cost
        for number in range(STUDENTS):
            join_by_code(people.open(f"{server.url}/class"), code, f"S{number}")
        following = server_cpu_over(server.pid, WINDOW_S)
        for context in people.contexts:
            if context.pages:
                context.close()
        people.contexts.clear()
        alone = server_cpu_over(server.pid, WINDOW_S)
    per_student_s_ms = 1000 * max(0.0, following - alone) / (STUDENTS * WINDOW_S)
    # The server wakes the fragment (the pinned Streamlit has what push takes:
    # tests/unit/test_upkeep_internals.py), so an idle student's runs are the safety timer's.
    per_run_ms = per_student_s_ms * push.FALLBACK_S
    sixty = 60 * per_student_s_ms / 1000
    print(
        f"\nserver CPU over {WINDOW_S:.0f} s: {following:.2f} s with {STUDENTS} idle followers, "
        f"{alone:.2f} s with none; per student {per_student_s_ms:.2f} ms/s ({per_run_ms:.1f} ms "
        f"per {push.FALLBACK_S:g}-s safety period); 60 students ≈ {100 * sixty:.1f} % of one core"
    )
    assert per_student_s_ms <= BUDGET_MS_PER_STUDENT_S, per_student_s_ms
