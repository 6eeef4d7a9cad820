"""components/classmode/push.py: the watcher wakes exactly the sessions whose class moved past
what their screen drew, once per change (retried a bounded number of times), forgets sessions
that are gone; the store's ``wait_for_change`` wakes it at a change this replica commits."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from components.classmode import push
from components.classmode.push import Follower, Watcher
from torchatlas.classmode import ClassStore, TeacherPass
from torchatlas.lessons import find

LESSON = find("broadcasting")


@pytest.fixture
def store(tmp_path: Path) -> ClassStore:
    return ClassStore(f"sqlite:///{tmp_path / 'classes.sqlite3'}")


class Wakes:
    """The watcher's ``wake``: records each (session, version) and says whether it lives."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.runs: list[tuple[str, push.PageRun | None]] = []
        self.gone: set[str] = set()
        self.answers: dict[str, Callable[[bool], object]] = {}

    def __call__(
        self,
        session_id: str,
        follower: Follower,
        run: push.PageRun | None,
        answered: Callable[[bool], object],
    ) -> bool:
        self.calls.append((session_id, follower.pushed))
        self.runs.append((session_id, run))
        self.answers[session_id] = answered
        return session_id not in self.gone


def move(store: ClassStore, code: str, key: str, number: int) -> int:
    step = LESSON.step(number)
    return store.move(code, key, step=number, room=step.room, query=step.fields()).version


def test_a_change_wakes_each_session_behind_once(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher = store.start(LESSON.id, "en", client="t")
    code = teacher.code
    wakes = Wakes()
    watcher = Watcher(store, wakes)
    monkeypatch.setattr(watcher, "thread", object())  # no thread: sweeps are called here
    now = store.version(code)
    for session in ("a", "b"):
        watcher.watch(session, Follower(code, "poll", now))
    assert watcher.sweep() == 0 and wakes.calls == []  # nothing new: nothing woken

    version = move(store, code, teacher.teacher_key, 1)
    assert watcher.sweep() == 2
    assert sorted(wakes.calls) == [("a", version), ("b", version)]
    assert watcher.sweep() == 0  # once per change, not at every sweep

    # "a" drew the change (its poll ran and said so); "b" did not: after RETRY_S it is
    # woken again, at most TRIES times in all, then left to its page's own timer.
    watcher.watch("a", Follower(code, "poll", version))
    clock = [time.monotonic()]
    monkeypatch.setattr(push.time, "monotonic", lambda: clock[0])
    retries = 0
    for _ in range(push.TRIES + 2):
        clock[0] += push.RETRY_S + 0.01
        retries += watcher.sweep()
    assert retries == push.TRIES - 1
    assert all(session == "b" for session, _ in wakes.calls[2:])


def test_a_gone_session_is_forgotten_and_other_classes_are_not_woken(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = store.start(LESSON.id, "en", client="t1")
    other = store.start(LESSON.id, "en", client="t2")
    wakes = Wakes()
    wakes.gone.add("left")
    watcher = Watcher(store, wakes)
    monkeypatch.setattr(watcher, "thread", object())
    watcher.watch("left", Follower(one.code, "poll", store.version(one.code)))
    watcher.watch("there", Follower(other.code, "poll", store.version(other.code)))
    move(store, one.code, one.teacher_key, 1)
    assert watcher.sweep() == 0  # the only session behind had gone
    assert "left" not in watcher.followers and "there" in watcher.followers
    assert [session for session, _ in wakes.calls] == ["left"]


def test_a_change_here_wakes_the_waiter_at_once(store: ClassStore) -> None:
    teacher = store.start(LESSON.id, "en", client="t")
    assert store.wait_for_change(0.01) is False  # nothing changed
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        if store.wait_for_change(30):
            woke.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    move(store, teacher.code, teacher.teacher_key, 1)
    thread.join(timeout=30)
    assert woke and woke[0] < 5  # the move, not the 30 s timeout


def test_without_a_server_the_page_polls_as_before() -> None:
    assert push.available() is False  # no Streamlit runtime in a unit test
    assert push.period(1.2) == 1.2


def test_the_start_up_warm_up_loads_the_lessons_and_opens_a_database_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components import upkeep
    from components.classmode.warm import warm_class_mode
    from torchatlas.lessons import find, loader

    assert upkeep.registered_warm_ups()["classmode"] is warm_class_mode
    # The default SQLite file is not created at start-up (it is, at first use).
    monkeypatch.setenv("ATLAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ATLAS_DATABASE_URL", raising=False)
    loader._load_all.cache_clear()
    warm_class_mode()
    hits = loader._load_all.cache_info().hits
    assert find("dlwp_tensors") is not None  # what a class's state reads: loaded already
    assert loader._load_all.cache_info().hits == hits + 1
    assert not (tmp_path / "data").exists()
    # A database URL: connected and migrated before the first visitor.
    database = tmp_path / "server" / "classes.sqlite3"
    monkeypatch.setenv("ATLAS_DATABASE_URL", f"sqlite:///{database}")
    warm_class_mode()
    assert database.exists()


def test_a_move_is_one_page_run_of_the_new_room_with_the_students_own_link(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a student's poll would only switch pages, the watcher asks for the new room's
    run itself: the room's page, the class's room link plus the student's own link (as
    ``state.follow`` opens it). Anyone else, a question opened, a removal and the end are
    left to the poll."""
    from urllib.parse import parse_qs

    teacher = store.start(LESSON.id, "en", client="t")
    code = teacher.code
    wakes = Wakes()
    watcher = Watcher(store, wakes)
    monkeypatch.setattr(watcher, "thread", object())
    pages = {room: f"hash-{room}" for room in {step.room for step in LESSON.steps}}
    start = store.current_state(code)
    place = (start.step, start.room, start.query)
    link = {"class": code, "student": "k" * 20, "lang": "ko"}
    student = Follower(code, "poll", start.version, place, tuple(link.items()))
    watcher.watch("student", student, pages)
    watcher.watch("teacher-ish", Follower(code, "poll", start.version))
    move(store, code, teacher.teacher_key, 1)
    assert watcher.sweep() == 2
    runs = dict(wakes.runs)
    assert runs["teacher-ish"] is None  # not a student: its poll decides
    page_hash, query = runs["student"]
    step = LESSON.step(1)
    assert page_hash == f"hash-{step.room}"
    expected = {k: v if isinstance(v, list) else [v] for k, v in step.fields().items()}
    assert parse_qs(query) == {**expected, **{k: [v] for k, v in link.items()}}

    now = store.current_state(code)
    here = Follower(code, "poll", now.version, (now.step, now.room, now.query), (("class", code),))
    # Already at the class's place: a question opening is drawn by the poll in place.
    asked = dataclasses.replace(now, asked=True, version=now.version + 1)
    assert push.page_run(here, asked, pages) is None
    # The reveal of a room its screen keeps closed: the poll draws the verdict first, then
    # the same page runs again.
    kept = dataclasses.replace(here, kept_room=True)
    revealed = dataclasses.replace(asked, revealed=True, version=now.version + 2)
    assert push.page_run(kept, revealed, pages) is None
    verdict_drawn = dataclasses.replace(kept, seen=revealed.version)
    assert push.page_run(verdict_drawn, revealed, pages) == (None, None)
    assert push.page_run(verdict_drawn, asked, pages) is None  # not revealed: stays closed
    assert push.page_run(here, revealed, pages) is None  # a room open already: in place
    moved = dataclasses.replace(now, step=now.step + 1, query=(("b_sec", "einsum"),))
    assert push.page_run(here, moved, pages) is not None
    assert push.page_run(here, dataclasses.replace(moved, ended=True), pages) is None
    assert push.page_run(here, dataclasses.replace(moved, removals=1), pages) is None
    assert push.page_run(here, moved, {}) is None  # a page this session's navigation lacks
    assert push.page_run(dataclasses.replace(here, link=()), moved, pages) is None
    # A student who has not followed a place yet (still on the Class page) is opened too.
    assert push.page_run(dataclasses.replace(here, place=None), moved, pages) is not None


def _waved(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch, wave: int
) -> tuple[TeacherPass, Wakes, set[str], Watcher]:
    """A class a teacher started, and a watcher that wakes its phones in waves of ``wave``,
    its runs over once out of ``running`` (the watcher's thread never starts: the test
    drives it)."""
    teacher = store.start(LESSON.id, "en", client="t")
    wakes = Wakes()
    running: set[str] = set()
    watcher = Watcher(store, wakes, running.__contains__, wave=wave)
    monkeypatch.setattr(watcher, "thread", object())
    return teacher, wakes, running, watcher


def test_a_move_wakes_a_class_in_a_wave_of_runs_not_all_at_once(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a way to tell when a run is over, the watcher keeps at most ``wave`` runs going:
    the next phone is woken as one ends, as one does not start (the session was busy), or as
    one outlives WAVE_SLOT_S; a phone whose screen drew the change while it waited is not
    woken; every phone behind is woken exactly once."""
    teacher, wakes, running, watcher = _waved(store, monkeypatch, wave=2)
    code = teacher.code
    clock = [time.monotonic()]
    monkeypatch.setattr(push.time, "monotonic", lambda: clock[0])
    now = store.version(code)
    phones = [f"phone{i}" for i in range(6)]
    for phone in phones:
        watcher.watch(phone, Follower(code, "poll", now))
    version = move(store, code, teacher.teacher_key, 1)

    def woken() -> list[str]:
        return [session for session, _ in wakes.calls]

    def start(session: str, started: bool = True) -> None:
        wakes.answers[session](started)
        if started:
            running.add(session)

    assert watcher.sweep() == 6  # every phone behind is asked for ...
    first = woken()
    assert len(first) == 2  # ... two at a time
    for session in first:
        start(session)
    assert watcher.dispatch() == 0 and len(woken()) == 2  # both still running

    running.discard(first[0])  # one run ended: the next phone
    assert watcher.dispatch() == 1
    third = woken()[2]
    start(third, started=False)  # busy with a run of its own: its place is free at once
    assert watcher.dispatch() == 1
    fourth = woken()[3]
    start(fourth)

    # A phone still waiting drew the change itself (its own timer's poll): not woken.
    waiting = [phone for phone in phones if phone not in woken()]
    watcher.watch(waiting[0], Follower(code, "poll", version))
    clock[0] += push.WAVE_SLOT_S + 0.01  # the two runs going outlived their slot
    assert watcher.dispatch() == 1
    assert woken()[4] == waiting[1]
    assert watcher.sweep() == 0  # nothing new to ask; nobody woken twice
    assert sorted(woken()) == sorted(set(phones) - {waiting[0]})
    assert all(pushed == version for _, pushed in wakes.calls)


def test_a_reveal_of_a_closed_room_wakes_every_verdict_before_any_room(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phones whose screens keep the step's room closed for the reveal: the reveal wakes
    each phone's poll (its verdict, a short run) first; a phone whose poll drew the verdict
    is then queued for the page run that opens its room, behind every verdict still
    waiting; once its page drew the room open, it is not woken again."""
    teacher, wakes, running, watcher = _waved(store, monkeypatch, wave=1)
    code = teacher.code
    version = move(store, code, teacher.teacher_key, 1)
    now = store.current_state(code)
    place = (now.step, now.room, now.query)
    link = (("class", code), ("student", "key"))
    phones = ["phone0", "phone1", "phone2"]

    def follow(phone: str, seen: int, *, closed: bool) -> None:
        watcher.watch(phone, Follower(code, "poll", seen, place, link, kept_room=closed))

    for phone in phones:
        follow(phone, version, closed=True)
    assert watcher.sweep() == 0  # the room stays closed until the reveal
    store.ask(code, teacher.teacher_key)
    revealed = store.reveal(code, teacher.teacher_key).version
    watcher.pages = {f"/{now.room}": "hash"}

    def finish(phone: str) -> None:
        wakes.answers[phone](True)  # started, and (not in ``running``) over

    assert watcher.sweep() == 3
    first = wakes.runs[0]
    assert first[1] is None  # a poll: the verdict, not the room
    follow(first[0], revealed, closed=True)  # its poll drew the verdict: the room is due
    finish(first[0])
    watcher.sweep()
    # The next phone's verdict goes before the first phone's room.
    assert [run for _, run in wakes.runs] == [None, None]
    for _ in phones[1:]:
        phone = wakes.runs[-1][0]
        follow(phone, revealed, closed=True)
        finish(phone)
        watcher.sweep()
    runs = wakes.runs
    assert [run for _, run in runs[:3]] == [None, None, None]
    assert runs[3] == (first[0], (None, None))  # then the rooms, in the order they came
    finish(runs[3][0])
    watcher.dispatch()
    finish(wakes.runs[-1][0])
    watcher.dispatch()
    assert sorted(session for session, run in wakes.runs if run == (None, None)) == phones
    for phone in phones:  # each page ran and drew its room open
        follow(phone, revealed, closed=False)
    count = len(wakes.runs)
    assert watcher.sweep() == 0 and len(wakes.runs) == count
    assert not running


def test_without_a_way_to_tell_a_run_is_over_every_wake_goes_at_once(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher = store.start(LESSON.id, "en", client="t")
    wakes = Wakes()
    watcher = Watcher(store, wakes, wave=1)  # running None: no waves
    monkeypatch.setattr(watcher, "thread", object())
    for phone in ("a", "b", "c"):
        watcher.watch(phone, Follower(teacher.code, "poll", store.version(teacher.code)))
    move(store, teacher.code, teacher.teacher_key, 1)
    assert watcher.sweep() == 3 and len(wakes.calls) == 3


def test_a_wave_under_way_makes_the_server_busy_for_its_upkeep(
    store: ClassStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a class's phones are queued or woken, the server's timed full collection waits
    (components/warm.py asks ``upkeep.busy()``); once the wave has run, it goes ahead."""
    from components import upkeep

    teacher, wakes, _, watcher = _waved(store, monkeypatch, wave=1)
    code = teacher.code
    monkeypatch.setitem(push._watchers, id(store), watcher)
    now = store.version(code)
    for phone in ("phone0", "phone1"):
        watcher.watch(phone, Follower(code, "poll", now))
    assert not upkeep.busy()
    move(store, code, teacher.teacher_key, 1)
    assert not upkeep.busy()  # a change nobody has looked at yet
    watcher.sweep()  # one phone woken, one waiting its turn
    assert push.waking() and upkeep.busy()
    for answered in list(wakes.answers.values()):
        answered(True)  # started, and (not in ``running``) already over
    watcher.dispatch()  # so the second phone is woken
    assert upkeep.busy()
    for answered in list(wakes.answers.values()):
        answered(True)
    watcher.dispatch()
    assert not push.waking() and not upkeep.busy()
