"""The devices room's state: its session keys, its cached engine calls, the benchmark's job.

Every key starts with ``devices_``. The room keeps nothing in the URL: everything it shows is
measured live on this server, so a shared link could not carry it.

The transfer benchmark runs as a :class:`~torchatlas.devices.BenchmarkJob` (a background
thread holding the one-per-server lock); the session keeps the job while it runs, then its
result, or the error that ended it, until the page shows them.
"""

from __future__ import annotations

import streamlit as st

from torchatlas.devices import (
    DEMONSTRATIONS,
    BenchmarkBusy,
    BenchmarkConfig,
    BenchmarkJob,
    BenchmarkResult,
    Demonstration,
    Inventory,
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

JOB_KEY = "devices_bench_job"
RESULT_KEY = "devices_bench_result"
BUSY_KEY = "devices_bench_busy"
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


def current_job() -> BenchmarkJob | None:
    return st.session_state.get(JOB_KEY)


def start_benchmark(max_bytes: int, time_budget_s: float) -> None:
    """The "run" button's callback: start a job, or note how long another one will hold the
    server."""
    st.session_state.pop(BUSY_KEY, None)
    config = BenchmarkConfig(max_bytes=max_bytes, time_budget_s=time_budget_s)
    try:
        st.session_state[JOB_KEY] = BenchmarkJob.start(config)
    except BenchmarkBusy as busy:
        st.session_state[BUSY_KEY] = busy.with_traceback(None)


def cancel_benchmark() -> None:
    """The "stop" button's callback: the job notices between samples and keeps what it has."""
    job = current_job()
    if job is not None:
        job.cancel()


def collect_finished_job() -> bool:
    """If the job has ended, keep its result (or its error) and forget the job; True then."""
    job = current_job()
    if job is None or not job.done:
        return False
    st.session_state.pop(JOB_KEY, None)
    if job.error is not None:
        # Kept without its traceback, whose frames would hold the run's locals (tensors too).
        st.session_state[ERROR_KEY] = job.error.with_traceback(None)
    elif job.result is not None:
        st.session_state[RESULT_KEY] = job.result
    return True


def take_error() -> BaseException | None:
    """The error that ended the last job, once: the page shows it a single time."""
    return st.session_state.pop(ERROR_KEY, None)


def take_busy() -> BenchmarkBusy | None:
    """The refusal of the last start, once."""
    return st.session_state.pop(BUSY_KEY, None)


def last_result() -> BenchmarkResult | None:
    return st.session_state.get(RESULT_KEY)
