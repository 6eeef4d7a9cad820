"""What class mode hands out: frozen dataclasses, and the limits a server applies."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Bounds on what one database accepts (every replica on it should use the same)."""

    max_classes: int = 200  # live (not ended) classes in the database
    max_students: int = 120  # students in one class
    # Students of one client (one address: a school's NAT is one) in one class: a school's
    # sixty phones fit, one laptop cannot take a 120-seat class (the roster and lock do the rest).
    seats_per_client: int = 60
    # Joins and failed link checks per client per minute: sixty phones behind one address join
    # within a minute; a prober tests at most this many codes a minute.
    joins_per_minute: int = 60
    starts_per_minute: int = 3  # class starts per client per minute (wrong passwords too)
    classes_per_client: int = 5  # live (not ended) classes one client started
    idle_hours: float = 3.0  # a class with no teacher action for this long is deleted
    untaught_minutes: float = 30.0  # a class still at step 0 with no teacher action: deleted
    version_cache_s: float = 0.5  # how old a cached version() may be (per store, per class)
    max_query_keys: int = 40  # fields in a place's link
    max_query_bytes: int = 8192  # the place's link as JSON
    nickname_chars: int = 24


@dataclass(frozen=True)
class TeacherPass:
    """What starting a class gives the teacher: keep ``teacher_key`` secret (it drives the
    class; only its SHA-256 is stored)."""

    code: str
    teacher_key: str


@dataclass(frozen=True)
class StudentPass:
    """What joining gives a student: ``student_key`` brings them back with their answers."""

    code: str
    student_key: str
    nickname: str


@dataclass(frozen=True)
class ClassState:
    """Where the class is: what every student's screen follows.

    ``query`` is the room's link as sorted ``(field, value)`` pairs, a repeated field's values
    as a tuple. ``options`` are the current step's question options (empty without one);
    ``correct`` is the right option's index, only once revealed (None before). ``locked``:
    the teacher closed the class to new joins. ``removals``: how many students the teacher
    removed (a student's screen checks its own key again when it grows).
    """

    code: str
    lesson_id: str | None
    lang: str
    step: int
    room: str
    query: tuple[tuple[str, str | tuple[str, ...]], ...]
    asked: bool
    revealed: bool
    version: int
    ended: bool
    students: int
    options: tuple[str, ...] = ()
    correct: int | None = None
    locked: bool = False
    removals: int = 0

    def fields(self) -> dict[str, str | list[str]]:
        """The query as ``st.switch_page(query_params=...)`` takes it."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.query}


@dataclass(frozen=True)
class Student:
    nickname: str
    answers: tuple[tuple[int, int], ...]  # (step, option picked), by step


@dataclass(frozen=True)
class RosterEntry:
    """One student as the teacher's roster shows them: ``student_id`` is opaque and of this
    class only (never the student's key); ``joined`` is the wall time they joined."""

    student_id: str
    nickname: str
    joined: float


@dataclass(frozen=True)
class Tally:
    """One question's answers so far (teacher only): ``counts[i]`` students picked option i."""

    joined: int
    answered: int
    counts: tuple[int, ...]
    correct: int | None  # None: the step asks nothing
    share_correct: float | None  # None until someone answered
    step: int = 0
    revealed: bool = False
    # A question answered with code: its counts are (passed, not yet, error) and these are
    # the most common errors (torch's exception class, how many), most common first.
    errors: tuple[tuple[str, int], ...] = ()


CODE_STATUSES = ("pass", "fail", "error")  # a code answer's verdict, as its tally counts them


@dataclass(frozen=True)
class CodeVerdict:
    """A student's code answer as class mode keeps it: the verdict the sandbox gave (its
    status, code and parameters, torch's exception class and words, the line)."""

    status: str  # one of CODE_STATUSES
    code: str
    params: tuple[tuple[str, str], ...] = ()
    error_type: str = ""
    message: str = ""
    line: int | None = None


@dataclass(frozen=True)
class QuestionSummary:
    """A question the teacher opened: its options, torch's answer and the final counts."""

    step: int
    options: tuple[str, ...]
    correct: int
    counts: tuple[int, ...]
    answered: int
    joined: int
    share_correct: float | None
    revealed: bool
