"""Teachers' own lessons, kept in the class database (SQLite by default, PostgreSQL when
``ATLAS_DATABASE_URL`` names one) as the TOML of ``assets/lessons/``.

Writing a lesson needs no account: saving a new one gives a short code (anyone with it may
run the lesson solo, start a class with it or copy it) and an author key, shown once, of
which only the SHA-256 is stored. The code and the key together edit or delete it. Every
keyed call refuses an unknown code and a wrong key alike (``not_author``), and failed checks
count toward the client's joins (:meth:`ClassStore._failed_check`), so codes cannot be
probed for free.

The store checks sizes and counts only; whether the text is a lesson (and torch's answers to
its questions) is the loader's business (:func:`torchatlas.lessons.parse_lesson`), which the
page runs, with the sandbox, before it saves.

Limits (:class:`AuthorLimits`): the bytes of one lesson, lessons per author key, lessons
created per client per hour and kept per client, and lessons in the whole database.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import tomllib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from torchatlas.classmode import clean
from torchatlas.classmode.db import default_url, engine_for, normalise, read, write
from torchatlas.classmode.errors import ClassError, ErrorCode
from torchatlas.classmode.schema import authored, schema

CODE_LENGTH = 7  # one longer than a class code: the two are never confused
ID_PREFIX = "u_"  # a teacher's lesson's id, as classes and links name it: "u_" + its code


@dataclass(frozen=True)
class AuthorLimits:
    max_bytes: int = 64 * 1024  # one lesson's TOML, UTF-8
    per_author: int = 30  # lessons one author key keeps
    per_client: int = 60  # lessons one client (address) keeps, across its author keys
    created_per_hour: int = 20  # new lessons (copies too) per client per hour
    max_lessons: int = 5000  # lessons in the database


@dataclass(frozen=True)
class AuthorPass:
    """What saving a new lesson gives: keep ``author_key`` secret (it edits the lesson)."""

    code: str
    author_key: str


@dataclass(frozen=True)
class AuthoredLesson:
    code: str
    toml: str
    updated: float

    @property
    def lesson_id(self) -> str:
        return ID_PREFIX + self.code.lower()


def new_code() -> str:
    return "".join(secrets.choice(clean.ALPHABET) for _ in range(CODE_LENGTH))


def code_or_none(code: object) -> str | None:
    """A well-formed lesson code (upper case), else None."""
    if not isinstance(code, str) or len(code) != CODE_LENGTH:
        return None
    code = code.upper()
    return code if all(ch in clean.ALPHABET for ch in code) else None


def code_of_lesson_id(lesson_id: object) -> str | None:
    """The code of a teacher's lesson id (``u_<code>``), else None."""
    if not isinstance(lesson_id, str) or not lesson_id.startswith(ID_PREFIX):
        return None
    return code_or_none(lesson_id[len(ID_PREFIX) :])


def _title(toml: str) -> str:
    """A line to list the lesson by in the database (the page reads the real title)."""
    for line in toml.splitlines():
        if line.startswith("title = "):
            return line[len("title = ") :].strip().strip('"')[:160]
    return ""


class LessonStore:
    """Teachers' lessons in the class database at ``url`` (None: the class store's default)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        limits: AuthorLimits = AuthorLimits(),
    ) -> None:
        self.url = normalise(url or default_url())
        self.clock = clock
        self.limits = limits

    def _size(self, toml: object) -> str:
        if not isinstance(toml, str):
            raise ClassError(ErrorCode.LESSON_TOO_BIG, limit=self.limits.max_bytes // 1024)
        if len(toml.encode("utf-8")) > self.limits.max_bytes:
            raise ClassError(ErrorCode.LESSON_TOO_BIG, limit=self.limits.max_bytes // 1024)
        return toml

    def create(self, toml: str, *, client: str, author_key: str | None = None) -> AuthorPass:
        """Save a new lesson; its code and author key (the key is not stored). With the
        ``author_key`` of the teacher's earlier lessons, the new one is theirs too (one key
        edits all of them, and counts toward ``limits.per_author``)."""
        toml = self._size(toml)
        key = author_key if clean.key_ok(author_key) else secrets.token_urlsafe(24)
        who = clean.client_hash(client)
        author = clean.key_hash(key)
        limits, now = self.limits, self.clock()

        def work(conn: Connection) -> str:
            # New lessons queue on the schema row, so no count below can be raced past.
            conn.execute(select(schema.c.version).where(schema.c.id == 1).with_for_update()).one()
            recent = conn.execute(
                select(func.count())
                .select_from(authored)
                .where(authored.c.client == who, authored.c.created > now - 3600.0)
            ).scalar_one()
            if recent >= limits.created_per_hour:
                raise ClassError(ErrorCode.LESSONS_PER_HOUR, limit=limits.created_per_hour)
            own = conn.execute(
                select(func.count()).select_from(authored).where(authored.c.client == who)
            ).scalar_one()
            mine = conn.execute(
                select(func.count()).select_from(authored).where(authored.c.author_hash == author)
            ).scalar_one()
            if own >= limits.per_client or mine >= limits.per_author:
                limit = limits.per_author if mine >= limits.per_author else limits.per_client
                raise ClassError(ErrorCode.TOO_MANY_LESSONS, limit=limit)
            total = conn.execute(select(func.count()).select_from(authored)).scalar_one()
            if total >= limits.max_lessons:
                raise ClassError(ErrorCode.LESSONS_FULL, limit=limits.max_lessons)
            code = new_code()
            conn.execute(
                insert(authored).values(
                    code=code,
                    author_hash=author,
                    client=who,
                    title=_title(toml),
                    toml=toml,
                    created=now,
                    updated=now,
                )
            )
            return code

        code = write(engine_for(self.url), work, retry_on=(OperationalError, IntegrityError))
        return AuthorPass(code, key)

    def get(self, code: object) -> AuthoredLesson:
        """A lesson by its code (anyone may read it); ``no_such_lesson`` when there is none."""
        found = code_or_none(code)
        if found is None:
            raise ClassError(ErrorCode.NO_SUCH_LESSON, lesson=str(code)[:12])
        row = read(
            engine_for(self.url),
            lambda conn: conn.execute(
                select(authored.c.toml, authored.c.updated).where(authored.c.code == found)
            ).one_or_none(),
        )
        if row is None:
            raise ClassError(ErrorCode.NO_SUCH_LESSON, lesson=found)
        return AuthoredLesson(found, row.toml, row.updated)

    def _keyed(self, conn: Connection, code: object, key: object) -> int:
        found = code_or_none(code)
        if found is None or not clean.key_ok(key):
            raise ClassError(ErrorCode.NOT_AUTHOR)
        row = conn.execute(
            select(authored.c.id, authored.c.author_hash).where(authored.c.code == found)
        ).one_or_none()
        if row is None or not clean.same_key(str(key), row.author_hash):
            raise ClassError(ErrorCode.NOT_AUTHOR)
        return int(row.id)

    def is_author(self, code: object, key: object) -> bool:
        try:
            read(engine_for(self.url), lambda conn: self._keyed(conn, code, key))
        except ClassError as error:
            if error.code == ErrorCode.UNAVAILABLE:
                raise
            return False
        return True

    def update(self, code: str, author_key: str, toml: str) -> AuthoredLesson:
        """Replace the lesson's text (its author only)."""
        toml = self._size(toml)
        now = self.clock()

        def work(conn: Connection) -> None:
            lesson = self._keyed(conn, code, author_key)
            conn.execute(
                update(authored)
                .where(authored.c.id == lesson)
                .values(toml=toml, title=_title(toml), updated=now)
            )

        write(engine_for(self.url), work)
        return AuthoredLesson(str(code_or_none(code)), toml, now)

    def delete(self, code: str, author_key: str) -> None:
        def work(conn: Connection) -> None:
            lesson = self._keyed(conn, code, author_key)
            conn.execute(delete(authored).where(authored.c.id == lesson))

        write(engine_for(self.url), work)

    def count_for(self, client: str) -> int:
        """How many lessons ``client`` keeps (the author page shows what is left)."""
        who = clean.client_hash(client)
        return read(
            engine_for(self.url),
            lambda conn: conn.execute(
                select(func.count()).select_from(authored).where(authored.c.client == who)
            ).scalar_one(),
        )


# --------------------------------------------------------------------------- reading lessons

CACHE_ENTRIES = 64  # teachers' lessons read and checked, per process (each a few KB)
RECHECK_S = 30.0  # how long a read lesson is used before its row's time is read again
_read_lock = threading.Lock()
# (url, code) → (when read, the row's time, the lesson or None, why it did not load or None)
_read: OrderedDict[tuple[str, str], tuple[float, float, Any, Any]] = OrderedDict()


# The texts a page shows as Markdown. Streamlit shows HTML in them as text already; an image
# (``![x](https://…)``) would make every student's browser fetch an address the author chose.
SHOWN_TEXTS = frozenset({"title", "summary", "text", "after", "prompt", "explain"})
_IMAGE = re.compile(r"!\[")


def _no_images(node: Any, where: str) -> None:
    """Refuse Markdown images in a teacher's shown texts (code fields may hold anything)."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{where}.{key}"
            if key in SHOWN_TEXTS and isinstance(value, str) and _IMAGE.search(value):
                from torchatlas.lessons import LessonError

                raise LessonError("image_in_text", where=here.rsplit(".", 2)[0], key=key)
            _no_images(value, here)
    elif isinstance(node, list):
        for index, value in enumerate(node, start=1):
            _no_images(value, f"{where}[{index}]")


def parse_authored(
    toml: str,
    code: str,
    *,
    visitor: Any = None,
    pool: Any = None,
    on_queued: Callable[[int], None] | None = None,
) -> Any:
    """A teacher's lesson text as a :class:`~torchatlas.lessons.Lesson` (id ``u_<code>``), in
    the languages it is written in, its code questions answered and its exercises' solutions
    graded in the sandbox (as ``visitor``); raises :class:`~torchatlas.lessons.LessonError`
    naming the step and the cause. Its shown texts may not hold Markdown images.
    ``on_queued(place)``: each sandbox job's place in line while it waits (the author page)."""
    from torchatlas.lessons import parse_lesson
    from torchatlas.lessons.kinds import Context

    lesson_id = ID_PREFIX + code.lower()
    context = Context(verify=True, visitor=visitor, pool=pool, on_queued=on_queued)
    lesson = parse_lesson(toml, lesson_id, all_languages=False, context=context)
    _no_images(tomllib.loads(toml), lesson_id)
    return lesson


def resolve_lesson(
    lesson_id: str | None, url: str | None = None, *, visitor: Any = None, pool: Any = None
) -> Any:
    """The lesson ``lesson_id`` names: a repository lesson, or a teacher's (``u_<code>``) read
    from the database at ``url`` and checked (kept per process, its row's time read again
    after :data:`RECHECK_S`). None when there is none or it does not load: the author page
    and the lesson page say why (:func:`parse_authored`)."""
    if lesson_id is None:
        return None
    code = code_of_lesson_id(lesson_id)
    if code is None:
        from torchatlas.lessons import find

        return find(lesson_id)
    store = LessonStore(url)
    key, now = (store.url, code), time.monotonic()
    with _read_lock:
        kept = _read.get(key)
    if kept is not None and now - kept[0] < RECHECK_S:
        return kept[2]
    try:
        stored = store.get(code)
    except ClassError as error:
        if error.code == ErrorCode.UNAVAILABLE and kept is not None:
            return kept[2]
        return None
    problem = None
    if kept is not None and kept[1] == stored.updated:
        lesson, problem = kept[2], kept[3]
    else:
        from torchatlas.lessons import LessonError

        try:
            lesson = parse_authored(stored.toml, code, visitor=visitor, pool=pool)
        except LessonError as error:
            lesson, problem = None, error
    with _read_lock:
        _read[key] = (now, stored.updated, lesson, problem)
        _read.move_to_end(key)
        while len(_read) > CACHE_ENTRIES:
            _read.popitem(last=False)
    return lesson


def load_problem(lesson_id: str | None, url: str | None = None) -> Any:
    """Why the teacher's lesson ``lesson_id`` did not load when it was last read in this
    process (a :class:`~torchatlas.lessons.LessonError` naming the step), else None."""
    code = code_of_lesson_id(lesson_id)
    if code is None:
        return None
    with _read_lock:
        kept = _read.get((LessonStore(url).url, code))
    return None if kept is None else kept[3]
