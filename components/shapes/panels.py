"""The shape explorer's widgets and output, in the order the page shows them.

Each function draws one part of the page from the state (:mod:`.state`) and the engine's
frozen dataclasses, with the pure builders of :mod:`.draw`; ``views/shapes.py`` calls them in
order. Every widget keeps its ``key=`` (the e2e tests select ``.st-key-<key>``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from components.format import format_bytes, format_count
from components.i18n import language, t
from components.kit.code_editor import CodeEditor
from components.kit.error_card import error_card
from components.shapes import draw, state
from components.theme import is_dark, palette
from torchatlas.shapes import ShapeError, ShapeReport

EDITOR_HEIGHT = 380


def intro() -> None:
    st.markdown(t("shapes.intro"))


def health_slot() -> DeltaGenerator:
    """A place near the top for the sandbox's health, filled after the analysis (the first
    one waits for the warm pool; the page does not)."""
    return st.empty()


def health_line(slot: DeltaGenerator) -> None:
    health = state.sandbox_health()
    with slot:
        if health is None:
            st.caption(t("shapes.health.unavailable"))
        else:
            st.caption(t("shapes.health.line", layers=draw.health_text(health, language())))


def link_warning() -> None:
    """Read the link on a session's first visit; say so when part of it could not be used."""
    state.start()
    state.notice()


# ---------------------------------------------------------------- editor
def _editor() -> CodeEditor:
    return CodeEditor(
        source_key=state.SOURCE,
        label=t("shapes.editor.code"),
        help=t("shapes.editor.code_help"),
        height=EDITOR_HEIGHT,
        form_key=state.FORM,
        run_label=t("shapes.editor.run"),
        preset_key=state.PRESET,
        preset_label=t("shapes.editor.preset"),
        preset_options=tuple(state.preset_labels()),
        on_preset=state.on_preset_change,
        beside=True,
    )


def _boxes() -> None:
    """The model, shapes and dtypes boxes and the formulas toggle, in the editor's form."""
    model_column, shapes_column, dtypes_column = st.columns([2, 2, 1])
    model_column.text_input(
        t("shapes.editor.model"), key=state.MODEL, max_chars=state.MAX_MODEL_CHARS,
        help=t("shapes.editor.model_help"),
    )  # fmt: skip
    shapes_column.text_input(
        t("shapes.editor.shapes"), key=state.SHAPES, max_chars=state.MAX_SHAPES_CHARS,
        help=t("shapes.editor.shapes_help"),
    )  # fmt: skip
    dtypes_column.text_input(
        t("shapes.editor.dtypes"), key=state.DTYPES, max_chars=state.MAX_DTYPES_CHARS,
        help=t("shapes.editor.dtypes_help"),
    )  # fmt: skip
    st.toggle(
        t("shapes.editor.symbolic"), key=state.SYMBOLIC, help=t("shapes.editor.symbolic_help")
    )


def editor() -> tuple[bool, DeltaGenerator]:
    """The preset picker and the form; whether it was submitted, and the empty place beside
    the editor where :func:`listing` draws the code after the analysis."""
    submitted, listing_slot = _editor().form(fields=_boxes)
    assert listing_slot is not None  # the editor has a place beside the code
    return submitted, listing_slot


def _queued(lang: str) -> Callable[[int], str]:
    return lambda position: draw.queue_text(position, lang)


def analysis(submitted: bool) -> None:
    """Analyse on arrival and on every press of the button; while the analysis waits in the
    sandbox's line, the student sees its place, then the result."""
    if not (submitted or state.needs_analysis()):
        return
    _editor().run(state.analyse, running=t("shapes.running"), queued=_queued(language()))


def listing(slot: DeltaGenerator) -> None:
    """Beside the editor: the code with syntax colours and line numbers, and the lines the
    last analysis failed on marked inline. st.text_area has neither; the Streamlit code-editor
    components on PyPI were tried and not adopted (unmaintained, or fetching fonts from a CDN
    with line numbers misaligned without them), so the listing does that part."""
    source = state.current_source()
    last = state.last_analysis()
    error = last.report.error if last.source == source else None
    with slot, st.container():
        st.markdown(t("shapes.editor.preview"), help=t("shapes.editor.preview_help"))
        st.markdown(
            _listing_html(source, error, window=None, max_height=EDITOR_HEIGHT),
            unsafe_allow_html=True,
        )


def _listing_html(
    source: str,
    error: ShapeError | None,
    *,
    window: tuple[int, int] | None,
    max_height: int | None,
    testid: str = "shapes-source-listing",
    marks: dict[int, str] | None = None,
    col: int | None = None,
) -> str:
    dark = is_dark()
    lines = state.code_lines(source, dark)
    if marks is None:
        marks, col = draw.error_marks(error, language()), error.col if error else None
    return draw.source_listing_html(
        lines,
        marks,
        palette(),
        col=col,
        window=window,
        max_height=max_height,
        testid=testid,
        line_lengths=[len(line) for line in source.splitlines()] or [0],
        dark=dark,
        label=t("shapes.a11y.source"),
    )


def how_it_works() -> None:
    with st.expander(t("shapes.how.title"), icon=":material/help:"):
        st.markdown(t("shapes.how.body"))


# ---------------------------------------------------------------- results
def results() -> None:
    last = state.last_analysis()
    _results(last.source, last.report)


@st.fragment
def _results(source: str, report: ShapeReport) -> None:
    lang = language()
    if report.error is not None:
        error_panel(report.error, source)
    if not report.layers:
        return
    if report.error is not None:
        st.caption(t("shapes.partial"))
    else:
        totals(report)
    if report.unmaterialised_params:
        st.caption(t("shapes.totals.unmaterialised", count=report.unmaterialised_params))
    deepest = max(1, draw.max_depth(report))
    table_tab, chart_tab, flow_tab, why_tab = st.tabs(
        [
            t("shapes.tabs.table"),
            t("shapes.tabs.chart"),
            t("shapes.tabs.flow"),
            t("shapes.tabs.why"),
        ]
    )
    with table_tab:
        depth = deepest
        if deepest > 1:
            depth = st.slider(
                t("shapes.table.depth"), min_value=1, max_value=deepest,
                value=min(2, deepest), key=state.DEPTH,
            )  # fmt: skip
        if report.symbolic:
            symbolic_notes(report)
        layer_table(report, depth)
        st.caption(t("shapes.table.caption"))
        downloads(report)
    with chart_tab:
        st.caption(t("shapes.chart.caption"))
        figure = draw.activation_figure(report, palette(), lang)
        st.plotly_chart(figure, theme="streamlit", width="stretch")
    with flow_tab:
        flow_depth = 1
        if deepest > 1:
            flow_depth = st.slider(
                t("shapes.flow.depth"), min_value=1, max_value=deepest, value=1,
                key=state.FLOW_DEPTH,
            )  # fmt: skip
        st.graphviz_chart(draw.flow_dot(report, flow_depth, palette(), lang))
    with why_tab:
        why_panel(source, report)


def totals(report: ShapeReport) -> None:
    columns = st.columns(5)
    columns[0].metric(t("shapes.totals.params"), format_count(report.total_params))
    columns[1].metric(t("shapes.totals.trainable"), format_count(report.trainable_params))
    columns[2].metric(t("shapes.totals.param_memory"), format_bytes(report.param_bytes))
    columns[3].metric(
        t("shapes.totals.activations"),
        format_bytes(report.activation_bytes),
        help=t("shapes.totals.activations_help"),
    )
    columns[4].metric(t("shapes.totals.flops"), format_count(report.flops))
    outputs = draw.output_shapes(report)
    if outputs:
        shape = f"`{draw.output_text(report, language())}`"
        st.markdown(t("shapes.totals.output", shape=shape))
    notes = draw.device_notes_markdown(report.device_moves, language())
    if notes:
        st.info(notes, icon=":material/memory:")


def layer_table(report: ShapeReport, depth: int) -> None:
    frame = draw.layer_frame(report, depth, report.symbolic, language())
    st.dataframe(
        frame,
        width="stretch",
        height=min(38 + 35 * len(frame), 560),
        column_config={
            t("shapes.table.params"): st.column_config.NumberColumn(format="compact"),
            t("shapes.table.flops"): st.column_config.NumberColumn(format="compact"),
            # Text, not a number column: a row with no line (the model itself) shows an empty
            # cell, where a number column would print "None".
            t("shapes.table.line"): st.column_config.TextColumn(width="small"),
        },
    )


def downloads(report: ShapeReport) -> None:
    """CSV and JSON of the whole table, built only when a button is pressed (a 3000-row
    report's files are megabytes; no rerun rebuilds them)."""
    csv_column, json_column = st.columns(2)
    csv_column.download_button(
        t("shapes.download.csv"), functools.partial(draw.csv_bytes, report),
        file_name="shapes.csv", mime="text/csv", icon=":material/download:",
    )  # fmt: skip
    json_column.download_button(
        t("shapes.download.json"), functools.partial(draw.json_bytes, report),
        file_name="shapes.json", mime="application/json", icon=":material/download:",
    )  # fmt: skip


def symbolic_notes(report: ShapeReport) -> None:
    """Why formulas are missing (if they are), the dims' names, and every constraint as one
    list: one element each, however many constraints there are."""
    issue, dims, constraints = draw.symbolic_markdown(report, language())
    if issue:
        st.warning(issue)
    if dims:
        st.caption(dims)
    if report.constraints:
        st.markdown(constraints)
    else:
        st.caption(constraints)


def error_panel(error: ShapeError, source: str) -> None:
    """The error in plain words, its fix, the refused lines (one list), what the sandbox or
    PyTorch said (as a detail), and the code around the marked line."""
    lang = language()
    error_card(error)
    hint = error.text(lang, "hint")
    if hint:
        st.info(hint, icon=":material/lightbulb:")
    refused = draw.refusals_markdown(error, lang)
    if refused:
        st.markdown(refused)
    detail = draw.error_detail(error, lang)
    if detail:
        st.caption(detail)
    marks = draw.error_marks(error, lang)
    if marks:
        line = error.line or min(marks)
        count = len(source.splitlines()) or 1
        st.markdown(
            _listing_html(
                source,
                error,
                window=draw.marker_window(count, line),
                max_height=None,
                testid="shapes-source-marker",
                marks=marks,
                col=error.col if line == min(marks) else None,
            ),
            unsafe_allow_html=True,
        )


# ---------------------------------------------------------------- why meta?
def why_panel(source: str, report: ShapeReport) -> None:
    lang = language()
    st.markdown(t("shapes.why.intro"))
    pressed = st.button(
        t("shapes.why.run"), icon=":material/timer:", disabled=report.error is not None
    )
    if pressed:
        _editor().run(
            lambda on_queued: state.compare_real_and_meta(
                state.Analysis(source, report), on_queued=on_queued
            ),
            running=t("shapes.why.running"),
            queued=_queued(lang),
        )
    outcome = state.last_comparison()
    if outcome is None:
        return
    if outcome.error is not None:
        error_panel(outcome.error, source)
        return
    points = outcome.points
    st.plotly_chart(
        draw.why_meta_figure(points, palette(), lang), theme="streamlit", width="stretch"
    )
    st.dataframe(draw.why_meta_frame(points, lang), width="stretch", hide_index=True)
    summary, caption = draw.why_meta_summary(points, lang)
    if summary:
        st.markdown(summary)
    if caption:
        st.caption(caption)
