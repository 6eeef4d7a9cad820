"""Layer 3, inside the worker: confine a freshly forked child, then run one job in it.

This layer must hold on its own, as if the job already ran full Python (``ctypes`` included),
whether the server runs as root or, as on most hosts, as an ordinary user: a job can affect no
process but its own. What defends what (a child is forked from the zygote for each job and never
reused):
- ``setsid``: the child leads its own process group, so a timeout kills everything it made.
- scrubbed environment: the zygote already started with a whitelist; the child clears it again.
  Secrets in the *server's* environment stay readable via ``/proc/<server pid>/environ`` to any
  process of the same user, which is why the next layers matter.
- a user of its own: when the server runs as root, each child switches to a uid and gid derived
  from its pid (``CHILD_UID_BASE + pid``), unique among live processes, so the kernel's own
  checks (signals, rlimits, priorities, ``/proc/<pid>/environ``, ``/proc/<pid>/mem``) keep it
  from the server, the zygote, the spare and every other job even without seccomp. A child of a
  server that is not root keeps the server's uid and drops every capability it inherited.
  ``PR_SET_DUMPABLE=0`` hides its memory; the parent-death signal is armed after the uid change
  (the kernel clears it on every change of credentials).
- rlimits: address space (current + budget, set after torch is imported), CPU seconds, file
  size 0 (no file can grow), few open files, no new processes, no core dumps, few pending
  signals and no message-queue bytes (both are counted per user, across processes).
- seccomp, closing everything that reaches beyond the process:
  * files: no ``open``/``openat`` at all (everything the job needs was imported by the zygote;
    this closes ``/proc/*/environ``, secrets files and ``/proc/self/mem``) and no call that
    changes a file by its path (chmod in all its forms, times, xattrs, links, renames);
  * no sockets, no ``execve``, no new processes (``clone`` only with ``CLONE_THREAD``);
  * every call that takes a pid, a process group, a uid or a file owner is denied or pinned to
    this process: signals (``kill``/``tgkill``/``rt_*sigqueueinfo`` only to its own pid;
    ``tkill``, ``pidfd_*`` denied), ``prlimit64`` and ``sched_set*`` only with pid 0 (glibc's
    ``setrlimit``/``getrlimit`` pass 0), ``setpriority`` only ``PRIO_PROCESS`` with who 0,
    ``fcntl`` ``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG``/``F_SETLEASE``/``F_NOTIFY`` and
    ``ioctl`` ``FIOSETOWN``/``SIOCSPGRP``/``TIOCSPGRP`` (which make the kernel signal an
    owner) denied, ``ptrace``, ``process_vm_*``, ``kcmp``, ``ioprio_set``, ``migrate_pages``,
    ``move_pages``, ``process_madvise``, ``setpgid``, ``capset`` denied;
  * what outlives the process or is shared by a user: SysV IPC, POSIX message queues, keyrings,
    inotify/fanotify watches, mounts (old and new API), namespaces, BPF, io_uring.
  Comparisons are written so that a 64-bit register cannot slip past a kernel that reads only
  32 bits: pids are *allowed only if equal* (denied when not equal, upper bits included), and
  ``fcntl``/``ioctl`` commands are compared on their low 32 bits. Syscalls this libseccomp does
  not name yet are added by their number. Other architectures' calling conventions (i386
  ``int 0x80``) kill the process.
- the spare: a child forked and confined before its job exists checks, when the job arrives,
  that its uid, limits, priority, affinity, scheduler and signal state are still what it set;
  if anything changed it refuses the job and exits, and the zygote forks a fresh child instead.
- an empty temporary working directory, and results as size-capped JSON on an inherited socket.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import dataclasses
import errno
import functools
import io
import json
import os
import platform
import resource
import select
import signal
import socket
import sys
import tempfile
import traceback
from collections.abc import Mapping
from typing import Any

from torchatlas.errors import exception_words
from torchatlas.sandbox import protocol
from torchatlas.sandbox.codec import EngineReply
from torchatlas.sandbox.facade import USER_MODULE_NAME, capability_namespace, text_guard
from torchatlas.sandbox.jobs import Job
from torchatlas.sandbox.policy import (
    MAX_SOURCE_CHARS,
    check_source,
    compile_model,
    syntax_refusal,
)

USER_FILENAME = "<pasted model>"
MAX_REQUEST_BYTES = 1 << 20
MAX_RESULT_BYTES = 8 << 20
# The address space an engine's reply needs free before orjson writes it, in reply limits:
# orjson grows its buffer by doubling, and the frame is one more copy.
REPLY_ROOM_FACTOR = 4
DEFAULT_MEMORY_MB = 1024
KEPT_ENVIRONMENT = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1"}
NOBODY = 65534  # only where the ids below cannot be used (a user namespace that maps few)
# A child of a root server becomes uid = gid = CHILD_UID_BASE + its pid: pids are unique among
# live processes and at most 2**22, so no two live children (nor anything else) share an id.
CHILD_UID_BASE = 2_000_000_000
JOB_FD = 3
JOB_PENDING_SIGNALS = 64

PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE = 1, 2, 3, 4
PR_GET_SECCOMP, PR_GET_TIMERSLACK, PR_GET_NO_NEW_PRIVS = 21, 30, 39
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CLONE_THREAD = 0x00010000

# The jobs this process may run, by name: the zygote fills it from what the pool registered
# before it forks any child (use_jobs), so every child inherits it and imports nothing.
_JOBS: dict[str, Job] = {}


def use_jobs(jobs: Mapping[str, Job]) -> None:
    """Make ``jobs`` the registry :func:`execute` looks job names up in (replacing it)."""
    _JOBS.clear()
    _JOBS.update(jobs)


# What a spare child answers the zygote when a job is handed to it (see spare_main).
SPARE_ACCEPTED = b"accepted"
SPARE_TAINTED = b"tainted"
EXIT_TAINTED = 72

# Layers a test may switch off to show that the others hold on their own (never the page).
TEST_LAYERS = frozenset({"static", "facade", "seccomp", "privileges"})

DENIED_SYSCALLS = (
    # files: nothing can be opened, created, renamed, removed or changed by its path
    "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "symlink",
    "symlinkat", "link", "linkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
    "fchown", "lchown", "fchownat", "truncate", "ftruncate", "mknod", "mknodat",
    "memfd_create", "chroot", "utime", "utimes", "utimensat", "futimesat", "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat",
    "removexattrat", "file_setattr", "uselib", "inotify_init", "inotify_init1",
    "inotify_add_watch", "fanotify_init", "fanotify_mark",
    # network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # programs, and other processes named by a pid or a pidfd
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill", "kcmp", "ioprio_set",
    "migrate_pages", "move_pages", "process_madvise", "process_mrelease", "setpgid",
    "get_robust_list", "capset",
    # shared by every process of a user, and they outlive the process
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr", "keyctl", "add_key", "request_key",
    # mounts and namespaces (old and new API)
    "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "open_tree_attr", "mount_setattr", "statmount", "listmount", "listns",
    "unshare", "setns",
    # kernel surfaces a model never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "personality", "quotactl",
    "quotactl_fd", "swapon", "swapoff", "reboot", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "acct", "settimeofday", "clock_settime",
    "sethostname", "setdomainname", "syslog", "lookup_dcookie", "vhangup", "nfsservctl",
)  # fmt: skip

# Numbers of syscalls newer than some libseccomp releases: since Linux 5.1 a new syscall gets
# the same number on x86_64, arm64 and the other architectures with the generic table.
NEWER_SYSCALLS = {
    "fchmodat2": 452, "statmount": 457, "listmount": 458, "setxattrat": 463,
    "removexattrat": 466, "open_tree_attr": 467, "file_setattr": 469, "listns": 470,
}  # fmt: skip
GENERIC_NUMBERING = frozenset({"x86_64", "aarch64", "arm64", "riscv64"})

# Signals: the first argument (a pid, or the thread group of a thread) must be this process.
SIGNAL_SYSCALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# These argument positions must be 0 ("this process"): a pid, or for setpriority which=
# PRIO_PROCESS and who=0 (PRIO_PGRP and PRIO_USER reach every process of a group or a user).
ZERO_ARGUMENTS = {
    "prlimit64": (0,), "setpriority": (0, 1), "sched_setaffinity": (0,),
    "sched_setscheduler": (0,), "sched_setparam": (0,), "sched_setattr": (0,),
}  # fmt: skip
# fcntl commands that name a process to signal (F_SETOWN, F_SETSIG, F_SETOWN_EX) or make the
# kernel signal the file's owner (F_SETLEASE, F_NOTIFY).
DENIED_FCNTL = (8, 10, 15, 1024, 1026)
# ioctl commands that set a file's owner (FIOSETOWN, SIOCSPGRP), a terminal's foreground group
# (TIOCSPGRP), its controlling process (TIOCSCTTY) or push input into it (TIOCSTI).
DENIED_IOCTL = (0x8901, 0x8902, 0x5410, 0x540E, 0x5412)
LOW_32_BITS = 0xFFFFFFFF


# ---------------------------------------------------------------------------- running a job
def _error(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": kind, "message": message, **extra}}


def _is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text or "not enough memory" in text or "bad_alloc" in text
    )


def _user_line(exc: BaseException) -> int | None:
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == USER_FILENAME:
            line = frame.lineno
    return line


def _memory_error() -> dict[str, Any]:
    return _error(
        "memory",
        "The code tried to use more memory than the sandbox allows. Build layers and tensors "
        "on the meta device (no data) or make them smaller.",
    )


def _exec_context(function: Any) -> contextlib.AbstractContextManager[Any]:
    """What the job asks the pasted source's top level to run under (its ``exec_context``
    attribute, a trusted factory of a context manager): a room may, say, keep device moves
    written at the top level (``model = Net().cuda()``) on the host, as it does in its job."""
    factory = getattr(function, "exec_context", None)
    return factory() if callable(factory) else contextlib.nullcontext()


def execute(request: dict[str, Any], layers_off: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Check, compile and run the pasted source, then the job; always a JSON-able reply."""
    source = request.get("source")
    job = request.get("job")
    params = request.get("params") or {}
    function = _JOBS.get(job) if isinstance(job, str) else None
    if not isinstance(source, str) or not isinstance(params, dict) or function is None:
        return _error("job_error", f"Malformed sandbox request (job {job!r}).")
    if len(source) > MAX_SOURCE_CHARS:
        return _error(
            "refused",
            f"The code is {len(source):,} characters long; the limit is {MAX_SOURCE_CHARS:,}.",
            line=1,
            col=1,
        )
    if "static" not in layers_off:
        refusals = check_source(source)
        if refusals and refusals[0].code == "syntax":
            first = refusals[0]
            return _error("syntax", first.message, line=first.line, col=first.col)
        if refusals:
            first = refusals[0]
            count = len({refusal.line for refusal in refusals})
            return _error(
                "refused",
                f"The code was not run: {count} line(s) use something that is not allowed here. "
                f"Line {first.line}: {first.message}",
                line=first.line,
                col=first.col,
                refusals=[refusal.to_dict() for refusal in refusals],
            )
    try:
        # Annotations are dropped before compiling, static layer or not: a model needs none,
        # and typing helpers would evaluate annotation text as code.
        code = compile_model(source, USER_FILENAME)
    except SyntaxError as exc:
        refusal = syntax_refusal(exc)
        return _error("syntax", refusal.message, line=refusal.line, col=refusal.col)
    except (ValueError, RecursionError, MemoryError) as exc:
        return _error("refused", f"The code cannot be compiled: {exc}.", line=1, col=1)

    if "facade" in layers_off:
        namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": USER_MODULE_NAME}
    else:
        namespace = capability_namespace()
    try:
        # text_guard: from here on, text becomes code only if the allow-list accepts it.
        with (
            contextlib.redirect_stdout(io.StringIO()) as printed,
            text_guard(),
            _exec_context(function),
        ):
            exec(code, namespace)  # the sandboxed step: this whole process is the container
    except BaseException as exc:
        if _is_out_of_memory(exc):
            return _memory_error()
        line = _user_line(exc)
        where = f" on line {line}" if line else ""
        return _error(
            "code_error",
            f"Your code raised {type(exc).__name__}{where} while it was being defined: {exc}. "
            "Fix that line; the code runs once before the model is analysed.",
            line=line,
            # what was raised, apart from the sentence, in the one refusal shape's fields
            refused={"words": exception_words(exc), "raised": type(exc).__name__},
        )
    del printed  # what user code prints is not shown; it only must not reach the server's log

    user_names = {key: value for key, value in namespace.items() if not key.startswith("__")}
    try:
        with text_guard():  # the job calls the user's classes and reads their objects
            value = function(user_names, **params)
    except BaseException as exc:
        if _is_out_of_memory(exc):
            return _memory_error()
        return _error("job_error", f"The analysis failed: {type(exc).__name__}: {exc}")
    if not isinstance(value, dict):
        return _error("job_error", f"The analysis returned {type(value).__name__}, not a dict.")
    return {"ok": True, "value": value}


def reply_frame(reply: dict[str, Any], limit: int = MAX_RESULT_BYTES) -> bytes:
    """The reply as a framed message (see :func:`encode_reply`), written with orjson when it
    is a room engine's reply (bounded by the engine) and the address space has room for
    orjson's buffer: orjson crashes the child where an allocation fails, and a crash would
    tell the visitor less than "out of memory" or "too large"."""
    value = reply.get("value")
    engine = isinstance(value, EngineReply)
    fast = engine and _has_room(REPLY_ROOM_FACTOR * limit)
    if engine and value.written is not None and not fast:
        # Python's json writes it then, and takes no JSON already written: read it back.
        reply = {**reply, "value": {"result": json.loads(value.written)}}
    return encode_reply(reply, limit, fast=fast)


_has_room = protocol.has_room


def encode_reply(
    reply: dict[str, Any], limit: int = MAX_RESULT_BYTES, *, fast: bool = False
) -> bytes:
    """The reply as a framed message, replaced by an error when it is too large or not JSON."""
    try:
        framed = protocol.encode(reply, fast=fast)
    except (TypeError, ValueError) as exc:
        framed = protocol.encode(
            _error("job_error", f"The analysis returned data that is not JSON: {exc}"),
            fast=False,
        )
    except MemoryError:
        framed = protocol.encode(_memory_error(), fast=False)
    if len(framed) - protocol.HEADER.size > limit:
        size_mb = (len(framed) - protocol.HEADER.size) / 2**20
        framed = protocol.encode(
            _error(
                "output_too_large",
                f"The result is {size_mb:.1f} MB; the limit is {limit / 2**20:.0f} MB. "
                "Analyse a smaller model or fewer layers.",
            ),
            fast=False,
        )
    return framed


# ---------------------------------------------------------------------------- confinement
@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    return _libc().prctl(option, value, 0, 0, 0) == 0


@functools.cache
def _syscall_number(name: str) -> int | None:
    """This architecture's number for ``name`` (None where it has no such call)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError):
        return None
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    if number >= 0:
        return number
    if platform.machine() in GENERIC_NUMBERING:
        return NEWER_SYSCALLS.get(name)
    return None


def raw_syscall(name: str, *args: int) -> int:
    """``syscall(2)`` by name with integer arguments: 0 or more, else minus the errno.

    No glibc wrapper in between (a wrapper may check or narrow its arguments first); the
    probe and the isolation tests use it to ask the kernel and the filter directly.
    """
    number = _syscall_number(name)
    if number is None:
        return -errno.ENOSYS
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_ulong(arg & 2**64 - 1) for arg in args))
    return result if result >= 0 else -ctypes.get_errno()


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def install_seccomp() -> None:
    """Load the filter described in the module docstring (raises when the kernel refuses)."""
    import pyseccomp as seccomp

    pid = os.getpid()
    deny = seccomp.ERRNO(errno.EPERM)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    # A call made with another architecture's convention (int 0x80 on x86_64) ends the process.
    rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)

    def add(name: str, *args: Any) -> None:
        number = _syscall_number(name)
        if number is not None:  # None: this architecture has no such call
            rules.add_rule(deny, number, *args)

    for name in DENIED_SYSCALLS:
        add(name)
    # Threads are fine (torch may start them); a new process is not.
    add("clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # clone3 hides its flags in memory a filter cannot read; ENOSYS makes glibc fall back to clone.
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # "Deny unless equal" compares all 64 bits: a pid with upper bits set (which the kernel
    # would truncate to this pid, or to another) is denied, never let through.
    for name in SIGNAL_SYSCALLS:
        add(name, seccomp.Arg(0, seccomp.NE, pid))
    for name, positions in ZERO_ARGUMENTS.items():
        for position in positions:  # one rule per argument: any non-zero one denies
            add(name, seccomp.Arg(position, seccomp.NE, 0))
    # The kernel reads these commands as 32-bit ints: compare the low 32 bits only, so that
    # F_SETOWN with garbage in the upper half is still F_SETOWN.
    for command in DENIED_FCNTL:
        add("fcntl", seccomp.Arg(1, seccomp.MASKED_EQ, LOW_32_BITS, command))
    for command in DENIED_IOCTL:
        add("ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, LOW_32_BITS, command))
    rules.load()


class _CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapabilityData(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]


def _drop_capabilities() -> bool:
    """Give up every capability this process holds (a server that is not root may still have
    some, granted to its user); True when none is left."""
    libc = _libc()
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapabilityHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    return libc.capset(ctypes.byref(header), (_CapabilityData * 2)()) == 0


def child_id(pid: int) -> int:
    """The uid and gid a child of a root server runs as (unique among live children)."""
    return CHILD_UID_BASE + pid


def _become_own_user(workdir: str) -> None:
    """Switch this (root) process to a user of its own, or to ``nobody`` where the ids are
    not mapped (a user namespace with a short uid map)."""
    ident = child_id(os.getpid())
    try:
        os.chown(workdir, ident, ident)
    except OSError:
        ident = NOBODY
        os.chown(workdir, ident, ident)
    os.setgroups([])
    os.setresgid(ident, ident, ident)
    os.setresuid(ident, ident, ident)


_RLIMITS = tuple(
    sorted({getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")})
)
_IOPRIO_WHO_PROCESS = 1


def process_state() -> tuple[Any, ...]:
    """What another process could have changed in this one since it was confined (ids,
    limits, priorities, affinity, scheduler, parent-death signal, pending signals), read with
    calls the filter allows; cheap enough to compare at every hand-over."""
    libc = _libc()
    death_signal = ctypes.c_int(0)
    libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(death_signal), 0, 0, 0)
    return (
        os.getresuid(),
        os.getresgid(),
        tuple(os.getgroups()),
        (os.getppid(), os.getpgid(0), os.getsid(0)),
        tuple(resource.getrlimit(limit) for limit in _RLIMITS),
        os.getpriority(os.PRIO_PROCESS, 0),
        tuple(sorted(os.sched_getaffinity(0))),
        (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority),
        raw_syscall("ioprio_get", _IOPRIO_WHO_PROCESS, 0),
        death_signal.value,
        tuple(
            libc.prctl(option, 0, 0, 0, 0)
            for option in (PR_GET_DUMPABLE, PR_GET_SECCOMP, PR_GET_NO_NEW_PRIVS, PR_GET_TIMERSLACK)
        ),
        tuple(sorted(signal.sigpending())),
    )


@dataclasses.dataclass
class Confinement:
    """What :func:`confine_process` applied, and what the job's limits are measured from."""

    active: dict[str, bool]
    base_address_space: int  # bytes mapped before the job (torch and all), read while open() works
    state: tuple[Any, ...] | None = None  # process_state() once confined (spares compare it)


def confine_process(layers_off: frozenset[str] = frozenset()) -> Confinement:
    """Every layer that does not depend on the job; seccomp last (it forbids open())."""
    active = {"setsid": False, "scrubbed_env": False, "unprivileged_user": False}
    parent = os.getppid()
    os.setsid()
    active["setsid"] = True
    os.environ.clear()
    os.environ.update(KEPT_ENVIRONMENT)
    active["scrubbed_env"] = True

    workdir = tempfile.mkdtemp(prefix="torchatlas-job-")
    if os.geteuid() == 0 and "privileges" not in layers_off:
        _become_own_user(workdir)
    os.chdir(workdir)
    os.rmdir(workdir)  # the cwd stays valid but no longer has a name: nothing to write into
    active["unprivileged_user"] = os.geteuid() != 0
    active["uid_per_child"] = os.geteuid() == child_id(os.getpid())
    active["no_capabilities"] = "privileges" not in layers_off and _drop_capabilities()
    # After the uid change: the kernel clears the parent-death signal on every change of
    # credentials. A zygote that died before it was armed is caught by the parent check.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote's death ends its children
    if os.getppid() != parent:
        os._exit(70)
    _prctl(PR_SET_DUMPABLE, 0)

    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (JOB_FD + 5,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Counted per user, across processes: keep this child's share small.
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (JOB_PENDING_SIGNALS,) * 2)
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    if active["unprivileged_user"]:
        # Counted per user, so only meaningful once this is not root (root ignores it).
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write to a file fails instead of killing
    base_address_space = _vm_size_bytes()

    active["seccomp"] = False
    if "seccomp" not in layers_off:
        # No libseccomp or a kernel without filters: the other layers still hold, and
        # health() says this one is off.
        with contextlib.suppress(Exception):
            install_seccomp()
            active["seccomp"] = True
    return Confinement(active, base_address_space)


def limit_job(confinement: Confinement, memory_mb: int, cpu_seconds: int) -> None:
    """The job's own limits: address space (what is mapped now + its budget) and CPU time.

    Hard limits equal the soft ones (CPU: one second of grace for SIGXCPU), and a process
    that is not root can only lower a hard limit, so the job cannot lift them again.
    """
    budget = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (confinement.base_address_space + budget,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    confinement.active["rlimits"] = True


def confine(
    memory_mb: int, cpu_seconds: int, layers_off: frozenset[str] = frozenset()
) -> dict[str, bool]:
    """Apply every process layer to this (freshly forked) process; returns what is active."""
    confinement = confine_process(layers_off)
    limit_job(confinement, memory_mb, cpu_seconds)
    return confinement.active


def _stdio_to_null() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    if null > 2:
        os.close(null)
    sys.stdout = sys.stderr = io.StringIO()


def _only_descriptor(fd: int) -> None:
    """Leave only stdin/stdout/stderr (on /dev/null) and ``fd``, moved to JOB_FD."""
    if fd != JOB_FD:
        os.dup2(fd, JOB_FD)
    os.closerange(JOB_FD + 1, max(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1024))


def child_main(job_fd: int, order: dict[str, Any], confinement: Confinement | None = None) -> None:
    """Entry point in the forked child (or a spare that got a job); never returns."""
    status = 70
    try:
        layers_off = frozenset(order.get("layers_off") or ()) & TEST_LAYERS
        timeout_s = float(order.get("timeout_s", 10))
        if confinement is None:
            _stdio_to_null()
            _only_descriptor(job_fd)
            confinement = confine_process(layers_off)
        else:
            _only_descriptor(job_fd)
        limit_job(confinement, int(order.get("memory_mb", DEFAULT_MEMORY_MB)), int(timeout_s) + 2)
        sock = socket.socket(fileno=JOB_FD)
        try:
            request = protocol.receive(sock, MAX_REQUEST_BYTES)
        except (protocol.MessageTooLarge, ValueError):
            request = None
        if request is None:
            reply = _error("job_error", "The sandbox request was missing or too large.")
        else:
            reply = execute(request, layers_off)
        framed = reply_frame(reply, int(order.get("max_result_bytes", MAX_RESULT_BYTES)))
        sock.sendall(framed)
        status = 0
    except BaseException:
        status = 71
    finally:
        os._exit(status)


def spare_main(channel: socket.socket, warm_up: list[dict[str, Any]] | None = None) -> None:
    """A spare child, forked before any job exists: confine itself, then wait for one job.

    It holds nothing of any user (it is a copy of the zygote, which never sees user data),
    and every layer except the job's own limits is in place before the job arrives, so a
    request pays neither the fork nor the confinement. The zygote hands it only jobs that
    switch no layer off.

    Confined, it says so (``SPARE_CONFINED``) and waits. The zygote may then ask it to warm up
    (``SPARE_WARM_UP``, sent only while no job runs): it runs ``warm_up`` (trusted requests,
    one per room that registered one, each run once, their replies dropped) and says
    ``SPARE_READY``; a job that arrives meanwhile is taken after the current request. The
    warm-up takes the child's first touches off the request: a forked child pays a page fault
    for every page it first writes, copy-on-write pages of the zygote and fresh heap alike,
    and its job's paths fill caches (torch's, the interpreter's specialised code) on first use.

    The spare waits while other jobs run, so when a job arrives it first checks that nothing
    outside changed it meanwhile (:func:`process_state`): it answers ``SPARE_ACCEPTED`` and
    runs the job, or ``SPARE_TAINTED`` and exits without touching the job's socket, and the
    zygote, which keeps the socket until it has the answer, forks a fresh child for the job.
    """
    status = 70
    try:
        _stdio_to_null()
        _only_descriptor(channel.detach())
        channel = socket.socket(fileno=JOB_FD)
        confinement = confine_process()
        confinement.state = process_state()
        channel.send(protocol.SPARE_CONFINED)
        data, fds, _, _ = socket.recv_fds(channel, 65536, 1)
        if data == protocol.SPARE_WARM_UP and not fds:
            for request in warm_up or ():
                if select.select([channel], [], [], 0)[0]:
                    break  # a job came: it needs this process more than the warm-up does
                reply_frame(execute(request))
            else:
                channel.send(protocol.SPARE_READY)
            data, fds, _, _ = socket.recv_fds(channel, 65536, 1)
        if not data or len(fds) != 1:  # the zygote is gone, or sent nothing usable
            os._exit(status)
        if process_state() != confinement.state:
            channel.send(SPARE_TAINTED)
            os._exit(EXIT_TAINTED)
        channel.send(SPARE_ACCEPTED)
        order = json.loads(data)
        channel.close()
    except BaseException:
        os._exit(status)
    child_main(fds[0], order, confinement)


def _others_unreachable(fd: int) -> bool:
    """Whether the filter answers every call that could reach another process (the parent
    here). Each call is made so that the kernel itself would refuse it with another error
    or change nothing: EPERM then can only come from the filter."""
    parent = os.getppid()
    attempts = (
        raw_syscall("kill", parent, 0x7FFF),  # no such signal: EINVAL from the kernel
        raw_syscall("prlimit64", parent, 0x7FFF, 0, 0),  # no such resource: EINVAL
        raw_syscall("setpriority", 0x7FFF, 0, 0),  # no such "which": EINVAL
        raw_syscall("sched_setaffinity", parent, 0, 0),  # an empty mask: EINVAL
        raw_syscall("fcntl", fd, 8, 0),  # F_SETOWN to nobody: a no-op
        raw_syscall("ioctl", fd, 0x8901, 0),  # FIOSETOWN from address 0: EFAULT
    )
    return all(result == -errno.EPERM for result in attempts)


def probe_layers() -> dict[str, Any]:
    """Fork a throw-away child, confine it and try the things the layers must stop."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        report: dict[str, Any] = {}
        try:
            os.close(read_end)
            report.update(confine(64, 5))
            try:
                socket.socket()
                report["socket_blocked"] = False
            except OSError:
                report["socket_blocked"] = True
            try:
                open("/proc/self/status").close()
                report["open_blocked"] = False
            except OSError:
                report["open_blocked"] = True
            report["others_unreachable"] = _others_unreachable(write_end)
            report["handover_check"] = process_state() == process_state()
        except BaseException as exc:
            report["error"] = f"{type(exc).__name__}: {exc}"
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return {"error": "the probe child returned nothing"}
