"""Layer 4, operations: the pool that owns the zygote, queues jobs and reports health.

Lives in the server process (threads, no forking here). Each job: rate limit per session →
a slot under the concurrency cap (waiting at most ``queue_wait_s``) → a socket pair whose one
end goes to the zygote, which forks a confined child around it → the request out and the reply
back on the other end, as size-capped JSON → the zygote's word on how the child ended.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchatlas.sandbox import protocol
from torchatlas.sandbox.jobs import JOBS
from torchatlas.sandbox.policy import Refusal
from torchatlas.sandbox.worker import DEFAULT_MEMORY_MB, MAX_RESULT_BYTES, TEST_LAYERS

REPO_ROOT = Path(__file__).resolve().parents[2]
ZYGOTE_START_TIMEOUT_S = 180.0
EXIT_REPORT_GRACE_S = 5.0
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 0.5, 120.0

ERROR_KINDS = (
    "refused", "syntax", "timeout", "memory", "crashed", "output_too_large", "busy",
    "job_error", "unavailable", "code_error",
)  # fmt: skip


@dataclass
class SandboxError:
    kind: str  # one of ERROR_KINDS
    message: str  # plain English: cause and fix
    line: int | None = None
    col: int | None = None
    refusals: list[Refusal] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "refusals": [refusal.to_dict() for refusal in self.refusals]}


@dataclass
class SandboxResult:
    ok: bool
    value: dict | None  # the job's JSON-able return value (round-tripped through JSON)
    error: SandboxError | None
    elapsed_s: float
    usage: dict[str, Any] = field(default_factory=dict)  # the child's peak memory and CPU time

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "value": self.value,
            "error": self.error.to_dict() if self.error else None,
            "elapsed_s": self.elapsed_s,
            "usage": self.usage,
        }


@dataclass
class SandboxHealth:
    """Which layers are active; keys read as labels on the page's health line."""

    allow_list: bool
    facade: bool
    process_isolation: bool
    scrubbed_env: bool
    rlimits: bool
    seccomp: bool
    own_user: bool  # the child runs as another user than the server (only possible from root)
    warm_workers: str  # "free/cap": job slots, each a fresh child forked from the warm zygote
    detail: str = ""  # why a layer is off, for the server log

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _error(kind: str, message: str, started: float, **extra: Any) -> SandboxResult:
    return SandboxResult(False, None, SandboxError(kind, message, **extra), _since(started))


def _since(started: float) -> float:
    return time.perf_counter() - started


class _RateLimiter:
    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = limit, window_s
        self.history: dict[str, collections.deque[float]] = {}
        self.lock = threading.Lock()

    def wait_needed(self, session_id: str | None) -> float:
        """0 when the session may start a job now (and counts it), else seconds to wait."""
        if session_id is None or self.limit <= 0:
            return 0.0
        now = time.monotonic()
        with self.lock:
            stamps = self.history.setdefault(session_id, collections.deque())
            while stamps and now - stamps[0] >= self.window_s:
                stamps.popleft()
            if len(stamps) >= self.limit:
                return self.window_s - (now - stamps[0])
            stamps.append(now)
            if len(self.history) > 10_000:  # forget idle sessions
                for key in [key for key, value in self.history.items() if not value]:
                    del self.history[key]
            return 0.0


class _Zygote:
    """One running zygote process and the thread that reads its control messages."""

    def __init__(self, log_path: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": tempfile.gettempdir(),
        }  # a whitelist: the server's secrets (often environment variables) stay behind
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "torchatlas.sandbox.zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env=environment,
                cwd=tempfile.gettempdir(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        theirs.close()
        self.control = ours
        self.send_lock = threading.Lock()
        self.waiters: dict[int, dict[str, Any]] = {}
        self.waiters_lock = threading.Lock()
        self.ready = threading.Event()
        self.dead = threading.Event()
        self.info: dict[str, Any] = {}
        self.last_spare_pid: int | None = None  # the newest warm spare child (diagnostics, tests)
        self.reader = threading.Thread(target=self._read, name="sandbox-zygote", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.control.recv(65536)
                if not data:
                    break
                message = json.loads(data)
                if message.get("op") == "ready":
                    self.info = message
                    self.ready.set()
                elif message.get("op") == "spare":
                    self.last_spare_pid = message.get("pid")
                elif message.get("op") == "exit":
                    with self.waiters_lock:
                        waiter = self.waiters.pop(message.get("id"), None)
                        if waiter is not None:
                            waiter["exit"] = message
                    if waiter is not None:
                        waiter["event"].set()
                        if waiter.get("on_exit"):
                            waiter["on_exit"]()
        except (OSError, ValueError):
            pass
        finally:
            self.dead.set()
            self.ready.set()  # wake anyone waiting for a start that will not come
            with self.waiters_lock:
                waiters, self.waiters = list(self.waiters.values()), {}
            for waiter in waiters:
                waiter["event"].set()
                if waiter.get("on_exit"):
                    waiter["on_exit"]()

    def when_exited(self, job_id: int, waiter: dict[str, Any], action: Callable[[], None]) -> bool:
        """Run ``action`` once the job's child has exited (its report arrived or the zygote
        died); False when that has already happened, and the caller acts itself."""
        with self.waiters_lock:
            if self.waiters.get(job_id) is not waiter:
                return False
            waiter["on_exit"] = action
            return True

    def alive(self) -> bool:
        return not self.dead.is_set() and self.process.poll() is None

    def submit(self, job_id: int, order: dict[str, Any], job_fd: int) -> dict[str, Any]:
        waiter: dict[str, Any] = {"event": threading.Event(), "exit": None}
        with self.waiters_lock:
            self.waiters[job_id] = waiter
        with self.send_lock:
            socket.send_fds(self.control, [json.dumps(order).encode()], [job_fd])
        return waiter

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


class SandboxPool:
    """Runs jobs on pasted code in confined, single-use children of a warm zygote."""

    def __init__(
        self,
        *,
        concurrency: int | None = None,
        queue_limit: int = 16,
        queue_wait_s: float = 15.0,
        rate_limit: int = 10,
        rate_window_s: float = 10.0,
        memory_mb: int = DEFAULT_MEMORY_MB,
        max_result_bytes: int = MAX_RESULT_BYTES,
        test_hooks: bool = False,
    ) -> None:
        self.concurrency = concurrency or max(1, min(os.cpu_count() or 1, 4))
        self.queue_limit = queue_limit
        self.queue_wait_s = queue_wait_s
        self.memory_mb = memory_mb
        self.max_result_bytes = max_result_bytes
        self.test_hooks = test_hooks  # allows switching layers off, for the attack tests only
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._rate = _RateLimiter(rate_limit, rate_window_s)
        self._counter_lock = threading.Lock()
        self._waiting = 0
        self._running = 0
        self._ids = itertools.count(1)
        self._zygote: _Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._closed = False
        self.log_path = Path(tempfile.gettempdir()) / f"torchatlas-sandbox-{os.getpid()}.log"

    # ------------------------------------------------------------------ zygote
    def _zygote_ready(self, wait: bool = True) -> _Zygote | None:
        with self._zygote_lock:
            if self._closed:
                return None
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:
                    self._zygote.stop()
                self._zygote = _Zygote(self.log_path)
            zygote = self._zygote
        if wait:
            zygote.ready.wait(ZYGOTE_START_TIMEOUT_S)
            if not zygote.alive() or not zygote.info:
                return None
        return zygote

    def warm_up(self, wait: bool = True) -> None:
        """Start the zygote now (it imports torch once); ``wait`` until it is ready."""
        self._zygote_ready(wait=wait)

    def shutdown(self) -> None:
        with self._zygote_lock:
            self._closed = True
            if self._zygote is not None:
                self._zygote.stop()
                self._zygote = None

    def health(self) -> SandboxHealth:
        zygote = self._zygote
        ready = bool(zygote and zygote.alive() and zygote.ready.is_set() and zygote.info)
        probe = zygote.info.get("probe", {}) if ready and zygote else {}
        with self._counter_lock:
            free = max(0, self.concurrency - self._running) if ready else 0
        details = []
        if probe.get("error"):
            details.append(f"probe: {probe['error']}")
        if ready and zygote and zygote.info.get("job_failures"):
            details.append(f"jobs: {zygote.info['job_failures']}")
        return SandboxHealth(
            allow_list=True,
            facade=True,
            process_isolation=ready,
            scrubbed_env=bool(probe.get("scrubbed_env")),
            rlimits=bool(probe.get("rlimits")),
            seccomp=bool(probe.get("seccomp") and probe.get("socket_blocked")),
            own_user=bool(probe.get("unprivileged_user")) and os.geteuid() == 0,
            warm_workers=f"{free}/{self.concurrency}",
            detail="; ".join(details),
        )

    # ------------------------------------------------------------------ jobs
    def run_job(
        self,
        source: str,
        job: str,
        params: dict,
        *,
        timeout_s: float = 10.0,
        session_id: str | None = None,
        layers_off: tuple[str, ...] = (),
    ) -> SandboxResult:
        """Run ``job`` on ``source`` in a fresh confined child; never raises for user input."""
        started = time.perf_counter()
        if job not in JOBS:
            return _error("job_error", f"Unknown sandbox job {job!r}.", started)
        if layers_off and not self.test_hooks:
            return _error("job_error", "Layers can only be switched off in tests.", started)
        if not set(layers_off) <= TEST_LAYERS:
            return _error("job_error", f"Unknown layers {sorted(layers_off)}.", started)
        try:
            json.dumps(params)
        except (TypeError, ValueError) as exc:
            return _error("job_error", f"The job's parameters are not JSON: {exc}", started)
        timeout_s = min(max(float(timeout_s), MIN_TIMEOUT_S), MAX_TIMEOUT_S)
        wait_s = self._rate.wait_needed(session_id)
        if wait_s > 0:
            return _error(
                "busy",
                f"You started {self._rate.limit} analyses in the last {self._rate.window_s:g} "
                f"seconds. Wait {max(1, round(wait_s))} s and try again.",
                started,
            )
        with self._counter_lock:
            if self._waiting >= self.queue_limit:
                return _error("busy", _busy_message(), started)
            self._waiting += 1
        try:
            got_slot = self._slots.acquire(timeout=self.queue_wait_s)
        finally:
            with self._counter_lock:
                self._waiting -= 1
        if not got_slot:
            return _error("busy", _busy_message(), started)
        with self._counter_lock:
            self._running += 1
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                with self._counter_lock:
                    self._running -= 1
                self._slots.release()

        handed_over = False
        try:
            result, handed_over = self._run_in_child(
                source, job, params, timeout_s, layers_off, started, release
            )
            return result
        finally:
            if not handed_over:
                release()

    def _run_in_child(
        self,
        source: str,
        job: str,
        params: dict,
        timeout_s: float,
        layers_off: tuple[str, ...],
        started: float,
        release: Callable[[], None],
    ) -> tuple[SandboxResult, bool]:
        """The job's result, and whether ``release`` (the concurrency slot) was handed to the
        child's exit: a child that has answered is not waited for, but its slot stays taken
        until it has really gone, so the concurrency cap still counts every live child."""
        zygote = self._zygote_ready()
        if zygote is None:
            return _error(
                "unavailable",
                "The isolated worker that runs pasted code could not start on this server. "
                "Try again in a minute.",
                started,
            ), False
        job_id = next(self._ids)
        order = {
            "op": "run",
            "id": job_id,
            "timeout_s": timeout_s,
            "memory_mb": self.memory_mb,
            "max_result_bytes": self.max_result_bytes,
            "layers_off": list(layers_off),
        }
        ours, theirs = socket.socketpair()
        try:
            try:
                waiter = zygote.submit(job_id, order, theirs.fileno())
            except OSError:
                error = _error("unavailable", "The sandbox worker stopped; try again.", started)
                return error, False
            finally:
                theirs.close()
            deadline = time.monotonic() + timeout_s + EXIT_REPORT_GRACE_S
            reply, too_large = None, None
            try:
                ours.settimeout(max(0.1, deadline - time.monotonic()))
                ours.sendall(protocol.encode({"source": source, "job": job, "params": params}))
                reply = protocol.receive(ours, self.max_result_bytes + 4096)
            except protocol.MessageTooLarge as exc:
                too_large = exc
            except (OSError, ValueError, RecursionError):
                # The child died, hung up or sent something unreadable (a child running hostile
                # code may write anything to its socket): the zygote's exit report says why.
                reply = None
        finally:
            ours.close()
        # A child that answered needs no exit report to be understood: answer now (its
        # exit, ~20 ms of address-space teardown and reaping, happens meanwhile). Without an
        # answer, only the exit report says what happened (timeout, crash, memory).
        answered = (
            too_large is None
            and isinstance(reply, dict)
            and (
                (reply.get("ok") is True and isinstance(reply.get("value"), dict))
                or isinstance(reply.get("error"), dict)
            )
        )
        handed_over = answered and zygote.when_exited(job_id, waiter, release)
        if not handed_over:
            waiter["event"].wait(max(0.1, deadline - time.monotonic()))
        exit_report = waiter["exit"] or {}
        usage = {key: exit_report[key] for key in ("max_rss_kb", "cpu_s") if key in exit_report}
        try:
            result = self._interpret(reply, too_large, exit_report, zygote, timeout_s, started)
        except (KeyError, TypeError, ValueError, AttributeError):  # a forged, malformed reply
            result = _error("crashed", "The worker sent an unreadable result; try again.", started)
        result.usage = usage
        return result, handed_over

    def _interpret(
        self,
        reply: dict[str, Any] | None,
        too_large: protocol.MessageTooLarge | None,
        exit_report: dict[str, Any],
        zygote: _Zygote,
        timeout_s: float,
        started: float,
    ) -> SandboxResult:
        if too_large is not None:
            return _error(
                "output_too_large",
                f"The result is {too_large.size / 2**20:.1f} MB; the limit is "
                f"{too_large.limit / 2**20:.0f} MB. Analyse a smaller model.",
                started,
            )
        if reply is not None and reply.get("ok") is True and isinstance(reply.get("value"), dict):
            return SandboxResult(True, reply["value"], None, _since(started))
        if reply is not None and isinstance(reply.get("error"), dict):
            return SandboxResult(False, None, _sandbox_error(reply["error"]), _since(started))
        stop_signal = exit_report.get("signal")
        if exit_report.get("timed_out") or stop_signal == signal.SIGXCPU:
            return _error(
                "timeout",
                f"The code was stopped after {timeout_s:g} s. Look for a loop that never "
                "ends or a very long computation in `__init__` or `forward`.",
                started,
            )
        if not exit_report:
            if not zygote.alive():
                return _error("crashed", "The sandbox worker stopped; try again.", started)
            return _error("timeout", f"The code did not answer within {timeout_s:g} s.", started)
        how = (
            f"signal {signal.Signals(stop_signal).name}"
            if stop_signal
            else f"exit code {exit_report.get('code')}"
        )
        return _error(
            "crashed",
            f"The process running the code stopped without a result ({how}). Code that exits, "
            "crashes the interpreter or runs out of memory does this; simplify it and try again.",
            started,
        )


def _busy_message() -> str:
    return "Many people are analysing models right now. Wait a few seconds and try again."


def _sandbox_error(data: dict[str, Any]) -> SandboxError:
    kind = data.get("kind") if data.get("kind") in ERROR_KINDS else "job_error"
    refusals = [
        Refusal(int(r["line"]), int(r["col"]), str(r["code"]), str(r["message"]))
        for r in data.get("refusals") or []
        if isinstance(r, dict)
    ]
    line, col = data.get("line"), data.get("col")
    return SandboxError(
        kind=str(kind),
        message=str(data.get("message", "")),
        line=line if isinstance(line, int) else None,
        col=col if isinstance(col, int) else None,
        refusals=refusals,
    )


_POOL: SandboxPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> SandboxPool:
    """The process-wide pool (started lazily; pages keep it in ``st.cache_resource``)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SandboxPool()
            atexit.register(_POOL.shutdown)
        return _POOL


def run_job(
    source: str,
    job: str,
    params: dict,
    *,
    timeout_s: float = 10.0,
    session_id: str | None = None,
) -> SandboxResult:
    """Run ``job`` on ``source`` in the process-wide pool (see :meth:`SandboxPool.run_job`)."""
    return get_pool().run_job(source, job, params, timeout_s=timeout_s, session_id=session_id)
