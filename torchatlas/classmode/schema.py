"""The tables, and the versioned migrations every store runs on start.

``classmode_schema`` holds one row (id 1) with the schema version. A store applies each
migration above that version in one transaction, holding that row's lock, so two replicas
starting together apply it once (on PostgreSQL the loser of a race to create the tables
fails, rolls back and finds them made on its retry). A migration is append-only: never
edit one that has shipped; add the next.

Version 1 creates its tables from this file's metadata as it is now, so on a new database
they already have every later column: each later migration adds only what it finds missing
(columns by ``ALTER TABLE ... ADD COLUMN`` with a default, tables and indexes ``checkfirst``).

- v1: classes, questions, students, answers, attempts.
- v2: ``classes.client`` (the starting client's digest) and ``classes.locked``;
  ``students.client`` (the joining client's digest); ``attempts.kind`` ("join": joins and
  failed link checks; "start"); the ``classmode_removed`` table (keys the teacher removed);
  indexes for the per-client counts.
- v3: ``classmode_authored`` (teachers' own lessons: their TOML, the author key's hash, the
  creating client's digest) and ``classmode_code_answers`` (a student's code answer and its
  verdict, kept for the class's life).
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
    false,
    insert,
    inspect,
    select,
    text,
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
    Column("active", Float, nullable=False, index=True),  # last teacher action (v1: or join)
    Column("version", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("room", String(16), nullable=False),
    Column("query", Text, nullable=False),  # JSON object, sorted keys
    Column("ended", Boolean, nullable=False),
    Column("students", Integer, nullable=False),  # in the class now (join +1, removal -1)
    # v2: SHA-256 of the client that started it (the per-client cap on live classes)
    Column("client", String(64), nullable=False, server_default=""),
    Column("locked", Boolean, nullable=False, server_default=false()),  # v2: no new joins
    Index("ix_classmode_classes_client", "client"),
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
    # the nickname's form for uniqueness in the class (v1: casefolded; v2: its confusable
    # skeleton, clean.fold; a join compares with both)
    Column("fold", String(128), nullable=False),
    Column("joined", Float, nullable=False),
    Column("client", String(64), nullable=False, server_default=""),  # v2: who joined (SHA-256)
    UniqueConstraint("class_id", "key_hash"),
    UniqueConstraint("class_id", "fold"),
    Index("ix_classmode_students_class_client", "class_id", "client"),
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
    "classmode_attempts",  # joins, failed link checks and starts, for the per-client limits
    metadata,
    Column("id", Integer, primary_key=True),
    Column("client", String(64), nullable=False),  # SHA-256 of what the page called the client
    Column("at", Float, nullable=False, index=True),
    Column("kind", String(8), nullable=False, server_default="join"),  # v2: "join" or "start"
    Index("ix_classmode_attempts_client_at", "client", "at"),
)

removed = Table(
    "classmode_removed",  # v2: students the teacher removed (their key says so, kindly)
    metadata,
    Column(
        "class_id",
        Integer,
        ForeignKey("classmode_classes.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("key_hash", String(64), nullable=False),
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("class_id", "key_hash"),
)


authored = Table(
    "classmode_authored",  # v3: a teacher's own lesson, in the TOML of assets/lessons/
    metadata,
    Column("id", Integer, primary_key=True),
    Column("code", String(8), nullable=False, unique=True),
    Column("author_hash", String(64), nullable=False),  # SHA-256 of the author key
    Column("client", String(64), nullable=False),  # SHA-256 of the client that created it
    Column("title", String(160), nullable=False),
    Column("toml", Text, nullable=False),
    Column("created", Float, nullable=False),
    Column("updated", Float, nullable=False, index=True),
    Index("ix_classmode_authored_client", "client"),
    Index("ix_classmode_authored_author", "author_hash"),
)

code_answers = Table(
    "classmode_code_answers",  # v3: a code answer (its choice in classmode_answers is -1)
    metadata,
    Column(
        "student_id",
        Integer,
        ForeignKey("classmode_students.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("class_id", Integer, nullable=False),
    Column("step", Integer, nullable=False),
    Column("source", Text, nullable=False),  # what the student wrote (bounded by the page)
    Column("status", String(8), nullable=False),  # "pass", "fail" or "error"
    Column("verdict", String(40), nullable=False),  # the verdict's code
    Column("error_type", String(40), nullable=False),  # torch's exception class, for the tally
    Column("detail", Text, nullable=False),  # the verdict's parameters and message, JSON
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("student_id", "step"),
    Index("ix_classmode_code_answers_class_step", "class_id", "step"),
)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[classes, questions, students, answers, attempts])


# v2's new columns: (table, column, its SQL type and default, as both databases read them)
_V2_COLUMNS = (
    (classes, "client", "VARCHAR(64) NOT NULL DEFAULT ''"),
    (classes, "locked", "BOOLEAN NOT NULL DEFAULT FALSE"),
    (students, "client", "VARCHAR(64) NOT NULL DEFAULT ''"),
    (attempts, "kind", "VARCHAR(8) NOT NULL DEFAULT 'join'"),
)


def _v2(conn: Connection) -> None:
    found = inspect(conn)
    for table, column, spec in _V2_COLUMNS:
        if column not in {c["name"] for c in found.get_columns(table.name)}:
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column} {spec}"))
    removed.create(conn, checkfirst=True)
    for index in (*classes.indexes, *students.indexes):
        index.create(conn, checkfirst=True)


def _v3(conn: Connection) -> None:
    authored.create(conn, checkfirst=True)
    code_answers.create(conn, checkfirst=True)
    for index in (*authored.indexes, *code_answers.indexes):
        index.create(conn, checkfirst=True)


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1, _v2, _v3)
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
