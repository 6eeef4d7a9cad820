"""Layer 3, inside the worker: confine a freshly forked child, then run one job in it.

What defends what (a child is forked from the zygote for each job and never reused):
- ``setsid``: the child leads its own process group, so a timeout kills everything it made.
- scrubbed environment: the zygote already started with a whitelist; the child clears it again.
  Secrets in the *server's* environment stay readable via ``/proc/<server pid>/environ`` to any
  process of the same user, which is why the next two layers matter.
- unprivileged user: when the server runs as root, the child drops to ``nobody``; a different
  user cannot read ``/proc/<pid>/environ`` or ``/proc/<pid>/mem`` of the server, kill it, or read
  its 0600 files. ``PR_SET_DUMPABLE=0`` hides the child's own memory from its siblings.
- rlimits: address space (current + budget, set after torch is imported), CPU seconds, file
  size 0 (no file can grow), few open files, no new processes, no core dumps.
- seccomp: no ``open``/``openat`` at all (everything the job needs was imported by the zygote;
  this closes ``/proc/*/environ``, secrets files and ``/proc/self/mem``), no sockets, no
  ``execve``, no new processes (``clone`` only with ``CLONE_THREAD``), no ``ptrace``, no signals
  to other processes, no file-system changes.
- an empty temporary working directory, and results as size-capped JSON on an inherited socket.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import dataclasses
import errno
import importlib
import io
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

from torchatlas.sandbox import protocol
from torchatlas.sandbox.facade import USER_MODULE_NAME, capability_namespace
from torchatlas.sandbox.jobs import JOBS
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS, check_source, syntax_refusal

USER_FILENAME = "<pasted model>"
MAX_REQUEST_BYTES = 1 << 20
MAX_RESULT_BYTES = 8 << 20
DEFAULT_MEMORY_MB = 1024
KEPT_ENVIRONMENT = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1"}
NOBODY = 65534
JOB_FD = 3

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
CLONE_THREAD = 0x00010000

# Layers a test may switch off to show that the others hold on their own (never the page).
TEST_LAYERS = frozenset({"static", "facade", "seccomp", "privileges"})

DENIED_SYSCALLS = (
    # files: nothing can be opened, created, renamed or removed
    "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "symlink",
    "symlinkat", "link", "linkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "truncate", "ftruncate", "mknod", "mknodat", "memfd_create", "chroot",
    # network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # programs and processes
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill", "kcmp",
    # kernel surfaces a model never needs
    "mount", "umount2", "pivot_root", "unshare", "setns", "bpf", "perf_event_open",
    "userfaultfd", "io_uring_setup", "keyctl", "add_key", "request_key", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "personality", "quotactl",
    "swapon", "swapoff", "reboot", "init_module", "finit_module", "delete_module",
    "kexec_load", "acct", "settimeofday", "clock_settime", "sethostname", "setdomainname",
)  # fmt: skip


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


def execute(request: dict[str, Any], layers_off: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Check, compile and run the pasted source, then the job; always a JSON-able reply."""
    source = request.get("source")
    job = request.get("job")
    params = request.get("params") or {}
    if not isinstance(source, str) or not isinstance(params, dict) or job not in JOBS:
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
        code = compile(source, USER_FILENAME, "exec", dont_inherit=True)
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
        with contextlib.redirect_stdout(io.StringIO()) as printed:
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
        )
    del printed  # what user code prints is not shown; it only must not reach the server's log

    module_name, _, function_name = JOBS[job].partition(":")
    user_names = {key: value for key, value in namespace.items() if not key.startswith("__")}
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        value = function(user_names, **params)
    except BaseException as exc:
        if _is_out_of_memory(exc):
            return _memory_error()
        return _error("job_error", f"The analysis failed: {type(exc).__name__}: {exc}")
    if not isinstance(value, dict):
        return _error("job_error", f"The analysis returned {type(value).__name__}, not a dict.")
    return {"ok": True, "value": value}


def encode_reply(reply: dict[str, Any], limit: int = MAX_RESULT_BYTES) -> bytes:
    """The reply as a framed message, replaced by an error when it is too large or not JSON."""
    try:
        framed = protocol.encode(reply)
    except (TypeError, ValueError) as exc:
        framed = protocol.encode(
            _error("job_error", f"The analysis returned data that is not JSON: {exc}")
        )
    except MemoryError:
        framed = protocol.encode(_memory_error())
    if len(framed) - protocol.HEADER.size > limit:
        size_mb = (len(framed) - protocol.HEADER.size) / 2**20
        framed = protocol.encode(
            _error(
                "output_too_large",
                f"The result is {size_mb:.1f} MB; the limit is {limit / 2**20:.0f} MB. "
                "Analyse a smaller model or fewer layers.",
            )
        )
    return framed


# ---------------------------------------------------------------------------- confinement
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    return _libc().prctl(option, value, 0, 0, 0) == 0


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
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(ValueError, OSError):  # a name this architecture lacks
            rules.add_rule(deny, name)
    # Threads are fine (torch may start them); a new process is not.
    rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # clone3 hides its flags in memory a filter cannot read; ENOSYS makes glibc fall back to clone.
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rules.add_rule(deny, name, seccomp.Arg(0, seccomp.NE, pid))
    rules.load()


@dataclasses.dataclass
class Confinement:
    """What :func:`confine_process` applied, and what the job's limits are measured from."""

    active: dict[str, bool]
    base_address_space: int  # bytes mapped before the job (torch and all), read while open() works


def confine_process(layers_off: frozenset[str] = frozenset()) -> Confinement:
    """Every layer that does not depend on the job; seccomp last (it forbids open())."""
    active = {"setsid": False, "scrubbed_env": False, "unprivileged_user": False}
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote's death ends its children
    os.setsid()
    active["setsid"] = True
    os.environ.clear()
    os.environ.update(KEPT_ENVIRONMENT)
    active["scrubbed_env"] = True

    workdir = tempfile.mkdtemp(prefix="torchatlas-job-")
    if os.geteuid() == 0 and "privileges" not in layers_off:
        os.chown(workdir, NOBODY, NOBODY)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    os.chdir(workdir)
    os.rmdir(workdir)  # the cwd stays valid but no longer has a name: nothing to write into
    active["unprivileged_user"] = os.geteuid() != 0
    _prctl(PR_SET_DUMPABLE, 0)

    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (JOB_FD + 5,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
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
        framed = encode_reply(reply, int(order.get("max_result_bytes", MAX_RESULT_BYTES)))
        sock.sendall(framed)
        status = 0
    except BaseException:
        status = 71
    finally:
        os._exit(status)


def spare_main(channel: socket.socket, warm_up: dict[str, Any] | None = None) -> None:
    """A spare child, forked before any job exists: confine itself, then wait for one job.

    It holds nothing of any user (it is a copy of the zygote, which never sees user data),
    and every layer except the job's own limits is in place before the job arrives, so a
    request pays neither the fork nor the confinement. The zygote hands it only jobs that
    switch no layer off.

    ``warm_up`` (a trusted request, run once, its reply dropped) takes the child's first
    touches off the request: a forked child pays a page fault for every page it first
    writes, copy-on-write pages of the zygote and fresh heap alike. A ResNet-50 analysis
    made ~2,300 of them in a cold child (25 ms of its 100) and ~230 after a small warm-up.
    """
    status = 70
    try:
        _stdio_to_null()
        _only_descriptor(channel.detach())
        channel = socket.socket(fileno=JOB_FD)
        confinement = confine_process()
        if warm_up is not None:
            encode_reply(execute(warm_up))
        channel.send(protocol.SPARE_READY)
        data, fds, _, _ = socket.recv_fds(channel, 65536, 1)
        if not data or len(fds) != 1:  # the zygote is gone, or sent nothing usable
            os._exit(status)
        order = json.loads(data)
        channel.close()
    except BaseException:
        os._exit(status)
    child_main(fds[0], order, confinement)


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
