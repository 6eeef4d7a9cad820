"""The devices room's state: its link, its session keys, its cached engine calls, the
benchmark's ticket.

Every key starts with ``devices_``. The link (``torchatlas/devices/link.py``) carries what a
teacher shares: the demonstration it opens, each demonstration's variant and the benchmark's
settings; results are measured live on this server, so a link never carries them (and never
starts a benchmark).

The transfer benchmark measures the machine, so its result is the server's, not the session's:
the engine's :data:`~torchatlas.devices.BOARD` keeps the latest one and runs the requests one
at a time. A session keeps only its ticket (which run it waits for), a name the board knows it
by (only the visitor who started a run may stop it), and a note or error to show once.
"""

from __future__ import annotations

import time
import uuid

import streamlit as st

from components.kit.room_state import RoomState
from torchatlas.devices import (
    BOARD,
    DEMONSTRATIONS,
    BenchmarkConfig,
    Demonstration,
    DevicesError,
    Inventory,
    RequestOutcome,
    RunStatus,
    SharedResult,
    Ticket,
    demonstration_code,
    machine_size_cap,
    run_demonstration,
    take_inventory,
)
from torchatlas.devices import link as devices_link
from torchatlas.devices.errors import ErrorCode, unexpected
from torchatlas.devices.transfer import (
    MAX_BYTES,
    MAX_TIME_BUDGET_S,
    MEMORY_BUDGET_BYTES,
    sizes_up_to,
)

# Inventory and size cap change with free memory, so they are kept briefly (the key carries
# the 30-second period they were read in); a snippet's text depends only on its name and this
# machine. Every entry is small: the cache's byte budget holds them all.
ROOM = RoomState(devices_link.LINK, cache_bytes=1 << 20)
LINK = ROOM.link
ROOM_CACHE = ROOM.cache

JOB_KEY = "devices_bench_job"  # the Ticket of the run this session watches
OWNER_KEY = "devices_bench_owner"  # this session's name on the board
RECENT_KEY = "devices_bench_recent"  # the last press was answered with a fresh result: its ticket
ERROR_KEY = "devices_bench_error"
# the room's buttons (no state of their own)
RUN_DEMO_PREFIX = "devices_run_"  # + the demonstration's key
BENCH_RUN_KEY = "devices_bench_run"
BENCH_STOP_KEY = "devices_bench_stop"
BENCH_LEAVE_KEY = "devices_bench_leave"
BENCH_CSV_KEY = "devices_bench_csv"
POLL_S = 0.5  # how often the page asks a running job for progress
# The time budget slider, in whole seconds from 1 up to the engine's own limit (the link's).
MIN_BUDGET_S, MAX_BUDGET_S = 1, int(MAX_TIME_BUDGET_S)
MAX_KEY = LINK.key("d_max")  # the largest copy, in bytes, as text (the link's closed list)
BUDGET_KEY = LINK.key("d_budget")
OPEN_DEMO_KEY = LINK.key("d_demo")


def demo_result_key(key: str) -> str:
    return f"devices_result_{key}"


def variant_key(key: str) -> str | None:
    """The session key of demonstration ``key``'s variant (None: it has only one)."""
    name = devices_link.variant_field(key)
    return LINK.key(name) if name in LINK.spec.names else None


# ---------------------------------------------------------------- the link


def start() -> None:
    """Every run, before the widgets: on the session's first run, the link's values become
    the widgets' (a size this machine does not offer becomes the largest it does; a size
    above the memory budget is not one the link can name, so the notice says so and the
    room keeps its largest) and the demonstration the link names is run, so its result is on
    the page."""
    read = LINK.start()
    state = st.session_state
    offered = [str(size) for size in size_options()[0]]
    if state.get(MAX_KEY) not in offered:
        state[MAX_KEY] = offered[-1]
    if read is not None and (opened := read.values["d_demo"]):
        variants = demonstration_variants()[opened]
        key = variant_key(opened)
        run_demo(opened, state.get(key, variants[0]) if key else variants[0])


notice = ROOM.notice
write_link = ROOM.write_link  # the widgets' session keys are the link


# ---------------------------------------------------------------- cached engine calls
FRESH_S = 30
_cached = ROOM.cached


def _period() -> int:
    return int(time.monotonic() // FRESH_S)


def inventory() -> Inventory:
    return _cached(("inventory", _period()), take_inventory)


def demo_code(key: str, variant: str) -> str:
    return _cached(("code", key, variant), lambda: demonstration_code(key, variant))


def size_cap() -> int:
    return _cached(("cap", _period()), machine_size_cap)


def size_options() -> tuple[list[int], int]:
    """The sizes this machine offers and the cap (the largest)."""
    cap = size_cap()
    return list(sizes_up_to(cap)), cap


def memory_limits() -> tuple[int, int]:
    """The largest copy the room ever measures and the memory budget it derives from (what
    one run may hold of the server's memory, which the whole class shares)."""
    return MAX_BYTES, MEMORY_BUDGET_BYTES


def demonstration_variants() -> dict[str, tuple[str, ...]]:
    """Each demonstration's name and its variants, in page order."""
    return {key: variants for key, (_, variants) in DEMONSTRATIONS.items()}


# ---------------------------------------------------------------- demonstrations


def run_demo(key: str, variant: str) -> DevicesError | None:
    """Run one demonstration and keep its result for this session; the error, if it failed."""
    try:
        st.session_state[demo_result_key(key)] = run_demonstration(key, variant)
        st.session_state[OPEN_DEMO_KEY] = key  # the link now opens the one last run
    except Exception as exc:  # shown by the page, never as a traceback
        st.session_state.pop(demo_result_key(key), None)
        return unexpected(exc, ErrorCode.DEMO_FAILED)
    return None


def demo_code_or_error(key: str, variant: str) -> str | DevicesError:
    """The snippet demonstration ``key`` runs, or why it cannot be shown."""
    try:
        return demo_code(key, variant)
    except Exception as exc:  # never let a torch surprise reach the page as a traceback
        return unexpected(exc, ErrorCode.DEMO_FAILED)


def inventory_or_error() -> Inventory | DevicesError:
    try:
        return inventory()
    except Exception as exc:
        return unexpected(exc, ErrorCode.INVENTORY_FAILED)


def demo_result(key: str, variant: str) -> Demonstration | None:
    """The last result of this demonstration, if it was run with this variant."""
    demo: Demonstration | None = st.session_state.get(demo_result_key(key))
    return demo if demo is not None and demo.variant == variant else None


# ---------------------------------------------------------------- transfer benchmark


def owner() -> str:
    """This session's name on the board, made once: the board lets only a run's starter stop
    it."""
    if OWNER_KEY not in st.session_state:
        st.session_state[OWNER_KEY] = uuid.uuid4().hex
    return st.session_state[OWNER_KEY]


def current_job() -> Ticket | None:
    return st.session_state.get(JOB_KEY)


def job_status() -> RunStatus | None:
    """The watched run as the board sees it now; None when this session watches none."""
    ticket = current_job()
    return None if ticket is None else BOARD.status(ticket.run_id, owner())


def running_status() -> RunStatus | None:
    """The run measuring the server now, whoever started it."""
    return BOARD.running(owner())


def latest() -> SharedResult | None:
    """The server's latest measurement and its age."""
    return BOARD.latest()


def start_benchmark() -> None:
    """The "run" button's callback: start a run with the widgets' settings, join the one with
    these settings, queue behind the running one, or be shown a fresh result with them."""
    st.session_state.pop(RECENT_KEY, None)
    max_bytes = int(st.session_state[MAX_KEY])
    time_budget_s = float(st.session_state[BUDGET_KEY])
    config = BenchmarkConfig(max_bytes=max_bytes, time_budget_s=time_budget_s)
    try:
        ticket = BOARD.request(config, owner())
    except DevicesError as refused:
        st.session_state[ERROR_KEY] = refused.with_traceback(None)
        return
    if ticket.outcome is RequestOutcome.RECENT:
        st.session_state[RECENT_KEY] = ticket
    else:
        st.session_state[JOB_KEY] = ticket


def cancel_benchmark() -> None:
    """The "stop" button's callback: the board stops the run only for its starter, at the
    next sample, keeping what it has."""
    ticket = current_job()
    if ticket is not None:
        BOARD.cancel(ticket.run_id, owner())


def stop_watching() -> None:
    """The "stop watching" button's callback: the run goes on for the others."""
    st.session_state.pop(JOB_KEY, None)


def collect_finished_job() -> bool:
    """If the watched run has ended, forget it (its result is the board's latest) and keep
    the error that ended it, if any; True then."""
    status = job_status()
    if status is None or status.active:
        return False
    st.session_state.pop(JOB_KEY, None)
    if status.error is not None:
        st.session_state[ERROR_KEY] = status.error
    return True


def take_error() -> DevicesError | None:
    """The error that ended the last run, or refused the last press, once."""
    error = st.session_state.pop(ERROR_KEY, None)
    return None if error is None else unexpected(error, ErrorCode.BENCH_FAILED)


def answered_with(shared: SharedResult) -> bool:
    """Whether this session's last press got ``shared`` instead of a new run, and pressing
    again would still get it: the page says so, and when a press will measure again. Kept
    across reruns (any widget reruns the page) until the result is no longer fresh."""
    ticket: Ticket | None = st.session_state.get(RECENT_KEY)
    return ticket is not None and ticket.run_id == shared.run_id and shared.rerun_after_s > 0
