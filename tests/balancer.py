"""A real load balancer for the e2e tests: Debian's nginx, running README's configuration
(``deploy/nginx/torchatlas.conf``, the very file), in front of two ``streamlit run app.py``
replicas on one throw-away PostgreSQL cluster.

``with running_balancer(folder) as balancer:`` starts the cluster (``bench/postgres.py``),
the replicas (``bench/server.py``, each with ``ATLAS_DATABASE_URL`` and
``ATLAS_TRUSTED_PROXIES=127.0.0.1``, nginx's address) and nginx, all on free loopback ports,
with every file nginx writes (pid, logs, temporary bodies) under ``folder``; nginx runs as
this user in the foreground (``nginx -p folder -c conf -e log -g 'daemon off;'``), never as
the system's service. The ``balancer`` fixture does the same in a test's ``tmp_path`` and
skips when nginx is missing (fails in CI, where ``.ci/run`` installs it).

Which replica served a request is read from nginx's own access log (``$upstream_addr``, per
request, with the affinity cookie the request carried): :meth:`Balancer.replica_of` asks
nginx where a cookie's key goes by sending a probe and reading its line.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.postgres import missing_reason as postgres_missing
from bench.postgres import postgres_cluster
from bench.server import Server, free_port, start_together

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "deploy" / "nginx" / "torchatlas.conf"
# The deploy file's example lines, replaced by the test's addresses (each must be there once).
EXAMPLE_LISTEN = "listen 80;"
EXAMPLE_REPLICAS = ("server 10.0.0.11:8501", "server 10.0.0.12:8501")
COOKIE = "atlas_replica"  # the affinity cookie the deploy file sets
# A browser that leaves mid-message is not a crash (as tests/e2e/conftest.py ignores it).
DISCONNECTS = ("WebSocketDisconnect", "ClientDisconnected", "ConnectionClosed")
START_TIMEOUT_S = 20.0
# Loopback only, never through a proxy the environment may name.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# One access-log line per request, tab-separated: what LogLine reads.
LOG_FORMAT = "$msec\\t$cookie_atlas_replica\\t$upstream_addr\\t$status\\t$request"


def nginx_binary() -> str | None:
    """Debian's nginx (``/usr/sbin`` is not on every user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None


def nginx_missing() -> str | None:
    if nginx_binary() is None:
        return "nginx missing (apt-get install nginx; .ci/run does it)"
    return None


def missing_reason() -> str | None:
    """Why the balancer cannot run here (nginx or PostgreSQL missing), or None."""
    return nginx_missing() or postgres_missing()


def site_config(listen_port: int, replicas: Sequence[str]) -> str:
    """The deploy file with this run's addresses in place of its examples. Each example
    line must be there exactly once: a config that drifted from what this replaces fails
    here instead of testing something else."""
    text = SITE.read_text(encoding="utf-8")
    if len(replicas) != len(EXAMPLE_REPLICAS):
        raise ValueError(f"the deploy file lists {len(EXAMPLE_REPLICAS)} replicas")
    swaps = [(EXAMPLE_LISTEN, f"listen 127.0.0.1:{listen_port};")]
    swaps += [(old, f"server {new}") for old, new in zip(EXAMPLE_REPLICAS, replicas, strict=True)]
    for old, new in swaps:
        if text.count(old) != 1:
            raise ValueError(f"{SITE.name}: {old!r} appears {text.count(old)} times, not once")
        text = text.replace(old, new)
    return text


def main_config(folder: Path, site: Path) -> str:
    """nginx.conf for a throw-away nginx: everything it writes under ``folder`` (Debian's
    build puts the pid file, logs and temporary bodies under /run and /var by default)."""
    lines = []
    if os.geteuid() == 0:
        # As root, nginx's workers would switch to "nobody", who cannot enter a private
        # temporary folder: they stay this user, as they would without root.
        user = pwd.getpwuid(os.geteuid()).pw_name
        lines.append(f"user {user} {grp.getgrgid(os.getegid()).gr_name};")
    lines += [
        "worker_processes 1;",
        f"pid {folder / 'nginx.pid'};",
        f"lock_file {folder / 'nginx.lock'};",
        f"error_log {folder / 'error.log'} warn;",
        "events { worker_connections 1024; }",
        "http {",
        f"    log_format atlas '{LOG_FORMAT}';",
        f"    access_log {folder / 'access.log'} atlas;",
    ]
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        lines.append(f"    {kind}_temp_path {folder / ('temp_' + kind)};")
    lines += [f"    include {site};", "}", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class LogLine:
    """One request as nginx logged it."""

    at: float
    key: str  # the affinity cookie it carried ("" without one)
    upstreams: tuple[str, ...]  # the replicas tried, in order (the last one answered)
    status: int
    request: str

    @classmethod
    def parse(cls, line: str) -> LogLine | None:
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 5:
            return None
        at, key, upstreams, status, request = parts
        tried = tuple(u.strip() for u in upstreams.replace(" : ", ", ").split(",") if u.strip())
        return cls(float(at), "" if key == "-" else key, tried, int(status), request)


class Nginx:
    """nginx in the foreground, configured by :func:`main_config` in ``folder``."""

    def __init__(self, folder: Path, port: int, replicas: Sequence[str]) -> None:
        self.folder = folder
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.address = ("127.0.0.1", port)
        folder.mkdir(parents=True, exist_ok=True)
        self.site = folder / "torchatlas.conf"
        self.site.write_text(site_config(port, replicas), encoding="utf-8")
        self.conf = folder / "nginx.conf"
        self.conf.write_text(main_config(folder, self.site), encoding="utf-8")
        self.access_log = folder / "access.log"
        self.error_log = folder / "error.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self, *extra: str) -> list[str]:
        binary = nginx_binary()
        assert binary is not None
        return [binary, "-p", str(self.folder), "-c", str(self.conf), "-e", str(self.error_log),
                *extra]  # fmt: skip

    def check(self) -> None:
        """``nginx -t``: the configuration parses (its message on failure)."""
        done = subprocess.run(self.command("-t"), capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"nginx -t failed: {done.stderr}")

    def start(self) -> None:
        self.check()
        self.process = subprocess.Popen(
            self.command("-g", "daemon off;"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        limit = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < limit:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {self.errors()}")
            with contextlib.suppress(OSError), socket.create_connection(self.address, 1):
                return
            time.sleep(0.05)
        raise TimeoutError(f"nginx did not listen on {self.port}: {self.errors()}")

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def errors(self) -> str:
        try:
            return self.error_log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def lines(self) -> list[LogLine]:
        try:
            text = self.access_log.read_text(errors="replace")
        except OSError:
            return []
        return [found for line in text.splitlines() if (found := LogLine.parse(line))]


@dataclass
class Balancer:
    """nginx (``url``, what browsers open) in front of ``replicas`` on one database (``db``)."""

    nginx: Nginx
    replicas: list[Server]
    db: str

    @property
    def url(self) -> str:
        return self.nginx.url

    def address(self, index: int) -> str:
        return f"127.0.0.1:{self.replicas[index].port}"

    def index_of(self, upstream: str) -> int:
        for index in range(len(self.replicas)):
            if self.address(index) == upstream:
                return index
        raise ValueError(f"{upstream!r} is none of the replicas")

    def probe(self, key: str | None) -> LogLine:
        """One request through nginx carrying the affinity cookie ``key`` (none: nginx picks
        and sets one); its line in nginx's access log."""
        marker = uuid.uuid4().hex
        request = urllib.request.Request(f"{self.url}/_stcore/health?probe={marker}")
        if key is not None:
            request.add_header("Cookie", f"{COOKIE}={key}")
        with OPENER.open(request, timeout=30) as response:
            response.read()
        limit = time.monotonic() + 5  # nginx logs a request just after answering it
        while time.monotonic() < limit:
            for line in reversed(self.nginx.lines()):
                if marker in line.request:
                    return line
            time.sleep(0.02)
        raise AssertionError(f"nginx did not log the probe {marker}")

    def replica_of(self, key: str) -> int:
        """The replica nginx sends a browser holding the affinity cookie ``key`` to."""
        return self.index_of(self.probe(key).upstreams[-1])

    def key_for(self, index: int, prefix: str = "atlas-test") -> str:
        """An affinity key that nginx's hash sends to replica ``index`` (found by asking)."""
        for number in range(200):
            key = f"{prefix}-{number}"
            if self.replica_of(key) == index:
                return key
        raise AssertionError(f"no key of 200 reached replica {index}")

    def served(self, key: str) -> list[LogLine]:
        """Every logged request that carried ``key``."""
        return [line for line in self.nginx.lines() if line.key == key]

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index``'s whole process tree (no shutdown of any kind): what a
        crashed host does."""
        self.replicas[index].crash()


@contextlib.contextmanager
def running_balancer(folder: Path, replicas: int = 2) -> Iterator[Balancer]:
    """PostgreSQL, ``replicas`` app servers on it and nginx in front (see the module's
    docstring); every replica's log must end without a page's traceback."""
    with postgres_cluster() as db:
        env = {
            "ATLAS_DATABASE_URL": db,
            "ATLAS_DATA_DIR": str(folder / "data"),  # unused with a database URL: not ~
            "ATLAS_TRUSTED_PROXIES": "127.0.0.1",  # nginx's address, as the README says
        }
        servers = [Server(0, folder / f"replica{i}.log", env=env) for i in range(replicas)]
        nginx = Nginx(folder / "nginx", free_port(), [f"127.0.0.1:{s.port}" for s in servers])
        try:
            start_together(servers)
            nginx.start()
            yield Balancer(nginx, servers, db)
        finally:
            nginx.stop()
            for server in servers:
                server.stop()
        for server in servers:
            crashes = server.crashes(ignoring=DISCONNECTS)
            assert not crashes, crashes[0][-4000:]


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[Balancer]:
    """:func:`running_balancer` in the test's folder; skipped without nginx or PostgreSQL,
    except in CI (``.ci/run`` installs both), where that fails."""
    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with running_balancer(tmp_path) as found:
        yield found
