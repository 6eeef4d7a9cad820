"""The heartbeat the hostile-link tests measure other sessions' stalls with
(tests/app/hostile.py): it catches work that holds the GIL, and not a machine that ran other
processes instead of this one."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

from tests.app.hostile import MAX_STALL_S, Heartbeat


def test_work_that_holds_the_gil_is_a_stall() -> None:
    with Heartbeat() as beat:
        time.sleep(0.05)  # the beat is running
        started = time.perf_counter()
        sum(range(30_000_000))  # one call into C that keeps the GIL all along (about 1 s)
        held = time.perf_counter() - started
    assert beat.worst_stall_s > held / 2


def test_a_process_the_machine_left_waiting_is_not_a_stall() -> None:
    # Another process stops this one for twice the bar, then lets it go on (what a loaded
    # machine does to a process, in the extreme). It is started before the beat and waits
    # for a byte, so starting it is not in the measurement.
    stopper = subprocess.Popen(
        [sys.executable, "-c",
         f"import os, signal, sys, time\nsys.stdin.read(1)\n"
         f"os.kill({os.getpid()}, signal.SIGSTOP)\n"
         f"try:\n    time.sleep({2 * MAX_STALL_S})\n"
         f"finally:\n    os.kill({os.getpid()}, signal.SIGCONT)"],
        stdin=subprocess.PIPE,
    )  # fmt: skip
    assert stopper.stdin is not None
    gc.collect()
    with Heartbeat() as beat:
        time.sleep(0.05)
        stopper.stdin.write(b"x")
        stopper.stdin.close()
        stopper.wait()
        time.sleep(0.05)
    assert beat.worst_stall_s < MAX_STALL_S / 2
