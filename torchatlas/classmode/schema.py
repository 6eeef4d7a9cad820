"""The tables, and the versioned migrations every store runs on start.

``classmode_schema`` holds one row (id 1) with the schema version. A store applies each
migration above that version in one transaction, holding that row's lock, so two replicas
starting together apply it once (on PostgreSQL the loser of a race to create the tables
fails, rolls back and finds them made on its retry). A migration is append-only: never
edit one that has shipped; add the next.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    insert,
    select,
    update,
)

metadata = MetaData()

schema = Table(
    "classmode_schema",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", Integer, nullable=False),
)

classes = Table(
    "classmode_classes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("code", String(6), nullable=False, unique=True),
    Column("teacher_hash", String(64), nullable=False),
    Column("lesson_id", String(40)),
    Column("lang", String(8), nullable=False),
    Column("created", Float, nullable=False),
    Column("active", Float, nullable=False, index=True),  # last teacher action or join
    Column("version", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("room", String(16), nullable=False),
    Column("query", Text, nullable=False),  # JSON object, sorted keys
    Column("ended", Boolean, nullable=False),
    Column("students", Integer, nullable=False),  # joined so far (kept with each join)
)

questions = Table(
    "classmode_questions",  # a step whose question the teacher opened
    metadata,
    Column("class_id", Integer, ForeignKey("classmode_classes.id", ondelete="CASCADE")),
    Column("step", Integer, nullable=False),
    Column("asked_at", Float, nullable=False),
    Column("revealed", Boolean, nullable=False),
    PrimaryKeyConstraint("class_id", "step"),
)

students = Table(
    "classmode_students",
    metadata,
    Column("id", Integer, primary_key=True),
    Column(
        "class_id",
        Integer,
        ForeignKey("classmode_classes.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("key_hash", String(64), nullable=False),
    Column("nickname", String(64), nullable=False),
    Column("fold", String(128), nullable=False),  # casefolded nickname: unique in the class
    Column("joined", Float, nullable=False),
    UniqueConstraint("class_id", "key_hash"),
    UniqueConstraint("class_id", "fold"),
)

answers = Table(
    "classmode_answers",
    metadata,
    Column(
        "student_id",
        Integer,
        ForeignKey("classmode_students.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("class_id", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("option", Integer, nullable=False),
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("student_id", "step"),
    Index("ix_classmode_answers_class_step", "class_id", "step"),
)

attempts = Table(
    "classmode_attempts",  # joins and starts, for the per-client rate limit
    metadata,
    Column("id", Integer, primary_key=True),
    Column("client", String(64), nullable=False),  # SHA-256 of what the page called the client
    Column("at", Float, nullable=False, index=True),
    Index("ix_classmode_attempts_client_at", "client", "at"),
)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[classes, questions, students, answers, attempts])


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1,)
VERSION = len(MIGRATIONS)


def migrate(conn: Connection) -> int:
    """Bring the schema to :data:`VERSION` inside the caller's transaction; the version found."""
    schema.create(conn, checkfirst=True)
    found = conn.execute(
        select(schema.c.version).where(schema.c.id == 1).with_for_update()
    ).scalar_one_or_none()
    if found is None:
        conn.execute(insert(schema).values(id=1, version=0))
        found = 0
    for number in range(found, VERSION):
        MIGRATIONS[number](conn)
    if found < VERSION:
        conn.execute(update(schema).where(schema.c.id == 1).values(version=VERSION))
    return found
