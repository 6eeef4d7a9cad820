"""``streamlit run app.py`` as README command 1 starts it, on a free loopback port: one server
start-up for the e2e tests (tests/e2e/conftest.py) and the classroom benchmark
(bench/classroom.py).

The server runs in its own process group; every descendant ever seen is remembered with its
start time, so :meth:`Server.stop` also stops a worker that left the group, and never a
process that merely reuses a pid. Only 127.0.0.1 is contacted.

>>> with running_server(Path("/tmp/server.log")) as server:  # doctest: +SKIP
...     urlopen(f"{server.url}/_stcore/health")
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from bench.memory import process_tree, start_time

ROOT = Path(__file__).resolve().parents[1]
# Loopback only, so never through a proxy the environment may name.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
START_TIMEOUT_S = 180.0  # torch, the rooms, the sandbox and a model load before it answers

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Streamlit prints tracebacks in colour
EXCEPTION_LINE = re.compile(r"^(?:\w+\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)\b.*$", re.M)
TRACEBACK = "Traceback (most recent call last)"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


README_FLAGS = ("--server.fileWatcherType", "none")  # what README command 1 adds


class Server:
    """``streamlit run <script>`` (``app.py``: README command 1) from ``app_dir`` on ``port``
    (0: a free one), its output in ``log_path``; ``env`` is added to this process's
    environment for the server (several replicas of one app differ only there). ``script``
    and ``flags`` start another entry as its host does (Community Cloud runs
    ``deploy/cloud/streamlit_app.py`` with no flags of ours)."""

    def __init__(
        self,
        port: int,
        log_path: Path,
        app_dir: Path = ROOT,
        env: Mapping[str, str] | None = None,
        *,
        script: str = "app.py",
        flags: tuple[str, ...] = README_FLAGS,
    ) -> None:
        self.app_dir = app_dir
        self.env = dict(env or {})
        self.script = script
        self.flags = flags
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.seen: dict[int, str] = {}
        self._lock = threading.Lock()

    def start(self, deadline: float | None = None) -> None:
        """Start the server and wait until it answers its health check (by ``deadline``, a
        ``time.monotonic()`` value, and at most :data:`START_TIMEOUT_S`)."""
        command = [
            sys.executable, "-m", "streamlit", "run", self.script,
            "--server.headless", "true",
            "--server.port", str(self.port),
            "--server.address", "127.0.0.1",
            *self.flags,
            "--browser.gatherUsageStats", "false",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.app_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.env} if self.env else None,
            )
        limit = time.monotonic() + START_TIMEOUT_S
        limit = limit if deadline is None else min(deadline, limit)
        while time.monotonic() < limit:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"streamlit exited with {self.process.returncode}: {self.log_tail()}"
                )
            try:
                with OPENER.open(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"{self.url} did not answer its health check in time")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def remember_tree(self) -> list[int]:
        """The server's process and its descendants now (remembered for :meth:`stop`)."""
        pids = process_tree(self.pid)
        with self._lock:
            for pid in pids:
                if pid not in self.seen:
                    started = start_time(pid)
                    if started is not None:
                        self.seen[pid] = started
        return pids

    def crash(self) -> None:
        """SIGKILL to the server's whole process tree (no shutdown of any kind): what a crashed
        host does. Sandbox workers may have left the group, so every descendant is killed."""
        tree = self.remember_tree()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        assert self.process is not None
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server's process group, then any descendant seen that is still there."""
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            self.remember_tree()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        time.sleep(0.2)
        with self._lock:
            leftovers = dict(self.seen)
        for pid, started in leftovers.items():
            if start_time(pid) == started:  # still the very process this server started
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.process = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_text()[-chars:]

    def tracebacks(self) -> tuple[int, str | None]:
        """(number of tracebacks in the server log, the last one's exception line)."""
        text = ANSI_ESCAPE.sub("", self.log_text())
        count = text.count(TRACEBACK)
        if not count:
            return 0, None
        found = EXCEPTION_LINE.search(text[text.rindex(TRACEBACK) :])
        return count, found.group(0).strip() if found else None

    def crashes(self, ignoring: Iterable[str] = ()) -> list[str]:
        """Each traceback in the log (from the word on), except those that mention one of
        ``ignoring`` (a browser that left mid-message is not a crash)."""
        words = tuple(ignoring)
        blocks = self.log_text().split("Traceback")[1:]
        return ["Traceback" + block for block in blocks if not any(w in block for w in words)]


def start_together(servers: Iterable[Server], deadline: float | None = None) -> None:
    """Start ``servers`` side by side (each start is mostly one core's import work, so two
    replicas on two cores start in the time of one); the first failure is raised once all
    have returned."""
    failures: list[BaseException] = []

    def start(server: Server) -> None:
        try:
            server.start(deadline)
        except BaseException as error:  # raised below, after the others finished
            failures.append(error)

    threads = [threading.Thread(target=start, args=(s,), name="server-start") for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@contextlib.contextmanager
def running_server(
    log_path: Path,
    app_dir: Path = ROOT,
    deadline: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """A started :class:`Server` on a free port, stopped on the way out (also on an error);
    ``env`` is added to its environment."""
    server = Server(0, log_path, app_dir, env=env)
    try:
        server.start(deadline)
        yield server
    finally:
        server.stop()
