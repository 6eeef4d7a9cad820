"""Devices: what .to() really does, and what moving data costs.

Widgets in → ``torchatlas.devices`` → ``components.devices`` out. Demonstrations run on the
"run" button; the transfer benchmark runs in a background job the page polls, so "stop" can
cancel it and another visitor is told to wait while it holds the server.
"""

from __future__ import annotations

import streamlit as st

from components.devices import (
    benchmark_chart,
    benchmark_summary,
    demonstration_result,
    inventory_cards,
)
from components.format import format_bytes, format_seconds
from components.i18n import t
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
POLL_S = 0.5


@st.cache_data(ttl=30, show_spinner=False)
def cached_inventory() -> Inventory:
    return take_inventory()


@st.cache_data(show_spinner=False)
def cached_code(key: str, variant: str) -> str:
    return demonstration_code(key, variant)


@st.cache_data(ttl=30, show_spinner=False)
def cached_size_cap() -> int:
    return machine_size_cap()


# ---------------------------------------------------------------- demonstrations


@st.fragment
def demonstration_card(key: str, other_device: str, has_accelerator: bool) -> None:
    _, variants = DEMONSTRATIONS[key]
    with st.container(border=True):
        st.subheader(t(f"devices.demos.{key}.title"), anchor=False)
        st.markdown(t(f"devices.demos.{key}.lesson"))
        variant = variants[0]
        if len(variants) > 1:
            variant = st.segmented_control(
                t("devices.demo.variant"),
                options=list(variants),
                default=variants[0],
                required=True,
                format_func=lambda v: t(f"devices.demos.{key}.variants.{v}", device=other_device),
                key=f"devices_variant_{key}",
            )
        try:
            st.code(cached_code(key, variant), language="python", wrap_lines=True)
        except Exception as exc:  # never let a torch surprise reach the page as a traceback
            st.warning(t("devices.errors.demo_failed", detail=f"{type(exc).__name__}: {exc}"))
            return
        clicked = st.button(
            t("devices.demo.run"),
            key=f"devices_run_{key}",
            type="primary",
            icon=":material/play_arrow:",
        )
        result_key = f"devices_result_{key}"
        if clicked:
            try:
                st.session_state[result_key] = run_demonstration(key, variant)
            except Exception as exc:
                st.session_state.pop(result_key, None)
                st.warning(t("devices.errors.demo_failed", detail=f"{type(exc).__name__}: {exc}"))
        demo: Demonstration | None = st.session_state.get(result_key)
        if demo is None or demo.variant != variant:
            st.info(t(f"devices.demos.{key}.predict"))
            return
        if demo.stand_in:
            st.info(t(f"devices.demos.{key}.stand_in"))
        demonstration_result(demo)
        if not has_accelerator and key == "device_agnostic":
            st.caption(t("devices.demos.device_agnostic.on_accelerator"))


# ---------------------------------------------------------------- transfer benchmark


def _start_benchmark(config: BenchmarkConfig) -> None:
    st.session_state.pop(BUSY_KEY, None)
    try:
        st.session_state[JOB_KEY] = BenchmarkJob.start(config)
    except BenchmarkBusy as busy:
        st.session_state[BUSY_KEY] = busy.retry_after_s


def _cancel_benchmark() -> None:
    job: BenchmarkJob | None = st.session_state.get(JOB_KEY)
    if job is not None:
        job.cancel()


def _progress_text(job: BenchmarkJob) -> str:
    progress = job.progress
    if progress is None:
        return t("devices.bench.preparing")
    return t(
        "devices.bench.progress",
        done=progress.done,
        total=progress.total,
        path=t(f"devices.bench.paths.{progress.path}"),
        size=format_bytes(progress.size_bytes),
        elapsed=f"{progress.elapsed_s:.1f}",
    )


def _watch_job() -> None:
    """Progress and "stop" for the running job; a fragment Streamlit reruns every ``POLL_S``.

    Each run returns at once. A run that waited for the job to end would cancel nothing:
    Streamlit handles a click on "stop" (and calls its callback) only after the run in progress
    has finished. When the job is over, the whole page reruns to show the result."""
    job: BenchmarkJob | None = st.session_state.get(JOB_KEY)
    if job is None:
        return
    if job.done:
        st.session_state.pop(JOB_KEY, None)
        if job.error is not None:
            detail = f"{type(job.error).__name__}: {job.error}"
            st.session_state[ERROR_KEY] = t("devices.errors.bench_failed", detail=detail)
        elif job.result is not None:
            st.session_state[RESULT_KEY] = job.result
        st.rerun(scope="app")
    st.button(
        t("devices.bench.stop"),
        icon=":material/stop:",
        on_click=_cancel_benchmark,
        disabled=job.cancelled,
        key="devices_bench_stop",
    )
    progress = job.progress
    st.progress(progress.fraction if progress else 0.0, text=_progress_text(job))


def _stop_note(result: BenchmarkResult) -> None:
    count = len(result.measurements)
    if result.stop_reason is None:
        st.caption(
            t("devices.bench.finished", count=count, elapsed=format_seconds(result.elapsed_s))
        )
    else:
        st.info(
            t(
                f"devices.bench.stopped.{result.stop_reason}",
                count=count,
                budget=f"{result.time_budget_s:g}",
            )
        )


@st.fragment
def benchmark_section(has_accelerator: bool, threads: int) -> None:
    with st.container(border=True):
        st.markdown(t("devices.bench.lesson"))
        if not has_accelerator:
            st.info(t("devices.bench.cpu_only"))
        job: BenchmarkJob | None = st.session_state.get(JOB_KEY)
        running = job is not None
        if running:
            st.fragment(_watch_job, run_every=POLL_S)()
        cap = cached_size_cap()
        sizes = list(sizes_up_to(cap))
        default = max(s for s in sizes if s <= DEFAULT_MAX_BYTES)
        left, right = st.columns(2)
        max_bytes = left.select_slider(
            t("devices.bench.max_size"),
            options=sizes,
            value=default,
            format_func=format_bytes,
            help=t("devices.bench.max_size_help", cap=format_bytes(cap)),
            disabled=running,
            key="devices_bench_max",
        )
        budget = right.slider(
            t("devices.bench.budget"),
            min_value=1.0,
            max_value=MAX_TIME_BUDGET_S,
            value=DEFAULT_TIME_BUDGET_S,
            step=1.0,
            format="%.0f s",
            help=t("devices.bench.budget_help"),
            disabled=running,
            key="devices_bench_budget",
        )
        st.button(
            t("devices.bench.run"),
            type="primary",
            icon=":material/timer:",
            on_click=_start_benchmark,
            args=(BenchmarkConfig(max_bytes=max_bytes, time_budget_s=budget),),
            disabled=running,
            key="devices_bench_run",
        )
        if running:  # the result and the chart come back when the job ends
            return
        if ERROR_KEY in st.session_state:
            st.warning(st.session_state.pop(ERROR_KEY))
        if BUSY_KEY in st.session_state:
            st.warning(t("devices.errors.busy", seconds=st.session_state.pop(BUSY_KEY)))
        result: BenchmarkResult | None = st.session_state.get(RESULT_KEY)
        if result is None:
            st.caption(t("devices.bench.not_run"))
            return
        _stop_note(result)
        if result.measurements:
            benchmark_chart(result)
            dips = sorted({size for path in result.paths for size in result.dips(path)})
            if dips:
                st.info(
                    t(
                        "devices.bench.dip",
                        sizes=", ".join(format_bytes(size) for size in dips),
                        threads=threads,
                    )
                )
            if result.references:
                st.caption(t("devices.bench.reference_note"))
            benchmark_summary(result)
            st.download_button(
                t("devices.bench.download"),
                data=result.to_csv(),
                file_name="torch-atlas-transfer.csv",
                mime="text/csv",
                icon=":material/download:",
                on_click="ignore",
                key="devices_bench_csv",
            )


# ---------------------------------------------------------------- the page

st.title(t("app.rooms.devices.title"))
st.markdown(t("devices.intro"))

try:
    found = cached_inventory()
except Exception as exc:
    st.warning(t("devices.errors.inventory_failed", detail=f"{type(exc).__name__}: {exc}"))
    st.stop()

has_accelerator = found.has_accelerator
other_device = found.accelerators[0].device if has_accelerator else "meta"

st.header(t("devices.inventory.header"), anchor=False)
inventory_cards(found)
if not has_accelerator:
    st.info(t("devices.no_accelerator", built_for=found.build.compiled_accelerator or "cpu"))

st.header(t("devices.demo.header"), anchor=False)
st.caption(t("devices.demo.how"))
for demo_key in DEMONSTRATIONS:
    demonstration_card(demo_key, other_device, has_accelerator)

st.header(t("devices.bench.header"), anchor=False)
benchmark_section(has_accelerator, found.cpu.torch_threads)
