"""The throw-away PostgreSQL cluster as pytest fixtures (the cluster itself:
``bench/postgres.py``, which benchmarks use too).

``from tests.postgres import postgres_url`` in a test module gives a session-wide cluster
(``postgres_url``, one per test session) and ``postgres_db``, a fresh database on it for one
test; both skip with the reason when the PostgreSQL binaries are missing (``.ci/run``
installs them with apt). ``with postgres_cluster() as url:`` starts one of your own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.postgres import binaries, create_database, missing_reason, postgres_cluster

__all__ = [
    "binaries",
    "create_database",
    "missing_reason",
    "postgres_cluster",
    "postgres_db",
    "postgres_url",
]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The session's throw-away cluster (skips when PostgreSQL is not installed)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with postgres_cluster() as url:
        yield url


@pytest.fixture
def postgres_db(postgres_url: str) -> str:
    """A fresh database on the session's cluster, for one test."""
    return create_database(postgres_url)
