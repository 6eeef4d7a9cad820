"""The class store: every call is one short transaction on the class database.

A call validates its inputs first (a code's format, a key's shape, an option's type, a
place's fields) and raises :class:`~torchatlas.classmode.errors.ClassError` without touching
the database when they cannot be right. Changes are committed before the call returns, so a
restarted server, or another replica on the same database, sees them.

A call that takes a code and a key refuses an unknown (or malformed, or expired) code and a
wrong key alike: ``not_teacher`` on the teacher's calls, ``not_student`` on a student's, so
no keyed call tells whether a code exists. Only ``join`` does, and every join is counted.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Engine, Row, and_, delete, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError

from torchatlas.classmode import clean
from torchatlas.classmode.db import default_url, engine_for, normalise, read, write
from torchatlas.classmode.errors import ClassError, ErrorCode
from torchatlas.classmode.model import (
    CODE_STATUSES,
    ClassState,
    CodeVerdict,
    Limits,
    QuestionSummary,
    RosterEntry,
    Student,
    StudentPass,
    Tally,
    TeacherPass,
)
from torchatlas.classmode.schema import (
    answers,
    attempts,
    classes,
    code_answers,
    questions,
    removed,
    students,
)
from torchatlas.i18n import DEFAULT_LANGUAGE, LANGUAGES

MAX_CODE_ANSWER = 2000  # characters of a student's code answer kept
FREE_MAX_STEP = 10_000  # a free class counts the teacher's moves; it has no lesson to bound it
LESSON_KEYS = ("lesson", "step")  # the lessons banner's own link fields, allowed in a place
DROPPED_KEYS = ("lang",)  # the reader's language: each student keeps their own
TOUCH_AFTER_S = 300.0  # a teacher's tally marks the class active at most this often
START_SECRET_SETTING = "ATLAS_START_SECRET"  # when set, starting a class asks for it
WINDOW_S = 60.0  # the rate limits' window
JOIN, START = "join", "start"  # what an attempt counts toward
_VERSION_CACHE_ENTRIES = 4096
ATTEMPTS_SWEEP_S = 10.0  # old rate-limit records are deleted at most this often per store
NAME_TRIES = 200  # nickname suffixes a join tries before giving up (a class seats 120)
DEFAULT_LIMITS = Limits()
# A nickname's fold, remembered: a join compares the wanted name with every name in the class.
_fold = lru_cache(maxsize=8192)(clean.fold)


def _lessons() -> Any:
    # Imported on first use: the lessons compute their answers with torch.
    from torchatlas import lessons

    return lessons


def _lesson(lesson_id: str | None, url: str | None = None) -> Any:
    """A repository lesson, or a teacher's own (``u_<code>``) from the database at ``url``."""
    if lesson_id is None:
        return None
    from torchatlas.classmode.authored import resolve_lesson

    return resolve_lesson(lesson_id, url)


def _question(lesson_id: str | None, step: int, url: str | None = None) -> Any:
    lesson = _lesson(lesson_id, url)
    if lesson is None or not 1 <= step <= len(lesson.steps):
        return None
    return lesson.step(step).question


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ClassStore:
    """Classes, students and answers in one database (see the package's docstring).

    ``url``: a SQLAlchemy URL; None reads ``ATLAS_DATABASE_URL``, else the SQLite file
    ``$ATLAS_DATA_DIR/classes.sqlite3``. ``clock`` gives the wall time (seconds) used for
    idle expiry and the rate limit: tests inject one. ``start_secret``: the password that
    starting a class asks for; None reads ``ATLAS_START_SECRET`` (unset or empty: none asked).
    Thread-safe: one store per process serves every session (the Engine is shared per URL).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        clock: Callable[[], float] = time.time,
        limits: Limits = DEFAULT_LIMITS,
        start_secret: str | None = None,
    ) -> None:
        self.url = normalise(url or default_url())
        self.clock = clock
        self.limits = limits
        if start_secret is None:
            start_secret = os.environ.get(START_SECRET_SETTING, "")
        self._start_secret = start_secret or None
        self._engine_found: Engine | None = None
        # version() cache: code → (monotonic time read, version or None for no class)
        self._versions: dict[str, tuple[float, int | None]] = {}
        self._versions_lock = threading.Lock()
        self._states: dict[str, ClassState] = {}  # each class's state at its newest version read
        self._fetching: dict[str, threading.Lock] = {}
        # Notified at each teacher's change this store commits: what wait_for_change waits on.
        self._change = threading.Condition()
        self._change_count = 0
        self._attempts_swept = -math.inf  # monotonic time of the last sweep of old attempts

    # ------------------------------------------------------------------ helpers

    @property
    def _engine(self) -> Engine:
        """Opened on first use, so building a store never fails: a database that cannot be
        reached is the first call's ``unavailable`` (and the next call tries again)."""
        if self._engine_found is None:
            self._engine_found = engine_for(self.url)
        return self._engine_found

    def open(self) -> None:
        """Connect and bring the schema up to date now (a server's start-up) instead of at
        the first visitor's call; ``unavailable`` when the database cannot be reached."""
        _ = self._engine

    @property
    def start_secret_required(self) -> bool:
        """Does starting a class ask for the server's password (``ATLAS_START_SECRET``)?"""
        return self._start_secret is not None

    def _row(
        self,
        conn: Connection,
        code: str,
        lock: str | None = None,
        missing: ErrorCode = ErrorCode.NO_SUCH_CLASS,
    ) -> Row:
        query = select(classes).where(classes.c.code == code)
        if lock is not None:
            query = query.with_for_update(read=lock == "share")
        row = conn.execute(query).one_or_none()
        if row is None:
            raise ClassError(missing)
        return row

    def _teacher(self, conn: Connection, code: str, key: object, lock: str | None = None) -> Row:
        """The class if ``key`` is its teacher's; ``not_teacher`` alike for an unknown code
        and a wrong key."""
        row = self._row(conn, code, lock, missing=ErrorCode.NOT_TEACHER)
        if not (clean.key_ok(key) and clean.same_key(str(key), row.teacher_hash)):
            raise ClassError(ErrorCode.NOT_TEACHER)
        return row

    @staticmethod
    def _live(row: Row) -> None:
        if row.ended:
            raise ClassError(ErrorCode.CLASS_ENDED)

    @staticmethod
    def _asked(conn: Connection, class_id: int, step: int) -> Row | None:
        return conn.execute(
            select(questions.c.revealed).where(
                questions.c.class_id == class_id, questions.c.step == step
            )
        ).one_or_none()

    def _state(self, conn: Connection, row: Row) -> ClassState:
        asked = self._asked(conn, row.id, row.step)
        question = _question(row.lesson_id, row.step, self.url)
        revealed = bool(asked is not None and asked.revealed)
        query = json.loads(row.query)
        removals = conn.execute(
            select(func.count()).select_from(removed).where(removed.c.class_id == row.id)
        ).scalar_one()
        return ClassState(
            code=row.code,
            lesson_id=row.lesson_id,
            lang=row.lang,
            step=row.step,
            room=row.room,
            query=tuple(
                (k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(query.items())
            ),
            asked=asked is not None,
            revealed=revealed,
            version=row.version,
            ended=bool(row.ended),
            students=row.students,
            options=tuple(question.options) if question is not None else (),
            correct=question.answer if question is not None and revealed else None,
            locked=bool(row.locked),
            removals=int(removals),
        )

    def _bump(self, conn: Connection, row: Row, **values: Any) -> ClassState:
        """Apply a teacher's change: version + 1, marked active; the state after it."""
        conn.execute(
            update(classes)
            .where(classes.c.id == row.id)
            .values(version=classes.c.version + 1, active=self.clock(), **values)
        )
        return self._state(conn, self._row(conn, row.code))

    def _changed(self, state: ClassState) -> ClassState:
        """A teacher's change, committed: this replica's sessions see it at their next poll
        (their version and state caches hold it now, no read needed)."""
        self._remember(state.code, state.version)
        self._keep_state(state)
        with self._change:
            self._change_count += 1
            self._change.notify_all()
        return state

    def wait_for_change(self, timeout_s: float) -> bool:
        """Block until this store commits a teacher's change (a move, a question opened or
        revealed, a lock, a removal, the end) or ``timeout_s`` passes; True for a change.
        What a server-side watcher of its sessions' classes waits on: it wakes at once on
        the replica that made the change, and reads :meth:`version` on its own clock for
        the changes other replicas made (the database is the only news from them)."""
        with self._change:
            seen = self._change_count
            return self._change.wait_for(lambda: self._change_count != seen, timeout_s)

    def _keep_state(self, state: ClassState) -> None:
        """Share ``state`` as its class's current one, unless a newer one is held already."""
        with self._versions_lock:
            if len(self._states) >= _VERSION_CACHE_ENTRIES:
                self._states.clear()
            held = self._states.get(state.code)
            if held is None or held.version <= state.version:
                self._states[state.code] = state

    def _remember(self, code: str, version: int | None) -> None:
        """Cache ``code``'s version. A read never moves a fresh entry back: a snapshot taken
        before this replica's own change committed must not hide that change."""
        now = time.monotonic()
        with self._versions_lock:
            held = self._versions.get(code)
            fresh = held is not None and now - held[0] <= self.limits.version_cache_s
            if fresh and version is not None and held[1] is not None and held[1] > version:
                return
            if len(self._versions) >= _VERSION_CACHE_ENTRIES:
                self._versions.clear()
                self._fetching.clear()
            self._versions[code] = (now, version)

    def _recent(self, conn: Connection, who: str, kind: str, now: float) -> tuple[int, float]:
        """(how many, the oldest's time) of ``who``'s ``kind`` attempts in the window."""
        found = conn.execute(
            select(func.count(), func.min(attempts.c.at)).where(
                attempts.c.client == who, attempts.c.kind == kind, attempts.c.at >= now - WINDOW_S
            )
        ).one()
        return int(found[0]), float(found[1] or now)

    def _count_attempt(self, client: object, kind: str = JOIN) -> None:
        """One attempt by ``client``: a join or a failed link check (``join``, at most
        ``limits.joins_per_minute``) or a start (``start``, ``limits.starts_per_minute``);
        refused past the limit (committed on its own, so a failed join still counts:
        guessing codes is what it limits). A client over its limit is refused by a read
        alone: a flood of refused tries takes no write lock."""
        who, now = clean.client_hash(client), self.clock()
        limit = self.limits.joins_per_minute if kind == JOIN else self.limits.starts_per_minute

        def over(found: tuple[int, float]) -> None:
            if found[0] >= limit:
                wait = max(1, math.ceil(found[1] + WINDOW_S - now))
                raise ClassError(ErrorCode.RATE_LIMITED, limit=limit, seconds=wait)

        over(read(self._engine, lambda conn: self._recent(conn, who, kind, now)))

        # Old records are swept now and then, not at every attempt: the count reads only the
        # window, and on PostgreSQL two replicas deleting the same rows at once wait for
        # each other (a class of phones joins together).
        sweep = time.monotonic() - self._attempts_swept >= ATTEMPTS_SWEEP_S

        def work(conn: Connection) -> None:
            if sweep:
                conn.execute(delete(attempts).where(attempts.c.at < now - WINDOW_S))
            over(self._recent(conn, who, kind, now))
            conn.execute(insert(attempts).values(client=who, at=now, kind=kind))

        write(self._engine, work)
        if sweep:
            self._attempts_swept = time.monotonic()

    def _failed_check(self, client: object | None, refusal: ErrorCode) -> ClassError:
        """A link check that failed: counted toward ``client``'s joins (when the page says
        who asks); the refusal to raise (``rate_limited`` past the limit)."""
        if client is not None:
            try:
                self._count_attempt(client, JOIN)
            except ClassError as error:
                return error
        return ClassError(refusal)

    def _place(
        self, lesson_id: str | None, step: object, room: object, query: object
    ) -> tuple[int, str, str]:
        """A teacher's move checked: (step, room, query as sorted JSON)."""
        lessons = _lessons()
        lesson = _lesson(lesson_id, self.url)
        high = len(lesson.steps) if lesson is not None else FREE_MAX_STEP
        if not _whole(step) or not 0 <= step <= high:  # type: ignore[operator]
            raise ClassError(ErrorCode.BAD_PLACE, room=str(room)[:20], field="step")
        if not isinstance(room, str) or room not in lessons.ROOMS:
            raise ClassError(ErrorCode.BAD_PLACE, room=str(room)[:20], field="")
        spec = lessons.ROOMS[room]
        allowed = set(spec.fields) | set(LESSON_KEYS)
        if spec.source_field is not None:
            allowed.add(spec.source_field)
        if not isinstance(query, Mapping) or len(query) > self.limits.max_query_keys:
            raise ClassError(ErrorCode.BAD_PLACE, room=room, field="")
        fields: dict[str, str | list[str]] = {}
        for key, value in query.items():
            if key in DROPPED_KEYS:
                continue
            if not isinstance(key, str) or key not in allowed:
                raise ClassError(ErrorCode.BAD_PLACE, room=room, field=str(key)[:40])
            if isinstance(value, str):
                fields[key] = value
            elif (
                isinstance(value, list | tuple)
                and key in spec.multi
                and len(value) <= self.limits.max_query_keys
                and all(isinstance(v, str) for v in value)
            ):
                fields[key] = list(value)
            else:
                raise ClassError(ErrorCode.BAD_PLACE, room=room, field=key)
        text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        if len(text.encode("utf-8")) > self.limits.max_query_bytes:
            raise ClassError(ErrorCode.BAD_PLACE, room=room, field="")
        return int(step), room, text  # type: ignore[call-overload]

    # ------------------------------------------------------------------ teacher

    def start(
        self, lesson_id: str | None, lang: str, client: str, secret: str | None = None
    ) -> TeacherPass:
        """A new class (step 0: not started, no room yet) and its teacher's key. Counted per
        ``client`` (``limits.starts_per_minute``, wrong passwords too); at most
        ``limits.classes_per_client`` live classes per client and ``limits.max_classes`` in
        all. ``secret``: the server's start password, when it asks for one."""
        if lesson_id is not None and (not isinstance(lesson_id, str) or len(lesson_id) > 40):
            raise ClassError(ErrorCode.NO_SUCH_LESSON, lesson="?")
        if lesson_id is not None and _lesson(lesson_id, self.url) is None:
            raise ClassError(ErrorCode.NO_SUCH_LESSON, lesson=lesson_id)
        lang = lang if lang in LANGUAGES else DEFAULT_LANGUAGE
        self._count_attempt(client, START)
        if self._start_secret is not None and not clean.same_secret(secret, self._start_secret):
            raise ClassError(ErrorCode.BAD_START_SECRET)
        self.expire_idle()
        key = secrets.token_urlsafe(24)
        limit = self.limits.max_classes
        own_limit = self.limits.classes_per_client
        who = clean.client_hash(client)
        from torchatlas.classmode.schema import schema as schema_table

        def work(conn: Connection) -> str:
            # Starts queue on the schema row, so the live-class count cannot be raced past.
            conn.execute(
                select(schema_table.c.version).where(schema_table.c.id == 1).with_for_update()
            ).one()
            live = conn.execute(
                select(func.count()).select_from(classes).where(classes.c.ended.is_(False))
            ).scalar_one()
            own = conn.execute(
                select(func.count())
                .select_from(classes)
                .where(classes.c.client == who, classes.c.ended.is_(False))
            ).scalar_one()
            if own >= own_limit:
                raise ClassError(ErrorCode.TOO_MANY_OWN_CLASSES, limit=own_limit)
            if live >= limit:
                raise ClassError(ErrorCode.TOO_MANY_CLASSES, limit=limit)
            code, now = clean.new_code(), self.clock()
            conn.execute(
                insert(classes).values(
                    code=code,
                    teacher_hash=clean.key_hash(key),
                    lesson_id=lesson_id,
                    lang=lang,
                    created=now,
                    active=now,
                    version=1,
                    step=0,
                    room="",
                    query="{}",
                    ended=False,
                    students=0,
                    client=who,
                    locked=False,
                )
            )
            return code

        # A new code that happens to be taken (one in ~10⁹ per live class) draws again.
        code = write(self._engine, work, retry_on=(OperationalError, IntegrityError))
        self._remember(code, 1)
        return TeacherPass(code, key)

    def is_teacher(self, code: str, teacher_key: str, client: str | None = None) -> bool:
        """Does ``teacher_key`` drive class ``code``? Never raises for a wrong code or key
        (False alike). With ``client`` (a link being checked), a False from a well-formed
        code and key counts toward that client's joins: probing codes through teacher links
        is limited like joining."""
        found = clean.code_or_none(code)
        if found is None or not clean.key_ok(teacher_key):
            return False
        row = read(
            self._engine,
            lambda conn: conn.execute(
                select(classes.c.teacher_hash).where(classes.c.code == found)
            ).one_or_none(),
        )
        ok = row is not None and clean.same_key(teacher_key, row.teacher_hash)
        if not ok:
            self._failed_check(client, ErrorCode.NOT_TEACHER)
        return ok

    def move(
        self,
        code: str,
        teacher_key: str,
        *,
        step: int,
        room: str,
        query: Mapping[str, str | list[str]],
    ) -> ClassState:
        """Take the class to ``room`` with its link fields ``query`` at lesson step ``step``."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> ClassState:
            row = self._teacher(conn, code, teacher_key, "update")
            self._live(row)
            number, place, text = self._place(row.lesson_id, step, room, query)
            return self._bump(conn, row, step=number, room=place, query=text)

        return self._changed(write(self._engine, work))

    def ask(self, code: str, teacher_key: str) -> ClassState:
        """Open the current step's question (again: no change; after its reveal: refused)."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> ClassState:
            row = self._teacher(conn, code, teacher_key, "update")
            self._live(row)
            if _question(row.lesson_id, row.step, self.url) is None:
                raise ClassError(ErrorCode.NO_QUESTION, step=row.step)
            asked = self._asked(conn, row.id, row.step)
            if asked is not None:
                if asked.revealed:
                    raise ClassError(ErrorCode.ALREADY_REVEALED, step=row.step)
                return self._state(conn, row)
            conn.execute(
                insert(questions).values(
                    class_id=row.id, step=row.step, asked_at=self.clock(), revealed=False
                )
            )
            return self._bump(conn, row)

        return self._changed(write(self._engine, work))

    def reveal(self, code: str, teacher_key: str) -> ClassState:
        """Show the current question's answer; answers to it are closed from now on."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> ClassState:
            # The class row's exclusive lock waits for answers in flight (they hold it
            # shared): each is counted or refused, none lands after the reveal.
            row = self._teacher(conn, code, teacher_key, "update")
            self._live(row)
            asked = self._asked(conn, row.id, row.step)
            if asked is None:
                raise ClassError(ErrorCode.NOT_ASKED, step=row.step)
            if asked.revealed:
                return self._state(conn, row)
            conn.execute(
                update(questions)
                .where(questions.c.class_id == row.id, questions.c.step == row.step)
                .values(revealed=True)
            )
            return self._bump(conn, row)

        return self._changed(write(self._engine, work))

    def end(self, code: str, teacher_key: str) -> None:
        """End the class: students see that it ended; the teacher keeps the summary until
        the class expires."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> ClassState | None:
            row = self._teacher(conn, code, teacher_key, "update")
            return None if row.ended else self._bump(conn, row, ended=True)

        ended = write(self._engine, work)
        if ended is not None:
            self._changed(ended)

    def roster(self, code: str, teacher_key: str) -> tuple[RosterEntry, ...]:
        """The class's students in the order they joined (teacher only): each with an opaque
        id of this class (:meth:`remove` takes it), their nickname and when they joined."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> tuple[RosterEntry, ...]:
            row = self._teacher(conn, code, teacher_key)
            people = conn.execute(
                select(students.c.key_hash, students.c.nickname, students.c.joined)
                .where(students.c.class_id == row.id)
                .order_by(students.c.id)
            ).all()
            return tuple(
                RosterEntry(clean.student_id(p.key_hash), p.nickname, float(p.joined))
                for p in people
            )

        return read(self._engine, work)

    def remove(self, code: str, teacher_key: str, student_id: str) -> bool:
        """Take a student out of the class (teacher only): their key stops working (their
        screen says the teacher removed them), their answers leave the tallies and the CSV,
        their seat and nickname are free again. False when no such student is in the class
        (removed already, say from another tab). A removed student may join again unless the
        class is locked."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)
        if not isinstance(student_id, str) or len(student_id) > 64:
            return False

        def work(conn: Connection) -> ClassState | None:
            row = self._teacher(conn, code, teacher_key, "update")
            person = next(
                (
                    p
                    for p in conn.execute(
                        select(students.c.id, students.c.key_hash).where(
                            students.c.class_id == row.id
                        )
                    ).all()
                    if clean.student_id(p.key_hash) == student_id
                ),
                None,
            )
            if person is None:
                return None
            conn.execute(delete(answers).where(answers.c.student_id == person.id))
            conn.execute(delete(students).where(students.c.id == person.id))
            conn.execute(
                insert(removed).values(class_id=row.id, key_hash=person.key_hash, at=self.clock())
            )
            return self._bump(conn, row, students=classes.c.students - 1)

        # Two tabs removing one student at once: the second finds them gone.
        done = write(self._engine, work, retry_on=(OperationalError, IntegrityError))
        if done is None:
            return False
        self._changed(done)
        return True

    def lock(self, code: str, teacher_key: str, locked: bool) -> ClassState:
        """Close the class to new joins (``locked``), or open it again (teacher only). The
        students in it stay; a join while it is locked is ``class_locked``."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> ClassState:
            row = self._teacher(conn, code, teacher_key, "update")
            if bool(row.locked) == bool(locked):
                return self._state(conn, row)
            return self._bump(conn, row, locked=bool(locked))

        return self._changed(write(self._engine, work))

    def tally(self, code: str, teacher_key: str, step: int | None = None) -> Tally:
        """Answers to ``step``'s question so far (default: the current step), teacher only."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)
        if step is not None and (not _whole(step) or not 0 <= step <= FREE_MAX_STEP):
            raise ClassError(ErrorCode.BAD_PLACE, room="", field="step")

        def work(conn: Connection) -> tuple[Row, Tally]:
            row = self._teacher(conn, code, teacher_key)
            number = row.step if step is None else step
            asked = self._asked(conn, row.id, number)
            return row, self._count(conn, row, number, asked is not None and asked.revealed)

        row, result = read(self._engine, work)
        if self.clock() - row.active > TOUCH_AFTER_S:
            # A teacher watching the tally keeps the class alive (rarely: a write).
            write(
                self._engine,
                lambda conn: conn.execute(
                    update(classes).where(classes.c.id == row.id).values(active=self.clock())
                ),
            )
        return result

    def _count(self, conn: Connection, row: Row, step: int, revealed: bool) -> Tally:
        question = _question(row.lesson_id, step, self.url)
        if question is not None and not question.options:  # answered with code
            return self._count_code(conn, row, step, revealed)
        picked = dict(
            conn.execute(
                select(answers.c.option, func.count())
                .where(answers.c.class_id == row.id, answers.c.step == step)
                .group_by(answers.c.option)
            ).all()
        )
        if question is None:
            return Tally(row.students, 0, (), None, None, step, revealed)
        counts = tuple(int(picked.get(i, 0)) for i in range(len(question.options)))
        answered = sum(counts)
        share = counts[question.answer] / answered if answered else None
        return Tally(row.students, answered, counts, question.answer, share, step, revealed)

    def _count_code(self, conn: Connection, row: Row, step: int, revealed: bool) -> Tally:
        """A code question's tally: (passed, not yet, error) and the commonest errors."""
        found = conn.execute(
            select(code_answers.c.status, code_answers.c.error_type, func.count())
            .where(code_answers.c.class_id == row.id, code_answers.c.step == step)
            .group_by(code_answers.c.status, code_answers.c.error_type)
        ).all()
        counts = [0] * len(CODE_STATUSES)
        errors: dict[str, int] = {}
        for status, error_type, number in found:
            if status in CODE_STATUSES:
                counts[CODE_STATUSES.index(status)] += int(number)
            if status == "error" and error_type:
                errors[error_type] = errors.get(error_type, 0) + int(number)
        answered = sum(counts)
        share = counts[0] / answered if answered else None
        common = tuple(sorted(errors.items(), key=lambda item: (-item[1], item[0]))[:3])
        return Tally(row.students, answered, tuple(counts), 0, share, step, revealed, common)

    def answer_code(self, code: str, student_key: str, source: str, verdict: CodeVerdict) -> None:
        """Keep a student's code answer to the current step's open code question and the
        sandbox's verdict on it (changeable until revealed; kept for the class's life)."""
        code = _checked(code, student_key, ErrorCode.NOT_STUDENT)
        if not isinstance(source, str) or verdict.status not in CODE_STATUSES:
            raise ClassError(ErrorCode.BAD_OPTION, options=0)
        detail = json.dumps(
            {"params": dict(verdict.params), "message": verdict.message[:500], "line": verdict.line}
        )
        values = {
            "source": source[:MAX_CODE_ANSWER],
            "status": verdict.status,
            "verdict": verdict.code[:40],
            "error_type": verdict.error_type[:40],
            "detail": detail[:2000],
            "at": self.clock(),
        }

        def work(conn: Connection) -> None:
            row, person, question = self._open_question(conn, code, student_key)
            if question is None or question.options:
                raise ClassError(
                    ErrorCode.BAD_OPTION, options=len(getattr(question, "options", ()))
                )
            changed = conn.execute(
                update(code_answers)
                .where(code_answers.c.student_id == person.id, code_answers.c.step == row.step)
                .values(**values)
            ).rowcount
            if not changed:
                conn.execute(
                    insert(code_answers).values(
                        student_id=person.id, class_id=row.id, step=row.step, **values
                    )
                )

        write(self._engine, work, retry_on=(OperationalError, IntegrityError))

    def my_code_answer(self, code: str, student_key: str, step: int) -> CodeVerdict | None:
        """This student's kept verdict for ``step`` (shown only to them), else None."""
        code = _checked(code, student_key, ErrorCode.NOT_STUDENT)

        def work(conn: Connection) -> Row | None:
            person = self._student_row(conn, code, student_key)
            return conn.execute(
                select(code_answers).where(
                    code_answers.c.student_id == person.id, code_answers.c.step == step
                )
            ).one_or_none()

        found = read(self._engine, work)
        if found is None:
            return None
        detail = json.loads(found.detail)
        return CodeVerdict(
            found.status,
            found.verdict,
            tuple((str(k), str(v)) for k, v in detail.get("params", {}).items()),
            found.error_type,
            str(detail.get("message", "")),
            detail.get("line"),
        )

    def summary(self, code: str, teacher_key: str) -> tuple[QuestionSummary, ...]:
        """Every question the teacher opened, in step order, with its final counts."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)
        return read(self._engine, lambda conn: self._summary(conn, code, teacher_key)[1])

    def _summary(
        self, conn: Connection, code: str, key: str
    ) -> tuple[Row, tuple[QuestionSummary, ...]]:
        row = self._teacher(conn, code, key)
        out = []
        for asked in conn.execute(
            select(questions.c.step, questions.c.revealed)
            .where(questions.c.class_id == row.id)
            .order_by(questions.c.step)
        ).all():
            question = _question(row.lesson_id, asked.step, self.url)
            if question is None:  # the lesson file changed under a running class
                continue
            tally = self._count(conn, row, asked.step, bool(asked.revealed))
            out.append(
                QuestionSummary(
                    step=asked.step,
                    # a code question's "options" are its verdicts, "passed" the right one
                    options=tuple(question.options) or CODE_STATUSES,
                    correct=question.answer if question.options else 0,
                    counts=tally.counts,
                    answered=tally.answered,
                    joined=tally.joined,
                    share_correct=tally.share_correct,
                    revealed=bool(asked.revealed),
                )
            )
        return row, tuple(out)

    def summary_csv(self, code: str, teacher_key: str) -> str:
        """One row per student: nickname, then per question the option picked and 1/0 for
        right; a last row of shares. Nicknames only (no keys); cells a spreadsheet would run
        as formulas start with an apostrophe."""
        code = _checked(code, teacher_key, ErrorCode.NOT_TEACHER)

        def work(conn: Connection) -> tuple[tuple[QuestionSummary, ...], list, list]:
            row, summary = self._summary(conn, code, teacher_key)
            people = conn.execute(
                select(students.c.id, students.c.nickname)
                .where(students.c.class_id == row.id)
                .order_by(students.c.id)
            ).all()
            picks = conn.execute(
                select(answers.c.student_id, answers.c.step, answers.c.option).where(
                    answers.c.class_id == row.id
                )
            ).all()
            # A code answer counts as its verdict's place in CODE_STATUSES (the summary's
            # "options" of a code question).
            verdicts = conn.execute(
                select(code_answers.c.student_id, code_answers.c.step, code_answers.c.status).where(
                    code_answers.c.class_id == row.id
                )
            ).all()
            picks = [*picks, *(
                (v.student_id, v.step, CODE_STATUSES.index(v.status))
                for v in verdicts if v.status in CODE_STATUSES
            )]  # fmt: skip
            return summary, people, picks

        summary, people, picks = read(self._engine, work)
        chosen = {(student, step): option for student, step, option in picks}
        buffer = io.StringIO()
        out = csv.writer(buffer, lineterminator="\r\n")
        header = ["nickname"]
        for q in summary:
            header += [f"step_{q.step}", f"step_{q.step}_right"]
        header.append("right_total")
        out.writerow(header)
        for person in people:
            cells, right = [clean.csv_cell(person.nickname)], 0
            for q in summary:
                option = chosen.get((person.id, q.step))
                if option is None or not 0 <= option < len(q.options):
                    cells += ["", ""]
                    continue
                right += option == q.correct
                cells += [clean.csv_cell(q.options[option]), str(int(option == q.correct))]
            cells.append(str(right))
            out.writerow(cells)
        shares = ["share_right"]
        for q in summary:
            share = "" if q.share_correct is None else f"{q.share_correct:.3f}"
            shares += [clean.csv_cell(q.options[q.correct]), share]
        shares.append("")
        out.writerow(shares)
        return buffer.getvalue()

    # ------------------------------------------------------------------ students

    def join(self, code: str, nickname: str, client: str) -> StudentPass:
        """A new student in class ``code``: a unique cleaned nickname and their secret key.

        Every join with a well-formed code counts toward ``client``'s
        ``limits.joins_per_minute``, whether the code exists or not. Refused: an unknown code
        (``no_such_class``), an ended class, a locked one (``class_locked``), a full one
        (``class_full``) and a client holding ``limits.seats_per_client`` seats in it
        already (``too_many_seats``). Nicknames are unique in the class under
        :func:`~torchatlas.classmode.clean.fold` (look-alikes too): a taken one gets " 2",
        " 3"... A join does not keep the class alive (only its teacher does)."""
        code = clean.check_code(code)
        limit = self.limits.nickname_chars
        wanted = clean.clean_nickname(nickname, limit)
        self._count_attempt(client, JOIN)
        key = secrets.token_urlsafe(18)
        who = clean.client_hash(client)
        seats, most = self.limits.seats_per_client, self.limits.max_students

        def refuse(row: Row, mine: int) -> None:
            self._live(row)
            if row.locked:
                raise ClassError(ErrorCode.CLASS_LOCKED)
            if row.students >= most:
                raise ClassError(ErrorCode.CLASS_FULL, limit=most)
            if mine >= seats:
                raise ClassError(ErrorCode.TOO_MANY_SEATS, limit=seats)

        def work(conn: Connection) -> str:
            # A class's joins queue on its row, so the seat counts cannot be raced past; on
            # PostgreSQL the row is locked last (the guarded update below), for two round
            # trips before the commit: a hundred phones on two replicas join one class at
            # once, and each statement under the lock waits for its server's GIL too.
            # Everything before it reads a snapshot and is checked again under the lock.
            row = self._row(conn, code)
            people = conn.execute(
                select(students.c.fold, students.c.nickname, students.c.client).where(
                    students.c.class_id == row.id
                )
            ).all()
            refuse(row, sum(p.client == who for p in people))
            # Rows of schema v1 keep their old fold: compare with it and with their skeleton.
            taken = {p.fold for p in people} | {_fold(p.nickname) for p in people}
            name = self._seat_under_free_name(conn, row, key, wanted, taken, who)
            seated = conn.execute(
                update(classes)
                .where(
                    classes.c.id == row.id,
                    classes.c.ended.is_(False),
                    classes.c.locked.is_(False),
                    classes.c.students < most,
                )
                .values(students=classes.c.students + 1)
            ).rowcount
            if not seated:  # ended, locked or filled since the snapshot: say which
                refuse(self._row(conn, code), 0)
            mine = conn.execute(
                select(func.count())
                .select_from(students)
                .where(students.c.class_id == row.id, students.c.client == who)
            ).scalar_one()
            if mine > seats:  # this join's own seat included
                raise ClassError(ErrorCode.TOO_MANY_SEATS, limit=seats)
            return name

        name = write(self._engine, work, retry_on=(OperationalError, IntegrityError))
        return StudentPass(code, key, name)

    def _seat_under_free_name(
        self, conn: Connection, row: Row, key: str, wanted: str, taken: set[str], who: str
    ) -> str:
        """Seat a student under ``wanted`` (or "Student <n>" for none), with " 2", " 3"... when
        its fold is ``taken``; the name it got. Raises ``class_full`` after NAME_TRIES."""
        limit, most = self.limits.nickname_chars, self.limits.max_students
        if wanted:
            base = wanted
        else:
            number = row.students + 1
            while _fold(f"Student {number}") in taken:
                number += 1
            base = f"Student {number}"
        name, number = base, 1
        for _ in range(NAME_TRIES):
            # A name another join takes meanwhile is a conflict on (class, fold): that
            # insert does nothing, and the next suffix is tried in this transaction.
            if _fold(name) not in taken and self._insert_student(conn, row.id, key, name, who):
                return name
            taken.add(_fold(name))
            number += 1
            name = clean.with_suffix(base, number, limit)
        raise ClassError(ErrorCode.CLASS_FULL, limit=most)

    def _insert_student(
        self, conn: Connection, class_id: int, key: str, name: str, who: str
    ) -> bool:
        """Seat a student under ``name``; False (nothing written, the transaction still
        usable) when the class has that nickname's fold already. The two databases this
        runs on spell "insert unless it conflicts" the same (``ON CONFLICT DO NOTHING``)."""
        make = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        statement = (
            make(students)
            .values(
                class_id=class_id,
                key_hash=clean.key_hash(key),
                nickname=name,
                fold=_fold(name),
                joined=self.clock(),
                client=who,
            )
            .on_conflict_do_nothing()
            .returning(students.c.id)  # a row back: seated (psycopg's rowcount may say -1)
        )
        return conn.execute(statement).first() is not None

    @staticmethod
    def _student_row(conn: Connection, code: str, key: str) -> Row:
        """The student holding ``key`` in class ``code`` (one query whether or not the code
        exists); ``removed`` for a key the teacher removed, else ``not_student``."""
        digest = clean.key_hash(key)
        person = conn.execute(
            select(students.c.id, students.c.nickname)
            .select_from(students.join(classes, students.c.class_id == classes.c.id))
            .where(classes.c.code == code, students.c.key_hash == digest)
        ).one_or_none()
        if person is not None:
            return person
        gone = conn.execute(
            select(removed.c.at)
            .select_from(removed.join(classes, removed.c.class_id == classes.c.id))
            .where(classes.c.code == code, removed.c.key_hash == digest)
        ).first()
        raise ClassError(ErrorCode.REMOVED if gone is not None else ErrorCode.NOT_STUDENT)

    def student(self, code: str, student_key: str, client: str | None = None) -> Student:
        """The student holding ``student_key`` in this class: nickname and answers so far.
        ``not_student`` alike for an unknown code and a wrong key; ``removed`` once the
        teacher removed them. With ``client`` (a student link being checked), a
        ``not_student`` from a well-formed code and key counts toward that client's joins
        (``rate_limited`` past the limit)."""
        code = _checked(code, student_key, ErrorCode.NOT_STUDENT)

        def work(conn: Connection) -> Student:
            person = self._student_row(conn, code, student_key)
            picks = conn.execute(
                select(answers.c.step, answers.c.option)
                .where(answers.c.student_id == person.id)
                .order_by(answers.c.step)
            ).all()
            return Student(person.nickname, tuple((p.step, p.option) for p in picks))

        try:
            return read(self._engine, work)
        except ClassError as error:
            if error.code != ErrorCode.NOT_STUDENT:
                raise
            raise self._failed_check(client, ErrorCode.NOT_STUDENT) from None

    def _open_question(self, conn: Connection, code: str, student_key: str) -> tuple[Row, Row, Any]:
        """A student's class, their row and the current step's question, once it is open and
        not yet revealed (what an answer of either kind needs)."""
        row = self._row(conn, code, "share", missing=ErrorCode.NOT_STUDENT)
        person = self._student_row(conn, code, student_key)
        self._live(row)
        asked = self._asked(conn, row.id, row.step)
        if asked is None:
            raise ClassError(ErrorCode.NOT_ASKED, step=row.step)
        if asked.revealed:
            raise ClassError(ErrorCode.ALREADY_REVEALED, step=row.step)
        return row, person, _question(row.lesson_id, row.step, self.url)

    def answer(self, code: str, student_key: str, option: int) -> None:
        """Pick ``option`` for the current step's open question (changeable until revealed)."""
        code = _checked(code, student_key, ErrorCode.NOT_STUDENT)
        if not _whole(option):
            raise ClassError(ErrorCode.BAD_OPTION, options=0)

        def work(conn: Connection) -> None:
            row, person, question = self._open_question(conn, code, student_key)
            if question is None or not 0 <= option < len(question.options):
                count = 0 if question is None else len(question.options)
                raise ClassError(ErrorCode.BAD_OPTION, options=count)
            changed = conn.execute(
                update(answers)
                .where(answers.c.student_id == person.id, answers.c.step == row.step)
                .values(option=option, at=self.clock())
            ).rowcount
            if not changed:
                conn.execute(
                    insert(answers).values(
                        student_id=person.id,
                        class_id=row.id,
                        step=row.step,
                        option=option,
                        at=self.clock(),
                    )
                )

        # Two tabs of one student answering at once: the second insert retries as an update.
        write(self._engine, work, retry_on=(OperationalError, IntegrityError))

    def revealed_steps(self, code: str, student_key: str) -> tuple[int, ...]:
        """The steps whose question the teacher revealed, asked by one of the class's
        students (their key): a student's own score counts only these (an answer to a
        question the teacher moved on from without revealing is not scored)."""
        code = _checked(code, student_key, ErrorCode.NOT_STUDENT)

        def work(conn: Connection) -> tuple[int, ...]:
            self._student_row(conn, code, student_key)
            found = conn.execute(
                select(questions.c.step)
                .select_from(questions.join(classes, questions.c.class_id == classes.c.id))
                .where(classes.c.code == code, questions.c.revealed.is_(True))
                .order_by(questions.c.step)
            ).all()
            return tuple(int(row.step) for row in found)

        return read(self._engine, work)

    # ------------------------------------------------------------------ everyone

    def state(self, code: str) -> ClassState:
        code = clean.check_code(code)
        state = read(self._engine, lambda conn: self._state(conn, self._row(conn, code)))
        self._remember(code, state.version)
        return state

    def current_state(self, code: str) -> ClassState:
        """The class's state at its current :meth:`version`, read from the database once per
        version by this store and shared by every session asking: sixty phones following a
        move cost one read, not sixty. Its ``students`` is the count at that read (a join
        does not change the version)."""
        version = self.version(code)
        with self._versions_lock:
            held = self._states.get(code)
        if held is not None and held.version == version:
            return held
        state = self.state(code)
        self._keep_state(state)
        return state

    def version(self, code: str) -> int:
        """The class's version: +1 on every teacher change. Served from this store's cache
        when read less than ``limits.version_cache_s`` ago, so the sessions of one replica
        polling one class cost one indexed read per class per interval between them."""
        code = clean.check_code(code)
        max_age = self.limits.version_cache_s
        with self._versions_lock:
            hit = self._versions.get(code)
            if hit is None or time.monotonic() - hit[0] > max_age:
                hit = None
                gate = self._fetching.setdefault(code, threading.Lock())
        if hit is None:
            with gate:  # one reader per class; the others wait for its answer
                with self._versions_lock:
                    hit = self._versions.get(code)
                if hit is None or time.monotonic() - hit[0] > max_age:
                    found = read(
                        self._engine,
                        lambda conn: conn.execute(
                            select(classes.c.version).where(classes.c.code == code)
                        ).scalar_one_or_none(),
                    )
                    self._remember(code, found)
                    hit = (time.monotonic(), found)
        if hit[1] is None:
            raise ClassError(ErrorCode.NO_SUCH_CLASS)
        return hit[1]

    def expire_idle(self) -> int:
        """Delete classes with no teacher action (a change, or watching the tally) for
        ``limits.idle_hours``, and classes still at step 0 (never taught: no lesson step, no
        room brought) with none for ``limits.untaught_minutes``, with their students and
        answers; the number deleted. Joins do not count: only the teacher keeps a class
        alive. Old rate-limit records go too."""
        now = self.clock()
        cutoff = now - self.limits.idle_hours * 3600
        untaught = now - self.limits.untaught_minutes * 60

        def work(conn: Connection) -> list[str]:
            gone = conn.execute(
                select(classes.c.id, classes.c.code).where(
                    or_(
                        classes.c.active < cutoff,
                        and_(classes.c.step == 0, classes.c.active < untaught),
                    )
                )
            ).all()
            ids = [g.id for g in gone]
            if ids:
                conn.execute(delete(answers).where(answers.c.class_id.in_(ids)))
                conn.execute(delete(students).where(students.c.class_id.in_(ids)))
                conn.execute(delete(removed).where(removed.c.class_id.in_(ids)))
                conn.execute(delete(questions).where(questions.c.class_id.in_(ids)))
                conn.execute(delete(classes).where(classes.c.id.in_(ids)))
            conn.execute(delete(attempts).where(attempts.c.at < now - WINDOW_S))
            return [g.code for g in gone]

        codes = write(self._engine, work)
        for code in codes:
            self._remember(code, None)
        return len(codes)


def _checked(code: str, key: str, refusal: ErrorCode) -> str:
    """The class code in its stored form, before any database call: a code or a key that
    cannot be one is ``refusal`` (not the teacher or student), as an unknown code and a
    wrong key are."""
    found = clean.code_or_none(code)
    if found is None or not clean.key_ok(key):
        raise ClassError(refusal)
    return found
