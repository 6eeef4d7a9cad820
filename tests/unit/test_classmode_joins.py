"""Joins under a class's load, on SQLite and PostgreSQL: a hundred phones joining at once get
distinct nicknames and exact seat counts (a class's row is locked only at the end of a join,
so the checks made before it are made again under the lock), and a store outlives the
database dropping its connections (no ping before each use: the retry takes a fresh one)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.postgres import create_database, postgres_url  # noqa: F401 (the fixture)
from torchatlas.classmode import ClassError, ClassStore, ErrorCode, Limits


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'classes.sqlite3'}"
    return create_database(request.getfixturevalue("postgres_url"))


def at_once(count: int, call: Callable[[int], object]) -> list[object]:
    """``call(i)`` for i < count from as many threads released together; each outcome (the
    result, or the ClassError's code)."""
    gate = threading.Barrier(count)
    outcomes: list[object] = [None] * count

    def run(i: int) -> None:
        gate.wait()
        try:
            outcomes[i] = call(i)
        except ClassError as error:
            outcomes[i] = error.code

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_a_class_joining_at_once_gets_distinct_names_and_every_seat(db_url: str) -> None:
    store = ClassStore(db_url)
    teacher = store.start(None, "en", client="t")
    # Half want the same nickname, half leave it empty ("Student N" from a count they read).
    outcomes = at_once(
        40, lambda i: store.join(teacher.code, "Ada" if i % 2 else "", client=f"ip:10.0.0.{i}")
    )
    names = [o.nickname for o in outcomes if hasattr(o, "nickname")]
    assert len(names) == 40 and len(set(names)) == 40, Counter(names).most_common(3)
    assert sum(name.startswith("Ada") for name in names) == 20
    for passed in outcomes:
        assert store.student(teacher.code, passed.student_key).nickname == passed.nickname
    assert store.tally(teacher.code, teacher.teacher_key).joined == 40


def test_seat_limits_hold_exactly_under_a_race(db_url: str) -> None:
    store = ClassStore(db_url, limits=Limits(seats_per_client=5, max_students=12))
    teacher = store.start(None, "en", client="t")
    laptop = at_once(9, lambda i: store.join(teacher.code, f"bot{i}", client="ip:10.9.9.9"))
    assert sum(not isinstance(o, ErrorCode) for o in laptop) == 5
    assert set(o for o in laptop if isinstance(o, ErrorCode)) == {ErrorCode.TOO_MANY_SEATS}
    others = at_once(12, lambda i: store.join(teacher.code, "", client=f"ip:10.1.0.{i}"))
    assert sum(not isinstance(o, ErrorCode) for o in others) == 7  # 12 seats in all
    assert set(o for o in others if isinstance(o, ErrorCode)) == {ErrorCode.CLASS_FULL}
    assert store.tally(teacher.code, teacher.teacher_key).joined == 12


def test_a_locked_or_ended_class_refuses_a_join_that_began_before(db_url: str) -> None:
    store = ClassStore(db_url)
    teacher = store.start(None, "en", client="t")
    store.lock(teacher.code, teacher.teacher_key, True)
    with pytest.raises(ClassError) as caught:
        store.join(teacher.code, "late", client="ip:10.2.0.1")
    assert caught.value.code == ErrorCode.CLASS_LOCKED
    assert store.tally(teacher.code, teacher.teacher_key).joined == 0


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:  # noqa: F811
    yield create_database(postgres_url)


def test_a_store_outlives_its_connections_being_dropped(pg_url: str) -> None:
    import psycopg

    store = ClassStore(pg_url)
    teacher = store.start(None, "en", client="t")
    before = store.join(teacher.code, "before", client="ip:10.3.0.1")
    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    name = plain.rsplit("/", 1)[1]
    with psycopg.connect(plain, autocommit=True) as admin:
        dropped = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    # The store's pooled connections were there, and are gone now.
    assert dropped is not None and dropped[0]
    after = store.join(teacher.code, "after", client="ip:10.3.0.2")  # a fresh connection
    assert store.student(teacher.code, before.student_key).nickname == "before"
    assert store.student(teacher.code, after.student_key).nickname == "after"
