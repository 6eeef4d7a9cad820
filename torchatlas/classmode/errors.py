"""The errors class mode raises: a stable code and parameters, never a sentence.

Their text lives in ``assets/translations/{en,ko}/classmode.json`` under
``classmode.errors.<code>`` (the page's tables): the page shows ``error.text(lang)`` (or
``t(f"classmode.errors.{error.code.value}", **error.params)``) and ``str(error)`` is the same
table's English, for a notebook or a log. :class:`ClassError` is the kit's ``CodedError``.
"""

from __future__ import annotations

from enum import StrEnum

from torchatlas.errors import CodedError


class ErrorCode(StrEnum):
    NO_SUCH_CLASS = "no_such_class"  # unknown, malformed or expired code (join, state)
    CLASS_ENDED = "class_ended"
    TOO_MANY_CLASSES = "too_many_classes"  # params: limit
    CLASS_FULL = "class_full"  # params: limit
    RATE_LIMITED = "rate_limited"  # params: limit (per minute), seconds (to wait)
    # A teacher's (student's) code and key that do not open a class: the code is unknown,
    # malformed or expired, or the key is wrong. One answer for all, so a link tells nothing.
    NOT_TEACHER = "not_teacher"
    NOT_STUDENT = "not_student"
    BAD_OPTION = "bad_option"  # params: options (how many)
    NOT_ASKED = "not_asked"
    ALREADY_REVEALED = "already_revealed"
    BAD_PLACE = "bad_place"  # params: room, field (the field at fault, "" when the room)
    BAD_NICKNAME = "bad_nickname"  # params: limit
    NO_SUCH_LESSON = "no_such_lesson"  # params: lesson
    NO_QUESTION = "no_question"  # params: step (the current step asks nothing)
    UNAVAILABLE = "unavailable"  # the class database cannot be reached (logged for the admin)
    CLASS_LOCKED = "class_locked"  # the teacher locked the class: no new joins
    REMOVED = "removed"  # the teacher removed this student (their key no longer works)
    TOO_MANY_SEATS = "too_many_seats"  # params: limit (students of one client in one class)
    TOO_MANY_OWN_CLASSES = "too_many_own_classes"  # params: limit (live classes per client)
    BAD_START_SECRET = "bad_start_secret"  # the server asks for ATLAS_START_SECRET to start
    # Teachers' own lessons (torchatlas.classmode.authored): an unknown code or a wrong author
    # key (one answer for both), and the limits on what one lesson, author, client and
    # database keep.
    NOT_AUTHOR = "not_author"
    LESSON_TOO_BIG = "lesson_too_big"  # params: limit (KB)
    TOO_MANY_LESSONS = "too_many_lessons"  # params: limit
    LESSONS_FULL = "lessons_full"  # params: limit
    LESSONS_PER_HOUR = "lessons_per_hour"  # params: limit (new lessons per client per hour)


class ClassError(CodedError):
    """What a class-mode call refuses: the kit's coded error (``torchatlas.errors``) with
    class mode's table; ``params`` are strings (they come from links and limits)."""

    room = "classmode"
    codes = ErrorCode

    def __init__(self, code: ErrorCode | str, **params: object) -> None:
        super().__init__(code, **{name: str(value) for name, value in params.items()})
