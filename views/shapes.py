"""Shape explorer: paste a model, see every layer's shape on the meta device.

Widgets in → ``torchatlas.shapes.explore`` (pasted code runs only in the sandbox's worker) →
``components.shapes`` out. The editor's content and the inputs live in the URL (``m_*``).
"""

from __future__ import annotations

import uuid
from typing import Any

import streamlit as st

from components import shapes as view
from components.i18n import t
from torchatlas.presets import DEFAULT_PRESET, PRESETS
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS
from torchatlas.shapes import AnalysisError, ShapeReport, explore, parse_shapes, why_meta
from torchatlas.shapes.analysis import (
    MAX_DTYPES_CHARS,
    MAX_MODEL_CHARS,
    MAX_SHAPES_CHARS,
    check_length,
    parse_constructor,
    parse_dtypes,
)

SOURCE, MODEL, SHAPES, DTYPES, SYMBOLIC, PRESET = (
    "shapes_source", "shapes_model", "shapes_inputs", "shapes_dtypes", "shapes_symbolic",
    "shapes_preset",
)  # fmt: skip
RESULT, WHY, LINK_BROKEN = "shapes_result", "shapes_why", "shapes_link_broken"
PRESET_KEY = "shapes_preset_key"  # the chosen preset's key; PRESET holds its translated label
URL_SOURCE, URL_PRESET, URL_MODEL, URL_SHAPES, URL_DTYPES, URL_SYMBOLIC = (
    "m_src", "m_preset", "m_model", "m_shapes", "m_dtypes", "m_sym",
)  # fmt: skip
# Each text box's limit, also applied to the values a shared link carries.
URL_LIMITS = {
    URL_MODEL: MAX_MODEL_CHARS,
    URL_SHAPES: MAX_SHAPES_CHARS,
    URL_DTYPES: MAX_DTYPES_CHARS,
}
ANALYSE_TIMEOUT_S = 10
EDITOR_HEIGHT = 380
WHY_TIMEOUT_S = 30


@st.cache_resource(show_spinner=False)
def sandbox_pool() -> Any:
    """The process-wide pool of pre-warmed workers (None when the sandbox cannot start)."""
    try:
        from torchatlas.sandbox import get_pool

        pool = get_pool()
        pool.warm_up(wait=False)  # the first analysis waits; the page does not
        return pool
    except Exception:  # a missing or broken sandbox is reported on the health line
        return None


def health_line() -> None:
    pool = sandbox_pool()
    try:
        health = pool.health().to_dict() if pool is not None else None
    except Exception:
        health = None
    if health is None:
        st.caption(t("shapes.health.unavailable"))
    else:
        st.caption(t("shapes.health.line", layers=view.health_text(health)))


# ---------------------------------------------------------------- state and URL
def preset_labels() -> dict[str, str]:
    return {t(f"shapes.presets.{key}"): key for key in PRESETS}


def load_preset(key: str) -> None:
    preset = PRESETS[key]
    st.session_state[PRESET_KEY] = key
    st.session_state[SOURCE] = preset.source
    st.session_state[MODEL] = preset.model
    st.session_state[SHAPES] = preset.shapes
    st.session_state[DTYPES] = preset.dtypes
    st.session_state.pop(RESULT, None)
    st.session_state.pop(WHY, None)


def on_preset_change() -> None:
    load_preset(preset_labels().get(st.session_state[PRESET], DEFAULT_PRESET))


def init_state() -> None:
    if SOURCE in st.session_state:
        return
    query = st.query_params
    key = query.get(URL_PRESET, DEFAULT_PRESET)
    key = key if key in PRESETS else DEFAULT_PRESET
    st.session_state[PRESET] = t(f"shapes.presets.{key}")
    load_preset(key)
    if URL_SOURCE in query:
        source = view.decode_source(query[URL_SOURCE])
        if source is None:
            st.session_state[LINK_BROKEN] = True
        else:
            st.session_state[SOURCE] = source
    for url_key, state_key in ((URL_MODEL, MODEL), (URL_SHAPES, SHAPES), (URL_DTYPES, DTYPES)):
        if url_key not in query:
            continue
        value = query[url_key]
        if len(value) > URL_LIMITS[url_key]:  # this app never writes such a link
            st.session_state[LINK_BROKEN] = True
        else:
            st.session_state[state_key] = value
    st.session_state[SYMBOLIC] = query.get(URL_SYMBOLIC) == "1"


def save_to_url(source: str) -> None:
    preset = PRESETS[st.session_state[PRESET_KEY]]
    query = st.query_params
    query[URL_PRESET] = preset.key
    encoded = view.encode_source(source)
    if source == preset.source or len(encoded) > view.MAX_URL_SOURCE_CHARS:
        query.pop(URL_SOURCE, None)
    else:
        query[URL_SOURCE] = encoded
    query[URL_MODEL] = st.session_state[MODEL]
    query[URL_SHAPES] = st.session_state[SHAPES]
    query[URL_DTYPES] = st.session_state[DTYPES]
    query[URL_SYMBOLIC] = "1" if st.session_state[SYMBOLIC] else "0"


def session_id() -> str:
    return st.session_state.setdefault("shapes_session_id", uuid.uuid4().hex)


# ---------------------------------------------------------------- analysis
def analyse() -> None:
    source = st.session_state[SOURCE]
    model = st.session_state[MODEL].strip()
    try:
        # Every box is checked here, before a worker is asked: each parser refuses over-long
        # text at once (the boxes' max_chars does not bind shared links or scripts).
        check_length(source, MAX_SOURCE_CHARS, "source_too_long")
        shapes = parse_shapes(st.session_state[SHAPES])
        dtypes = parse_dtypes(st.session_state[DTYPES])
        if model:
            parse_constructor(model)
    except AnalysisError as exc:
        report = ShapeReport(error=exc.error)
    else:
        with st.spinner(t("shapes.running")):
            report = explore(
                source,
                shapes,
                input_dtypes=dtypes or None,
                model=model or None,
                symbolic=st.session_state[SYMBOLIC],
                timeout_s=ANALYSE_TIMEOUT_S,
                session_id=session_id(),
            )
    st.session_state[RESULT] = {"source": source, "report": report.to_dict()}
    st.session_state.pop(WHY, None)
    save_to_url(source)


def editor() -> tuple[bool, Any]:
    st.selectbox(
        t("shapes.editor.preset"),
        options=list(preset_labels()),
        key=PRESET,
        on_change=on_preset_change,
    )
    # Code in a monospace font, so indentation lines up (Streamlit bundles Source Code Pro).
    st.markdown(
        f"<style>.st-key-{SOURCE} textarea {{font-family: 'Source Code Pro', ui-monospace, "
        "monospace; font-size: 0.85rem; line-height: 1.45}</style>",
        unsafe_allow_html=True,
    )
    with st.form("shapes_form", border=False):
        code_column, listing_column = st.columns(2)
        code_column.text_area(
            t("shapes.editor.code"),
            key=SOURCE,
            height=EDITOR_HEIGHT,
            max_chars=MAX_SOURCE_CHARS,
            help=t("shapes.editor.code_help"),
        )
        listing = listing_column.empty()  # filled after the analysis, with its marks
        model_column, shapes_column, dtypes_column = st.columns([2, 2, 1])
        model_column.text_input(
            t("shapes.editor.model"), key=MODEL, max_chars=MAX_MODEL_CHARS,
            help=t("shapes.editor.model_help"),
        )  # fmt: skip
        shapes_column.text_input(
            t("shapes.editor.shapes"), key=SHAPES, max_chars=MAX_SHAPES_CHARS,
            help=t("shapes.editor.shapes_help"),
        )  # fmt: skip
        dtypes_column.text_input(
            t("shapes.editor.dtypes"), key=DTYPES, max_chars=MAX_DTYPES_CHARS,
            help=t("shapes.editor.dtypes_help"),
        )  # fmt: skip
        st.toggle(t("shapes.editor.symbolic"), key=SYMBOLIC, help=t("shapes.editor.symbolic_help"))
        submitted = st.form_submit_button(
            t("shapes.editor.run"), type="primary", icon=":material/play_arrow:"
        )
    return submitted, listing


def source_listing() -> None:
    """Beside the editor: the code with syntax colours and line numbers, and the lines the
    last analysis failed on marked inline. st.text_area has neither; the Streamlit code-editor
    components on PyPI were tried and not adopted (unmaintained, or fetching fonts from a CDN
    with line numbers misaligned without them), so the listing does that part."""
    source = st.session_state[SOURCE]
    result = st.session_state.get(RESULT)
    error = result["report"]["error"] if result and result["source"] == source else None
    with st.container():
        st.markdown(t("shapes.editor.preview"), help=t("shapes.editor.preview_help"))
        view.source_view(source, error, max_height=EDITOR_HEIGHT)


@st.fragment
def results(source: str, report: dict[str, Any]) -> None:
    if report["error"]:
        view.error_panel(report["error"], source)
    if not report["layers"]:
        return
    if report["error"]:
        st.caption(t("shapes.partial"))
    else:
        view.totals(report)
    symbolic = bool(report.get("symbolic"))
    deepest = max(1, view.max_depth(report))
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
                value=min(2, deepest), key="shapes_depth",
            )  # fmt: skip
        if symbolic:
            view.constraints_list(report)
        view.layer_table(report, depth, symbolic)
        st.caption(t("shapes.table.caption"))
        csv_column, json_column = st.columns(2)
        csv_column.download_button(
            t("shapes.download.csv"), view.csv_bytes(report), file_name="shapes.csv",
            mime="text/csv", icon=":material/download:",
        )  # fmt: skip
        json_column.download_button(
            t("shapes.download.json"), view.json_bytes(report), file_name="shapes.json",
            mime="application/json", icon=":material/download:",
        )  # fmt: skip
    with chart_tab:
        st.caption(t("shapes.chart.caption"))
        st.plotly_chart(view.activation_figure(report), theme="streamlit", width="stretch")
    with flow_tab:
        flow_depth = 1
        if deepest > 1:
            flow_depth = st.slider(
                t("shapes.flow.depth"), min_value=1, max_value=deepest, value=1,
                key="shapes_flow_depth",
            )  # fmt: skip
        st.graphviz_chart(view.flow_dot(report, flow_depth))
    with why_tab:
        why_panel(source, report)


def why_panel(source: str, report: dict[str, Any]) -> None:
    st.markdown(t("shapes.why.intro"))
    if st.button(t("shapes.why.run"), icon=":material/timer:", disabled=bool(report["error"])):
        with st.spinner(t("shapes.why.running")):
            st.session_state[WHY] = why_meta(
                source,
                report["input_shapes"],
                input_dtypes=report["input_dtypes"],
                model=report["model"] or None,
                timeout_s=WHY_TIMEOUT_S,
                session_id=session_id(),
            ).to_dict()
    outcome = st.session_state.get(WHY)
    if not outcome:
        return
    if outcome["error"]:
        view.error_panel(outcome["error"], source)
        return
    points = outcome["points"]
    st.plotly_chart(view.why_meta_figure(points), theme="streamlit", width="stretch")
    view.why_meta_table(points)
    real = [point for point in points if point["real_s"] is not None]
    if len(real) >= 2:
        st.markdown(
            t(
                "shapes.why.summary",
                real_growth=f"{real[-1]['real_s'] / max(real[0]['real_s'], 1e-9):.1f}",
                meta_growth=f"{points[-1]['meta_s'] / max(points[0]['meta_s'], 1e-9):.1f}",
                first=real[0]["batch"],
                last_real=real[-1]["batch"],
                last=points[-1]["batch"],
            )
        )
    elif not real:
        st.caption(t("shapes.why.too_big"))


# ---------------------------------------------------------------- page
st.title(t("app.rooms.shapes.title"))
st.markdown(t("shapes.intro"))
health_slot = st.empty()  # filled after the analysis: the first one waits for the warm pool
init_state()
if st.session_state.pop(LINK_BROKEN, False):
    st.warning(t("shapes.link_broken"))

submitted, listing = editor()
if submitted or RESULT not in st.session_state:
    analyse()
with listing:
    source_listing()
with health_slot:
    health_line()

with st.expander(t("shapes.how.title"), icon=":material/help:"):
    st.markdown(t("shapes.how.body"))

result = st.session_state[RESULT]
results(result["source"], result["report"])
