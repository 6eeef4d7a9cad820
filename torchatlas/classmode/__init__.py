"""Class mode: a teacher leads a class of students through a lesson (or "free: follow me")
and sees their answers live. The engine: no Streamlit; state lives in a database so that a
restart loses nothing and several server replicas share one class.

    store = ClassStore()                      # ATLAS_DATABASE_URL, else SQLite in ATLAS_DATA_DIR
    teacher = store.start("dlwp_tensors", "en", client=client)   # secret=... if the server asks
    pupil = store.join(teacher.code, "Ada", client=client)
    store.move(teacher.code, teacher.teacher_key, step=1, room="strides", query={...})
    store.ask(teacher.code, teacher.teacher_key); store.answer(pupil.code, pupil.student_key, 1)
    store.tally(teacher.code, teacher.teacher_key)   # Tally(joined=1, answered=1, ...)
    store.roster(teacher.code, teacher.teacher_key)  # (RosterEntry(student_id, "Ada", t),)
    store.remove(teacher.code, teacher.teacher_key, student_id)   # True; their key: removed
    store.lock(teacher.code, teacher.teacher_key, True)           # no new joins

``client`` is who asks, for every per-client limit: the page passes
``components.visitor.client()`` (the machine's address, ``ip:203.0.113.7``; or
``session:<id>`` where no address is known), never a session alone, since a new browser
session costs nothing. It is stored only as a SHA-256.

Storage: SQLAlchemy Core on SQLite (WAL, ``synchronous=FULL``, writes begin IMMEDIATE with a
30 s busy timeout and are retried) or PostgreSQL (``postgresql://`` URLs use psycopg 3).
One Engine per URL per process; the schema is created and migrated on first use
(:mod:`~torchatlas.classmode.schema`). Every change is committed before the call returns.

``version(code)`` is the students' poll: each store answers it from a cache at most
``Limits.version_cache_s`` (0.5 s) old, one indexed read per class per interval shared by
every session of the process (concurrent pollers of one class wait for one read). A change
made through a store updates that store's cache at once; another replica sees it within
the cache age.

Details beyond the shared contract (the page follows these):
- Errors: :class:`ClassError` is the kit's ``torchatlas.errors.CodedError`` (``room`` =
  "classmode", ``error.text(lang)``, ``error.key``); ``code`` is an :class:`ErrorCode` (a
  ``StrEnum``); params are strings. Codes beyond the contract's list:
  ``no_such_lesson`` (start with an unknown lesson id; param ``lesson``), ``no_question``
  (ask on a step without a question, or in a free class; param ``step``), ``unavailable``
  (the database cannot be reached or stays locked after the retries; no params; the cause is
  logged for the admin), ``class_locked`` (join while the teacher locked the class),
  ``removed`` (a student key the teacher removed), ``too_many_seats`` (param ``limit``: the
  client holds ``Limits.seats_per_client`` seats in the class), ``too_many_own_classes``
  (param ``limit``: the client runs ``Limits.classes_per_client`` live classes) and
  ``bad_start_secret`` (the server asks for ``ATLAS_START_SECRET`` and it was missing or
  wrong). Any call may raise ``unavailable``; ``ClassStore(...)`` itself never touches the
  database (it is opened on first use), so ``st.cache_resource`` can build it safely. Other
  params: ``too_many_classes``/``class_full``/``bad_nickname``: ``limit``;
  ``rate_limited``: ``limit``, ``seconds``; ``bad_option``: ``options``;
  ``not_asked``/``already_revealed``: ``step``; ``bad_place``: ``room``, ``field``.
- One answer for a code and a key: every call that takes both (``student``, ``answer``;
  ``move``, ``ask``, ``reveal``, ``end``, ``tally``, ``summary``, ``summary_csv``,
  ``roster``, ``remove``, ``lock``) refuses an unknown, expired or malformed code exactly as
  it refuses a wrong key: ``not_student`` on a student's calls, ``not_teacher`` on a
  teacher's (same code, no params, same text). ``is_teacher`` is False for both. Only
  ``join`` says ``no_such_class``, and every join is counted. ``state``/``version`` take a
  code alone: the page calls them only for a code its session holds a key for.
- A new class is at step 0 with ``room == ""`` and an empty query: nothing to follow yet.
- ``move``: ``step`` is 0..len(lesson steps) in a lesson class, 0..10000 in a free class;
  ``room`` one of ``torchatlas.lessons.ROOMS``; ``query`` keys are that room's link fields,
  its source field (``m_src``/``nn_src``) and ``lesson``/``step`` (the lessons banner's);
  a ``lang`` key is dropped (each student keeps their language); a list value only for the
  room's repeated fields (``s_ops``). ``ClassState.fields()`` gives the query back as
  ``st.switch_page(query_params=...)`` takes it.
- ``ClassState`` has more fields: ``options`` (the current step's question options, empty
  without one), ``correct`` (the right option's index once revealed, else None), ``locked``
  and ``removals`` (students removed so far: a student's screen checks its key when it grows).
- ``Tally`` has two more fields after the contract's five: ``step`` and ``revealed``.
  ``share_correct`` is None until someone answered. ``QuestionSummary(step, options,
  correct, counts, answered, joined, share_correct, revealed)``.
- ``ask`` again before the reveal and ``reveal`` again change nothing (no error);
  ``ask`` after the step's reveal is ``already_revealed``. ``end`` twice is fine.
- ``is_teacher(code, key, client=None)`` never raises for a wrong code or key (False).
  ``student(code, key, client=None)``: with ``client`` (the page checking a link), a failed
  check of a well-formed code and key counts toward that client's joins, and past the limit
  ``student`` says ``rate_limited``; a right link is never counted or refused. The page's own
  later reads of a key it holds pass no client.
- The teacher owns the class: ``roster`` lists the students (``RosterEntry``: an opaque
  ``student_id`` of this class, never the key; ``nickname``; ``joined``, wall time) in join
  order; ``remove`` takes one out (their answers leave the tallies and the CSV, their seat
  and nickname are free, their key answers ``removed``; the class's version and
  ``removals`` grow; False when they are not there); ``lock(True/False)`` closes and opens
  the class to joins (``class_locked``; the students in it stay). All three: teacher only.
- ``lang`` not in ``torchatlas.i18n.LANGUAGES`` becomes the default language.
- Nicknames: raw text over 200 characters (or not a string) is ``bad_nickname``; None or
  text with nothing printable gives "Student N". NFKC, invisible characters dropped, at most
  two combining marks per character (the rest dropped: a stack of marks draws over the
  names around it). Unique in the class under their confusable skeleton (Unicode TR 39,
  case-folded: ``clean.fold``): "Аda" (Cyrillic А) after "Ada" becomes "Аda 2", as a second
  "Ada" does, so the roster and the CSV never show two names that look the same.
- Expiry: ``expire_idle()`` deletes classes (with students and answers) whose last teacher
  action (a change, or watching the tally) is older than ``Limits.idle_hours``, and classes
  still at step 0 (never taught) with none for ``Limits.untaught_minutes``; joins do not
  keep a class alive. ``start`` runs it. An ended class keeps its summary for the teacher
  until then; students see ``ended``.
- Limits per ``client`` (stored as a SHA-256 in the database, so they hold across replicas;
  the numbers are :class:`Limits`' defaults):
  - joins and failed link checks: ``joins_per_minute`` (60): sixty phones behind one school
    address join within a minute; a join with a wrong code counts (guessing codes is what it
    limits), and so does a student or teacher link that opens nothing;
  - seats: ``seats_per_client`` (60) students of one client in one class (a school's NAT
    fits; one laptop cannot take a 120-seat class);
  - starts: ``starts_per_minute`` (3), wrong start passwords included, and at most
    ``classes_per_client`` (5) live classes per client, within ``max_classes`` (200) in all;
  - ``ATLAS_START_SECRET`` (optional): when set, ``start`` needs it as ``secret``
    (``ClassStore.start_secret_required`` says so; the page then shows a password box).
- CSV columns: ``nickname``, per question ``step_<n>`` (the option picked) and
  ``step_<n>_right`` (1/0), ``right_total``; a last row ``share_right``.
"""

from __future__ import annotations

from torchatlas.classmode.clean import ALPHABET, CODE_LENGTH
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
from torchatlas.classmode.store import ClassStore

__all__ = [
    "ALPHABET",
    "CODE_LENGTH",
    "CODE_STATUSES",
    "ClassError",
    "ClassState",
    "ClassStore",
    "CodeVerdict",
    "ErrorCode",
    "Limits",
    "QuestionSummary",
    "RosterEntry",
    "Student",
    "StudentPass",
    "Tally",
    "TeacherPass",
]
