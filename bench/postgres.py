"""A throw-away PostgreSQL cluster for benchmarks and tests (Debian's ``postgresql``).

``with postgres_cluster() as url:`` initialises a cluster in a temporary folder, starts it
on a free local port and its own unix socket, yields a SQLAlchemy URL
(``postgresql+psycopg://...``), and stops and deletes it at the end. As root (this machine,
CI containers) the server runs as the ``postgres`` user through ``runuser``, since
PostgreSQL refuses to run as root; as anyone else it runs as that user.

The pytest fixtures are in ``tests/postgres.py`` (bench may not import tests; tests import
this). ``.ci/run`` installs the binaries with apt when they are missing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

USER = "atlas"


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder (with initdb), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major, reverse=True)
    for candidate in [*found, shutil.which("initdb")]:
        if candidate and Path(candidate).exists():
            return Path(candidate).parent
    return None


def _major(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except (ValueError, IndexError):
        return 0


def missing_reason() -> str | None:
    if binaries() is None:
        return "PostgreSQL binaries missing (apt-get install postgresql; .ci/run does it)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as 'postgres'"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextlib.contextmanager
def postgres_cluster(*, fsync: bool = False) -> Iterator[str]:
    """A running cluster's URL (database ``atlas``, user ``atlas``, trust auth, local only).
    ``fsync`` off by default: the data is thrown away; a test of the server's own restart
    kills the app, never this cluster."""
    reason = missing_reason()
    if reason is not None:
        raise RuntimeError(reason)
    bin_dir = binaries()
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
    data, sock, log = root / "data", root / "sock", root / "server.log"
    sock.mkdir()
    if os.geteuid() == 0:
        record = pwd.getpwnam("postgres")
        for path in (root, sock):
            os.chown(path, record.pw_uid, record.pw_gid)
    port = _free_port()
    started = False
    try:
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "-A", "trust",
                 "--no-sync", "-E", "UTF8", "--locale=C"]
            ),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        options = (
            f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=200"
            f" -c fsync={'on' if fsync else 'off'} -c synchronous_commit=on"
        )
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
                 "-w", "-t", "60", "start"]
            ),
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip
        started = True
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "createdb"), "-h", str(sock), "-p", str(port), "-U", USER, USER]
            ),
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        yield f"postgresql+psycopg://{USER}@127.0.0.1:{port}/{USER}"
    finally:
        if started:
            subprocess.run(
                _as_server_user(
                    [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
                ),
                capture_output=True, timeout=60, check=False,
            )  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def create_database(url: str) -> str:
    """A new empty database on the cluster at ``url``; its URL."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # name: our own hex, not input
    return url.rsplit("/", 1)[0] + "/" + name
