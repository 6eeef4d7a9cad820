"""One SQLAlchemy Engine per database URL per process, and short transactions with retries.

SQLite (the default: a file in ``$ATLAS_DATA_DIR``, WAL mode, created on first use) and
PostgreSQL (``ATLAS_DATABASE_URL``, through psycopg 3) run the same SQLAlchemy Core
statements. Two things differ and are set here, not in the statements:

- SQLite: Python's driver would open its transactions lazily, at the first write, so a
  transaction that reads and then writes can find that another writer committed in between
  and fail at once with "database is locked", whatever the busy timeout. Writes therefore
  start with ``BEGIN IMMEDIATE`` (the write lock is taken first, waiting up to the busy
  timeout), reads with a plain ``BEGIN`` (one consistent snapshot; WAL readers never wait).
- Both: a write that still fails on a lock, a deadlock or a dropped connection is retried
  from the start a few times (each transaction is a function of its inputs only).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from torchatlas.classmode import schema
from torchatlas.classmode.errors import ClassError, ErrorCode

T = TypeVar("T")

BUSY_TIMEOUT_S = 30.0
RETRIES = 6
CONNECT_TIMEOUT_S = 5
_IMMEDIATE = "classmode_immediate"

log = logging.getLogger(__name__)
_lock = threading.Lock()
_engines: dict[str, Engine] = {}
_migrated: set[str] = set()


def data_dir() -> Path:
    return Path(os.environ.get("ATLAS_DATA_DIR") or Path.home() / ".local/share/torchatlas")


def default_url() -> str:
    """``ATLAS_DATABASE_URL`` when set, else the SQLite file in the data folder."""
    url = os.environ.get("ATLAS_DATABASE_URL", "").strip()
    if url:
        return url
    return f"sqlite:///{data_dir() / 'classes.sqlite3'}"


def normalise(url: str) -> str:
    """``postgres://`` and ``postgresql://`` (as hosting services write them) use psycopg 3,
    the driver installed; SQLAlchemy's default for them would be psycopg2."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_engine(url: str) -> Engine:
    path = make_url(url).database
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    engine = create_engine(
        url,
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
        pool_size=8,
        max_overflow=24,
        pool_timeout=60,
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we say BEGIN ourselves (below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before the call returns (the restart promise).
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def engine_for(url: str) -> Engine:
    """The process's Engine for ``url``, schema migrated (once per process and URL);
    :class:`ClassError` ``unavailable`` when the database cannot be opened (the cause is
    logged: it is the server's configuration, not the visitor's doing)."""
    url = normalise(url)
    try:
        return _engine_for(url)
    except ClassError:
        raise
    except Exception as error:
        log.warning("class database %s unavailable: %r", _safe(url), error)
        raise ClassError(ErrorCode.UNAVAILABLE) from error


def _safe(url: str) -> str:
    """The URL without its password, for a log line."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(an unreadable URL)"


def _engine_for(url: str) -> Engine:
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            if url.startswith("sqlite"):
                engine = _sqlite_engine(url)
            else:
                engine = create_engine(
                    url,
                    # No ping before each use (a round trip per transaction, and each waits
                    # for this server's GIL under a class's load): a connection the
                    # database dropped fails its statement with an OperationalError, the
                    # pool throws it away, and read/write retry on a fresh one, so a
                    # replica still outlives a database restart.
                    pool_size=8,
                    max_overflow=24,
                    pool_timeout=60,
                    # an unreachable host fails in seconds, not at the OS's TCP timeout
                    connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
                )
            _engines[url] = engine
        if url not in _migrated:
            write(engine, schema.migrate, retry_on=(OperationalError, DBAPIError))
            _migrated.add(url)
    return engine


def write(
    engine: Engine,
    work: Callable[[Connection], T],
    *,
    retry_on: tuple[type[BaseException], ...] = (OperationalError,),
) -> T:
    """Run ``work(conn)`` in one write transaction (committed before returning), retried
    from the start on ``retry_on``; any other exception rolls back and propagates."""
    writer = engine.execution_options(**{_IMMEDIATE: True})
    for attempt in range(RETRIES):
        try:
            with writer.begin() as conn:
                return work(conn)
        except retry_on as error:
            if attempt == RETRIES - 1:
                _give_up(engine, error)
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    raise AssertionError("unreachable")


def _give_up(engine: Engine, error: BaseException) -> None:
    """After the last retry: a database that stays locked or unreachable is ``unavailable``
    (logged); anything else (a bug) propagates as it is."""
    if isinstance(error, OperationalError):
        log.warning("class database %s: %r", _safe(str(engine.url)), error)
        raise ClassError(ErrorCode.UNAVAILABLE) from error
    raise error


def read(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run ``work(conn)`` in one read transaction (one snapshot), retried like a write."""
    for attempt in range(RETRIES):
        try:
            with engine.begin() as conn:
                return work(conn)
        except OperationalError as error:
            if attempt == RETRIES - 1:
                _give_up(engine, error)
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    raise AssertionError("unreachable")


__all__ = ["IntegrityError", "default_url", "engine_for", "normalise", "read", "write"]
