"""Class mode's state in the page: the one store of this process, who this session is in a
class (teacher or student), the keys a link brings, and the move that makes a student's
screen follow the teacher.

Identity lives in session state, read from a link once:

- ``?class=CODE&teacher=KEY`` (the teacher's "resume on another device" link): the key is
  checked, kept in the session, and removed from the address bar at once, since a teacher's
  screen is projected and the key drives the class.
- ``?class=CODE&student=KEY`` (a student's own link): checked and kept; it stays in the
  student's address bar (their phone, not a projector), so a reload or a reconnect after a
  server restart brings them back with their answers. Every page the student follows the
  class to carries it again.
- ``?class=CODE`` alone (the join link, the QR's target): the join form with the code filled,
  and nothing else above the fold (starting a class is one click away).
- The teacher's own browser keeps ``CODE.KEY`` in a ``SameSite=Strict`` cookie
  (:data:`TEACHER_COOKIE`, set by :func:`keep_in_browser`): a reload of the projected tab (a
  new session) reads it once from the request (``st.context.cookies``), checks it against the
  key's hash in the store, and drives the class again without the key in the address bar. A
  teacher who leaves has it cleared; a key the store refuses is forgotten.

Values from a link are bounded before the engine sees them; the engine checks the rest
(code alphabet, keys in constant time). A refusal is kept as ``(code, params)`` and shown
once as a card (``classmode.errors.<code>``). A link with an unknown code and one with a
wrong key get the same card; each failed check counts toward this client's joins.

Who is asking: every class-mode limit (joins, starts, link checks) counts the **client**
(:func:`components.visitor.client`: the machine's address, or the session itself where no
address is known), never the session alone: a new session costs nothing.

The engine's ``state``/``version`` take a code alone and say whether it exists: the page
calls them only for the code of a class this session holds a key for (checked, or handed
out by start or join), so they probe nothing.

Following: the student's page holds a fragment that the server runs when the class changes
(``components/classmode/push.py``; where it cannot, the browser's timer runs it every
:func:`poll_period` seconds, the session's own period, :data:`POLL_S` on average) that reads only
``store.version(code)`` (served from the engine's per-process cache, at most ~0.5 s old, so
sixty phones cost one database read per class per half second). When the version has grown,
the fragment reads the class's state: if the teacher's place (step, room, link) changed, the
room's own session keys are forgotten and the page is switched to the room with the
teacher's link (:func:`follow`), as the lessons open a step; a question opened, and its
reveal, are drawn in the fragment itself. The state last drawn is kept
(:func:`mark_seen`), so a poll that finds nothing new reads nothing else.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import unquote

import streamlit as st

from components import visitor
from components.i18n import language
from components.kit import focus
from components.lessons.state import URL_LESSON, URL_STEP, forget_room, room_query
from torchatlas.classmode import (
    ClassError,
    ClassState,
    ClassStore,
    CodeVerdict,
    ErrorCode,
    RosterEntry,
    Student,
    Tally,
)
from torchatlas.i18n import DEFAULT_LANGUAGE
from torchatlas.lessons import ROOMS, Lesson, Step, load_all

URL_CLASS, URL_TEACHER, URL_STUDENT = "class", "teacher", "student"
PAGE = "views/classmode.py"
PAGE_PATH = "class"  # url_path of the Class page
POLL_S = 1.2  # where the server cannot wake a student's screen, it polls this often, on average
POLL_SPREAD_S = 0.2  # each session's own period is drawn from POLL_S ± this
TEACHER_POLL_S = 1.0  # the teacher's live counts and tally
ROSTER_POLL_S = 3.0  # the teacher's roster of students
MAX_CODE_CHARS = 12  # a code is 6 characters (spaces and a dash tolerated); more is junk
MAX_KEY_CHARS = 64  # token_urlsafe(24) is 32 characters, (18) is 24

TEACHER_KEY = "classmode_teacher"  # (code, teacher key) this session drives
STUDENT_KEY = "classmode_student"  # (code, student key) this session answers as
SEEN_KEY = "classmode_seen"  # the class's state as this session's screen last drew it
PLACE_KEY = "classmode_place"  # (step, room, query) the student last followed
ERROR_KEY = "classmode_error"  # (code, params) of a refusal, shown once
LINK_READ_KEY = "classmode_link_read"  # the (class, teacher, student) link values read
JOIN_CODE_KEY = "classmode_join_code"  # the join form's boxes
JOIN_NAME_KEY = "classmode_join_name"
START_SECRET_KEY = "classmode_start_secret"  # the start form's password box (when asked)
LESSON_PICK_KEY = "classmode_lesson_pick"
# The student's question, per class and step: the kit keys its widgets from it (the options
# ``classmode_q_<code>_<step>_given``, Send ``…_send``, a code answer's box ``…_code``).
PICK_KEY = "classmode_q"
RECORD_KEY = "classmode_record"  # ((code, student key), Student) as last read or sent
PERIOD_KEY = "classmode_poll_period"  # this session's poll period, drawn once
JOIN_LINK_KEY = "classmode_join_link"  # the code a join link brought (the page shows joining)
START_OPEN_KEY = "classmode_start_open"  # a visitor on a join link asked for the start form
CONFIRM_KEY = "classmode_confirm"  # (code, step, target): a move away from an open question
COOKIE_READ_KEY = "classmode_cookie_read"  # this session looked for the teacher's cookie
FORGET_COOKIE_KEY = "classmode_forget_cookie"  # the teacher left: the browser forgets the class
ROOM_CLOSED_KEY = "classmode_room_closed"  # this page's last whole run kept the room closed
# The teacher's hold on a class in their own browser ("CODE.KEY"), so a reload of the projected
# tab keeps the class without the key in the address bar. It outlives the class's idle expiry
# (3 h) a little; a stale one is checked against the store and forgotten.
TEACHER_COOKIE = "atlas_class_teacher"
TEACHER_COOKIE_S = 4 * 3600

T = TypeVar("T")


@st.cache_resource(show_spinner=False)
def store() -> ClassStore:
    """One store per process: its engine (connection pool) and version cache are shared by
    every session this server holds. SQLite under ``ATLAS_DATA_DIR`` unless
    ``ATLAS_DATABASE_URL`` names a database."""
    return ClassStore()


# --------------------------------------------------------------------------- refusals


def refuse(code: str, **params: object) -> None:
    """Keep a refusal to show (the engine's codes, or the same codes found here first)."""
    st.session_state[ERROR_KEY] = (str(code), {k: str(v) for k, v in params.items()})


def attempt(call: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``call(...)``, or None with its refusal kept for the card."""
    try:
        return call(*args, **kwargs)
    except ClassError as error:
        refuse(error.code.value, **error.params)
        return None


def take_refusal() -> tuple[str, dict[str, str]] | None:
    return st.session_state.pop(ERROR_KEY, None)


def refused_for_a_while() -> bool:
    """The kept refusal is the database being unreachable: a pause, not the class's end, so a
    student keeps their place and their screen keeps asking."""
    refusal = st.session_state.get(ERROR_KEY)
    return refusal is not None and refusal[0] == ErrorCode.UNAVAILABLE.value


# --------------------------------------------------------------------------- who this session is


@dataclass(frozen=True)
class Role:
    code: str
    key: str
    teacher: bool


def role() -> Role | None:
    if TEACHER_KEY in st.session_state:
        code, key = st.session_state[TEACHER_KEY]
        return Role(code, key, True)
    if STUDENT_KEY in st.session_state:
        code, key = st.session_state[STUDENT_KEY]
        return Role(code, key, False)
    return None


def leave() -> None:
    """Forget this session's place in a class (the class itself goes on); a teacher's browser
    forgets it too (its cookie is cleared on the next run)."""
    if TEACHER_KEY in st.session_state:
        st.session_state[FORGET_COOKIE_KEY] = True
    for key in (TEACHER_KEY, STUDENT_KEY, SEEN_KEY, PLACE_KEY, RECORD_KEY, CONFIRM_KEY):
        st.session_state.pop(key, None)
    for name in (URL_TEACHER, URL_STUDENT):
        if name in st.query_params:
            del st.query_params[name]


def _link_text(name: str, limit: int) -> str | None:
    """A link value as one bounded string (the last if repeated); None when absent or
    longer than ``limit`` (no code or key is that long: refused without a database read)."""
    if name not in st.query_params:
        return None
    values = st.query_params.get_all(name)
    value = values[-1] if values else ""
    return value if len(value) <= limit else "\x00"  # an impossible value: refused below


def normal_code(text: str) -> str:
    """What a person types: spaces and dashes dropped, upper case (``abc 234`` → ``ABC234``)."""
    return "".join(ch for ch in text if ch not in " -\t").upper()


def absorb_link() -> None:
    """Read ``class``/``teacher``/``student`` from the address bar once per distinct link:
    a teacher key moves into the session and out of the URL; a student key moves into the
    session and stays in the URL (their reload link)."""
    code = _link_text(URL_CLASS, MAX_CODE_CHARS)
    if code is None:
        return
    teacher = _link_text(URL_TEACHER, MAX_KEY_CHARS)
    student = _link_text(URL_STUDENT, MAX_KEY_CHARS)
    seen = (code, teacher, student)
    if st.session_state.get(LINK_READ_KEY) == seen:
        return
    st.session_state[LINK_READ_KEY] = seen
    code = normal_code(code)
    if teacher is not None:
        del st.query_params[URL_TEACHER]  # never left on a projected screen
        st.session_state[LINK_READ_KEY] = (st.query_params.get(URL_CLASS), None, student)
        if attempt(store().is_teacher, code, teacher, client()):
            st.session_state.pop(STUDENT_KEY, None)
            st.session_state[TEACHER_KEY] = (code, teacher)
            st.session_state.pop(SEEN_KEY, None)
        elif ERROR_KEY not in st.session_state:
            refuse("not_teacher")
        return
    if student is not None:
        current = role()
        if current is not None and (current.code, current.key) == (code, student):
            return
        found = attempt(store().student, code, student, client())
        if found is not None:
            st.session_state.pop(TEACHER_KEY, None)
            st.session_state[STUDENT_KEY] = (code, student)
            st.session_state.pop(SEEN_KEY, None)
            st.session_state.pop(PLACE_KEY, None)
        else:
            del st.query_params[URL_STUDENT]
            st.session_state[LINK_READ_KEY] = (st.query_params.get(URL_CLASS), teacher, None)
        return
    st.session_state.setdefault(JOIN_CODE_KEY, code)
    st.session_state[JOIN_LINK_KEY] = code  # a join link: the page is a student's first


# --------------------------------------------------------------------------- the teacher's browser


def browser_cookie(name: str) -> str | None:
    """Cookie ``name`` as this session's first request carried it (None outside a browser)."""
    try:
        value = st.context.cookies.get(name)
    except Exception:  # no browser context (a bare script run, AppTest)
        return None
    return value if isinstance(value, str) else None


def teacher_cookie() -> tuple[str, str] | None:
    """The (code, teacher key) this browser keeps, if any and well formed."""
    held = browser_cookie(TEACHER_COOKIE)
    if not held:
        return None
    code, separator, key = unquote(held).partition(".")
    if not separator or not code or len(code) > MAX_CODE_CHARS or not 0 < len(key) <= MAX_KEY_CHARS:
        return None
    return normal_code(code), key


def absorb_cookie(on_class_page: bool) -> None:
    """Once per session, before the link is read: a reload of the teacher's own tab finds the
    class this browser keeps (checked against the key's hash in the store) and drives it
    again, without the key in the address bar. Only on the Class page or on a page whose link
    names that class (a fresh tab on another page stays a visitor's); a link with a key of
    its own decides instead; a key the store refuses is forgotten."""
    state = st.session_state
    if state.get(COOKIE_READ_KEY) or role() is not None:
        return
    if URL_TEACHER in st.query_params or URL_STUDENT in st.query_params:
        return
    held = teacher_cookie()
    if held is None:
        return
    code, key = held
    linked = _link_text(URL_CLASS, MAX_CODE_CHARS)
    if linked is not None and normal_code(linked) != code:
        return  # another class's link: its page, and the cookie kept for its own class
    if linked is None and not on_class_page:
        return  # a page that is not the class's: maybe the next one this session opens
    state[COOKIE_READ_KEY] = True  # checked once: a stale key costs one counted check
    if not attempt(store().is_teacher, code, key, client()):
        if not refused_for_a_while():
            state.pop(ERROR_KEY, None)  # nothing to tell: the old class has gone
            state[FORGET_COOKIE_KEY] = True
        return
    state[TEACHER_KEY] = (code, key)
    if linked is None:
        st.query_params[URL_CLASS] = code
    state[LINK_READ_KEY] = (linked if linked is not None else code, None, None)


def keep_in_browser(who: Role) -> None:
    """The teacher's browser keeps this class (see :func:`absorb_cookie`)."""
    if who.teacher:
        focus.set_cookie(TEACHER_COOKIE, f"{who.code}.{who.key}", TEACHER_COOKIE_S)


def forget_in_browser() -> None:
    """Clear the teacher's cookie once after :func:`leave` (and after a stale one)."""
    if st.session_state.pop(FORGET_COOKIE_KEY, None):
        focus.clear_cookie(TEACHER_COOKIE)


# --------------------------------------------------------------------------- moving on


def ask_to_confirm(current: ClassState, target: int) -> None:
    """The teacher moves on while the step's question is open and unrevealed: ask once."""
    st.session_state[CONFIRM_KEY] = (current.code, current.step, target)


def confirming(current: ClassState) -> int | None:
    """The step the teacher asked to move to from this open question, awaiting their answer."""
    held = st.session_state.get(CONFIRM_KEY)
    if held is None or held[:2] != (current.code, current.step):
        return None
    return int(held[2])


def stop_confirming() -> None:
    st.session_state.pop(CONFIRM_KEY, None)


# --------------------------------------------------------------------------- links


def page_url() -> str | None:
    """This page's address as the browser shows it (no query); None outside a browser."""
    try:
        return st.context.url
    except Exception:  # no browser context (a bare script run)
        return None


def class_page_url() -> str:
    """The Class page's address: absolute when the browser told us where we are, else the
    path (AppTest, a server that cannot tell)."""
    here = page_url()
    if not here:
        return f"/{PAGE_PATH}"
    base = here.rstrip("/")
    if base.endswith(f"/{PAGE_PATH}"):
        return base
    # Another page: replace its path segment (the app's pages are one segment deep).
    head, _, _tail = base.rpartition("/")
    return f"{head}/{PAGE_PATH}" if "://" in head else f"{base}/{PAGE_PATH}"


def with_lang(query: dict[str, Any]) -> dict[str, Any]:
    lang = language()
    if lang != DEFAULT_LANGUAGE:
        query["lang"] = lang
    return query


def join_query(code: str) -> dict[str, str]:
    return {URL_CLASS: code}


def student_query(code: str, key: str) -> dict[str, str]:
    return {URL_CLASS: code, URL_STUDENT: key}


def teacher_query(code: str, key: str) -> dict[str, str]:
    return {URL_CLASS: code, URL_TEACHER: key}


# --------------------------------------------------------------------------- lessons


def lessons() -> tuple[Lesson, ...]:
    return load_all()


def lesson_of(state: ClassState) -> Lesson | None:
    """The class's lesson: a repository lesson, or a teacher's own (``u_<code>``, read from
    the class database and checked in the sandbox once per process)."""
    if not state.lesson_id:
        return None
    from torchatlas.classmode.authored import resolve_lesson

    return resolve_lesson(state.lesson_id, store().url, visitor=visitor.visitor())


def step_of(state: ClassState) -> Step | None:
    lesson = lesson_of(state)
    if lesson is None or not 1 <= state.step <= len(lesson.steps):
        return None
    return lesson.step(state.step)


def step_query(lesson: Lesson, step: Step) -> dict[str, str | list[str]]:
    """The step's room link as the lessons build it (pasted source encoded as the room
    encodes it), without the lesson's own ``lesson``/``step``/``lang``: in a class the
    question is the teacher's to open and reveal, so the lessons banner (which reveals on
    the student's own click) must not appear, and each student keeps their language."""
    query = room_query(lesson, step)
    for name in (URL_LESSON, URL_STEP, "lang"):
        query.pop(name, None)
    return query


def room_fields_now(room: str) -> dict[str, str | list[str]]:
    """The room's own fields in the address bar now (what "bring the class here" sends)."""
    spec = ROOMS[room]
    names = set(spec.fields) | ({spec.source_field} if spec.source_field else set())
    query: dict[str, str | list[str]] = {}
    for name in st.query_params:
        if name in names:
            values = st.query_params.get_all(name)
            query[name] = values if name in spec.multi else values[-1]
    return query


# --------------------------------------------------------------------------- engine calls


def client() -> str:
    """Who is asking, for every per-client limit of the engine (joins, starts, link checks):
    this session's client, i.e. its machine's address (a school's phones behind one NAT are
    one client: the engine's limits are sized for that), or the session where none is known."""
    return visitor.client()


def start_secret_required() -> bool:
    """Does this server ask for a password to start a class (``ATLAS_START_SECRET``)?"""
    return store().start_secret_required


def start(lesson_id: str | None, secret: str | None = None) -> bool:
    passed = attempt(store().start, lesson_id, language(), client(), secret)
    if passed is None:
        return False
    st.session_state.pop(START_SECRET_KEY, None)
    leave()
    st.session_state.pop(FORGET_COOKIE_KEY, None)  # the new class replaces the old cookie
    st.session_state[TEACHER_KEY] = (passed.code, passed.teacher_key)
    st.query_params[URL_CLASS] = passed.code
    return True


def join(code: str, nickname: str) -> bool:
    passed = attempt(store().join, normal_code(code), nickname, client())
    if passed is None:
        return False
    leave()
    st.session_state[STUDENT_KEY] = (passed.code, passed.student_key)
    st.session_state[LINK_READ_KEY] = (passed.code, None, passed.student_key)
    st.query_params[URL_CLASS] = passed.code
    st.query_params[URL_STUDENT] = passed.student_key
    return True


def class_state(code: str) -> ClassState | None:
    """The class's state at its current version (one database read per change, shared by
    this server's sessions)."""
    return attempt(store().current_state, code)


def version(code: str) -> int | None:
    return attempt(store().version, code)


def _out_of_class(error: ClassError) -> bool:
    """A student's own key refused (removed by the teacher, or the class gone): this
    session leaves the class and keeps the refusal for its card."""
    return error.code in (ErrorCode.REMOVED, ErrorCode.NOT_STUDENT)


def me(who: Role) -> Student | None:
    try:
        return store().student(who.code, who.key)
    except ClassError as error:
        refuse(error.code.value, **error.params)
        if _out_of_class(error):
            leave()
        return None


def tally(who: Role, step: int | None = None) -> Tally | None:
    return attempt(store().tally, who.code, who.key, step)


def move_to_step(who: Role, lesson: Lesson, number: int) -> ClassState | None:
    step = lesson.step(number)
    query = step_query(lesson, step)
    return attempt(store().move, who.code, who.key, step=number, room=step.room, query=query)


def bring_here(who: Role, state: ClassState, room: str) -> ClassState | None:
    """Free mode: the class goes to the teacher's room with the room's link as it is now."""
    return attempt(
        store().move,
        who.code,
        who.key,
        step=state.step + 1,
        room=room,
        query=room_fields_now(room),
    )


def ask(who: Role) -> ClassState | None:
    return attempt(store().ask, who.code, who.key)


def reveal(who: Role) -> ClassState | None:
    return attempt(store().reveal, who.code, who.key)


def end(who: Role) -> None:
    attempt(store().end, who.code, who.key)


def answer(who: Role, step: int, option: int) -> bool:
    try:
        store().answer(who.code, who.key, option)
    except ClassError as error:
        refuse(error.code.value, **error.params)
        if _out_of_class(error):
            leave()
        return False
    held = st.session_state.get(RECORD_KEY)
    if held is not None and held[0] == (who.code, who.key):
        answers = tuple(sorted({**dict(held[1].answers), step: option}.items()))
        st.session_state[RECORD_KEY] = (held[0], replace(held[1], answers=answers))
    return True


def answer_code(who: Role, source: str, verdict: Any) -> bool:
    """Keep a code answer's verdict (graded by the kit's code answer box, in the sandbox)."""
    kept = CodeVerdict(
        verdict.status,
        verdict.code,
        tuple(verdict.params),
        verdict.error_type,
        verdict.message,
        verdict.line,
    )
    try:
        store().answer_code(who.code, who.key, source, kept)
    except ClassError as error:
        refuse(error.code.value, **error.params)
        if _out_of_class(error):
            leave()
        return False
    return True


def my_code_answer(who: Role, step: int) -> CodeVerdict | None:
    return attempt(store().my_code_answer, who.code, who.key, step)


def revealed_steps(who: Role) -> tuple[int, ...] | None:
    return attempt(store().revealed_steps, who.code, who.key)


def summary_csv(who: Role) -> str | None:
    return attempt(store().summary_csv, who.code, who.key)


def summary(who: Role) -> tuple | None:
    return attempt(store().summary, who.code, who.key)


def roster(who: Role) -> tuple[RosterEntry, ...] | None:
    return attempt(store().roster, who.code, who.key)


def remove(who: Role, student_id: str) -> bool:
    return bool(attempt(store().remove, who.code, who.key, student_id))


def lock(who: Role, locked: bool) -> ClassState | None:
    return attempt(store().lock, who.code, who.key, locked)


# --------------------------------------------------------------------------- following


def poll_period() -> float:
    """This session's poll period, drawn once from :data:`POLL_S` ± :data:`POLL_SPREAD_S`.
    A whole-page run restarts a page's poll timer, and the phones that followed a move
    together finish that run together (the server runs them side by side): with one period
    for all, every later change would reach the whole class after the same wait, in one
    burst of page runs. Periods that differ spread the phones' polls out again within a few
    polls, so a change reaches each after its own wait."""
    if PERIOD_KEY not in st.session_state:
        spread = random.uniform(-POLL_SPREAD_S, POLL_SPREAD_S)
        st.session_state[PERIOD_KEY] = round(POLL_S + spread, 2)
    return st.session_state[PERIOD_KEY]


def seen_state() -> ClassState | None:
    return st.session_state.get(SEEN_KEY)


def seen_version() -> int:
    seen = seen_state()
    return seen.version if seen is not None else -1


def mark_seen(state: ClassState) -> None:
    st.session_state[SEEN_KEY] = state


def keep_room_closed(closed: bool) -> None:
    """Say, in a whole-page run, whether this page keeps the class's room closed for the
    reveal: a fragment's later run reads it (:func:`room_closed`)."""
    st.session_state[ROOM_CLOSED_KEY] = closed


def room_closed() -> bool:
    """Does this screen show the class's room closed for the reveal, as its page's last whole
    run drew it (a fragment's own run draws no room: the room stays as that run left it)?"""
    return bool(st.session_state.get(ROOM_CLOSED_KEY, False))


def place_of(state: ClassState) -> tuple[int, str, tuple]:
    return (state.step, state.room, state.query)


def keep_student_link(who: Role) -> None:
    """Put the student's own link back in the address bar when a page change dropped it
    (Streamlit's navigation starts a page with an empty query), so a reload there still
    brings them back to the class."""
    query = st.query_params
    if query.get(URL_STUDENT) != who.key or query.get(URL_CLASS) != who.code:
        query[URL_CLASS] = who.code
        query[URL_STUDENT] = who.key
        st.session_state[LINK_READ_KEY] = (who.code, None, who.key)


def own_link(who: Role) -> dict[str, str]:
    """A student's own part of the address, beside the room's fields: their class link and,
    where it is not the default, their language."""
    return with_lang(dict(student_query(who.code, who.key)))


def follow_query(state: ClassState, who: Role) -> dict[str, Any]:
    query: dict[str, Any] = dict(state.fields())
    query.update(own_link(who))
    return query


def follow(state: ClassState, who: Role) -> None:
    """Open the teacher's room in the teacher's state (stops this run)."""
    st.session_state[PLACE_KEY] = place_of(state)
    forget_room(state.room)
    st.switch_page(ROOMS[state.room].script, query_params=follow_query(state, who))


def needs_follow(state: ClassState) -> bool:
    """The teacher moved since this student last followed (a place, not a question)."""
    return state.room in ROOMS and st.session_state.get(PLACE_KEY) != place_of(state)


def show_step(who: Role, lesson: Lesson, step: Step) -> None:
    """The teacher's own screen opens the step's room (the address bar carries the class's
    code, never the teacher key: it may be projected). Stops this run."""
    forget_room(step.room)
    query = with_lang({**step_query(lesson, step), **join_query(who.code)})
    st.switch_page(ROOMS[step.room].script, query_params=query)


def remember_place(state: ClassState) -> None:
    st.session_state[PLACE_KEY] = place_of(state)


def followed_place() -> tuple[int, str, tuple] | None:
    """The (step, room, room link) this student last followed; None before the first."""
    return st.session_state.get(PLACE_KEY)


def arrived(state: ClassState, who: Role) -> None:
    """This run is on the class's room page with the class's room link already: a reload of
    it, or the run the server asked for at the teacher's move (``push.page_run``). Remember
    the place, and do what :func:`follow` does before it switches: the room forgets its last
    visit's inputs (it reads the link), and the browser's address bar gets the new link (a
    run the server asked for carries the query it was given; the browser only learns it
    from ``st.query_params``; after a reload it has it already and nothing changes)."""
    forget_room(state.room)
    st.query_params.from_dict(follow_query(state, who))
    remember_place(state)


START_KEY = "start"  # ?start=u_<code>: a teacher's lesson to start a class with (the author page)


def lesson_pick_widget(lang: str) -> str:
    """The start form's lesson box in ``lang`` (one per language; the pick is LESSON_PICK_KEY)."""
    return f"{LESSON_PICK_KEY}_{lang}"


def lesson_options() -> list[str | None]:
    """Free mode, then the repository's lessons, then the teacher's own lesson the link names
    (``?start=u_<code>``; picked)."""
    options: list[str | None] = [None, *(lesson.id for lesson in lessons())]
    own = chosen_lesson()
    if own is not None and own.id not in options:
        options.append(own.id)
        st.session_state.setdefault(LESSON_PICK_KEY, own.id)
    return options


def chosen_lesson() -> Lesson | None:
    """The teacher's own lesson ``?start=`` names (read from the database, checked)."""
    from torchatlas.classmode.authored import code_of_lesson_id, resolve_lesson

    lesson_id = st.query_params.get(START_KEY)
    if code_of_lesson_id(lesson_id) is None:
        return None
    return resolve_lesson(lesson_id, store().url, visitor=visitor.visitor())


def lesson_title(lesson_id: str | None, lang: str) -> str | None:
    """A lesson's title in ``lang`` (a repository lesson or the one ``?start=`` names)."""
    found = next((lesson for lesson in lessons() if lesson.id == lesson_id), None)
    if found is None:
        own = chosen_lesson()
        found = own if own is not None and own.id == lesson_id else None
    return None if found is None else found.title[lang]


def my_record(who: Role, *, fresh: bool = False) -> Student | None:
    """This student's nickname and answers as this session last read or sent them: the bar
    and the poll draw without a database read. ``fresh`` reads them again (the class
    changed: another tab of the same student may have answered)."""
    held = st.session_state.get(RECORD_KEY)
    if fresh or held is None or held[0] != (who.code, who.key):
        student = me(who)
        if student is None:
            return None
        held = st.session_state[RECORD_KEY] = ((who.code, who.key), student)
    return held[1]


def my_answer(who: Role, step: int, *, fresh: bool = False) -> int | None:
    record = my_record(who, fresh=fresh)
    return dict(record.answers).get(step) if record is not None else None


def question_key(code: str, step: int) -> str:
    """The key of the class's question at ``step`` on this student's screen (the kit's
    predict_option and code answer derive their widgets' keys from it)."""
    return f"{PICK_KEY}_{code}_{step}"
