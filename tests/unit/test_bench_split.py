"""The classroom benchmark's command and the e2e tests share their parts: one server start-up
(bench/server.py), one memory meter (bench/memory.py), and extra scenario tools reached
through ``python -m bench.classroom --mode <name>``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import classroom
from bench.server import Server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def extra_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A scenario tool of its own, registered as the mode ``drill``; it records its argv."""
    (tmp_path / "drill_tool_for_test.py").write_text(
        "CALLS = []\ndef main(argv):\n    CALLS.append(list(argv))\n    return 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(classroom.EXTRA_MODES, "drill", "drill_tool_for_test")
    monkeypatch.setitem(classroom.EXTRA_MODES, "absent", "no_such_tool_for_test")
    yield
    sys.modules.pop("drill_tool_for_test", None)


def test_an_extra_mode_hands_the_whole_command_line_to_its_tool(extra_tool) -> None:
    argv = ["--mode", "drill", "--students", "3"]
    assert classroom.main(argv) == 7
    recorded = sys.modules["drill_tool_for_test"].CALLS
    assert recorded == [argv]
    assert classroom.main(["--students", "2", "--mode=drill"]) == 7


def test_an_extra_mode_whose_tool_is_absent_is_not_offered(extra_tool) -> None:
    assert "drill" in classroom.extra_modes() and "absent" not in classroom.extra_modes()
    with pytest.raises(SystemExit):
        classroom.parse_args(["--mode", "absent"])


def test_the_class_mode_goes_to_classmode_load() -> None:
    assert classroom.EXTRA_MODES["class"] == "bench.classmode_load"
    assert classroom.requested_extra_mode(["--mode", "mixed"]) is None


def test_the_e2e_tests_and_the_benchmark_start_the_same_server() -> None:
    conftest = (ROOT / "tests" / "e2e" / "conftest.py").read_text()
    assert "from bench.server import" in conftest
    assert "subprocess.Popen" not in conftest and 'streamlit", "run"' not in conftest
    assert "subprocess.Popen" not in (ROOT / "bench" / "classroom.py").read_text()


def test_a_browser_leaving_is_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "start\nTraceback (most recent call last):\n  ...\nWebSocketDisconnect: 1001\n"
        "Traceback (most recent call last):\n  ...\nZeroDivisionError: division by zero\n"
    )
    server = Server(1, log)
    crashes = server.crashes(ignoring=("WebSocketDisconnect",))
    assert len(crashes) == 1 and "ZeroDivisionError" in crashes[0]
    assert server.tracebacks() == (2, "ZeroDivisionError: division by zero")


def test_one_copy_of_the_sandbox_jobs() -> None:
    import bench.sandbox_jobs
    import tests.sandbox_jobs

    assert tests.sandbox_jobs.JOBS is bench.sandbox_jobs.JOBS
    assert {"sandbox.echo", "sandbox.sleep"} <= set(bench.sandbox_jobs.JOBS)
