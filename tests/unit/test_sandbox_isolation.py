"""Layer 3 on its own: a job running full Python (ctypes, raw syscalls) can affect no process
but itself — not the server, not the zygote, not the warm spare, not another running job.

The static allow-list and the facade are switched off through the pool's test-only hook, so
each job below runs real Python with ``ctypes``. It calls ``syscall(2)`` with raw x86_64
numbers (no glibc wrapper to check or narrow an argument), including arguments whose upper
32 bits are set, which a seccomp rule comparing 64-bit registers must not let through while
the kernel reads only the low 32 bits. Afterwards every victim must be alive, its limits, nice
value, I/O priority, scheduler and CPU affinity unchanged, and the next honest job must work.

Run as root (CI), the pool gives every child a uid of its own, so two layers stand in the way;
where root, each layer is also shown holding alone (seccomp with the job left as root; the
own uid with seccomp off). The server that matters most runs as an ordinary user, as on
Streamlit Cloud: then jobs share its uid and only seccomp stands between them.
:func:`test_a_non_root_server_is_out_of_reach` runs this module as a driver under another uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox_jobs import GOOD_MODEL, make_pool
from torchatlas.sandbox import SandboxPool, SandboxResult
from torchatlas.sandbox.worker import child_id

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
        reason="the attacks call syscalls by their x86_64 Linux numbers",
    ),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
BARE_PYTHON = ("static", "facade")  # full Python: builtins, real imports, ctypes
IS_ROOT = os.geteuid() == 0

# The attack, pasted as a model: it runs at job time (sandbox.call) with the targets' pids
# filled in. Every call returns its result or minus the errno. Pointers are built in the job.
ATTACK = r"""
import ctypes, os, time
from torchatlas.sandbox import protocol

TARGETS = __TARGETS__  # name -> [pid, signal to send]
GLOBAL_SIGNAL = __GLOBAL_SIGNAL__  # for kill(-1) and the socket owner (0: permission check only)
WHOLE_USER = __WHOLE_USER__  # also try calls that reach every process of the uid
LINGER_S = __LINGER_S__  # stay alive after the reply, so the server closes the socket first
UPPER = 1 << 32
JOB_SOCKET = 3
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def call(number, *args):
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_ulong(a % 2**64) for a in args))
    return result if result >= 0 else -ctypes.get_errno()


def address(value):
    return ctypes.addressof(value)


def against(pid, sig):
    try:
        group = os.getpgid(pid)
    except OSError:
        group = pid
    one_cpu = (ctypes.c_ulong * 16)(1)
    limit = (ctypes.c_ulonglong * 2)(1, 1)
    info = (ctypes.c_int * 32)(sig, 0, -1)  # si_signo, si_errno, si_code = SI_QUEUE
    param = ctypes.c_int(0)
    sched_attr = (ctypes.c_uint32 * 14)(56, 5)  # size, SCHED_IDLE
    remote = (ctypes.c_ulong * 2)(0, 16)  # address 0: EFAULT even if the call got through
    local = (ctypes.c_ulong * 2)(address(limit), 16)
    cap_header = (ctypes.c_uint32 * 2)(0x20080522, pid)
    cap_data = (ctypes.c_uint32 * 6)()
    robust = (ctypes.c_ulong * 2)()
    results = {
        "kill": call(62, pid, sig),
        "kill_upper_bits": call(62, pid + UPPER, sig),
        "kill_group": call(62, -group, sig),
        "tgkill": call(234, pid, pid, sig),
        "tgkill_upper_bits": call(234, pid + UPPER, pid, sig),
        "tkill": call(200, pid, sig),
        "rt_sigqueueinfo": call(129, pid, sig, address(info)),
        "rt_tgsigqueueinfo": call(297, pid, pid, sig, address(info)),
        "prlimit_cpu": call(302, pid, 0, address(limit), 0),
        "prlimit_as": call(302, pid, 9, address(limit), 0),
        "prlimit_nofile_upper_bits": call(302, pid + UPPER, 7, address(limit), 0),
        "setpriority": call(141, 0, pid, 19),
        "setpriority_upper_bits": call(141, UPPER, pid, 19),
        "setpriority_group": call(141, 1, group, 19),
        "sched_setaffinity": call(203, pid, 8, address(one_cpu)),
        "sched_setscheduler": call(144, pid, 5, address(param)),
        "sched_setparam": call(142, pid, address(param)),
        "sched_setattr": call(314, pid, address(sched_attr), 0),
        "ioprio_set": call(251, 1, pid, 3 << 13),
        "ptrace_seize": call(101, 0x4206, pid, 0, 0),
        "process_vm_readv": call(310, pid, address(local), 1, address(remote), 1, 0),
        "process_vm_writev": call(311, pid, address(local), 1, address(remote), 1, 0),
        "kcmp": call(312, os.getpid(), pid, 0, 0, 0),
        "migrate_pages": call(256, pid, 64, address(one_cpu), address(one_cpu)),
        "move_pages": call(279, pid, 0, 0, 0, 0, 0),
        "get_robust_list": call(274, pid, address(robust), address(robust) + 8),
        "capset": call(126, address(cap_header), address(cap_data)),
        "setpgid": call(109, pid, os.getpid()),
    }
    pidfd = call(434, pid, 0)
    results["pidfd_open"] = pidfd  # needs no permission by itself: what it allows does
    if pidfd >= 0:
        results["pidfd_send_signal"] = call(424, pidfd, sig, 0, 0)
        results["process_madvise"] = call(440, pidfd, address(local), 1, 8, 0)
        os.close(pidfd)
    return results


def everyone(server):
    owner = ctypes.c_int(server)
    owner_ex = (ctypes.c_int * 2)(1, server)  # F_OWNER_PID
    queue_name = ctypes.c_char_p(b"torchatlas-attack")
    flags = call(72, JOB_SOCKET, 3, 0)  # F_GETFL
    results = {
        # The socket to the server: make the kernel signal the server when it closes it.
        "o_async": call(72, JOB_SOCKET, 4, flags | 0o20000),  # F_SETFL: allowed, harmless
        "fcntl_setsig": call(72, JOB_SOCKET, 10, GLOBAL_SIGNAL),
        "fcntl_setsig_upper_bits": call(72, JOB_SOCKET, 10 + UPPER, GLOBAL_SIGNAL),
        "fcntl_setown": call(72, JOB_SOCKET, 8, server),
        "fcntl_setown_upper_bits": call(72, JOB_SOCKET, 8 + UPPER, server),
        "fcntl_setown_group": call(72, JOB_SOCKET, 8, -server),
        "fcntl_setown_ex": call(72, JOB_SOCKET, 15, address(owner_ex)),
        "fcntl_setlease": call(72, JOB_SOCKET, 1024, 1),
        "fcntl_notify": call(72, JOB_SOCKET, 1026, 0x80000000),
        "ioctl_fiosetown": call(16, JOB_SOCKET, 0x8901, address(owner)),
        "ioctl_fiosetown_upper_bits": call(16, JOB_SOCKET, 0x8901 + UPPER, address(owner)),
        "ioctl_siocspgrp": call(16, JOB_SOCKET, 0x8902, address(owner)),
        "ioctl_tiocspgrp": call(16, 0, 0x5410, address(owner)),
        "ioctl_tiocsti": call(16, 0, 0x5412, address(owner)),
        # What outlives the process and is shared by every process of the uid.
        "shmget": call(29, 0, 4096, 0o1600),
        "semget": call(64, 0, 1, 0o1600),
        "msgget": call(68, 0, 0o1600),
        "mq_open": call(240, ctypes.cast(queue_name, ctypes.c_void_p).value, 0o102, 0o600, 0),
        "inotify_init1": call(294, 0),
        "keyctl_join": call(250, 1, 0),  # KEYCTL_JOIN_SESSION_KEYRING
        "kill_everyone": call(62, -1, GLOBAL_SIGNAL),
        "kill_everyone_upper_bits": call(62, (1 << 64) - 1, GLOBAL_SIGNAL),
    }
    # Whatever got through is removed again: these would outlive the test.
    for key, number, args in (("shmget", 31, (0,)), ("semget", 66, (0, 0)), ("msgget", 71, (0,))):
        if results[key] >= 0:
            call(number, results[key], *args, 0)  # IPC_RMID
    if results["mq_open"] >= 0:
        call(241, ctypes.cast(queue_name, ctypes.c_void_p).value)
    if WHOLE_USER:
        results["setpriority_whole_user"] = call(141, 2, 0, 19)
        results["ioprio_set_whole_user"] = call(251, 3, 0, 3 << 13)
    return results


def attack():
    server = TARGETS["server"][0]
    results = {"everyone": everyone(server)}
    for name, (pid, sig) in TARGETS.items():
        results[name] = against(pid, sig)
    if not LINGER_S:
        return results
    # Answer the server directly, then stay: the server closes its end while this process
    # still holds the socket, which is when an owner set above would be signalled.
    os.write(JOB_SOCKET, protocol.encode({"ok": True, "value": {"result": results}}))
    time.sleep(LINGER_S)
    os._exit(0)
"""

# Results that are not attacks (allowed and harmless), or that say nothing without seccomp:
# calls on the job's own socket or its own uid's kernel objects, and kill(-1), which answers 0
# when it found processes even if it could signal none of them (the victims' state tells).
HARMLESS = {"o_async", "pidfd_open"}
ONLY_SECCOMP_STOPS = {
    "kill_everyone", "kill_everyone_upper_bits",
    "fcntl_setsig", "fcntl_setsig_upper_bits", "fcntl_setown", "fcntl_setown_upper_bits",
    "fcntl_setown_group", "fcntl_setown_ex", "fcntl_setlease", "fcntl_notify",
    "ioctl_fiosetown", "ioctl_fiosetown_upper_bits", "ioctl_siocspgrp", "ioctl_tiocspgrp",
    "ioctl_tiocsti", "shmget", "semget", "msgget", "mq_open", "inotify_init1", "keyctl_join",
}  # fmt: skip


def attack_source(
    targets: dict[str, tuple[int, int]],
    *,
    global_signal: int,
    whole_user: bool,
    linger_s: float,
) -> str:
    return (
        ATTACK.replace(
            "__TARGETS__",
            repr({name: [int(pid), int(sig)] for name, (pid, sig) in targets.items()}),
        )
        .replace("__GLOBAL_SIGNAL__", str(int(global_signal)))
        .replace("__WHOLE_USER__", repr(whole_user))
        .replace("__LINGER_S__", repr(linger_s))
    )


def failed_attacks(results: dict[str, dict[str, int]], *, seccomp: bool) -> list[str]:
    """Every attack that did not fail (with seccomp: that the filter did not answer EPERM)."""
    through = []
    for target, calls in results.items():
        for name, result in calls.items():
            if name in HARMLESS or (not seccomp and name in ONLY_SECCOMP_STOPS):
                continue
            if (result != -errno.EPERM) if seccomp else (result >= 0):
                through.append(f"{target}.{name} = {result}")
    return through


# ------------------------------------------------------------------ observing the victims
def _ioprio(pid: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(252, 1, pid))  # ioprio_get(IOPRIO_WHO_PROCESS, pid)


def snapshot(pid: int) -> dict[str, Any]:
    """What a job could change in another process: limits, nice, scheduler, affinity, I/O."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return {
        "state": fields[0],
        "limits": Path(f"/proc/{pid}/limits").read_text(),
        "nice": int(fields[16]),
        "policy": int(fields[38]),
        "rt_priority": int(fields[37]),
        "affinity": sorted(os.sched_getaffinity(pid)),
        "ioprio": _ioprio(pid),
    }


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def changes(before: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The victims that died or changed since ``before`` was taken."""
    found: dict[str, Any] = {}
    for name, old in before.items():
        pid = old["pid"]
        if not alive(pid):
            found[name] = "gone"
            continue
        new = {"pid": pid, **snapshot(pid)}
        diff = {key: (old[key], new[key]) for key in old if key != "state" and old[key] != new[key]}
        if diff:
            found[name] = diff
    return found


# ------------------------------------------------------------------ pool helpers
USED: set[int] = set()  # pids that took a job here: once a spare, never the spare again


def ready_spare(pool: SandboxPool, not_one_of: set[int]) -> int:
    """The zygote's spare once it says it is warm, and not one of ``not_one_of``."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        spare = pool._zygote.last_spare_pid
        if spare is not None and spare not in not_one_of | USED and alive(spare):
            return spare
        time.sleep(0.01)
    raise AssertionError("no new warm spare")


@contextlib.contextmanager
def running_job(pool: SandboxPool, seconds: float) -> Iterator[tuple[int, dict[str, Any]]]:
    """A honest job that took the warm spare and sleeps: its pid, and its result once done."""
    spare = ready_spare(pool, set())
    USED.add(spare)
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = pool.run_job(
            GOOD_MODEL, "sandbox.sleep", {"seconds": seconds}, timeout_s=seconds + 30
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while pool._zygote.last_spare_pid == spare and time.monotonic() < deadline:
            time.sleep(0.01)  # the spare took the job; the zygote forked the next one
        yield spare, outcome
    finally:
        thread.join(seconds + 40)


def honest_job(pool: SandboxPool) -> SandboxResult:
    """A small honest job; the pid it ran in is remembered (see :data:`USED`)."""
    result = pool.run_job(GOOD_MODEL, "sandbox.echo", {})
    if result.ok:
        USED.add(result.value["pid"])
    return result


def run_attacks(
    pool: SandboxPool,
    *,
    layers_off: tuple[str, ...],
    server_signal: int,
    global_signal: int,
    whole_user: bool,
    linger_s: float,
) -> dict[str, Any]:
    """Attack the server (this process), the zygote, the spare and a running job; report the
    calls' results, what changed in the victims, and whether honest jobs still work."""
    zygote = pool._zygote.process.pid
    with running_job(pool, seconds=linger_s + 4) as (job, outcome):
        spare = ready_spare(pool, {job})
        targets = {
            "server": (os.getpid(), server_signal),
            "zygote": (zygote, signal.SIGKILL),
            "spare": (spare, signal.SIGKILL),
            "job": (job, signal.SIGKILL),
        }
        before = {name: {"pid": pid, **snapshot(pid)} for name, (pid, _) in targets.items()}
        source = attack_source(
            targets, global_signal=global_signal, whole_user=whole_user, linger_s=linger_s
        )
        result = pool.run_job(source, "sandbox.call", {"name": "attack"}, layers_off=layers_off)
        time.sleep(linger_s + 0.5)  # the attacker has exited; any signal it arranged is due
        changed = changes(before)
    report = {
        "attack_ok": result.ok,
        "attack_error": result.error.message if result.error else None,
        "results": result.value["result"] if result.ok else {},
        "changed": changed,
        "running_job_ok": bool(outcome.get("result") and outcome["result"].ok),
    }
    # The spare was not touched: its own check at hand-over agrees, and it takes the next job.
    follow = honest_job(pool)
    report["next_job_ok"] = follow.ok and follow.value["classes"] == ["Net"]
    report["next_job_in_spare"] = follow.ok and follow.value["pid"] == spare
    return report


# ------------------------------------------------------------------ in this process (root in CI)
class _Recorder:
    """Signals that reach this process (the server) instead of killing it."""

    def __init__(self, signals: tuple[int, ...]) -> None:
        self.signals = signals
        self.received: list[int] = []
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Recorder:
        for number in self.signals:
            self.previous[number] = signal.signal(number, self._record)
        return self

    def _record(self, number: int, frame: Any) -> None:
        self.received.append(number)

    def __exit__(self, *exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    sandbox = make_pool(test_hooks=True, rate_limit=0, concurrency=3, memory_mb=512)
    try:
        sandbox.warm_up()
        yield sandbox
    finally:
        sandbox.shutdown()


LAYER_SETS = [
    pytest.param(BARE_PYTHON, True, id="every-process-layer"),
    pytest.param(
        (*BARE_PYTHON, "privileges"),
        True,
        id="seccomp-alone-job-as-root",
        marks=pytest.mark.skipif(not IS_ROOT, reason="the job is left as root: needs root"),
    ),
    pytest.param(
        (*BARE_PYTHON, "seccomp"),
        False,
        id="own-uid-alone",
        marks=pytest.mark.skipif(not IS_ROOT, reason="a uid per child needs a root server"),
    ),
]


@pytest.mark.parametrize(("layers_off", "seccomp"), LAYER_SETS)
def test_a_job_reaches_no_other_process(
    pool: SandboxPool, layers_off: tuple[str, ...], seccomp: bool
) -> None:
    """The server is this test process: signals that would kill it are recorded instead (if
    the layers failed, SIGUSR2/SIGIO would arrive here). kill(-1) and F_SETSIG use signal 0
    or SIGUSR2 so that a failure here cannot reach processes outside this test."""
    zygote = pool._zygote.process.pid
    with _Recorder((signal.SIGUSR2, signal.SIGIO)) as recorder:
        report = run_attacks(
            pool,
            layers_off=layers_off,
            server_signal=signal.SIGUSR2,
            global_signal=0 if "privileges" in layers_off else signal.SIGUSR2,
            whole_user=False,
            linger_s=1.0,
        )
    assert report["attack_ok"], report["attack_error"]
    assert failed_attacks(report["results"], seccomp=seccomp) == []
    assert report["changed"] == {}
    assert recorder.received == []
    assert report["running_job_ok"]
    assert report["next_job_ok"] and report["next_job_in_spare"]
    assert pool._zygote.process.pid == zygote and pool._zygote.alive()


def test_each_child_has_a_uid_of_its_own(pool: SandboxPool) -> None:
    if not IS_ROOT:
        pytest.skip("only a root server can give its children other uids")
    seen = {}
    for _ in range(3):
        result = honest_job(pool)
        assert result.ok, result.error
        seen[result.value["pid"]] = result.value["uid"]
    result = pool.run_job(GOOD_MODEL, "sandbox.echo", {}, layers_off=("static",))  # fresh fork
    seen[result.value["pid"]] = result.value["uid"]
    assert all(uid == child_id(pid) for pid, uid in seen.items()), seen
    assert len(set(seen.values())) == len(seen)
    probe = pool._zygote.info["probe"]
    assert probe["uid_per_child"] and probe["others_unreachable"], probe
    assert isinstance(probe["unprivileged_user_namespaces"], bool)


# i386 kill(pid, sig) through int 0x80 from 64-bit code (push rbx; mov eax, 37; mov ebx, pid;
# mov ecx, sig; int 0x80; pop rbx; ret): a filter written for x86_64 numbers must not let
# another architecture's calling convention through.
FOREIGN_ARCHITECTURE = r"""
import ctypes, mmap, struct

def attack():
    code = (b"\x53\xb8\x25\x00\x00\x00\xbb" + struct.pack("<i", __PID__) + b"\xb9"
            + struct.pack("<i", __SIGNAL__) + b"\xcd\x80\x5b\xc3")
    memory = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    memory.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()
"""


@pytest.mark.skipif(not IS_ROOT, reason="the job is left as root: needs root")
def test_another_architectures_syscalls_end_the_job(pool: SandboxPool) -> None:
    """A root job (privileges off: only seccomp stands in the way) calls i386 kill on this
    process: the filter ends the job instead of letting the call through."""
    source = FOREIGN_ARCHITECTURE.replace("__PID__", str(os.getpid())).replace(
        "__SIGNAL__", str(int(signal.SIGUSR2))
    )
    with _Recorder((signal.SIGUSR2,)) as recorder:
        result = pool.run_job(
            source, "sandbox.call", {"name": "attack"}, layers_off=(*BARE_PYTHON, "privileges")
        )
        time.sleep(0.3)
    assert not result.ok and result.error.kind == "crashed", result
    assert "SIGSYS" in result.error.message
    assert recorder.received == []
    assert honest_job(pool).ok


# ------------------------------------------------------------------ the spare's own check
CHANGE_THE_SPARE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def call(number, *args):
    return libc.syscall(ctypes.c_long(number), *(ctypes.c_ulong(a % 2**64) for a in args))


def attack():
    pid = __SPARE__
    how = "__HOW__"
    if how == "rlimit":
        limit = (ctypes.c_ulonglong * 2)(64 << 20, 64 << 20)  # RLIMIT_AS: too small for a job
        result = call(302, pid, 9, ctypes.addressof(limit), 0)
    elif how == "nice":
        result = call(141, 0, pid, 19)
    elif how == "affinity":
        one_cpu = (ctypes.c_ulong * 16)(1)
        result = call(203, pid, 128, ctypes.addressof(one_cpu))
    elif how == "scheduler":
        param = ctypes.c_int(0)
        result = call(144, pid, 5, ctypes.addressof(param))  # SCHED_IDLE
    else:
        result = call(251, 1, pid, 3 << 13)  # ioprio: idle class
    return [result, ctypes.get_errno()]
"""


@pytest.mark.parametrize("how", ["rlimit", "nice", "affinity", "scheduler", "ioprio"])
def test_a_changed_spare_refuses_its_job(pool: SandboxPool, how: str) -> None:
    """With every layer off, a job (test hook only) really changes the waiting spare; the
    spare notices at hand-over and exits, and the job it was meant for still succeeds in a
    fresh child."""
    if how == "affinity" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no smaller affinity to set")
    spare = ready_spare(pool, set())
    before = snapshot(spare)
    source = CHANGE_THE_SPARE.replace("__SPARE__", str(spare)).replace("__HOW__", how)
    everything_off = ("static", "facade", "seccomp", "privileges")
    result = pool.run_job(source, "sandbox.call", {"name": "attack"}, layers_off=everything_off)
    assert result.ok, result.error
    if how == "rlimit" and result.value["result"] == [-1, errno.EPERM]:
        # Some containers keep CAP_SYS_RESOURCE out of root's bounding set; the non-root
        # test changes the spare's limits as its own uid instead.
        pytest.skip("root here lacks CAP_SYS_RESOURCE: it cannot change another uid's limits")
    assert result.value["result"][0] == 0, result  # the change was made
    assert snapshot(spare) != before
    follow = honest_job(pool)
    assert follow.ok, follow.error
    assert follow.value["classes"] == ["Net"] and follow.value["pid"] != spare
    deadline = time.monotonic() + 5
    while alive(spare) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(spare)  # it refused the job and exited
    assert honest_job(pool).ok


# ------------------------------------------------------------------ a server that is not root
def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(entry.name))
                        break
    return found


def _unused_uid() -> int:
    for uid in range(47_100, 47_200):
        if not _processes_of(uid):
            return uid
    raise AssertionError("no unused uid between 47100 and 47200")


def test_a_non_root_server_is_out_of_reach() -> None:
    """The server-side pool runs as an unprivileged uid, as on Streamlit Cloud: the server,
    its zygote, the spare and every job share that uid, so only seccomp stands between them.

    The driver (this module run with ``--driver``) is started through ``setpriv`` with a new
    uid and gid, no groups and one capability, CAP_DAC_READ_SEARCH, held in the ambient set:
    the interpreter and its packages live under /root (mode 700), which an ordinary user
    could not read at all. That capability bypasses file read and directory search
    permission only. Signals (kill and friends: same uid or CAP_KILL), limits (prlimit:
    same uid or CAP_SYS_RESOURCE), priorities and affinity (same uid or CAP_SYS_NICE),
    ptrace and process_vm_* (same uid and PTRACE_MODE checks or CAP_SYS_PTRACE) check uids
    and other capabilities, none of which the driver holds, so what is shown here is what a
    plain non-root server gets. The children drop it anyway (the probe's ``no_capabilities``).

    The driver attacks with lethal signals (SIGKILL to the driver, the zygote, the spare and
    a running job, kill(-1, SIGKILL), F_SETSIG SIGKILL + F_SETOWN + O_ASYNC on the job's
    socket), the calls that reach the whole uid (setpriority and ioprio_set on PRIO_USER), and
    a job that changes the spare with seccomp off (test hook), and prints a JSON report.
    """
    if not IS_ROOT:
        pytest.skip("needs root to start the driver as another, unprivileged uid")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    uid = _unused_uid()
    command = [
        setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
        sys.executable, "-m", "tests.unit.test_sandbox_isolation", "--driver",
    ]  # fmt: skip
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }
    try:
        done = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        leftover = _processes_of(uid)
    finally:
        for pid in _processes_of(uid):  # only processes of this test's own, unused uid
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == uid and report["euid"] == uid
    assert report["probe"]["seccomp"] and report["probe"]["others_unreachable"], report["probe"]
    assert report["probe"]["no_capabilities"] and not report["probe"]["uid_per_child"]
    attacks = report["attacks"]
    assert attacks["attack_ok"], attacks["attack_error"]
    assert failed_attacks(attacks["results"], seccomp=True) == []
    assert {"server", "zygote", "spare", "job", "everyone"} <= set(attacks["results"])
    assert "setpriority_whole_user" in attacks["results"]["everyone"]
    assert attacks["changed"] == {}
    assert attacks["running_job_ok"]
    assert attacks["next_job_ok"] and attacks["next_job_in_spare"]
    assert report["changed_spare"] == {"changed": True, "refused": True, "next_job_ok": True}
    assert report["leftover"] == [] and leftover == []


def driver() -> dict[str, Any]:
    """The non-root server: a pool of its own, attacked by its jobs; returns the report."""
    report: dict[str, Any] = {"uid": os.getuid(), "euid": os.geteuid()}
    pool = make_pool(test_hooks=True, rate_limit=0, concurrency=3, memory_mb=512)
    try:
        pool.warm_up()
        report["probe"] = pool._zygote.info.get("probe", {})
        report["attacks"] = run_attacks(
            pool,
            layers_off=BARE_PYTHON,
            server_signal=signal.SIGKILL,
            global_signal=signal.SIGKILL,
            whole_user=True,
            linger_s=1.0,
        )
        # Seccomp off (test hook): a job of the same uid really can change the spare; the
        # spare refuses its next job, which runs in a fresh child instead.
        spare = ready_spare(pool, set())
        before = snapshot(spare)
        source = CHANGE_THE_SPARE.replace("__SPARE__", str(spare)).replace("__HOW__", "rlimit")
        pool.run_job(
            source, "sandbox.call", {"name": "attack"}, layers_off=(*BARE_PYTHON, "seccomp")
        )
        changed = alive(spare) and snapshot(spare) != before
        follow = honest_job(pool)
        time.sleep(0.5)
        report["changed_spare"] = {
            "changed": changed,
            "refused": not alive(spare) and follow.ok and follow.value.get("pid") != spare,
            "next_job_ok": follow.ok,
        }
    finally:
        pool.shutdown()
    deadline = time.monotonic() + 10
    while (others := [pid for pid in _processes_of(os.getuid()) if pid != os.getpid()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    report["leftover"] = others
    return report


if __name__ == "__main__" and "--driver" in sys.argv:
    print(json.dumps(driver()))
