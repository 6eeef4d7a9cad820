"""The classroom benchmark's scenarios: how a class of protocol-level students behaves in
each mode (bench/classroom.py runs them against a server).

``mixed`` spreads the students over the rooms (student i in room i mod n), each doing every
action of its room with a short pause between them; ``all-analyse``, ``all-classify-same``
and ``all-upload`` put everyone in one room (:data:`FOCUS`) and, once all have opened it,
have them act within about a second (a :class:`Gate` per round). ``flood`` is a mixed class
while one laptop floods the sandbox (:func:`flood`): each student is a phone of its own
(a loopback address each), the flooder one machine with many fresh sessions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.classroom_client import Student
from bench.classroom_rooms import (
    ROOM_ACTIONS,
    ROOMS,
    Catalog,
    Outcome,
    _predictions_present,
    _report_present,
    open_room,
    student_photo,
    take_action,
)

MODES = ("mixed", "all-analyse", "all-classify-same", "all-upload", "flood")
FLOOD_ADDRESS = "127.3.0.1"  # the flooding laptop: every one of its sessions connects from here
# A model whose forward spins until the sandbox stops it (its CPU limit or deadline); the
# number makes each paste new, so no cache or shared computation answers it.
FLOOD_SOURCE = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        n = {number}
        while n >= 0:
            n += 1
        return self.fc(x)
"""
FOCUS = {  # the one room and action of each "everyone at once" mode
    "all-analyse": ("shapes", "analyse"),
    "all-classify-same": ("classify", "sample"),
    "all-upload": ("classify", "upload"),
}


class Gate:
    """Everyone waits here until all students have arrived (or left); then all go at once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.arrived = 0
        self._open = asyncio.Event()

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived >= self.size:
            self._open.set()

    async def pass_(self, deadline: float) -> None:
        self.arrive()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._open.wait(), max(0.0, deadline - time.monotonic()))


@dataclass
class Plan:
    mode: str
    students: int
    rounds: int
    photo_px: int
    seed: int
    rooms: tuple[str, ...] = ROOMS  # a mixed class's rooms (student i in rooms[i mod n])
    catalog: Catalog = field(default_factory=Catalog)  # labels read from the served code
    arrival_spread_s: float = 5.0  # a class opens the link over a few seconds
    press_jitter_s: float = 1.0  # "now everyone press": within about a second
    pause_s: tuple[float, float] = (0.5, 2.0)  # between one student's actions in mixed rooms
    flooders: int = 8  # the flooding laptop's sessions at once (``flood`` mode)


async def run_student(
    base_url: str,
    index: int,
    plan: Plan,
    gates: list[Gate],
    pool: concurrent.futures.Executor,
    outcomes: list[Outcome],
    deadline: float,
    log: Callable[[str], None],
) -> None:
    rng = random.Random(plan.seed * 1000 + index)
    focus = FOCUS.get(plan.mode)
    room = focus[0] if focus else plan.rooms[index % len(plan.rooms)]
    student = Student(base_url, index, pool)
    passed = 0
    loop = asyncio.get_running_loop()
    try:
        await asyncio.sleep(plan.arrival_spread_s * index / max(1, plan.students))
        connected = False
        for round_ in range(plan.rounds):
            if time.monotonic() >= deadline:
                break
            opened = await open_room(student, room, not connected, deadline)
            outcomes.append(
                Outcome(opened.action, index, round_, opened.seconds, opened.error, opened.skipped)
            )
            connected = connected or student.ws is not None
            if opened.error is not None and (student.closed_reason or student.ws is None):
                log(f"student {index}: {opened.error}")
                break
            actions = (focus[1],) if focus else ROOM_ACTIONS[room]
            photo = None
            if "upload" in actions:
                photo = await loop.run_in_executor(
                    pool, student_photo, index, round_, plan.photo_px
                )
            if focus:
                await gates[round_].pass_(deadline)
                passed += 1
                await asyncio.sleep(rng.uniform(0, plan.press_jitter_s))

            async def pause() -> None:  # a student reads the page before the next action
                await asyncio.sleep(rng.uniform(*plan.pause_s))

            for name in actions:
                if not focus:
                    await pause()
                if time.monotonic() >= deadline:
                    break
                taken = await take_action(
                    student,
                    room,
                    name,
                    round_,
                    pick=round_ if focus else index + round_,
                    photo=photo,
                    catalog=plan.catalog,
                    deadline=deadline,
                    pause=pause,
                )
                outcomes.extend(taken)
                if any(o.error for o in taken) and student.closed_reason:
                    break
            if student.closed_reason:
                log(f"student {index}: {student.closed_reason}")
                break
    finally:
        for gate in gates[passed:]:
            gate.arrive()  # a student who left must not hold the others back
        await student.close()


async def first_visit(
    base_url: str, pool: concurrent.futures.Executor, deadline: float
) -> dict[str, Outcome]:
    """The first shape analysis and the first classification, asked for at once."""

    async def visit(room: str, index: int) -> Outcome:
        student = Student(base_url, index, pool)
        started = time.perf_counter()
        try:
            outcome = await open_room(student, room, True, deadline)
            if outcome.error is None:
                present = (
                    _report_present(student, 0)
                    if room == "shapes"
                    else _predictions_present(student, 0)
                )
                if not present:
                    outcome = Outcome(outcome.action, index, 0, outcome.seconds, "no result shown")
            return Outcome(f"{room}.first", index, 0, time.perf_counter() - started, outcome.error)
        finally:
            await student.close()

    shapes, classify = await asyncio.gather(visit("shapes", -1), visit("classify", -2))
    return {"shapes": shapes, "classify": classify}


async def warm_up(base_url: str, pool: concurrent.futures.Executor, deadline: float) -> None:
    """Open the other rooms once, as a first visitor would, so the baseline has seen them."""
    others = [room for room in ROOMS if room not in ("shapes", "classify")]
    for number, room in enumerate(others):
        student = Student(base_url, -10 - number, pool)
        try:
            await open_room(student, room, True, deadline)
        finally:
            await student.close()


@dataclass
class FloodCount:
    """What the flooding laptop got: analyses it asked for, and how each ended."""

    sent: int = 0
    answered: int = 0  # a result or an explained refusal came back
    refused: int = 0  # of those, the sandbox's "busy"/"too many" answers
    errors: int = 0  # the tab broke (connection, timeout)


async def flood(
    base_url: str,
    plan: Plan,
    pool: concurrent.futures.Executor,
    stop: asyncio.Event,
    count: FloodCount,
    deadline: float,
) -> None:
    """One laptop, ``plan.flooders`` fresh sessions at a time: each opens the shape explorer
    with a link carrying a model that runs until the sandbox stops it, waits for its answer,
    leaves, and starts over as a new session, until ``stop``."""
    from torchatlas.links import encode_source

    numbers = iter(range(10**9))

    async def loop(lane: int) -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            tab = Student(base_url, 10_000 + lane, pool, source=FLOOD_ADDRESS)
            token = encode_source(FLOOD_SOURCE.format(number=next(numbers)))
            count.sent += 1
            try:
                await asyncio.wait_for(tab.connect(), 30)

                send = functools.partial(
                    tab.send_rerun,
                    page_name="shapes",
                    page_hash="",
                    query=f"m_src={token}",
                    keep_page=False,
                )
                _seconds, error = await tab.act(send, lambda since: True, 60.0, deadline)
                # The sandbox stopping the model is an explained card: the job was served.
                if error is None or error.startswith("error:"):
                    count.answered += 1
                    alerts = " ".join(n.text().lower() for n in tab.find(kind="alert"))
                    if any(word in alerts for word in ("busy", "too many", "already have")):
                        count.refused += 1
                else:
                    count.errors += 1
            except Exception:  # a tab that broke is counted, and the flood goes on
                count.errors += 1
            finally:
                await tab.close()

    await asyncio.gather(*(loop(lane) for lane in range(plan.flooders)))


async def run_class(
    base_url: str,
    plan: Plan,
    deadline: float,
    log: Callable[[str], None],
    flooded: FloodCount | None = None,
) -> list[Outcome]:
    """The class's outcomes; with ``flooded``, one laptop floods the sandbox meanwhile (what
    it got is counted there)."""
    outcomes: list[Outcome] = []
    gates = [Gate(plan.students) for _ in range(plan.rounds)]
    workers = plan.students + 4 + (plan.flooders if flooded is not None else 0)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        stop = asyncio.Event()
        flooding = None
        if flooded is not None:
            flooding = asyncio.create_task(flood(base_url, plan, pool, stop, flooded, deadline))
            await asyncio.sleep(3.0)  # the flood fills the sandbox's queue before the class
        tasks = [
            asyncio.create_task(
                run_student(base_url, i, plan, gates, pool, outcomes, deadline, log),
                name=f"student-{i}",
            )
            for i in range(plan.students)
        ]
        done, pending = await asyncio.wait(tasks, timeout=max(1.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=30)
        for task in done:
            if task.exception() is not None:
                log(f"{task.get_name()} stopped: {task.exception()!r}")
        if flooding is not None:
            stop.set()
            await asyncio.wait([flooding], timeout=90)
    return outcomes
