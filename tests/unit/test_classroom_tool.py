"""The classroom load tool's pure parts (bench/classroom.py): percentiles, the server tree's
PSS, arguments, goals, and how a client keeps the page as the browser does. No server runs."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import random
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from bench import classroom as tool

# ---------------------------------------------------------------------------- percentiles


def run_coroutine(coroutine):
    """``asyncio.run`` on a thread of its own: the e2e tests' Playwright keeps an event loop
    running on the main thread for the whole session, and asyncio.run refuses to nest."""
    results: list = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(coroutine))
        except BaseException as error:  # re-raised in the test's own thread
            errors.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    if errors:
        raise errors[0]
    return results[0]


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(4)
    for size in (1, 2, 3, 7, 30, 60, 61):
        values = [rng.uniform(0, 20) for _ in range(size)]
        for q in (0, 50, 95, 100):
            assert tool.percentile(values, q) == pytest.approx(np.percentile(values, q))
    assert tool.percentile(list(range(1, 11)), 50) == pytest.approx(5.5)
    assert tool.percentile(list(range(1, 11)), 95) == pytest.approx(9.55)


def test_percentile_of_nothing_and_bad_quantiles() -> None:
    assert math.isnan(tool.percentile([], 95))
    with pytest.raises(ValueError):
        tool.percentile([1.0], 101)


def test_summarize_leaves_errors_and_skips_out_of_the_times() -> None:
    outcomes = [
        tool.Outcome("shapes.analyse", 0, 0, 1.0),
        tool.Outcome("shapes.analyse", 1, 0, 2.0),
        tool.Outcome("shapes.analyse", 2, 0, 50.0, error="warning: the sandbox is busy"),
        tool.Outcome("shapes.analyse", 3, 0, 60.0, error="timeout after 90 s"),
        tool.Outcome("strides.click", 0, 0, 0.0, skipped="answered in the browser"),
    ]
    analyse, click = tool.summarize(outcomes)
    assert (analyse.action, analyse.count, analyse.errors) == ("shapes.analyse", 4, 2)
    assert analyse.first_error == "warning: the sandbox is busy"
    assert analyse.max_s == 2.0  # the failed ones' waits are not latencies
    assert analyse.p50_s == pytest.approx(1.5)
    assert (click.count, click.skipped, click.errors) == (1, 1, 0)
    assert math.isnan(click.p95_s)


# ---------------------------------------------------------------------------- PSS of a tree


def _fake_process(
    proc: Path, pid: int, ppid: int, pss_kb: int | None, comm: str = "python"
) -> None:
    folder = proc / str(pid)
    folder.mkdir()
    # The command name may hold spaces and parentheses; the fields after it are what counts.
    (folder / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 " + "0 " * 40)
    if pss_kb is not None:
        (folder / "smaps_rollup").write_text(
            "00400000-7fff0000 ---p 00000000 00:00 0   [rollup]\n"
            f"Rss:              {pss_kb * 2} kB\nPss:              {pss_kb} kB\n"
            "Pss_Anon:           10 kB\n"
        )


def test_tree_pss_sums_the_server_and_every_descendant(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "self").mkdir()  # not a pid: ignored
    _fake_process(proc, 1, 0, 5)
    _fake_process(proc, 100, 1, 1000, comm="streamlit (server) x")
    _fake_process(proc, 101, 100, 200)  # the sandbox zygote
    _fake_process(proc, 102, 101, 30)  # its worker: a grandchild
    _fake_process(proc, 103, 100, None)  # gone while read (no smaps_rollup): skipped
    _fake_process(proc, 200, 1, 777)  # someone else's process
    assert tool.process_tree(100, proc) == [100, 101, 102, 103]
    assert tool.tree_pss_bytes(100, proc) == ((1000 + 200 + 30) * 1024, 3)
    assert tool.tree_pss_bytes(102, proc) == (30 * 1024, 1)
    assert tool.pss_bytes(999, proc) is None


def test_tree_pss_of_this_process_counts_its_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while child.pid not in tool.process_tree(os.getpid()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.pid in tool.process_tree(os.getpid())
        alone = tool.pss_bytes(os.getpid())
        total, counted = tool.tree_pss_bytes(os.getpid())
        assert alone is not None and alone > 0
        assert counted >= 2 and total > alone
    finally:
        child.kill()
        child.wait()


# ---------------------------------------------------------------------------- arguments


def test_defaults_are_issue_13s_class() -> None:
    args = tool.parse_args([])
    assert (args.students, args.rounds, args.mode, args.settle_s) == (30, 2, "mixed", 120.0)
    assert args.modes == ["mixed"]
    assert args.deadline_s > args.settle_s  # always bounded, never zero


def test_all_runs_every_mode_and_bounds_are_enforced() -> None:
    args = tool.parse_args(["--mode", "all", "--students", "3", "--rounds", "1", "--settle-s", "5"])
    assert args.modes == list(tool.MODES)
    assert args.deadline_s == pytest.approx(4 * (900 + 5))
    for wrong in (
        ["--students", "0"],
        ["--students", "1000"],
        ["--rounds", "0"],
        ["--settle-s", "-1"],
        ["--mode", "everyone"],
        ["--port", "80"],
        ["--app-dir", "/nonexistent"],
    ):
        with pytest.raises(SystemExit):
            tool.parse_args(wrong)


# ---------------------------------------------------------------------------- goals


def _result(mode: str, times: dict[str, list[float]], **memory: int) -> tool.ModeResult:
    result = tool.ModeResult(mode=mode, students=30, rounds=2)
    for action, seconds in times.items():
        result.outcomes += [tool.Outcome(action, i, 0, s) for i, s in enumerate(seconds)]
    mb = tool.MB
    result.memory = tool.MemoryFigures(
        baseline=memory.get("baseline", 1400 * mb),
        peak=memory.get("peak", 1800 * mb),
        settled=memory.get("settled", 1450 * mb),
        settle_s=120,
    )
    result.first_visit = {
        "shapes": tool.Outcome("shapes.first", -1, 0, 2.0),
        "classify": tool.Outcome("classify.first", -2, 0, 1.0),
    }
    return result


def test_a_class_within_every_goal_passes() -> None:
    fast = [0.5] * 60
    result = _result("mixed", {"strides.open": fast, "strides.click": fast, "devices.bench": fast})
    assert tool.check_goals(result) == []
    assert tool.check_goals(_result("all-analyse", {"shapes.analyse": [1.9] * 60})) == []
    assert tool.check_goals(_result("all-upload", {"classify.upload": [4.9] * 60})) == []


def test_each_missed_goal_is_named() -> None:
    slow = _result("mixed", {"strides.click": [0.5] * 50 + [4.4] * 10})
    (missed,) = tool.check_goals(slow)
    assert "strides.click p95" in missed and "> 3 s" in missed

    busy = _result("all-analyse", {"shapes.analyse": [1.0] * 59})
    busy.outcomes.append(tool.Outcome("shapes.analyse", 59, 0, 9.6, error="warning: busy"))
    assert any("1 error(s)" in line for line in tool.check_goals(busy))

    same = _result("all-classify-same", {"classify.sample": [2.5] * 30})
    assert any("classify.sample p95 2.50 s > 2 s" in line for line in tool.check_goals(same))
    # The focused action must have been measured at all.
    assert any("no classify.sample" in line for line in tool.check_goals(_result(
        "all-classify-same", {"classify.open": [1.0]})))  # fmt: skip

    mb = tool.MB
    heavy = _result("all-upload", {"classify.upload": [1.0]}, peak=2100 * mb)
    assert any("peak PSS 2,100 MB" in line for line in tool.check_goals(heavy))
    leaky = _result("mixed", {"shapes.open": [1.0]}, baseline=1420 * mb, settled=1706 * mb)
    assert any("286 MB above the baseline" in line for line in tool.check_goals(leaky))
    within = _result("mixed", {"shapes.open": [1.0]}, baseline=1420 * mb, settled=1569 * mb)
    assert tool.check_goals(within) == []

    first = _result("mixed", {"shapes.open": [1.0]})
    first.first_visit["shapes"] = tool.Outcome("shapes.first", -1, 0, 11.0)
    assert any("waited 11.0 s for shapes" in line for line in tool.check_goals(first))


def test_an_unfinished_measurement_is_a_miss() -> None:
    result = _result("mixed", {"shapes.open": [1.0]})
    result.memory.settled = None
    result.aborted = "the mode's time limit was reached"
    missed = tool.check_goals(result)
    assert any("not measured to the end" in line for line in missed)
    assert any("settled PSS not measured" in line for line in missed)


def test_the_report_prints_every_action_and_the_memory() -> None:
    result = _result("mixed", {"strides.click": [0.5, 1.5]})
    result.outcomes.append(tool.Outcome("devices.bench", 0, 0, 3.0, error="warning: busy"))
    text = tool.format_result(result)
    assert "strides.click" in text and "devices.bench" in text and "warning: busy" in text
    assert "baseline 1,400, peak 1,800" in text
    data = json.loads(json.dumps(tool.result_json(result)))
    assert data["actions"][1]["p95_s"] is None  # no successful bench: no latency, not NaN


# ---------------------------------------------------------------------------- the protocol


def test_a_click_on_a_typed_plotly_array_names_its_point() -> None:
    def typed(values: list[int]) -> dict[str, str]:
        raw = struct.pack(f"<{len(values)}H", *values)
        return {"dtype": "u2", "bdata": base64.b64encode(raw).decode()}

    spec = {"data": [{"type": "scatter", "x": typed([0, 1, 2]), "y": typed([0, 0, 1]),
                      "customdata": typed([10, 11, 12])}]}  # fmt: skip
    event = json.loads(tool.plotly_click(json.dumps(spec), 4))
    (point,) = event["selection"]["points"]
    assert point == {"curve_number": 0, "point_number": 1, "point_index": 1, "x": 1, "y": 0,
                     "customdata": 11}  # fmt: skip
    assert event["selection"]["point_indices"] == [1]
    assert tool.plotly_click(json.dumps({"data": [{"x": []}]}), 0) is None
    assert tool.plotly_click("not json", 0) is None


def _delta(path: list[int], body: str, fragment: str = "") -> object:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.metadata.delta_path.extend(path)
    message.delta.new_element.markdown.body = body
    message.delta.fragment_id = fragment
    return message


def _finished(status: int, fragments: tuple[str, ...] = ()) -> object:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.script_finished = status
    message.metadata.run.fragment_ids.extend(fragments)
    return message


def test_the_client_keeps_the_page_as_the_browser_does() -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    done = ForwardMsg.ScriptFinishedStatus
    student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
    for message in (_delta([0, 0], "title"), _delta([0, 1], "old"), _delta([0, 2, 0], "f", "F")):
        student._handle(message)
    student._handle(_finished(done.FINISHED_SUCCESSFULLY))
    assert [n.text() for n in student.find()] == ["title", "old", "f"]
    assert student.epoch == 1

    # A fragment run replaces only its own elements; the rest of the page stays.
    student._handle(_delta([0, 2, 1], "f2", "F"))
    student._handle(_finished(done.FINISHED_FRAGMENT_RUN_SUCCESSFULLY, ("F",)))
    assert [n.text() for n in student.find()] == ["title", "old", "f2"]
    assert [n.text() for n in student.fresh(1)] == ["f2"]

    # A full run drops whatever it did not send again.
    student._handle(_delta([0, 0], "title"))
    student._handle(_finished(done.FINISHED_SUCCESSFULLY))
    assert [n.text() for n in student.find()] == ["title"]


def test_errors_and_warnings_on_the_page_are_found() -> None:
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
    warning = ForwardMsg()
    warning.metadata.delta_path.extend([0, 0])
    warning.delta.new_element.alert.body = "Another visitor's benchmark is running"
    warning.delta.new_element.alert.format = Alert.WARNING
    student._handle(warning)
    assert student.problems() == (None, "warning: Another visitor's benchmark is running")
    crash = ForwardMsg()
    crash.metadata.delta_path.extend([0, 1])
    crash.delta.new_element.exception.message = "redacted"
    student._handle(crash)
    hard, _ = student.problems()
    assert hard is not None and hard.startswith("exception")


def test_polling_timers_live_until_a_full_run_starts() -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    async def scenario() -> list[list[str]]:
        student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
        seen = []
        poll = ForwardMsg()
        poll.auto_rerun.interval = 60
        poll.auto_rerun.fragment_id = "watch"
        student._handle(poll)
        seen.append(sorted(student._auto))
        fragment_run = ForwardMsg()
        fragment_run.new_session.name = "app"
        fragment_run.metadata.run.fragment_ids.append("watch")  # the poll's own run
        student._handle(fragment_run)
        seen.append(sorted(student._auto))
        full_run = ForwardMsg()
        full_run.new_session.name = "app"
        student._handle(full_run)
        seen.append(sorted(student._auto))
        await student.close()
        return seen

    assert run_coroutine(scenario()) == [["watch"], ["watch"], []]


def _alert(path: list[int], body: str, kind: str) -> object:
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.metadata.delta_path.extend(path)
    message.delta.new_element.alert.body = body
    message.delta.new_element.alert.format = getattr(Alert, kind)
    return message


def test_an_action_is_judged_by_the_run_that_finishes_after_it() -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    done = ForwardMsg.ScriptFinishedStatus

    async def act(replies: list[object], timeout_s: float = 5) -> tuple[float, str | None]:
        student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
        student._handle(_delta([0, 0], "Report"))  # an earlier run's result does not count
        student._handle(_finished(done.FINISHED_SUCCESSFULLY))

        async def send() -> None:
            async def reply() -> None:
                for message in replies:
                    await asyncio.sleep(0.01)
                    student._handle(message)
                    student._wake.set()

            asyncio.get_running_loop().create_task(reply())

        def shows_report(since: int) -> bool:
            return any(n.text() == "Report" for n in student.fresh(since))

        result = await student.act(send, shows_report, timeout_s, deadline=1e12, quiet_s=0.3)
        await student.close()
        return result

    full = _finished(done.FINISHED_SUCCESSFULLY)
    seconds, error = run_coroutine(act([_delta([0, 0], "Report"), full]))
    assert error is None and seconds < 5
    rerun = _finished(done.FINISHED_EARLY_FOR_RERUN)  # st.rerun(): the next run decides
    _, error = run_coroutine(act([rerun, _delta([0, 0], "Report"), full]))
    assert error is None
    _, error = run_coroutine(act([_alert([0, 0], "The sandbox is busy", "WARNING"), full]))
    assert error == "warning: The sandbox is busy"
    _, error = run_coroutine(act([_alert([0, 0], "Busy: try again in 5 s", "INFO"), full]))
    assert error == "note: Busy: try again in 5 s"
    _, error = run_coroutine(act([_delta([0, 0], "Something else"), full]))
    assert error == "the run finished without the result"
    _, error = run_coroutine(act([_delta([0, 0], "Report")], timeout_s=0.5))  # never finishes
    assert error is not None and error.startswith("timeout")
