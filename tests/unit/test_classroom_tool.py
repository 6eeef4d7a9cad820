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
from bench import classroom_rooms
from torchatlas.rooms import room_keys

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


def test_all_runs_every_class_mode_and_bounds_are_enforced() -> None:
    args = tool.parse_args(["--mode", "all", "--students", "3", "--rounds", "1", "--settle-s", "5"])
    # every class of issue 13; ``flood`` (a class run twice) is asked for by name
    assert args.modes == [mode for mode in tool.MODES if mode != "flood"]
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


def _every_action(seconds: float, count: int = 8) -> dict[str, list[float]]:
    """A mixed class in which every room's every action (and each room's opening) was taken."""
    actions = [f"{room}.open" for room in tool.ROOMS] + tool.every_action()
    return {action: [seconds] * count for action in actions}


def test_a_class_within_every_goal_passes() -> None:
    assert tool.check_goals(_result("mixed", _every_action(0.5))) == []
    assert tool.check_goals(_result("all-analyse", {"shapes.analyse": [1.9] * 60})) == []
    assert tool.check_goals(_result("all-upload", {"classify.upload": [4.9] * 60})) == []


def test_each_missed_goal_is_named() -> None:
    # Issue 21: every action of a mixed class within 1 s at p95 (issue 13 allowed 3 s).
    slow = _result("mixed", {**_every_action(0.5), "strides.click": [0.5] * 50 + [1.4] * 10})
    (missed,) = tool.check_goals(slow)
    assert "strides.click p95" in missed and "> 1 s" in missed

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
    within = _result("mixed", _every_action(0.5), baseline=1420 * mb, settled=1569 * mb)
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
        student.handle(message)
    student.handle(_finished(done.FINISHED_SUCCESSFULLY))
    assert [n.text() for n in student.find()] == ["title", "old", "f"]
    assert student.epoch == 1

    # A fragment run replaces only its own elements; the rest of the page stays.
    student.handle(_delta([0, 2, 1], "f2", "F"))
    student.handle(_finished(done.FINISHED_FRAGMENT_RUN_SUCCESSFULLY, ("F",)))
    assert [n.text() for n in student.find()] == ["title", "old", "f2"]
    assert [n.text() for n in student.fresh(1)] == ["f2"]

    # A full run drops whatever it did not send again.
    student.handle(_delta([0, 0], "title"))
    student.handle(_finished(done.FINISHED_SUCCESSFULLY))
    assert [n.text() for n in student.find()] == ["title"]


def test_errors_and_warnings_on_the_page_are_found() -> None:
    from streamlit.proto.Alert_pb2 import Alert
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
    warning = ForwardMsg()
    warning.metadata.delta_path.extend([0, 0])
    warning.delta.new_element.alert.body = "Another visitor's benchmark is running"
    warning.delta.new_element.alert.format = Alert.WARNING
    student.handle(warning)
    assert student.problems() == (None, "warning: Another visitor's benchmark is running")
    crash = ForwardMsg()
    crash.metadata.delta_path.extend([0, 1])
    crash.delta.new_element.exception.message = "redacted"
    student.handle(crash)
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
        student.handle(poll)
        seen.append(sorted(student.polling))
        fragment_run = ForwardMsg()
        fragment_run.new_session.name = "app"
        fragment_run.metadata.run.fragment_ids.append("watch")  # the poll's own run
        student.handle(fragment_run)
        seen.append(sorted(student.polling))
        full_run = ForwardMsg()
        full_run.new_session.name = "app"
        student.handle(full_run)
        seen.append(sorted(student.polling))
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
        student.handle(_delta([0, 0], "Report"))  # an earlier run's result does not count
        student.handle(_finished(done.FINISHED_SUCCESSFULLY))

        async def send() -> None:
            async def reply() -> None:
                for message in replies:
                    await asyncio.sleep(0.01)
                    student.handle(message)
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


# ---------------------------------------------------------------------------- seven rooms

ROOMS_SOURCE = Path(tool.__file__).with_name("classroom_rooms.py")
ROOT = Path(__file__).resolve().parents[2]


def test_a_mixed_class_must_take_every_action_of_all_seven_rooms() -> None:
    assert room_keys() == tool.ROOMS  # the registry's rooms, each with its actions
    assert all(classroom_rooms.ROOM_ACTIONS.get(room) for room in room_keys())
    full = _every_action(0.5)
    without = {a: t for a, t in full.items() if a != "autograd.step"}
    (missed,) = tool.check_goals(_result("mixed", without))
    assert missed == "mixed: never taken: autograd.step"
    # A smaller class, or a class in some rooms only, cannot show the goal.
    small = _result("mixed", full)
    small.students = 4
    assert any("4 student(s)" in line for line in tool.check_goals(small))
    some = _result("mixed", {a: t for a, t in full.items() if a.startswith("basics.")})
    some.rooms = ("basics",)
    missed = tool.check_goals(some)
    assert any("rooms left out of the class: strides, autograd" in line for line in missed)
    # The single-room modes ask only for their own action.
    assert tool.check_goals(_result("all-analyse", {"shapes.analyse": [1.9] * 60})) == []


def test_rooms_option_limits_a_mixed_class() -> None:
    assert tool.parse_args([]).rooms == list(tool.ROOMS)
    args = tool.parse_args(["--rooms", "autograd, basics,modules", "--students", "3"])
    assert args.rooms == ["autograd", "basics", "modules"]
    for wrong in ("autograd,nowhere", "", "basics,basics"):
        with pytest.raises(SystemExit):
            tool.parse_args(["--rooms", wrong])


def test_the_table_lists_rooms_in_order_with_each_goal() -> None:
    result = _result("mixed", {"devices.demo": [0.2], "basics.saving": [1.5], "basics.open": [0.1],
                               "basics.section": [0.3]})  # fmt: skip
    lines = tool.format_result(result).splitlines()
    rows = [line.split()[0] for line in lines if line.startswith("  ") and "." in line.split()[0]]
    assert rows == ["basics.open", "basics.section", "basics.saving", "devices.demo"]
    saving = next(line for line in lines if "basics.saving" in line)
    assert "≤1 s MISSED" in saving
    assert "≤1 s ok" in next(line for line in lines if "devices.demo" in line)


def test_autograd_examples_that_teach_an_error_are_left_out() -> None:
    """The tool reads the served checkout's examples without importing them; what it reads
    must be what the room runs."""
    from torchatlas.autograd.examples import EXAMPLES

    source = (ROOT / "torchatlas" / "autograd" / "examples.py").read_text()
    clean = tool.read_catalog(ROOT).autograd_examples
    assert clean == tuple(key for key, example in EXAMPLES.items() if example.error is None)
    assert clean and len(clean) < len(EXAMPLES)  # some examples do teach an error
    assert classroom_rooms.clean_examples(source) == clean


def test_every_label_and_widget_key_the_driver_uses_is_in_the_rooms_code() -> None:
    """A renamed key would make every action of a room fail with "no ... on the page"; this
    names the key instead. Keys are read from components/<room>/panels.py and state.py, and
    from the room's link declaration (torchatlas/<room>/link.py), which names the widgets'
    session keys of the fields a link carries."""
    import re

    from bench import classroom_rooms as rooms

    catalog = tool.read_catalog(ROOT)
    for section in rooms.BASICS_INPUTS:
        assert catalog.label(f"basics.sections.{section}"), section
    for section in ("inspect", "train"):
        assert catalog.label(f"modules.sections.{section}"), section
    for key in catalog.autograd_examples:
        assert catalog.label(f"autograd.examples.{key}"), key
    used = set(re.findall(r'"((?:basics|autograd|modules)_[a-z_]+)"', ROOMS_SOURCE.read_text()))
    used |= {spec.key for spec in rooms.BASICS_INPUTS.values()}
    assert {"autograd_next", "autograd_all", "basics_section", "modules_lr"} <= used
    for key in sorted(used):
        room = key.split("_")[0]
        files = [ROOT / "components" / room / name for name in ("panels.py", "state.py")]
        files.append(ROOT / "torchatlas" / room / "link.py")
        code = "".join(path.read_text() for path in files if path.exists())
        assert f'"{key}"' in code, f"{key} is not a key in components/{room}"


def _button(path: list[int], key: str, fragment: str, disabled: bool = False) -> object:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.metadata.delta_path.extend(path)
    message.delta.new_element.button.id = f"$$ID-abc-{key}"
    message.delta.new_element.button.disabled = disabled
    message.delta.fragment_id = fragment
    return message


def _element(path: list[int], kind: str, fragment: str = "", **fields: object) -> object:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.metadata.delta_path.extend(path)
    inner = getattr(message.delta.new_element, kind)
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(inner, name).extend(value)
        else:
            setattr(inner, name, value)
    message.delta.fragment_id = fragment
    return message


def _graph_fragment(step: str, at_end: bool = False) -> list[object]:
    return [
        _button([0, 3, 0], "autograd_next", "G", disabled=at_end),
        _button([0, 3, 1], "autograd_all", "G", disabled=at_end),
        _element([0, 3, 2], "alert", "G", body=step),
        _element([0, 3, 3], "graphviz_chart", "G", spec=f"digraph {{ {step!r} }}"),
    ]


def _drive(page: list[object], action, reply):
    """Run one driver action against a page: ``reply(sent)`` gives the server's messages
    for what the driver sent (its widget states and fragment)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    done = ForwardMsg.ScriptFinishedStatus

    async def scenario():
        student = tool.Student("http://127.0.0.1:1", 3, pool=None)  # type: ignore[arg-type]
        for message in page:
            student.handle(message)
        student.handle(_finished(done.FINISHED_SUCCESSFULLY))
        sent: list[tuple[list, str]] = []

        async def send_rerun(widgets=(), *, fragment_id="", **_: object) -> None:
            sent.append((list(widgets), fragment_id))
            kind = (
                done.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
                if fragment_id
                else done.FINISHED_SUCCESSFULLY
            )
            replies = [
                *reply(widgets, fragment_id),
                _finished(kind, (fragment_id,) if fragment_id else ()),
            ]

            async def later() -> None:
                for message in replies:
                    await asyncio.sleep(0.005)
                    student.handle(message)
                    student.last_message_at = time.monotonic()
                    student._wake.set()

            asyncio.get_running_loop().create_task(later())

        student.send_rerun = send_rerun  # type: ignore[method-assign]
        outcomes = await action(student)
        await student.close()
        return outcomes, sent

    return run_coroutine(scenario())


def test_autograd_step_presses_next_in_the_graph_fragment_and_waits_for_the_next_step() -> None:
    from bench import classroom_rooms as rooms

    page = [_element([0, 0], "heading", body="Autograd", tag="h1"), *_graph_fragment("Before")]

    def step(student):
        return rooms.autograd_step(student, 0, deadline=time.monotonic() + 10)

    outcome, sent = _drive(page, step, lambda w, f: _graph_fragment("Step 1 of 7"))
    assert outcome.error is None and outcome.action == "autograd.step"
    ((widgets, fragment),) = sent
    assert fragment == "G"
    assert [(w.id, w.trigger_value) for w in widgets] == [("$$ID-abc-autograd_next", True)]
    # A fragment that draws the same step again did not step: that is an error, not a time.
    outcome, _ = _drive(page, step, lambda w, f: _graph_fragment("Before"))
    assert outcome.error == "the run finished without the result"
    # An error card in the fragment is an error.
    broken = lambda w, f: [_element([0, 3, 2], "exception", "G", message="boom")]  # noqa: E731
    outcome, _ = _drive(page, step, broken)
    assert outcome.error is not None and outcome.error.startswith("exception")


def test_autograd_all_ends_with_its_button_off() -> None:
    from bench import classroom_rooms as rooms

    page = _graph_fragment("Step 2 of 7")

    def press_all(student):
        return rooms.autograd_all(student, 0, deadline=time.monotonic() + 10)

    outcome, sent = _drive(page, press_all, lambda w, f: _graph_fragment("Step 7", at_end=True))
    assert outcome.error is None
    assert sent[0][0][0].id == "$$ID-abc-autograd_all"


def test_basics_switches_section_then_types_in_its_box() -> None:
    from streamlit.proto.ButtonGroup_pb2 import ButtonGroup

    from bench import classroom_rooms as rooms

    labels = ["Types", "Broadcasting", "einsum", "Indexing", "Saving"]
    picker = _element([0, 1], "button_group", id="$$ID-s-basics_section", default=[0],
                      options=[ButtonGroup.Option(content=label) for label in labels])  # fmt: skip
    types = [_element([0, 2, 0], "text_input", "T", id="$$ID-t-basics_left_value", value="100"),
             _element([0, 2, 1], "metric", "T", label="result", body="int8")]  # fmt: skip
    indexing = [_element([0, 2, 0], "text_input", "I", id="$$ID-i-basics_index", value="x"),
                _element([0, 2, 1], "html", "I", body="<svg/>")]  # fmt: skip
    catalog = tool.read_catalog(ROOT)

    def reply(widgets, fragment):
        (widget,) = widgets
        if widget.id.endswith("basics_section"):
            assert list(widget.string_array_value.data) == ["Indexing"]
            return [picker, *indexing]
        assert fragment == "I" and widget.string_value in rooms.INDEX_EXPRESSIONS
        return indexing

    async def pause() -> None:
        return None

    def act(student):
        return rooms.take_action(student, "basics", "indexing", 1, pick=0, photo=None,
                                 catalog=catalog, deadline=time.monotonic() + 10,
                                 pause=pause)  # fmt: skip

    outcomes, sent = _drive([picker, *types], act, reply)
    assert [(o.action, o.error) for o in outcomes] == [
        ("basics.section", None),
        ("basics.indexing", None),
    ]
    assert [fragment for _, fragment in sent] == ["", "I"]


def test_a_select_box_gets_another_option_than_the_one_shown() -> None:
    from bench import classroom_rooms as rooms

    student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
    student.handle(_element([0, 0], "selectbox", id="$$ID-p-modules_preset",
                             options=["a", "b", "c"], default=1))  # fmt: skip
    (menu,) = student.find(key="modules_preset")
    assert student.current_value(menu) == "b"
    assert {rooms.choose_option(["a", "b", "c"], "b", pick) for pick in range(6)} == {"a", "c"}
    # The server sets a new value (a callback changed it): the browser shows that one.
    student.handle(_element([0, 0], "selectbox", id="$$ID-p-modules_preset",
                             options=["a", "b", "c"], raw_value="c", set_value=True))  # fmt: skip
    (menu,) = student.find(key="modules_preset")
    assert student.current_value(menu) == "c"


def test_a_rerun_carries_every_drawn_widgets_state_as_the_browser_does() -> None:
    """The browser sends the state of every widget it shows with each rerun (defaults
    included) and forgets a widget once it is no longer drawn; a client that sent only the
    changed widget made the server lose values of widgets drawn again after a while."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    done = ForwardMsg.ScriptFinishedStatus

    async def scenario() -> list[dict[str, object]]:
        student = tool.Student("http://127.0.0.1:1", 0, pool=None)  # type: ignore[arg-type]
        sent: list[dict[str, object]] = []

        async def capture(message) -> None:
            parsed = BackMsg()
            parsed.ParseFromString(message.SerializeToString())
            widgets = parsed.rerun_script.widget_states.widgets
            sent.append({w.id: getattr(w, w.WhichOneof("value")) for w in widgets})

        student._send = capture  # type: ignore[method-assign]
        for message in (
            _element([0, 0], "text_input", "T", id="$$ID-a-left", default="100"),
            _element([0, 1], "text_input", "T", id="$$ID-a-right", default="1000"),
            _element([0, 2], "selectbox", "", id="$$ID-a-menu", options=["x", "y"]),  # none
            _button([0, 3], "press", ""),
        ):
            student.handle(message)
        student.handle(_finished(done.FINISHED_SUCCESSFULLY))
        (left,) = student.find(key="left")
        await student.send_rerun([classroom_rooms.widget_state(left, "-89")], fragment_id="T")
        # The next run draws only the right box: the left one's state is forgotten.
        student.handle(_element([0, 0], "text_input", "", id="$$ID-a-right", default="1000"))
        student.handle(_finished(done.FINISHED_SUCCESSFULLY))
        await student.send_rerun()
        await student.send_rerun(keep_page=False)  # a page change carries nothing
        return sent

    first, second, page_change = run_coroutine(scenario())
    assert first == {"$$ID-a-left": "-89", "$$ID-a-right": "1000"}
    assert second == {"$$ID-a-right": "1000"}
    assert page_change == {}


def test_each_student_is_a_machine_of_its_own_and_the_flooder_one_machine() -> None:
    """The server counts its limits per client (the peer address): thirty tabs from one
    address would be one laptop, not a class."""
    from bench.classroom_client import phone_address
    from bench.classroom_scenarios import FLOOD_ADDRESS

    phones = {phone_address(i) for i in range(200)}
    assert len(phones) == 200
    assert all(address.startswith("127.") for address in phones)
    assert FLOOD_ADDRESS not in phones and "127.0.0.1" not in phones
    assert phone_address(-1) == "127.0.0.1"  # the tool's own warm-up tabs


def test_flood_goals_compare_with_the_class_alone() -> None:
    from bench.classroom_report import flood_goals
    from bench.classroom_scenarios import FloodCount

    def outcomes(seconds: float) -> list:
        return [tool.Outcome("shapes.analyse", i, 0, seconds, None) for i in range(20)]

    result = tool.ModeResult(mode="flood", students=30, rounds=1)
    result.baseline_outcomes = outcomes(0.4)
    result.outcomes = outcomes(0.8)
    result.flood = FloodCount(sent=40, answered=40)
    assert flood_goals(result) == []  # 0.8 s ≤ 0.4 s + 0.5 s
    result.outcomes = outcomes(3.5)
    assert any("shapes.analyse" in line for line in flood_goals(result))
    result.outcomes, result.flood = outcomes(0.4), FloodCount(sent=400, answered=40, refused=38)
    assert any("no real flood" in line for line in flood_goals(result))
