"""Layer 4, operations: the pool that owns the zygote, queues jobs and reports health.

Lives in the server process (threads, no forking here). Each job: rate limits per session and
per client → a place in the fair queue and then a slot under the concurrency cap → a socket
pair whose one end goes to the zygote, which forks a confined child around it → the request
out and the reply back on the other end, as size-capped JSON → the reply checked against a
bounded schema (the child may run hostile code: its reply is hostile input) → the zygote's word
on how the child ended.

Who asks is a :class:`~torchatlas.clients.Visitor`: a client (the machine's address, which a
visitor cannot multiply) and a session within it (which costs nothing: every websocket
connection is a new one). The queue is fair on two levels (:class:`FairQueue`), so one machine
cannot take the pool from the others however many sessions it opens:

- between clients, start-time fair queueing: each client's first waiting job is served in the
  current round, its n-th in later rounds; within a client, its sessions take turns;
- a free slot goes to the waiting client that runs the fewest jobs, and no client holds more
  than ``max(1, slots - 1)`` slots (with the default two: one running job per client), so a
  newcomer waits at most for the shortest running job, never behind a flood of CPU-limit jobs;
- bounded waiting per session, per client and in all; when the line is full, a client with
  fewer jobs waiting pushes out the newest job of the client holding the most, so a flood
  never makes another client's job be answered "busy";
- rate limits per session and, larger, per client (a class behind one address stays under it).

A waiting job learns its place in line through ``on_queued``.
"""

from __future__ import annotations

import atexit
import bisect
import collections
import contextlib
import copy
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torchatlas.clients import Visitor
from torchatlas.errors import MAX_REFUSAL_NAME, MAX_REFUSAL_WORDS, TorchRefusal
from torchatlas.sandbox import protocol
from torchatlas.sandbox.jobs import Job, target_of
from torchatlas.sandbox.outcomes import known_kind
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS, Refusal
from torchatlas.sandbox.schema import (
    AnyJSON,
    Bool,
    Dict,
    Int,
    List,
    Optional,
    SchemaError,
    Spec,
    Str,
    validate,
)
from torchatlas.sandbox.worker import DEFAULT_MEMORY_MB, MAX_RESULT_BYTES, TEST_LAYERS
from torchatlas.sandbox.zygote import CONTROL_MESSAGE_BYTES

LOG = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
ZYGOTE_START_TIMEOUT_S = 180.0
EXIT_REPORT_GRACE_S = 5.0
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 0.5, 120.0

UNTRUSTED_MESSAGE = "The worker sent a result that could not be trusted; try again."

# The reply's envelope. Lines and columns point into the pasted source, which is at most
# MAX_SOURCE_CHARS long: a larger one would make the page draw a caret of that many spaces.
MAX_MESSAGE_CHARS = 4000
MAX_REFUSALS = 200  # one per refused line is plenty to teach; the rest are dropped
_POSITION = Int(0, MAX_SOURCE_CHARS + 1)
_REFUSAL = Dict(
    {"line": _POSITION, "col": _POSITION, "code": Str(40, clip=True),
     "message": Str(1000, clip=True)},
    required=("line", "col", "code", "message"),
)  # fmt: skip
# What the pasted code raised (a code_error), as the one refusal shape's fields
# (torchatlas.errors.TorchRefusal), bounded like it.
_REFUSED = Dict(
    {"words": Str(MAX_REFUSAL_WORDS, clip=True), "raised": Str(MAX_REFUSAL_NAME, clip=True)},
    required=("words", "raised"),
)
_ERROR = Dict(
    {
        "kind": Str(40),
        "message": Str(MAX_MESSAGE_CHARS, clip=True),
        "line": Optional(_POSITION),
        "col": Optional(_POSITION),
        "refusals": List(_REFUSAL, MAX_REFUSALS, clip=True),
        "refused": Optional(_REFUSED),
    },
    required=("kind", "message"),
)
# Any job's value before its caller checks its own fields: bounded nesting, finite numbers.
GENERIC_VALUE = AnyJSON(max_depth=32)


class DecodedByCaller(Spec):
    """A job's value that its caller rebuilds with :func:`torchatlas.sandbox.codec.decode`,
    which bounds everything itself (types, sizes, depth, the number of values) and cleans its
    text: here it only has to be an object, so the reply is walked once, not twice.

    ``read_body``: the caller's reader of a whole reply's bytes (see
    :mod:`torchatlas.sandbox.typed_reply`), tried first: what it returns (a dict) is the
    job's value, already checked; None sends the reply the ordinary way."""

    def __init__(self, read_body: Callable[[bytes | bytearray], dict | None] | None = None):
        self.read_body = read_body

    def check(self, value: Any, budget: Any) -> Any:
        if type(value) is not dict:
            raise SchemaError("expected an object")
        return value


# What a caller passes as ``value_schema`` when it decodes the value with the codec.
DECODED_BY_CALLER: Spec = DecodedByCaller()


def reply_schema(value: Spec | None = None) -> Spec:
    """The schema of a worker's reply whose ``value`` (when ``ok``) matches ``value``."""
    return Dict(
        {"ok": Bool(), "value": Optional(value or GENERIC_VALUE), "error": Optional(_ERROR)},
        required=("ok",),
    )


def check_reply(reply: Any, value: Spec | None = None) -> dict[str, Any]:
    """The reply, checked and cleaned; :class:`SchemaError` when it cannot be trusted.

    ``ok`` true needs an object ``value``; ``ok`` false needs an ``error``.
    """
    clean = validate(reply, reply_schema(value))
    if clean["ok"] and not isinstance(clean.get("value"), dict):
        raise SchemaError("ok without an object value")
    if not clean["ok"] and clean.get("error") is None:
        raise SchemaError("not ok, and no error")
    return clean


def _read_reply(body: bytes | bytearray, value_schema: Spec | None) -> dict[str, Any]:
    """A reply's bytes, read and checked: by the caller's own reader of the whole reply when
    it has one and vouches for these bytes, else as JSON checked by :func:`check_reply`."""
    read_body = getattr(value_schema, "read_body", None)
    value = read_body(body) if read_body is not None else None
    if value is not None:
        return {"ok": True, "value": value}
    return check_reply(protocol.decode(body), value_schema)


@dataclass
class SandboxError:
    kind: str  # one of FAILURE_KINDS (torchatlas.sandbox.outcomes)
    message: str  # plain English: cause and fix
    line: int | None = None
    col: int | None = None
    refusals: list[Refusal] = field(default_factory=list)
    refused: TorchRefusal | None = None  # what the pasted code raised (a code_error)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "refusals": [refusal.to_dict() for refusal in self.refusals]}


@dataclass
class SandboxResult:
    ok: bool
    value: dict | None  # the job's JSON-able return value (round-tripped through JSON)
    error: SandboxError | None
    elapsed_s: float
    usage: dict[str, Any] = field(default_factory=dict)  # the child's peak memory and CPU time

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "value": self.value,
            "error": self.error.to_dict() if self.error else None,
            "elapsed_s": self.elapsed_s,
            "usage": self.usage,
        }


@dataclass
class SandboxHealth:
    """Which layers are active; keys read as labels on the page's health line."""

    allow_list: bool
    facade: bool
    process_isolation: bool
    scrubbed_env: bool
    rlimits: bool
    seccomp: bool
    own_user: bool  # each child runs as a user of its own, not the server's (needs a root server)
    warm_workers: str  # "free/cap": job slots, each a fresh child forked from the warm zygote
    detail: str = ""  # why a layer is off, for the server log

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _error(kind: str, message: str, started: float, **extra: Any) -> SandboxResult:
    return SandboxResult(False, None, SandboxError(kind, message, **extra), _since(started))


def _since(started: float) -> float:
    return time.perf_counter() - started


class _RateLimiter:
    """At most ``limit`` jobs started per key in any ``window_s`` (0: no limit)."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = limit, window_s
        self.history: dict[object, collections.deque[float]] = {}
        self.lock = threading.Lock()

    def wait_needed(self, key: object) -> float:
        """0 when ``key`` may start a job now (and counts it), else seconds to wait."""
        if key is None or self.limit <= 0:
            return 0.0
        now = time.monotonic()
        with self.lock:
            stamps = self.history.setdefault(key, collections.deque())
            while stamps and now - stamps[0] >= self.window_s:
                stamps.popleft()
            if len(stamps) >= self.limit:
                return self.window_s - (now - stamps[0])
            stamps.append(now)
            if len(self.history) > 10_000:  # forget idle keys
                for old in [old for old, value in self.history.items() if not value]:
                    del self.history[old]
            return 0.0

    def give_back(self, key: object) -> None:
        """Uncount ``key``'s newest job (it never got a place in line)."""
        if key is None or self.limit <= 0:
            return
        with self.lock:
            stamps = self.history.get(key)
            if stamps:
                stamps.pop()


def as_visitor(visitor: Visitor | str | None) -> Visitor | None:
    """Who asks for a job: a :class:`~torchatlas.clients.Visitor`; a plain session id is a
    session that is its own client; None an anonymous one-off caller (its own client too)."""
    if visitor is None or isinstance(visitor, Visitor):
        return visitor
    if isinstance(visitor, str):
        return Visitor.alone(visitor)
    raise TypeError(f"visitor must be a Visitor, a session id or None, not {type(visitor)!r}")


@dataclass(eq=False)
class _Ticket:
    client: object  # the client, or a fresh object for an anonymous call
    session: object  # the session within it (idem)
    tag: int  # virtual start time between the client's sessions: its order there is (tag, seq)
    seq: int  # arrival
    # "waiting" → "running" → "done"; or "left" (gave up waiting) or "pushed" (pushed out of
    # a full line by a client with fewer jobs waiting)
    state: str = "waiting"


@dataclass(eq=False)
class _Client:
    """One client's part of the line."""

    # Its waiting jobs in its own order: round robin between its sessions, (tag, seq).
    waiting: list[_Ticket] = field(default_factory=list)
    # Its places in the line between clients, one per waiting job, in order: (virtual start
    # time, arrival). Its first job (in its own order) has its first place, and so on.
    turns: list[tuple[int, int]] = field(default_factory=list)
    running: int = 0
    next_turn: int = 0  # its next job's earliest virtual start time between clients
    virtual: int = 0  # the session-level tag of its latest started job
    next_tag: dict[object, int] = field(default_factory=dict)  # per session: next job's tag
    waiting_of: collections.Counter[object] = field(default_factory=collections.Counter)

    def idle(self) -> bool:
        return not self.waiting and not self.running


def _newest(client: _Client) -> _Ticket:
    return max(client.waiting, key=lambda ticket: ticket.seq)


class FairQueue:
    """Slots for jobs, shared fairly between clients (machines), then between the sessions
    (tabs, phones) of each client: hierarchical start-time fair queueing with unit costs.

    A session costs nothing (every websocket connection is a new one), so fairness that counts
    sessions alone goes to whoever opens the most; a client (the machine's address, see
    :mod:`torchatlas.clients`) is what a visitor cannot multiply.

    Order. Between clients: a client's n-th waiting job gets the virtual start time
    ``max(now, its previous job's) + 1``, so a client's first waiting job is served in the
    current round and its backlog in later rounds, however many sessions it spreads it over;
    ties go by arrival. Within a client, the same one level down: its sessions take turns
    (round robin), so one tab's backlog does not hold up the class-mate next to it. The
    client's places in line go to its jobs in that order.

    Slots. A free slot goes to the waiting client that runs the fewest jobs, then by the order
    above: while another client waits, a client runs a second job only if every waiting client
    already runs one. No client ever holds more than ``max(1, slots - 1)`` slots, so with two
    or more slots one is always out of reach of a client that already runs a job (with the
    default two slots: one running job per client). Why: a flood's jobs run to the CPU limit,
    so a client that could take every slot while nobody else waits would make the next
    newcomer wait a whole CPU limit; the reserved slot bounds a newcomer's wait by the
    shortest running job, and is otherwise used by whoever is alone (work-conserving).

    Bounds. At most ``per_session`` waiting jobs per session (answered at once beyond:
    ``"session"``), ``per_client`` per client (``"client"``; by default the whole line, so a
    class of 30 behind one school address waits, never refused) and ``limit`` in all. When the
    line is full, a job from a client with at least two fewer jobs waiting than the client
    holding the most pushes out that client's newest waiting job (its caller is answered as
    for a full line), so a client that floods the line cannot make another client's job be
    answered "busy"; otherwise the job is refused (``"full"``). (With one fewer, the push would
    only swap the two clients' places.)
    """

    def __init__(
        self, slots: int, *, per_session: int, limit: int, per_client: int | None = None
    ) -> None:
        self.slots = slots
        self.per_session = per_session
        self.limit = limit
        self.per_client = limit if per_client is None else per_client
        self.most_per_client = max(1, slots - 1)
        self.cond = threading.Condition()
        self.free = slots
        self.waiting: list[_Ticket] = []
        self.clients: dict[object, _Client] = {}
        self.virtual = 0
        self.seq = itertools.count()

    def enter(self, visitor: Visitor | str | None) -> tuple[_Ticket | None, str]:
        """A ticket (running at once when a slot is free for its client), or None and why:
        ``"session"`` (this session has enough waiting), ``"client"`` (this client has) or
        ``"full"`` (the line is, and no client holds enough more of it to make room)."""
        who = as_visitor(visitor)
        client_key: object = who.client if who is not None else object()
        session_key: object = who.session if who is not None else object()
        with self.cond:
            client = self.clients.get(client_key)
            if client is None:
                client = self.clients[client_key] = _Client()
            if not (self.free > 0 and client.running < self.most_per_client):
                refusal = self._make_room(client, session_key)
                if refusal:
                    self._forget(client_key, client)
                    return None, refusal
            turn = max(self.virtual, client.next_turn)
            client.next_turn = turn + 1
            tag = max(client.virtual, client.next_tag.get(session_key, 0))
            client.next_tag[session_key] = tag + 1
            ticket = _Ticket(client_key, session_key, tag, next(self.seq))
            client.turns.append((turn, ticket.seq))  # turns only grow: the list stays sorted
            bisect.insort(client.waiting, ticket, key=lambda item: (item.tag, item.seq))
            client.waiting_of[session_key] += 1
            self.waiting.append(ticket)
            self._dispatch()
            self.cond.notify_all()  # places in line may have changed
            return ticket, ""

    def _make_room(self, client: _Client, session: object) -> str:
        """Why a job that must wait cannot (after pushing another client's out if it may)."""
        if client.waiting_of[session] >= self.per_session:
            return "session"
        if len(client.waiting) >= self.per_client:
            return "client"
        if len(self.waiting) < self.limit:
            return ""
        largest = max(
            self._backlogged(), key=lambda other: (len(other.waiting), _newest(other).seq)
        )
        if len(largest.waiting) < len(client.waiting) + 2:
            return "full"
        newest = _newest(largest)
        self._unwait(newest)
        newest.state = "pushed"
        self.cond.notify_all()  # its caller is answered; the jobs behind it moved up
        return ""

    def _dispatch(self) -> None:
        granted = False
        while self.free > 0:
            best: _Client | None = None
            for client in self._backlogged():
                if client.running >= self.most_per_client:
                    continue
                if best is None or (client.running, client.turns[0]) < (
                    best.running,
                    best.turns[0],
                ):
                    best = client
            if best is None:
                break
            ticket = best.waiting.pop(0)
            turn, _ = best.turns.pop(0)
            self._count_out(best, ticket)
            ticket.state = "running"
            best.running += 1
            self.free -= 1
            self.virtual = max(self.virtual, turn)
            best.virtual = max(best.virtual, ticket.tag)
            granted = True
        if granted:
            self.cond.notify_all()

    def _count_out(self, client: _Client, ticket: _Ticket) -> None:
        self.waiting.remove(ticket)
        client.waiting_of[ticket.session] -= 1
        if not client.waiting_of[ticket.session]:
            del client.waiting_of[ticket.session]

    def _unwait(self, ticket: _Ticket) -> None:
        """A waiting ticket leaves the line (not to run): its client's last place goes, and
        the turns it had taken are given back."""
        client = self.clients[ticket.client]
        client.waiting.remove(ticket)
        turn, _ = client.turns.pop()
        if client.next_turn == turn + 1:
            client.next_turn = turn
        if client.next_tag.get(ticket.session) == ticket.tag + 1:
            client.next_tag[ticket.session] = ticket.tag
        self._count_out(client, ticket)
        self._forget(ticket.client, client)

    def _backlogged(self) -> list[_Client]:
        """The clients with jobs waiting."""
        return list(
            {ticket.client: self.clients[ticket.client] for ticket in self.waiting}.values()
        )

    def _forget(self, key: object, client: _Client) -> None:
        """Drop ``client`` once it is idle with no advance left (a later job of it starts
        afresh; an anonymous caller never comes back), and the sessions within a client that
        have no advance left once there are many; so the bookkeeping stays bounded however
        many sessions and clients come and go."""
        if client.idle() and (client.next_turn <= self.virtual or not isinstance(key, str)):
            self.clients.pop(key, None)
        elif len(client.next_tag) > 4 * self.limit:
            for session in [s for s, tag in client.next_tag.items() if tag <= client.virtual]:
                del client.next_tag[session]
        if len(self.clients) > 4 * self.limit:  # clients gone quiet
            for old, quiet in list(self.clients.items()):
                if quiet.idle() and quiet.next_turn <= self.virtual:
                    del self.clients[old]

    def _order(self) -> dict[int, tuple[int, int]]:
        """Every waiting ticket's place in the line between clients (by ``id``)."""
        places: dict[int, tuple[int, int]] = {}
        for client in self._backlogged():
            for ticket, turn in zip(client.waiting, client.turns, strict=True):
                places[id(ticket)] = turn
        return places

    def position(self, ticket: _Ticket) -> int:
        """1 for the next job to start, 2 for the one after…; 0 once it runs (or has left)."""
        with self.cond:
            return self._position(ticket)

    def _position(self, ticket: _Ticket) -> int:
        if ticket.state != "waiting":
            return 0
        places = self._order()
        mine = places[id(ticket)]
        return 1 + sum(1 for place in places.values() if place < mine)

    def wait(
        self,
        ticket: _Ticket,
        timeout_s: float,
        on_queued: Callable[[int], None] | None = None,
    ) -> bool:
        """True once the ticket runs; False after ``timeout_s`` (it then leaves the queue) or
        when a job of another client pushed it out of a full line (``ticket.state`` is then
        ``"pushed"``).

        ``on_queued(position)`` is called in this thread, outside the lock, whenever the
        position changes, and with 0 when a job that had to wait starts. A job that starts
        at once never calls it. If it raises, the ticket leaves the queue (or gives its slot
        back) and the exception propagates.
        """
        deadline = time.monotonic() + timeout_s
        reported: int | None = None
        try:
            while True:
                with self.cond:
                    while True:
                        if ticket.state == "pushed":
                            return False
                        position = self._position(ticket)
                        if position == 0 or (on_queued is not None and position != reported):
                            break
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            self._unwait(ticket)
                            ticket.state = "left"
                            self.cond.notify_all()  # the jobs behind it moved up
                            return False
                        self.cond.wait(remaining)
                if position == 0:
                    if reported is not None and on_queued is not None:
                        on_queued(0)
                    return True
                reported = position
                if on_queued is not None:
                    on_queued(position)
        except BaseException:
            self.leave(ticket)
            raise

    def leave(self, ticket: _Ticket) -> None:
        """Withdraw a waiting ticket, or give back the slot of a running one."""
        with self.cond:
            if ticket.state == "waiting":
                self._unwait(ticket)
                ticket.state = "left"
                self.cond.notify_all()
        if ticket.state == "running":
            self.release(ticket)

    def release(self, ticket: _Ticket) -> None:
        """The ticket's job has ended (its child is gone): its slot goes to the next job."""
        with self.cond:
            if ticket.state != "running":
                return
            ticket.state = "done"
            self.free += 1
            client = self.clients[ticket.client]
            client.running -= 1
            self._forget(ticket.client, client)
            self._dispatch()
            self.cond.notify_all()

    @property
    def running_count(self) -> int:
        with self.cond:
            return self.slots - self.free

    @property
    def waiting_count(self) -> int:
        with self.cond:
            return len(self.waiting)


class _Zygote:
    """One running zygote process and the thread that reads its control messages."""

    def __init__(self, registry: dict[str, Any]) -> None:
        """``registry``: the jobs message (see SandboxPool.register), sent before anything.

        The zygote writes only its own start-up problems (never a job's output: children's
        standard streams are /dev/null) to the server's standard error, so they reach the
        server's log and no file is left behind."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": tempfile.gettempdir(),
        }  # a whitelist: the server's secrets (often environment variables) stay behind
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchatlas.sandbox.zygote", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=environment,
            cwd=tempfile.gettempdir(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self.control = ours
        with contextlib.suppress(OSError):  # a zygote that died at once: the reader sees it
            ours.send(json.dumps(registry).encode())
        self.send_lock = threading.Lock()
        self.waiters: dict[int, dict[str, Any]] = {}
        self.waiters_lock = threading.Lock()
        self.ready = threading.Event()
        self.dead = threading.Event()
        self.info: dict[str, Any] = {}
        # The newest spare child, confined and waiting for a job, and whether it has warmed up
        # yet (diagnostics, tests).
        self.last_spare_pid: int | None = None
        self.spare_warm = False
        self.reader = threading.Thread(target=self._read, name="sandbox-zygote", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            while True:
                data = self.control.recv(65536)
                if not data:
                    break
                message = json.loads(data)
                if message.get("op") == "ready":
                    self.info = message
                    self.ready.set()
                elif message.get("op") == "spare":
                    self.last_spare_pid = message.get("pid")
                    self.spare_warm = message.get("warm") is True
                elif message.get("op") == "exit":
                    with self.waiters_lock:
                        waiter = self.waiters.pop(message.get("id"), None)
                        if waiter is not None:
                            waiter["exit"] = message
                    if waiter is not None:
                        waiter["event"].set()
                        if waiter.get("on_exit"):
                            waiter["on_exit"]()
        except (OSError, ValueError):
            pass
        finally:
            self.dead.set()
            self.ready.set()  # wake anyone waiting for a start that will not come
            with self.waiters_lock:
                waiters, self.waiters = list(self.waiters.values()), {}
            for waiter in waiters:
                waiter["event"].set()
                if waiter.get("on_exit"):
                    waiter["on_exit"]()

    def when_exited(self, job_id: int, waiter: dict[str, Any], action: Callable[[], None]) -> bool:
        """Run ``action`` once the job's child has exited (its report arrived or the zygote
        died); False when that has already happened, and the caller acts itself."""
        with self.waiters_lock:
            if self.waiters.get(job_id) is not waiter:
                return False
            waiter["on_exit"] = action
            return True

    def alive(self) -> bool:
        return not self.dead.is_set() and self.process.poll() is None

    def submit(self, job_id: int, order: dict[str, Any], job_fd: int) -> dict[str, Any]:
        waiter: dict[str, Any] = {"event": threading.Event(), "exit": None}
        with self.waiters_lock:
            self.waiters[job_id] = waiter
        with self.send_lock:
            socket.send_fds(self.control, [json.dumps(order).encode()], [job_fd])
        return waiter

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


class SandboxPool:
    """Runs jobs on pasted code in confined, single-use children of a warm zygote."""

    def __init__(
        self,
        *,
        concurrency: int | None = None,
        queue_limit: int = 64,
        session_queue_limit: int = 2,
        client_queue_limit: int | None = None,
        queue_wait_s: float = 120.0,
        rate_limit: int = 10,
        rate_window_s: float = 10.0,
        client_rate_limit: int = 150,
        client_rate_window_s: float = 30.0,
        memory_mb: int = DEFAULT_MEMORY_MB,
        max_result_bytes: int = MAX_RESULT_BYTES,
        test_hooks: bool = False,
        jobs: Mapping[str, Job] | None = None,
        warm_up_requests: Sequence[Mapping[str, Any]] = (),
        spare_warm_up: Mapping[str, Any] | None = None,
    ) -> None:
        """``queue_limit``: jobs that may wait in all (a class of 30, one job each, fits);
        ``session_queue_limit``: jobs one session may have waiting;
        ``client_queue_limit``: jobs one client (one address) may have waiting, by default the
        whole line: a class behind one school address fits, and when the line is full a job of
        a client with fewer waiting pushes out the newest of the client holding the most
        (:class:`FairQueue`). ``queue_wait_s``: the longest a job waits for a slot before it is
        answered "busy" (a safety net: with the queue bounded and every job time-limited,
        honest load never reaches it). ``concurrency`` defaults to the cores, between 2 and 4:
        with one running job per client while others wait, a second slot is what keeps one
        client's slow job from holding up everyone else, even on a single core (the two
        children then share it).

        Rate limits, counted when a job takes its place in line (a refused job is not
        counted): ``rate_limit`` jobs per session in ``rate_window_s`` (10 in 10 s: a person
        presses far less often); ``client_rate_limit`` per client in ``client_rate_window_s``
        (150 in 30 s, 5 a second held for half a minute: a class of 30 behind one address
        pressing Analyse together starts 30, and the rooms' shared caches answer a class's
        identical presses without a job, so normal use stays far below it; it caps a client
        that spreads cheap jobs over fresh sessions). 0 switches a limit off.

        ``jobs``, ``warm_up_requests``, ``spare_warm_up``: what :meth:`register` takes; the pool
        runs no job that its callers did not register."""
        self.concurrency = concurrency or max(2, min(os.cpu_count() or 1, 4))
        self.queue_limit = queue_limit
        self.session_queue_limit = session_queue_limit
        self.client_queue_limit = queue_limit if client_queue_limit is None else client_queue_limit
        self.queue_wait_s = queue_wait_s
        self.memory_mb = memory_mb
        self.max_result_bytes = max_result_bytes
        self.test_hooks = test_hooks  # allows switching layers off, for the attack tests only
        self._queue = FairQueue(
            self.concurrency,
            per_session=session_queue_limit,
            per_client=self.client_queue_limit,
            limit=queue_limit,
        )
        self._rate = _RateLimiter(rate_limit, rate_window_s)  # per session
        self._client_rate = _RateLimiter(client_rate_limit, client_rate_window_s)
        self._ids = itertools.count(1)
        self._zygote: _Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._closed = False
        # The registry the next zygote starts with: job names → "module:qualname".
        self._jobs: dict[str, Job] = {}
        self._targets: dict[str, str] = {}
        self._warm_requests: list[dict[str, Any]] = []
        self._spare_warm_ups: list[dict[str, Any]] = []
        self._registry_changed = False  # the running zygote has an older registry
        # Registrations already applied (copies), so that registering the same again is cheap.
        self._registered: list[tuple[Any, ...]] = []
        if jobs or warm_up_requests or spare_warm_up:
            self.register(jobs or {}, warm_up_requests, spare_warm_up)

    @property
    def _running(self) -> int:
        """Jobs holding a slot (their child may still be exiting)."""
        return self._queue.running_count

    @property
    def queued(self) -> int:
        """Jobs waiting for a slot now."""
        return self._queue.waiting_count

    # ------------------------------------------------------------------ jobs registry
    def register(
        self,
        jobs: Mapping[str, Job],
        warm_up_requests: Sequence[Mapping[str, Any]] = (),
        spare_warm_up: Mapping[str, Any] | None = None,
    ) -> SandboxPool:
        """Let this pool run ``jobs`` (name → a module-level function called in the worker as
        ``fn(namespace, **params)``); returns the pool.

        ``warm_up_requests`` (``{"source", "job", "params"}`` each, for registered jobs) run
        once in the zygote before it forks, so children find everything imported and touched;
        ``spare_warm_up`` is a request each spare child runs while it waits for a job: each
        registration adds its own (a room touches its own paths), and a spare runs them all
        once no job is running. Registering the same again changes nothing (and costs next to
        nothing: every room job registers every room first); a name already registered to
        another function raises ValueError. Call it before the first job: a registration that
        changes anything after the zygote started makes the next job start a new zygote (jobs
        running in the old one then end as crashed).
        """
        key = (dict(jobs), list(warm_up_requests), spare_warm_up)
        if key in self._registered:  # compared by value: a changed request is registered
            return self
        with self._zygote_lock:
            new_jobs = dict(self._jobs)
            targets = dict(self._targets)
            for name, function in jobs.items():
                if not isinstance(name, str) or not name:
                    raise ValueError(f"A sandbox job's name must be a non-empty string: {name!r}")
                known = new_jobs.get(name)
                if known is function:
                    continue
                if known is not None:
                    raise ValueError(
                        f"The sandbox job {name!r} is already registered as {targets[name]}; "
                        "give the new job another name."
                    )
                targets[name] = target_of(function)
                new_jobs[name] = function
            requests = list(self._warm_requests)
            for request in warm_up_requests:
                clean = _warm_request(request, new_jobs)
                if clean not in requests:
                    requests.append(clean)
            spare = list(self._spare_warm_ups)
            if spare_warm_up is not None:
                clean = _warm_request(spare_warm_up, new_jobs)
                if clean not in spare:
                    spare.append(clean)
            registry = {"op": "jobs", "jobs": targets, "warm_up": requests, "spare_warm_up": spare}
            if len(json.dumps(registry).encode()) > CONTROL_MESSAGE_BYTES:
                raise ValueError(
                    "The sandbox's jobs and warm-up requests do not fit in one control message "
                    f"({CONTROL_MESSAGE_BYTES} bytes); use shorter warm-up sources."
                )
            old = (self._targets, self._warm_requests, self._spare_warm_ups)
            if (targets, requests, spare) != old:
                self._jobs, self._targets = new_jobs, targets
                self._warm_requests, self._spare_warm_ups = requests, spare
                self._registry_changed = self._zygote is not None
            self._registered = [*self._registered[-31:], copy.deepcopy(key)]
        return self

    @property
    def jobs(self) -> dict[str, str]:
        """The registered jobs: name → ``"module:qualname"`` (a copy)."""
        return dict(self._targets)

    def _registry(self) -> dict[str, Any]:
        return {
            "op": "jobs",
            "jobs": self._targets,
            "warm_up": self._warm_requests,
            "spare_warm_up": self._spare_warm_ups,
        }

    # ------------------------------------------------------------------ zygote
    def _zygote_ready(self, wait: bool = True) -> _Zygote | None:
        with self._zygote_lock:
            if self._closed:
                return None
            if self._zygote is None or not self._zygote.alive() or self._registry_changed:
                if self._zygote is not None:
                    self._zygote.stop()
                self._zygote = _Zygote(self._registry())
                self._registry_changed = False
            zygote = self._zygote
        if wait:
            zygote.ready.wait(ZYGOTE_START_TIMEOUT_S)
            if not zygote.alive() or not zygote.info:
                return None
        return zygote

    def warm_up(self, wait: bool = True) -> None:
        """Start the zygote now (it imports torch once); ``wait`` until it is ready."""
        self._zygote_ready(wait=wait)

    def shutdown(self) -> None:
        with self._zygote_lock:
            self._closed = True
            if self._zygote is not None:
                self._zygote.stop()
                self._zygote = None

    def health(self) -> SandboxHealth:
        zygote = self._zygote
        ready = bool(zygote and zygote.alive() and zygote.ready.is_set() and zygote.info)
        probe = zygote.info.get("probe", {}) if ready and zygote else {}
        free = max(0, self.concurrency - self._running) if ready else 0
        details = []
        if probe.get("error"):
            details.append(f"probe: {probe['error']}")
        if ready and zygote and zygote.info.get("job_failures"):
            details.append(f"jobs: {zygote.info['job_failures']}")
        return SandboxHealth(
            allow_list=True,
            facade=True,
            process_isolation=ready,
            scrubbed_env=bool(probe.get("scrubbed_env")),
            rlimits=bool(probe.get("rlimits")),
            # On only when the probe also saw the filter keep other processes out of reach.
            seccomp=bool(
                probe.get("seccomp")
                and probe.get("socket_blocked")
                and probe.get("others_unreachable")
            ),
            own_user=bool(probe.get("uid_per_child")) and os.geteuid() == 0,
            warm_workers=f"{free}/{self.concurrency}",
            detail="; ".join(details),
        )

    # ------------------------------------------------------------------ jobs
    def run_job(
        self,
        source: str,
        job: str,
        params: dict,
        *,
        timeout_s: float = 10.0,
        visitor: Visitor | str | None = None,
        layers_off: tuple[str, ...] = (),
        on_queued: Callable[[int], None] | None = None,
        value_schema: Spec | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> SandboxResult:
        """Run ``job`` on ``source`` in a fresh confined child; never raises for user input.

        ``visitor``: who asks (:class:`~torchatlas.clients.Visitor`: its client and session),
        for the fair queue and the rate limits; a plain string is a session that is its own
        client, None an anonymous one-off caller (its own client, no rate limit).
        ``on_queued(position)``: called (in this thread) while the job waits for a slot, with
        its place in line (1 = next) whenever that changes, and with 0 when it starts; not
        called when a slot is free at once. ``value_schema``: the caller's schema of the
        job's value; a reply that does not match it (or the envelope's own bounds) becomes
        an ``untrusted`` error, never an exception. ``meanwhile``: the caller's own work,
        called once in this thread: while the child computes (after the request is sent,
        before the reply is read), or before returning when no child got the job. An
        exception it raises is the caller's: it is raised once the job is over. Keep it short
        against ``timeout_s``: the child's deadline runs on, and a reply larger than the
        socket's buffer waits for the read.
        """
        pending = [] if meanwhile is None else [meanwhile]
        raised: list[Exception] = []

        def caller_work() -> None:
            if pending:
                try:
                    pending.pop()()
                except Exception as exc:  # the caller's, raised after the job is over
                    raised.append(exc)

        result = self._run_job(source, job, params, timeout_s, as_visitor(visitor), layers_off,
                               on_queued, value_schema, caller_work)  # fmt: skip
        caller_work()  # no child got the job: the caller's work still runs (a no-op otherwise)
        if raised:
            raise raised[0]
        return result

    def _run_job(
        self,
        source: str,
        job: str,
        params: dict,
        timeout_s: float,
        visitor: Visitor | None,
        layers_off: tuple[str, ...],
        on_queued: Callable[[int], None] | None,
        value_schema: Spec | None,
        meanwhile: Callable[[], None],
    ) -> SandboxResult:
        started = time.perf_counter()
        if not isinstance(job, str) or job not in self._jobs:
            return _error("job_error", f"Unknown sandbox job {job!r}.", started)
        if layers_off and not self.test_hooks:
            return _error("job_error", "Layers can only be switched off in tests.", started)
        if not set(layers_off) <= TEST_LAYERS:
            return _error("job_error", f"Unknown layers {sorted(layers_off)}.", started)
        try:
            json.dumps(params)
        except (TypeError, ValueError) as exc:
            return _error("job_error", f"The job's parameters are not JSON: {exc}", started)
        timeout_s = min(max(float(timeout_s), MIN_TIMEOUT_S), MAX_TIMEOUT_S)
        refused = self._rate_refusal(visitor, started)
        if refused is not None:
            return refused
        ticket, refusal = self._queue.enter(visitor)
        if ticket is None:
            self._give_back_rate(visitor)
            if refusal == "session":
                return _error(
                    "too_many_jobs",
                    f"You already have an analysis running and {self.session_queue_limit} "
                    "waiting. Wait until they finish, then start the next one.",
                    started,
                )
            if refusal == "client":
                return _error("busy", _client_busy_message(self.client_queue_limit), started)
            return _error("busy", _busy_message(), started)
        if not self._queue.wait(ticket, self.queue_wait_s, on_queued):
            if ticket.state == "pushed":  # a client with fewer jobs in the full line took its place
                self._give_back_rate(visitor)
                return _error("busy", _busy_message(), started)
            return _error(
                "busy",
                f"Your analysis waited {self.queue_wait_s:g} s in line without a free worker. "
                "Try again in a minute.",
                started,
            )
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                self._queue.release(ticket)

        handed_over = False
        try:
            result, handed_over = self._run_in_child(
                source,
                job,
                params,
                timeout_s,
                layers_off,
                started,
                release,
                value_schema,
                meanwhile,
            )
            return result
        finally:
            if not handed_over:
                release()

    def _rate_refusal(self, visitor: Visitor | None, started: float) -> SandboxResult | None:
        """The answer to a visitor over a rate limit (its session's, then its client's), or
        None: the job is counted against both."""
        if visitor is None:  # an anonymous one-off caller: the server's own work
            return None
        session = (visitor.client, visitor.session)
        wait_s = self._rate.wait_needed(session)
        if wait_s > 0:
            return _error(
                "busy",
                f"You started {self._rate.limit} analyses in the last {self._rate.window_s:g} "
                f"seconds. Wait {max(1, round(wait_s))} s and try again.",
                started,
            )
        wait_s = self._client_rate.wait_needed(visitor.client)
        if wait_s > 0:
            self._rate.give_back(session)
            return _error(
                "busy",
                f"The computers sharing your network address started {self._client_rate.limit} "
                f"analyses in the last {self._client_rate.window_s:g} seconds. Wait "
                f"{max(1, round(wait_s))} s and try again.",
                started,
            )
        return None

    def _give_back_rate(self, visitor: Visitor | None) -> None:
        """A job that got no place in line (or lost it) does not count against the rates."""
        if visitor is not None:
            self._rate.give_back((visitor.client, visitor.session))
            self._client_rate.give_back(visitor.client)

    def _run_in_child(
        self,
        source: str,
        job: str,
        params: dict,
        timeout_s: float,
        layers_off: tuple[str, ...],
        started: float,
        release: Callable[[], None],
        value_schema: Spec | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> tuple[SandboxResult, bool]:
        """The job's result, and whether ``release`` (the concurrency slot) was handed to the
        child's exit: a child that has answered is not waited for, but its slot stays taken
        until it has really gone, so the concurrency cap still counts every live child."""
        zygote = self._zygote_ready()
        if zygote is None:
            return _error(
                "unavailable",
                "The isolated worker that runs pasted code could not start on this server. "
                "Try again in a minute.",
                started,
            ), False
        job_id = next(self._ids)
        order = {
            "op": "run",
            "id": job_id,
            "timeout_s": timeout_s,
            "memory_mb": self.memory_mb,
            "max_result_bytes": self.max_result_bytes,
            "layers_off": list(layers_off),
        }
        ours, theirs = socket.socketpair()
        reply: dict[str, Any] | None = None
        too_large: protocol.MessageTooLarge | None = None
        untrusted: str | None = None  # why the reply cannot be believed
        try:
            try:
                waiter = zygote.submit(job_id, order, theirs.fileno())
            except OSError:
                error = _error("unavailable", "The sandbox worker stopped; try again.", started)
                return error, False
            finally:
                theirs.close()
            deadline = time.monotonic() + timeout_s + EXIT_REPORT_GRACE_S
            try:
                ours.settimeout(max(0.1, deadline - time.monotonic()))
                ours.sendall(protocol.encode({"source": source, "job": job, "params": params}))
                if meanwhile is not None:  # the child computes now: the caller's own work
                    meanwhile()  # (its errors are kept by run_job: none reaches this try)
                body = protocol.receive_body(ours, self.max_result_bytes + 4096)
                if body is not None:
                    reply = _read_reply(body, value_schema)
            except protocol.MessageTooLarge as exc:
                too_large = exc
            except OSError:
                # The child died or hung up: the zygote's exit report says why.
                reply = None
            except (ValueError, RecursionError) as exc:
                # Unreadable JSON, numbers past the decoder's bounds, or a reply outside its
                # schema: a child running hostile code may write anything to its socket.
                untrusted = str(exc)[:300] if isinstance(exc, ValueError) else "nested too deep"
        finally:
            ours.close()
        # A child that answered needs no exit report to be understood: answer now (its
        # exit, the teardown of a large address space and the reaping, happens meanwhile).
        # Without an answer, only the exit report says what happened (timeout, crash, memory).
        answered = too_large is None and (reply is not None or untrusted is not None)
        handed_over = answered and zygote.when_exited(job_id, waiter, release)
        if not handed_over:
            waiter["event"].wait(max(0.1, deadline - time.monotonic()))
        exit_report = waiter["exit"] or {}
        usage = {key: exit_report[key] for key in ("max_rss_kb", "cpu_s") if key in exit_report}
        if untrusted is not None:
            LOG.warning("sandbox job %s: reply refused: %s", job, untrusted)
            result = _error("untrusted", UNTRUSTED_MESSAGE, started)
        else:
            result = self._interpret(reply, too_large, exit_report, zygote, timeout_s, started)
        result.usage = usage
        return result, handed_over

    def _interpret(
        self,
        reply: dict[str, Any] | None,
        too_large: protocol.MessageTooLarge | None,
        exit_report: dict[str, Any],
        zygote: _Zygote,
        timeout_s: float,
        started: float,
    ) -> SandboxResult:
        """``reply`` has passed :func:`check_reply` (or is None)."""
        if too_large is not None:
            return _error(
                "output_too_large",
                f"The result is {too_large.size / 2**20:.1f} MB; the limit is "
                f"{too_large.limit / 2**20:.0f} MB. Analyse a smaller model.",
                started,
            )
        if reply is not None and reply["ok"]:
            return SandboxResult(True, reply["value"], None, _since(started))
        if reply is not None:
            return SandboxResult(False, None, _sandbox_error(reply["error"]), _since(started))
        stop_signal = exit_report.get("signal")
        if exit_report.get("timed_out") or stop_signal == signal.SIGXCPU:
            return _error(
                "timeout",
                f"The code was stopped after {timeout_s:g} s. Look for a loop that never "
                "ends or a very long computation in `__init__` or `forward`.",
                started,
            )
        if not exit_report:
            if not zygote.alive():
                return _error("crashed", "The sandbox worker stopped; try again.", started)
            return _error("timeout", f"The code did not answer within {timeout_s:g} s.", started)
        how = (
            f"signal {signal.Signals(stop_signal).name}"
            if stop_signal
            else f"exit code {exit_report.get('code')}"
        )
        return _error(
            "crashed",
            f"The process running the code stopped without a result ({how}). Code that exits, "
            "crashes the interpreter or runs out of memory does this; simplify it and try again.",
            started,
        )


def _warm_request(request: Mapping[str, Any], jobs: Mapping[str, Job]) -> dict[str, Any]:
    """A warm-up request, checked (a registered job, a source, JSON parameters) and copied."""
    source, job, params = request.get("source"), request.get("job"), request.get("params", {})
    known = isinstance(job, str) and job in jobs
    if not isinstance(source, str) or not isinstance(params, dict) or not known:
        raise ValueError(
            f"A warm-up request needs a source, a registered job and a dict of params: {job!r}"
        )
    try:
        return json.loads(json.dumps({"source": source, "job": job, "params": params}))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"The warm-up request's params for {job!r} are not JSON: {exc}") from exc


def _busy_message() -> str:
    return (
        "Many people are analysing models right now and the line is full. Wait a few seconds "
        "and try again."
    )


def _client_busy_message(limit: int) -> str:
    return (
        f"The computers sharing your network address already have {limit} analyses waiting "
        "in line. Wait a few seconds and try again."
    )


def _sandbox_error(data: dict[str, Any]) -> SandboxError:
    """The error of a reply that passed :func:`check_reply` (every field bounded)."""
    kind = known_kind(data["kind"])
    refusals = [
        Refusal(r["line"], r["col"], r["code"], r["message"]) for r in data.get("refusals") or []
    ]
    raised = data.get("refused")
    return SandboxError(
        kind=kind,
        message=data["message"],
        line=data.get("line"),
        col=data.get("col"),
        refusals=refusals,
        refused=None if raised is None else TorchRefusal(raised["words"], raised["raised"]),
    )


_POOL: SandboxPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> SandboxPool:
    """The process-wide pool (started lazily; pages keep it in ``st.cache_resource``)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SandboxPool()
            atexit.register(_POOL.shutdown)
        return _POOL


def run_job(
    source: str,
    job: str,
    params: dict,
    *,
    timeout_s: float = 10.0,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
    value_schema: Spec | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> SandboxResult:
    """Run ``job`` on ``source`` in the process-wide pool (see :meth:`SandboxPool.run_job`)."""
    return get_pool().run_job(
        source,
        job,
        params,
        timeout_s=timeout_s,
        visitor=visitor,
        on_queued=on_queued,
        value_schema=value_schema,
        meanwhile=meanwhile,
    )
