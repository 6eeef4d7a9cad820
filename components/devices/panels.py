"""The devices room's panels, in page order: inventory, demonstrations, transfer benchmark.

Widgets and ``st.*`` output only: engine calls and session keys go through ``state``, every
string, table and figure comes from ``draw``. Demonstrations run on their "run" button; the
transfer benchmark is the server's: every visitor sees its latest result, and a press while a
run goes joins it or waits behind it, watched by a fragment that polls, so "stop" (for the
run's starter) can cancel it.
"""

from __future__ import annotations

import streamlit as st

from components.devices import draw, state
from components.format import format_bytes, format_seconds
from components.i18n import language, t
from components.kit.error_card import error_card
from components.theme import palette
from torchatlas.devices import (  # types only
    BenchmarkResult,
    Demonstration,
    Inventory,
    RunPhase,
    RunStatus,
)


def intro() -> None:
    """The room's first lines; reads the link on a session's first run (before any widget)
    and says which parts of it were not used."""
    state.start()
    st.markdown(t("devices.intro"))
    state.notice()


# ---------------------------------------------------------------- inventory


def inventory() -> Inventory:
    """The machine's devices as cards; stops the page when they cannot be read."""
    found = state.inventory_or_error()
    if not isinstance(found, Inventory):
        error_card(found, warning=True)
        st.stop()
    st.header(t("devices.inventory.header"), anchor=False)
    _inventory_cards(found)
    if not found.has_accelerator:
        st.info(t("devices.no_accelerator", built_for=found.build.compiled_accelerator or "cpu"))
    return found


def _inventory_cards(found: Inventory) -> None:
    lang = language()
    columns = st.columns(4 if not found.accelerators else 3 + len(found.accelerators[:3]))
    with columns[0].container(border=True):
        st.markdown(f"### {t('devices.inventory.build')}")
        st.markdown(draw.build_lines(found.build, lang))
    with columns[1].container(border=True):
        st.markdown(f"### {t('devices.inventory.cpu')}")
        st.markdown(draw.cpu_lines(found.cpu, lang))
    if found.accelerators:
        for column, info in zip(columns[2:-1], found.accelerators, strict=False):
            with column.container(border=True):
                st.markdown(f"### `{info.device}`")
                st.markdown(draw.accelerator_lines(info, lang))
        if len(found.accelerators) > 3:
            st.caption(t("devices.inventory.more", count=len(found.accelerators) - 3))
    else:
        with columns[2].container(border=True):
            st.markdown(f"### {t('devices.inventory.accelerator')}")
            built_for = found.build.compiled_accelerator or "cpu"
            st.markdown(t("devices.inventory.no_accelerator", built_for=built_for))
    with columns[-1].container(border=True):
        st.markdown("### `meta`")
        st.markdown(draw.meta_text(found.meta, lang))


# ---------------------------------------------------------------- demonstrations


def demonstrations(found: Inventory) -> None:
    st.header(t("devices.demo.header"), anchor=False)
    st.caption(t("devices.demo.how"))
    other_device = found.accelerators[0].device if found.has_accelerator else "meta"
    for key, variants in state.demonstration_variants().items():
        _demonstration_card(key, variants, other_device, found.has_accelerator)


@st.fragment
def _demonstration_card(
    key: str, variants: tuple[str, ...], other_device: str, has_accelerator: bool
) -> None:
    with st.container(border=True):
        st.subheader(t(f"devices.demos.{key}.title"), anchor=False)
        st.markdown(t(f"devices.demos.{key}.lesson"))
        variant = variants[0]
        if (variant_key := state.variant_key(key)) is not None:
            variant = st.segmented_control(
                t("devices.demo.variant"),
                options=list(variants),
                required=True,
                format_func=lambda v: t(f"devices.demos.{key}.variants.{v}", device=other_device),
                key=variant_key,  # its value comes from the link (state.start)
            )
        code = state.demo_code_or_error(key, variant)
        if not isinstance(code, str):
            error_card(code, warning=True)
            return
        st.code(code, language="python", wrap_lines=True)
        pressed = st.button(
            t("devices.demo.run"),
            key=f"{state.RUN_DEMO_PREFIX}{key}",
            type="primary",
            icon=":material/play_arrow:",
        )
        if pressed and (error := state.run_demo(key, variant)) is not None:
            error_card(error, warning=True)
        state.write_link()
        demo = state.demo_result(key, variant)
        if demo is None:
            st.info(t(f"devices.demos.{key}.predict"))
            return
        if demo.stand_in:
            st.info(t(f"devices.demos.{key}.stand_in"))
        _demonstration_steps(demo)
        if not has_accelerator and key == "device_agnostic":
            st.caption(t("devices.demos.device_agnostic.on_accelerator"))


def _demonstration_steps(demo: Demonstration) -> None:
    """Step by step: the line, the exception it raised (exact text), what it changed; then the
    findings computed from the live objects."""
    lang = language()
    for step, table in zip(demo.steps, draw.step_tables(demo, lang), strict=True):
        st.code(step.code, language="python", wrap_lines=True)
        if step.error is not None:
            st.markdown(t("devices.demo.raised", error=step.error.raised))
            st.code(step.error.words, language="text", wrap_lines=True)
        if table is not None:
            st.dataframe(table, hide_index=True, width="stretch")
        elif step.error is None:
            st.caption(t("devices.demo.nothing_changed"))
    st.markdown(f"**{t('devices.demo.findings')}**")
    st.markdown(draw.findings_markdown(demo, lang))
    st.caption(t("devices.demo.legend"))


# ---------------------------------------------------------------- transfer benchmark


def benchmark(found: Inventory) -> None:
    st.header(t("devices.bench.header"), anchor=False)
    _benchmark_section(found.has_accelerator, found.cpu.torch_threads)


def _watch_job() -> None:
    """Progress and "stop" for the watched run; a fragment Streamlit reruns every
    ``state.POLL_S``.

    Each run returns at once. A run that waited for the job to end would cancel nothing:
    Streamlit handles a click on "stop" (and calls its callback) only after the run in progress
    has finished. When the run is over, the whole page reruns to show the result."""
    if state.collect_finished_job():
        st.rerun(scope="app")
    status = state.job_status()
    if status is None:
        return
    lang = language()
    if status.mine:
        st.button(
            t("devices.bench.stop"),
            icon=":material/stop:",
            on_click=state.cancel_benchmark,
            disabled=status.stopping,
            key=state.BENCH_STOP_KEY,
        )
    else:
        st.button(
            t("devices.bench.stop_watching"),
            icon=":material/visibility_off:",
            on_click=state.stop_watching,
            key=state.BENCH_LEAVE_KEY,
        )
    st.caption(draw.run_status_text(status, lang))
    shown = status if status.phase is RunPhase.RUNNING else state.running_status()
    if shown is not None:
        if shown is not status:
            st.caption(t("devices.bench.running_now", **draw.settings_params(shown.config)))
        _progress(shown)


def _progress(status: RunStatus) -> None:
    text = draw.progress_text(status.progress, language())
    if status.stopping:
        text = f"{text} · {t('devices.bench.stopping')}"
    st.progress(status.progress.fraction if status.progress else 0.0, text=text)


@st.fragment
def _benchmark_section(has_accelerator: bool, threads: int) -> None:
    with st.container(border=True):
        st.markdown(t("devices.bench.lesson"))
        if not has_accelerator:
            st.info(t("devices.bench.cpu_only"))
        state.collect_finished_job()  # a run that ended between polls: its result is below
        watching = state.current_job() is not None
        if watching:
            st.fragment(_watch_job, run_every=state.POLL_S)()
        sizes, cap = state.size_options()
        left, right = st.columns(2)
        # Both widgets take their values from the link (state.start): sizes are the link's
        # text, so a link and the slider name the same choices.
        left.select_slider(
            t("devices.bench.max_size"),
            options=[str(size) for size in sizes],
            format_func=lambda size: format_bytes(int(size)),
            help=t("devices.bench.max_size_help", cap=format_bytes(cap)),
            disabled=watching,
            key=state.MAX_KEY,
        )
        right.slider(
            t("devices.bench.budget"),
            min_value=state.MIN_BUDGET_S,
            max_value=state.MAX_BUDGET_S,
            step=1,
            format="%d s",
            help=t("devices.bench.budget_help"),
            disabled=watching,
            key=state.BUDGET_KEY,
        )
        largest, budget = state.memory_limits()
        limits = {"largest": format_bytes(largest), "budget": format_bytes(budget)}
        st.caption(t("devices.bench.size_limit", **limits))
        state.write_link()
        st.button(
            t("devices.bench.run"),
            type="primary",
            icon=":material/timer:",
            on_click=state.start_benchmark,
            disabled=watching,
            key=state.BENCH_RUN_KEY,
        )
        if watching:  # the result and the chart come back when the run ends
            return
        lang = language()
        if (error := state.take_error()) is not None:
            error_card(error, warning=True)
        elsewhere = state.running_status()
        if elsewhere is not None:
            params = draw.settings_params(elsewhere.config)
            st.caption(t("devices.bench.running_elsewhere", **params))
        shared = state.latest()
        if shared is None:
            st.caption(t("devices.bench.not_run"))
            return
        if state.answered_with(shared):
            st.info(draw.recent_text(shared, lang))
        st.caption(draw.measured_text(shared, lang))
        _benchmark_result(shared.result, threads)


def _benchmark_result(result: BenchmarkResult, threads: int) -> None:
    count = len(result.measurements)
    if result.stop_reason is None:
        elapsed = format_seconds(result.elapsed_s)
        st.caption(t("devices.bench.finished", count=count, elapsed=elapsed))
    else:
        budget = f"{result.time_budget_s:g}"
        st.info(t(f"devices.bench.stopped.{result.stop_reason}", count=count, budget=budget))
    if not result.measurements:
        return
    lang = language()
    st.plotly_chart(
        draw.bandwidth_chart(result, palette(), lang), theme="streamlit", width="stretch"
    )
    if dips := result.dip_sizes():
        sizes = ", ".join(format_bytes(size) for size in dips)
        st.info(t("devices.bench.dip", sizes=sizes, threads=threads))
    if result.references:
        st.caption(t("devices.bench.reference_note"))
    st.dataframe(draw.summary_frame(result, lang), hide_index=True, width="stretch")
    st.download_button(
        t("devices.bench.download"),
        data=result.to_csv(),
        file_name="torch-atlas-transfer.csv",
        mime="text/csv",
        icon=":material/download:",
        on_click="ignore",
        key=state.BENCH_CSV_KEY,
    )
