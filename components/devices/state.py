"""The devices room's state: its session keys, its cached engine calls, the benchmark's ticket.

Every key starts with ``devices_``. The room keeps nothing in the URL: everything it shows is
measured live on this server, so a shared link could not carry it.

The transfer benchmark measures the machine, so its result is the server's, not the session's:
the engine's :data:`~torchatlas.devices.BOARD` keeps the latest one and runs the requests one
at a time. A session keeps only its ticket (which run it waits for), a name the board knows it
by (only the visitor who started a run may stop it), and a note or error to show once.
"""

from __future__ import annotations

import uuid

import streamlit as st

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
from torchatlas.devices.transfer import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIME_BUDGET_S,
    MAX_TIME_BUDGET_S,
    sizes_up_to,
)

JOB_KEY = "devices_bench_job"  # the Ticket of the run this session watches
OWNER_KEY = "devices_bench_owner"  # this session's name on the board
RECENT_KEY = "devices_bench_recent"  # the last press was answered with a fresh result: its ticket
ERROR_KEY = "devices_bench_error"
POLL_S = 0.5  # how often the page asks a running job for progress
# The time budget slider, in seconds: whole seconds from 1 up to the engine's own limit.
MIN_BUDGET_S, DEFAULT_BUDGET_S, MAX_BUDGET_S = 1.0, DEFAULT_TIME_BUDGET_S, MAX_TIME_BUDGET_S


def demo_result_key(key: str) -> str:
    return f"devices_result_{key}"


# ---------------------------------------------------------------- cached engine calls
# Inventory and size cap change with free memory, so they are kept briefly; a snippet's text
# depends only on its name and this machine. Each holds a handful of small entries.


@st.cache_data(ttl=30, max_entries=1, show_spinner=False)
def inventory() -> Inventory:
    return take_inventory()


@st.cache_data(max_entries=64, show_spinner=False)
def demo_code(key: str, variant: str) -> str:
    return demonstration_code(key, variant)


@st.cache_data(ttl=30, max_entries=1, show_spinner=False)
def size_cap() -> int:
    return machine_size_cap()


def size_options() -> tuple[list[int], int, int]:
    """The sizes this machine offers, the default among them, and the cap (the largest)."""
    cap = size_cap()
    sizes = list(sizes_up_to(cap))
    return sizes, max(size for size in sizes if size <= DEFAULT_MAX_BYTES), cap


def demonstration_variants() -> dict[str, tuple[str, ...]]:
    """Each demonstration's name and its variants, in page order."""
    return {key: variants for key, (_, variants) in DEMONSTRATIONS.items()}


# ---------------------------------------------------------------- demonstrations


def run_demo(key: str, variant: str) -> Exception | None:
    """Run one demonstration and keep its result for this session; the error, if it failed."""
    try:
        st.session_state[demo_result_key(key)] = run_demonstration(key, variant)
    except Exception as exc:  # shown by the page, never as a traceback
        st.session_state.pop(demo_result_key(key), None)
        return exc
    return None


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


def start_benchmark(max_bytes: int, time_budget_s: float) -> None:
    """The "run" button's callback: start a run, join the one with these settings, queue
    behind the running one, or be shown a fresh result with these settings."""
    st.session_state.pop(RECENT_KEY, None)
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


def take_error() -> BaseException | None:
    """The error that ended the last run, or refused the last press, once."""
    return st.session_state.pop(ERROR_KEY, None)


def answered_with(shared: SharedResult) -> bool:
    """Whether this session's last press got ``shared`` instead of a new run, and pressing
    again would still get it: the page says so, and when a press will measure again. Kept
    across reruns (any widget reruns the page) until the result is no longer fresh."""
    ticket: Ticket | None = st.session_state.get(RECENT_KEY)
    return ticket is not None and ticket.run_id == shared.run_id and shared.rerun_after_s > 0
