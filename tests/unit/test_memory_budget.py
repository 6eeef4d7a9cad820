"""bench/memory_budget.py's parts: sizes, finding this process's cgroups, a memory cgroup's
figures (v1 and v2 files), the scenario tools' reports read into a verdict, and, where this
machine lets a test make a memory cgroup, the cap itself killing a process over it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import bench.classroom
from bench.memory_budget import (
    MB,
    Budget,
    Hierarchy,
    MemoryCgroup,
    ToolFigures,
    class_figures,
    classroom_figures,
    keyed,
    make_cgroup,
    own_hierarchies,
    parse_size,
    read_text,
    servers_in,
    tool_json,
)
from bench.server import Server

# A hybrid host (this repository's development machine): v1 controllers, v2 without memory.
HYBRID_CGROUP = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
HYBRID_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
# A container with cgroup v2 only, its own sub-tree mounted as the root.
V2_CGROUP = "0::/kubepods/pod1/app\n"
V2_MOUNTS = "29 22 0:26 /kubepods/pod1 /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.mark.parametrize(
    ("text", "size"),
    [("2.7G", 2_700_000_000), ("690M", 690_000_000), ("2Gi", 2 * 1024**3),
     ("512MiB", 512 * 1024**2), ("1000", 1000), (" 1.5 gb ", 1_500_000_000)],
)  # fmt: skip
def test_sizes_read_as_cloud_states_them(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "2.7X", "-1G", "two"])
def test_a_size_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_a_hybrid_host_offers_the_v1_memory_controller_after_the_v2_tree() -> None:
    assert own_hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS) == [
        Hierarchy(2, Path("/sys/fs/cgroup/unified")),
        Hierarchy(1, Path("/sys/fs/cgroup/memory/process_api/abc")),
    ]


def test_a_containers_own_subtree_is_not_named_twice() -> None:
    assert own_hierarchies(V2_CGROUP, V2_MOUNTS) == [Hierarchy(2, Path("/sys/fs/cgroup/app"))]


def test_no_cgroup_mounted_means_no_hierarchy() -> None:
    assert own_hierarchies(HYBRID_CGROUP, "22 1 0:5 / /proc rw - proc proc rw\n") == []


def test_keyed_files_are_read_by_key() -> None:
    events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n"
    assert keyed(events, "max") == 12 and keyed(events, "oom_kill") == 1
    assert keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill") == 3
    assert keyed(events, "absent") is None


def fake_cgroup(path: Path, version: int, files: dict[str, str]) -> MemoryCgroup:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return MemoryCgroup(version, path, 2_700_000_000)


def test_v1_figures(tmp_path: Path) -> None:
    group = fake_cgroup(tmp_path / "v1", 1, {
        "memory.max_usage_in_bytes": "1234567890\n", "memory.failcnt": "7\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        "cgroup.procs": "10\n11\n", "memory.usage_in_bytes": "5\n",
    })  # fmt: skip
    assert (group.peak(), group.limit_hits(), group.oom_kills()) == (1234567890, 7, 2)
    assert group.pids() == [10, 11] and group.limit_file == "memory.limit_in_bytes"
    group.add(12)  # the kernel moves the process; the file here just keeps what was written
    assert read_text(group.path / "cgroup.procs") == "12"
    assert group.remove(attempts=1) is False  # a folder with files in it is not empty


def test_v2_figures_fall_back_to_the_sampled_peak(tmp_path: Path) -> None:
    group = fake_cgroup(tmp_path / "v2", 2, {
        "memory.current": "900\n", "memory.events": "low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n",
    })  # fmt: skip
    assert group.peak() is None  # no memory.peak (kernels before 5.19), nothing sampled yet
    group.sampled_peak = 1000
    assert (group.peak(), group.limit_hits(), group.oom_kills()) == (1000, 3, 0)
    (group.path / "memory.peak").write_text("1500\n")
    assert group.peak() == 1500 and group.limit_file == "memory.max"


def test_a_folder_without_a_memory_controller_is_passed_over_and_left_clean(
    tmp_path: Path,
) -> None:
    """A plain folder (a tmpfs, no permission to a real cgroup) makes a folder without the
    controller's files: no cgroup, a note why, and nothing left behind."""
    group, notes = make_cgroup(2 * 10**9, [Hierarchy(1, tmp_path)], "atlas-budget-test")
    assert group is None and len(notes) == 1 and "no memory controller" in notes[0]
    assert list(tmp_path.iterdir()) == []
    group, notes = make_cgroup(2 * 10**9, [Hierarchy(2, tmp_path / "absent")], "x")
    assert group is None and "No such file" in notes[0]


def test_the_tools_start_their_server_in_the_cgroup_only_within_the_block(
    tmp_path: Path,
) -> None:
    group = MemoryCgroup(1, tmp_path, 10**9)
    with servers_in(group, ["bench.classroom"]):
        replaced = bench.classroom.Server
        assert replaced is not Server and issubclass(replaced, Server)
    assert bench.classroom.Server is Server
    with servers_in(None, ["bench.classroom"]):  # no cgroup: nothing changes
        assert bench.classroom.Server is Server


def test_the_wrapper_reads_the_tools_json_or_its_own() -> None:
    args, path = tool_json(["--students", "60"], Path("/tmp/x"))
    assert args == ["--students", "60", "--json", "/tmp/x/tool.json"]
    assert path == Path("/tmp/x/tool.json")
    assert tool_json(["--json", "/a.json"], Path("/t")) == (["--json", "/a.json"], Path("/a.json"))


def test_classroom_report_errors_count_every_failure() -> None:
    report = {"modes": [{
        "mode": "mixed", "aborted": None, "server_tracebacks": 1,
        "memory_bytes": {"peak": 1_500_000_000},
        "first_visit": {"shapes": {"error": None}, "classify": {"error": "timeout"}},
        "outcomes": [{"error": None}, {"error": "busy"}, {"error": None}],
    }]}  # fmt: skip
    figures = classroom_figures(report)
    assert figures.errors == 3 and figures.pss_peak == 1_500_000_000 and not figures.aborted
    assert classroom_figures({"modes": []}).aborted == ["no mode was measured"]


def test_class_report() -> None:
    figures = class_figures({"errors": ["step 2: x"], "aborted": None, "peak_pss": 1_100_000_000})
    assert (figures.errors, figures.pss_peak, figures.aborted) == (1, 1_100_000_000, [])


def budget(**changes: object) -> Budget:
    fields: dict[str, object] = {
        "scenario": "class", "command": "c", "limit": 2_700 * MB, "enforced_by": "cgroup v1",
        "tool_exit": 0, "tool": ToolFigures(pss_peak=1_200 * MB), "cgroup_peak": 1_000 * MB,
        "limit_hits": 0, "oom_kills": 0,
    }  # fmt: skip
    return Budget(**(fields | changes))  # type: ignore[arg-type]


def test_the_verdict() -> None:
    assert budget().problems() == [] and budget().exit_code() == 0
    assert budget().peak == 1_000 * MB  # the cgroup's own count, where there is one
    assert budget(cgroup_peak=None, enforced_by=None).peak == 1_200 * MB  # else the PSS
    assert budget(oom_kills=1).exit_code() == 1
    assert budget(tool=ToolFigures(errors=2, first_errors=["x"], pss_peak=1)).exit_code() == 1
    assert budget(cgroup_peak=None, tool=ToolFigures(pss_peak=3_000 * MB)).exit_code() == 1
    assert budget(tool=ToolFigures(aborted=["killed"])).exit_code() == 2
    assert budget(cgroup_peak=None, tool=ToolFigures()).exit_code() == 2


def this_machines_hierarchies() -> list[Hierarchy]:
    return own_hierarchies(
        read_text(Path("/proc/self/cgroup")) or "", read_text(Path("/proc/self/mountinfo")) or ""
    )


def test_a_real_cgroup_caps_a_process(tmp_path: Path) -> None:
    """Where this machine allows a memory cgroup (root, a writable v1 or v2 memory
    controller): a child that allocates 300 MB under a 100 MB cap is killed, and the
    cgroup's figures say so."""
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root here")
    name = f"atlas-test-{os.getpid()}"
    group, notes = make_cgroup(100 * MB, this_machines_hierarchies(), name, enable_controller=False)
    if group is None:
        pytest.skip(f"no memory cgroup on this machine: {notes}")
    try:
        hog = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read(); b = bytearray(300_000_000)"],
            stdin=subprocess.PIPE,
        )
        group.add(hog.pid)
        assert hog.pid in group.pids()
        assert hog.stdin is not None
        hog.stdin.close()  # now it allocates
        assert hog.wait(timeout=30) == -9
        assert group.oom_kills() == 1
        peak = group.peak()
        assert peak is not None and 90 * MB <= peak <= 101 * MB
    finally:
        assert group.remove()
