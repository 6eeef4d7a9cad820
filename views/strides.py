"""Tensor storage & strides room: a start tensor and an op chain in → torchatlas.strides →
storage strip, logical tensor, op history, write-through, byte lens, code and quiz out.

The shape, dtype and chain live in the URL (``s_shape``, ``s_dtype``, ``s_ops``, ``s_seed``),
so a link restores the room. Clicks on cells rerun only the explorer fragment. The panels are
in components/strides_panels.py.
"""

from __future__ import annotations

import math

import streamlit as st

from components.i18n import t
from components.strides_panels import (
    DTYPE_KEY,
    LINK_BROKEN_KEY,
    OP_TEMPLATES,
    OPS_KEY,
    PANEL_KEY,
    SHAPE_KEY,
    STEP_KEY,
    add_op,
    byte_lens_panel,
    cached_code,
    cached_steps,
    explorer,
    facts_markdown,
    history_panel,
    initial_state,
    load_example,
    ops_lines,
    quiz_panel,
    show_step_error,
    step_label,
    write_panel,
    write_url,
)
from torchatlas.strides import (
    EXACT_UP_TO,
    MAX_CHAIN_TEXT,
    MAX_OPS,
    MAX_SHAPE_TEXT,
    START_DTYPES,
    OpParseError,
    ShapeInputError,
    parse_shape,
)
from torchatlas.strides.examples import EXAMPLES

# --------------------------------------------------------------------------- the page

st.title(t("app.rooms.strides.title"))
st.markdown(t("strides.intro"))
initial_state()
if st.session_state.pop(LINK_BROKEN_KEY, False):
    st.warning(t("strides.link_broken"), icon=":material/link_off:")

with st.container(border=True):
    # A wrapping flex row, not st.columns: three fewer blocks on every rerun, and on a phone
    # shape and dtype share a line while the example picker wraps below them.
    setup_row = st.container(horizontal=True)
    setup_row.text_input(
        t("strides.setup.shape"), key=SHAPE_KEY, max_chars=MAX_SHAPE_TEXT,
        help=t("strides.setup.shape_help"),
    )  # fmt: skip
    setup_row.selectbox(t("strides.setup.dtype"), START_DTYPES, key=DTYPE_KEY)
    setup_row.selectbox(
        t("strides.setup.example"),
        list(EXAMPLES),
        index=None,
        placeholder=t("strides.setup.example_placeholder"),
        format_func=lambda key: t(f"strides.examples.{key}"),
        key="strides_example",
        on_change=load_example,
    )
    st.text_area(
        t("strides.setup.ops"),
        key=OPS_KEY,
        height=140,
        max_chars=MAX_CHAIN_TEXT,
        help=t("strides.setup.ops_help", limit=MAX_OPS),
    )
    st.selectbox(  # picking (or typing and pressing Enter) appends the op: no extra button
        t("strides.setup.add_op"),
        OP_TEMPLATES,
        index=None,
        placeholder=t("strides.setup.add_placeholder"),
        key="strides_add_op",
        accept_new_options=True,
        on_change=add_op,
    )

shape_text = str(st.session_state[SHAPE_KEY])
dtype = str(st.session_state[DTYPE_KEY])
try:  # both parsers refuse over-long text at once (links and scripts skip max_chars)
    shape = parse_shape(shape_text)
    all_ops = ops_lines()
except (ShapeInputError, OpParseError) as problem:
    st.error(t(f"strides.errors.{problem.code}", **problem.params), icon=":material/block:")
    st.stop()
ops = tuple(all_ops[:MAX_OPS])
write_url(shape_text, dtype, list(ops))
if len(all_ops) > MAX_OPS:
    st.warning(t("strides.setup.too_many_ops", limit=MAX_OPS))
if math.prod(shape) - 1 > EXACT_UP_TO[dtype]:
    st.caption(t("strides.setup.inexact", dtype=dtype, limit=EXACT_UP_TO[dtype]))

steps = cached_steps(shape, dtype, ops)
failed = next((s for s in steps if s["error"] is not None), None)
ok_steps = [s for s in steps if s["error"] is None]
if failed is not None:
    show_step_error(failed["error"])

signature = (shape, dtype, ops)
if st.session_state.get("strides_signature") != signature:
    st.session_state["strides_signature"] = signature
    st.session_state[STEP_KEY] = len(ok_steps) - 1
    st.session_state.pop("strides_write_result", None)
if st.session_state.get(STEP_KEY) not in range(len(ok_steps)):
    st.session_state[STEP_KEY] = len(ok_steps) - 1
shown = st.segmented_control(
    t("strides.step_picker"),
    options=list(range(len(ok_steps))),
    format_func=lambda i: step_label(ok_steps[i]),
    key=STEP_KEY,
    required=True,
)
shown = int(shown if shown is not None else len(ok_steps) - 1)
step = ok_steps[shown]

explorer((shape, dtype, ops), ok_steps, shown)

facts, history = st.columns([1, 2], gap="medium")
with facts:
    note = t("strides.facts.named_tensors")
    st.markdown(
        f"### {t('strides.facts.title')}\n\n{facts_markdown(step)}\n\n:gray[:small[{note}]]"
    )
with history:
    history_panel((shape, dtype, ops), shown)

# Only the open tab runs (on_change="rerun" + .open): the other panels cost nothing on a
# rerun, which keeps clicks on a 64×64 tensor quick.
panel_labels = [
    t("strides.tabs.code"),
    t("strides.tabs.write"),
    t("strides.tabs.bytes"),
    t("strides.tabs.quiz"),
]
code_tab, write_tab, bytes_tab, quiz_tab = st.tabs(
    panel_labels, key=PANEL_KEY, on_change="rerun", default=panel_labels[0]
)
if code_tab.open:
    with code_tab:
        # The caption travels as the code's first comment: one element fewer on each rerun.
        code = f"# {t('strides.code.caption')}\n{cached_code(shape, dtype, ops)}"
        st.code(code, language="python")
if write_tab.open:
    with write_tab:
        write_panel(shape, dtype, ops, steps)
if bytes_tab.open:
    with bytes_tab:
        byte_lens_panel(step)
if quiz_tab.open:
    with quiz_tab:
        quiz_panel()
