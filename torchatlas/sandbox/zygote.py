"""The zygote: a separate process that imports torch once, then forks one fresh child per job.

One child is forked ahead (the spare): it confines itself and waits for a job, so a request
pays neither the fork nor the confinement. The next spare is forked once the job's child has
exited, not while a short job runs: forking this process and confining a child, on a host
with one or two cores, slow the running job and the server decoding its reply (a job that
finds no spare gets a child forked on the spot, as does a job right behind another; a job
still running after ``SPARE_FORK_DURING_JOB_S`` gets the next spare forked beside it). Once
no job is running, the zygote tells the spare to warm up (it runs the callers' warm-up
requests, taking the child's first page faults and cold caches off the next request); a
warm-up started while a job runs would take the CPU from that job and from the server
decoding its reply. A job goes to the spare whatever it is doing: one still confining itself
or warming up takes the job as soon as that step is done, which is sooner than a fresh fork
would be ready. Every job still gets its own new process; jobs that switch a layer off (tests
only) get a child forked on the spot instead. When a job is handed to the spare, the spare
first checks that nothing outside changed it while it waited (its uid, limits, priority,
affinity, ...) and answers; a spare that refuses is replaced by a child forked on the spot
for the same job, so the job never runs in a process another job touched.

Started by :class:`torchatlas.sandbox.pool.SandboxPool` as ``python -m torchatlas.sandbox.zygote
FD`` with a scrubbed environment (the server is multithreaded, so it must never fork itself).
FD is a SOCK_SEQPACKET control socket. The pool's first message names the jobs the caller
registered (``{"op": "jobs", "jobs": {name: "module:qualname"}, "warm_up": [request, ...],
"spare_warm_up": [request, ...]}``): the zygote imports them, runs the warm-up requests, and each
spare runs the spares' requests; this module names no job of its own. The pool then sends ``{"op":
"run", "id", "timeout_s", ...}`` with one file descriptor attached: the job socket, on which the
pool and the child exchange the request and the reply directly, so user code and results never
pass through the zygote's memory (a later child, forked from it, could otherwise find traces of
an earlier user's request). The zygote answers ``ready`` once, ``spare`` whenever a spare is
confined (``"warm": false``) or warm (``"warm": true``), and ``exit`` for every job (how the
child ended).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

CONTROL_MESSAGE_BYTES = 65536
# How long a spare may take to accept a job before it is replaced by a fresh child (it answers
# at once unless something is wrong with it).
HANDOVER_TIMEOUT_S = 2.0
# How long no job must have run before the spare warms up: long enough for the server to
# decode the last reply undisturbed, short against the time between a visitor's clicks.
SPARE_WARM_DELAY_S = 0.05
# When a job has held the spare this long and still runs, the next spare is forked anyway: the
# jobs behind a long one should not each wait for a fork of their own.
SPARE_FORK_DURING_JOB_S = 0.05
NOBODY = 65534
CLONE_NEWUSER = 0x10000000


def unprivileged_user_namespaces() -> bool:
    """Whether this kernel lets an ordinary user create a user namespace (reported in the
    probe; the sandbox does not depend on it), asked in a throw-away child."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
            code = 0 if ctypes.CDLL(None).unshare(CLONE_NEWUSER) == 0 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    control.send(json.dumps(message).encode())


def receive_jobs(control: socket.socket) -> dict[str, Any]:
    """The pool's first control message: the jobs to run by ``"module:qualname"``, the
    warm-up requests and the spare's warm-up request (see SandboxPool.register)."""
    message = json.loads(control.recv(CONTROL_MESSAGE_BYTES) or b"null")
    if not isinstance(message, dict) or message.get("op") != "jobs":
        raise SystemExit("the pool did not send the jobs first")
    jobs = message.get("jobs") or {}
    requests = message.get("warm_up") or []
    spare = message.get("spare_warm_up")
    if not all(isinstance(name, str) and isinstance(target, str) for name, target in jobs.items()):
        raise SystemExit("malformed job registry")
    if not isinstance(requests, list) or not all(isinstance(item, dict) for item in requests):
        raise SystemExit("malformed warm-up requests")
    if isinstance(spare, dict):
        spare = [spare]
    if spare is not None and not (
        isinstance(spare, list) and all(isinstance(item, dict) for item in spare)
    ):
        raise SystemExit("malformed spare warm-up requests")
    return {"jobs": jobs, "warm_up": requests, "spare_warm_up": spare}


def warm_up(jobs: dict[str, str], requests: list[dict[str, Any]]) -> dict[str, str]:
    """Import every job and run the caller's warm-up requests, so children never need to open
    a file; the jobs that failed to import or to warm up, and why."""
    from torchatlas.sandbox import worker
    from torchatlas.sandbox.facade import facade_modules
    from torchatlas.sandbox.jobs import load_target

    facade_modules()
    failures: dict[str, str] = {}
    loaded = {}
    for job, target in jobs.items():
        try:
            loaded[job] = load_target(target)
        except Exception as exc:  # a missing job module makes only its own jobs fail
            failures[job] = f"{type(exc).__name__}: {exc}"
    worker.use_jobs(loaded)
    for request in requests:
        if request.get("job") not in loaded or request.get("job") in failures:
            continue
        reply = worker.execute(request)
        worker.reply_frame(reply)  # the same writer a job's child uses, orjson included
        if not reply.get("ok"):
            failures[request["job"]] = json.dumps(reply.get("error"))[:500]
    if loaded:
        # Error paths import their own modules (traceback formatting, difflib in hints, …);
        # the job is never reached, so any registered one will do.
        any_job = next(iter(loaded))
        worker.execute({"source": "import torch\nx = (", "job": any_job, "params": {}})
        worker.execute({"source": "raise ValueError('warm')", "job": any_job, "params": {}})
    return failures


class _Spare:
    """A child forked ahead of time, waiting for one job on its own socket."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self.channel = channel
        # "starting" (confining itself) → "cold" (confined, waiting) → "warming" → "warm".
        # A job is handed to it in any state: it reads the job once confined, and between two
        # warm-up requests (the rest of its warm-up is skipped).
        self.state = "starting"


class Zygote:
    def __init__(self, control: socket.socket, spare_warm_up: list[dict[str, Any]] | None) -> None:
        self.control = control
        self.spare_warm_up = spare_warm_up  # the callers' requests each spare runs while it waits
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, dict[str, Any]] = {}  # pidfd → job
        self.idle_since = time.monotonic()  # when the last job's child ended
        # Forking this process (torch imported: hundreds of MB of private pages to map),
        # confining a child and its first page faults all take time; a spare prepared ahead
        # of the request (after the previous job) takes all three off it.
        self.spare: _Spare | None = None
        self.fork_at: float | None = None  # when to fork the next spare (None: one exists)
        self.fork_spare()

    def _in_child(self) -> None:
        """What every forked child does first: drop the zygote's own descriptors."""
        self.selector.close()
        self.control.close()
        if self.spare is not None:
            self.spare.channel.close()

    def fork_spare(self) -> None:
        from torchatlas.sandbox.worker import spare_main

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            self._in_child()
            spare_main(theirs, self.spare_warm_up)  # never returns
        theirs.close()
        self.spare = _Spare(pid, ours)
        self.fork_at = None
        self.selector.register(ours, selectors.EVENT_READ, "spare")

    def _drop_spare(self) -> _Spare | None:
        spare, self.spare = self.spare, None
        if spare is not None:
            self.selector.unregister(spare.channel)
        return spare

    def spare_message(self) -> None:
        """The spare is confined, or warm (or gone: then reap it; the next job forks anew)."""
        from torchatlas.sandbox.protocol import SPARE_CONFINED, SPARE_READY

        assert self.spare is not None
        try:
            message = self.spare.channel.recv(16)
        except OSError:
            message = b""
        if message == SPARE_CONFINED and self.spare.state == "starting":
            self.spare.state = "cold"
            self.send({"op": "spare", "pid": self.spare.pid, "warm": False})
            return
        if message == SPARE_READY and self.spare.state == "warming":
            self.spare.state = "warm"
            self.send({"op": "spare", "pid": self.spare.pid, "warm": True})
            return
        spare = self._drop_spare()
        assert spare is not None
        spare.channel.close()
        with contextlib.suppress(OSError):
            os.kill(spare.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(spare.pid, 0)

    def warm_due(self) -> float | None:
        """When the cold spare should start warming up (None: no cold spare, or a job runs)."""
        if self.spare is None or self.spare.state != "cold" or self.children:
            return None
        return self.idle_since + SPARE_WARM_DELAY_S

    def warm_spare(self) -> None:
        """Tell the cold spare to warm up now (no job runs)."""
        from torchatlas.sandbox.protocol import SPARE_WARM_UP

        assert self.spare is not None
        try:
            self.spare.channel.send(SPARE_WARM_UP)
        except OSError:
            return  # gone: its end of stream drops it
        self.spare.state = "warming"

    def _hand_to_spare(self, order: dict[str, Any], job_fd: int) -> int | None:
        """The spare's pid once it holds the job, or None (no spare, it is gone, or it found
        itself changed since it was confined: then the caller forks a fresh child)."""
        from torchatlas.sandbox.protocol import SPARE_CONFINED, SPARE_READY
        from torchatlas.sandbox.worker import SPARE_ACCEPTED

        if order.get("layers_off"):  # a test switching layers off: the spare has them all on
            return None
        if self.spare is None:
            return None
        spare = self._drop_spare()
        assert spare is not None
        answer = b""
        try:
            socket.send_fds(spare.channel, [json.dumps(order).encode()], [job_fd])
            # The spare answers before it reads anything from the job's socket; until then
            # this process keeps its own copy of the socket, so a refused job is not lost. A
            # spare still confining itself or warming up answers once that step is done (it
            # may say so first): waiting for it costs less than forking and confining anew.
            deadline = time.monotonic() + HANDOVER_TIMEOUT_S
            while answer in (b"", SPARE_CONFINED, SPARE_READY):
                spare.channel.settimeout(max(0.001, deadline - time.monotonic()))
                answer = spare.channel.recv(16)
                if not answer:
                    break
        except OSError:  # it died (killed from outside) or does not answer
            answer = b""
        finally:
            spare.channel.close()
        if answer == SPARE_ACCEPTED:
            return spare.pid
        with contextlib.suppress(OSError):
            os.kill(spare.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(spare.pid, 0)
        return None

    def start_job(self, order: dict[str, Any], job_fd: int) -> None:
        from torchatlas.sandbox.worker import child_main

        pid = self._hand_to_spare(order, job_fd)
        if pid is None:
            pid = os.fork()
            if pid == 0:
                self._in_child()
                child_main(job_fd, order)  # never returns
        os.close(job_fd)
        pidfd = os.pidfd_open(pid)
        deadline = time.monotonic() + float(order.get("timeout_s", 10))
        job = {"id": order.get("id"), "pid": pid, "deadline": deadline, "timed_out": False}
        self.children[pidfd] = job
        self.selector.register(pidfd, selectors.EVENT_READ, "child")
        if self.spare is None:
            self.fork_at = time.monotonic() + SPARE_FORK_DURING_JOB_S

    def reap(self, pidfd: int) -> None:
        job = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status, usage = os.wait4(job["pid"], 0)
        if not self.children:
            self.idle_since = time.monotonic()
        if self.spare is None:
            self.fork_at = time.monotonic()  # once the exit report below is sent
        self.send(
            {
                "op": "exit",
                "id": job["id"],
                "timed_out": job["timed_out"],
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "max_rss_kb": usage.ru_maxrss,
                "cpu_s": usage.ru_utime + usage.ru_stime,
            }
        )

    def send(self, message: dict[str, Any]) -> None:
        try:
            _send(self.control, message)
        except OSError:
            self.stop()

    def kill_overdue(self) -> None:
        now = time.monotonic()
        for job in self.children.values():
            if not job["timed_out"] and now >= job["deadline"]:
                job["timed_out"] = True
                with contextlib.suppress(ProcessLookupError):
                    try:
                        os.killpg(job["pid"], signal.SIGKILL)
                    except ProcessLookupError:  # before its setsid: the group is the zygote's
                        os.kill(job["pid"], signal.SIGKILL)

    def stop(self) -> None:
        pids = [job["pid"] for job in self.children.values()]
        if self.spare is not None:
            pids.append(self.spare.pid)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(0)

    def serve(self) -> None:
        self.selector.register(self.control, selectors.EVENT_READ, "control")
        while True:
            deadlines = [job["deadline"] for job in self.children.values() if not job["timed_out"]]
            for due in (self.warm_due(), self.fork_at):
                if due is not None:
                    deadlines.append(due)
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            for key, _ in self.selector.select(wait):
                if key.data == "control":
                    try:
                        data, fds, _, _ = socket.recv_fds(self.control, CONTROL_MESSAGE_BYTES, 1)
                    except OSError:
                        data, fds = b"", []
                    if not data:
                        self.stop()  # the pool is gone: so are its jobs
                    order = json.loads(data)
                    if order.get("op") == "run" and len(fds) == 1:
                        self.start_job(order, fds[0])
                    else:
                        for fd in fds:
                            os.close(fd)
                elif key.data == "spare":
                    # A job handled earlier in this same batch may have taken the spare (its
                    # channel's event is then stale): only the current spare's channel counts.
                    if self.spare is not None and key.fileobj is self.spare.channel:
                        self.spare_message()
                else:
                    self.reap(key.fd)
            self.kill_overdue()
            if self.fork_at is not None and time.monotonic() >= self.fork_at:
                self.fork_spare()
            warm_at = self.warm_due()
            if warm_at is not None and time.monotonic() >= warm_at:
                self.warm_spare()


def freeze_heap() -> None:
    """Move everything the zygote holds out of the garbage collector's reach before forking.

    A forked child shares the zygote's pages until it writes to one; a collection that walks
    the zygote's objects writes to each object's header, so every child would copy most of the
    zygote's heap page by page, a page fault each, before its job's own work. Frozen objects are
    never walked: a child collects only what it allocated itself."""
    import gc

    gc.collect()
    gc.freeze()


def settle_autograd_engine() -> None:
    """Run one CPU backward before anything else touches torch.

    Autograd's engine decides once per process, on its first backward, how many device
    threads it needs: one per device of every device type known then. Some analyses (fake
    tensors with symbolic shapes) make torch know devices that do not exist here, and a
    backward after them starts threads; a child forked from a process with those threads
    cannot run backward at all, and a confined child may start none. Deciding now, while only
    the CPU is known, means no device threads ever: children run backward on their own thread.
    """
    import torch

    with torch.enable_grad():
        torch.ones(1, requires_grad=True).sum().backward()


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that started us ends, and the
    # server starts the zygote from a short-lived script thread. The control socket's end of
    # stream (the kernel closes it when the server dies) stops the zygote instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the server's terminal is its own
    started = time.perf_counter()
    registry = receive_jobs(control)
    with contextlib.suppress(ImportError, OSError):  # without it, health() shows seccomp off
        import pyseccomp  # noqa: F401 - loads libseccomp now; children cannot open it later
    user_namespaces = unprivileged_user_namespaces()  # asked before torch makes forks slow
    import torch
    import torchvision.models  # noqa: F401

    torch.set_num_threads(1)  # one thread per job; also keeps OpenMP from starting before fork
    settle_autograd_engine()
    from torchatlas.sandbox.worker import probe_layers

    import_s = time.perf_counter() - started
    failures = warm_up(registry["jobs"], registry["warm_up"])
    probe = probe_layers()
    probe["unprivileged_user_namespaces"] = user_namespaces  # for the record; not relied on
    # Before "ready": a full collection of this heap takes most of a second, and the first
    # job would wait for it.
    freeze_heap()
    _send(
        control,
        {
            "op": "ready",
            "pid": os.getpid(),
            "import_s": round(import_s, 3),
            "warm_s": round(time.perf_counter() - started, 3),
            "probe": probe,
            "job_failures": failures,
        },
    )
    Zygote(control, registry["spare_warm_up"]).serve()


if __name__ == "__main__":
    main()
