"""Class mode: a teacher leads a class of students through a lesson (or "free: follow me")
and sees their answers live. The engine: no Streamlit; state lives in a database so that a
restart loses nothing and several server replicas share one class.

    store = ClassStore()                      # ATLAS_DATABASE_URL, else SQLite in ATLAS_DATA_DIR
    teacher = store.start("dlwp_tensors", "en", client=session_id)
    pupil = store.join(teacher.code, "Ada", client=session_id)
    store.move(teacher.code, teacher.teacher_key, step=1, room="strides", query={...})
    store.ask(teacher.code, teacher.teacher_key); store.answer(pupil.code, pupil.student_key, 1)
    store.tally(teacher.code, teacher.teacher_key)   # Tally(joined=1, answered=1, ...)

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
  ``StrEnum``); params are strings. Three codes beyond the contract's list:
  ``no_such_lesson`` (start with an unknown lesson id; param ``lesson``), ``no_question``
  (ask on a step without a question, or in a free class; param ``step``) and ``unavailable``
  (the database cannot be reached or stays locked after the retries; no params; the cause is
  logged for the admin). Any call may raise ``unavailable``; ``ClassStore(...)`` itself
  never touches the database (it is opened on first use), so ``st.cache_resource`` can build
  it safely. Other params: ``too_many_classes``/``class_full``/``bad_nickname``: ``limit``;
  ``rate_limited``: ``limit``, ``seconds``; ``bad_option``: ``options``;
  ``not_asked``/``already_revealed``: ``step``; ``bad_place``: ``room``, ``field``.
- A new class is at step 0 with ``room == ""`` and an empty query: nothing to follow yet.
- ``move``: ``step`` is 0..len(lesson steps) in a lesson class, 0..10000 in a free class;
  ``room`` one of ``torchatlas.lessons.ROOMS``; ``query`` keys are that room's link fields,
  its source field (``m_src``/``nn_src``) and ``lesson``/``step`` (the lessons banner's);
  a ``lang`` key is dropped (each student keeps their language); a list value only for the
  room's repeated fields (``s_ops``). ``ClassState.fields()`` gives the query back as
  ``st.switch_page(query_params=...)`` takes it.
- ``ClassState`` has two more fields: ``options`` (the current step's question options,
  empty without one) and ``correct`` (the right option's index once revealed, else None).
- ``Tally`` has two more fields after the contract's five: ``step`` and ``revealed``.
  ``share_correct`` is None until someone answered. ``QuestionSummary(step, options,
  correct, counts, answered, joined, share_correct, revealed)``.
- ``ask`` again before the reveal and ``reveal`` again change nothing (no error);
  ``ask`` after the step's reveal is ``already_revealed``. ``end`` twice is fine.
- ``is_teacher`` never raises (False for an unknown or malformed code).
- ``lang`` not in ``torchatlas.i18n.LANGUAGES`` becomes the default language.
- Nicknames: raw text over 200 characters (or not a string) is ``bad_nickname``; None or
  text with nothing printable gives "Student N".
- Expiry: ``expire_idle()`` deletes classes (with students and answers) whose last teacher
  change, join or tally watching is older than ``Limits.idle_hours``; ``start`` runs it.
  An ended class keeps its summary for the teacher until then; students see ``ended``.
- The rate limit (``Limits.joins_per_minute``) counts joins and starts per ``client``
  (stored as a SHA-256) in the database, so it holds across replicas; a join with a wrong
  code counts too (it is what limits guessing codes).
- CSV columns: ``nickname``, per question ``step_<n>`` (the option picked) and
  ``step_<n>_right`` (1/0), ``right_total``; a last row ``share_right``.
"""

from __future__ import annotations

from torchatlas.classmode.clean import ALPHABET, CODE_LENGTH
from torchatlas.classmode.errors import ClassError, ErrorCode
from torchatlas.classmode.model import (
    ClassState,
    Limits,
    QuestionSummary,
    Student,
    StudentPass,
    Tally,
    TeacherPass,
)
from torchatlas.classmode.store import ClassStore

__all__ = [
    "ALPHABET",
    "CODE_LENGTH",
    "ClassError",
    "ClassState",
    "ClassStore",
    "ErrorCode",
    "Limits",
    "QuestionSummary",
    "Student",
    "StudentPass",
    "Tally",
    "TeacherPass",
]
