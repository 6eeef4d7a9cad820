"""The basics room's panels: a section picker, then one section at a time (Types,
Broadcasting, einsum, Indexing, Saving), each with live inputs, a picture, the code, and a
predict-then-reveal question.

Widgets and ``st.*`` output only: engine calls and session keys go through ``state``; every
picture and table comes from ``draw``. Each section is a fragment, so typing in one reruns
only it; the URL follows the inputs (``state.write_link``). Questions go through the kit's
``predict_reveal``; errors through its ``error_card``. A student following a class sees the
room folded on the teacher's example (``kit.follow``): no section picker, no inputs, no
reference tables, until they press the one button that unfolds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from components.basics import draw, state
from components.contained import guarded
from components.format import format_bytes, format_count
from components.i18n import language, t
from components.kit.error_card import error_card
from components.kit.follow import folded, unfold_button
from components.kit.predict_reveal import predict_reveal, room_questions_shown
from components.theme import palette
from torchatlas.basics import (  # types only
    DTYPES,
    SAVE_DTYPES,
    BasicsError,
    BasicsValueError,
    Broadcast,
    EinsumPlan,
    IndexResult,
    OperandKind,
    Outcome,
    Promotion,
    SaveReport,
)
from torchatlas.basics.quiz import COPY, ERROR_CHOICE, VIEW, Section
from torchatlas.links import QueryValue

Found = TypeVar("Found")
Refusable = TypeVar("Refusable", EinsumPlan, IndexResult)  # outcomes torch may refuse

ICONS = {
    Section.TYPES: ":material/category:",
    Section.BROADCASTING: ":material/open_in_full:",
    Section.EINSUM: ":material/functions:",
    Section.INDEXING: ":material/grid_view:",
    Section.SAVING: ":material/save:",
}


def _error(exc: BasicsError | state.NoResult) -> None:
    """The room's refusal (the cause and the fix, translated), or why the sandbox job has no
    result."""
    error_card(exc.failure if isinstance(exc, state.NoResult) else exc, warning=True)


def _torch_said(message: str) -> None:
    st.markdown(t("basics.torch_said"))
    st.code(message, language="text", wrap_lines=True)


def _metric_row() -> DeltaGenerator:
    """A row of metrics that wraps on a phone: one block for the row, where columns are a
    block each as well (every block is server work and a message in every run of every phone
    of a class)."""
    return st.container(horizontal=True, gap="medium")


def _strides_link(query: dict[str, QueryValue] | None, label_key: str) -> None:
    """A link into the strides room with its state filled in (None: nothing to link)."""
    if query is None:
        return
    st.page_link(
        state.strides_page(),
        label=t(label_key),
        icon=":material/grid_on:",
        query_params=query,
        width="content",
    )


def setup() -> Section:
    """First-run state, the link notice, the intro and the section picker; for a student
    following a class, the button that unfolds them and the sections' inputs (kit.follow)."""
    state.start()
    state.keep_values()
    if folded():
        state.notice()
        unfold_button(state.UNFOLD_KEY)
        return state.section()
    st.markdown(t("basics.intro"))
    state.notice()
    st.segmented_control(
        t("basics.section_label"),
        options=[s.value for s in Section],
        format_func=lambda s: t(f"basics.sections.{s}"),
        required=True,
        key=state.SECTION_KEY,
        label_visibility="collapsed",
        width="stretch",
    )
    return state.section()


def show(section: Section) -> None:
    """The section: a fragment, so typing in it reruns only it; folded (kit.follow), the same
    code run in place, since a folded section has no inputs to rerun and a fragment costs
    every following phone's page run something for nothing."""
    plain, fragment = {
        Section.TYPES: (_types, types),
        Section.BROADCASTING: (_broadcasting, broadcasting),
        Section.EINSUM: (_einsum, einsum),
        Section.INDEXING: (_indexing, indexing),
        Section.SAVING: (_saving, saving),
    }[section]
    (plain if folded() else fragment)()


def _section(
    section: Section,
    texts: str,
    inputs: Callable[[], None],
    compute: Callable[[], Found],
    draw_found: Callable[[Found], None],
) -> None:
    """A section's page: its header and lesson (``basics.<texts>.*``), its inputs unless the
    room is folded, then its outcome (or why there is none), its quiz and the link."""
    st.header(t(f"basics.{texts}.header"), anchor=False)
    st.markdown(t(f"basics.{texts}.lesson"))
    if not folded():
        inputs()
    try:
        found = compute()
    except (BasicsError, state.NoResult) as exc:
        _error(exc)
        state.write_link()
        return
    draw_found(found)
    quiz(section)
    state.write_link()


def _unless_refused(
    texts: str, draw_found: Callable[[Refusable], None]
) -> Callable[[Refusable], None]:
    """``draw_found``, or torch's refusal in its own words when the outcome is one."""

    def shown(found: Refusable) -> None:
        if found.ok:
            draw_found(found)
            return
        st.error(t(f"basics.{texts}.refused"), icon=":material/close:")
        _torch_said(found.torch_message or "")

    return shown


# ======================================================================= types


@guarded
def _types() -> None:
    st.header(t("basics.types.header"), anchor=False)
    st.markdown(t("basics.types.lesson"))
    _promotion_explorer()
    if not folded():  # reference, not the step: a following student unfolds it
        _promotion_table()
        _creation()
    quiz(Section.TYPES)
    state.write_link()


types = st.fragment(_types)


def _promotion_explorer() -> None:
    with st.container(border=True):
        st.subheader(t("basics.types.explorer"), anchor=False)
        if not folded():
            _promotion_inputs()
        try:
            found = state.current_promotion()
        except (BasicsError, state.NoResult) as exc:
            _error(exc)
            return
        _promotion_result(found)


def _promotion_inputs() -> None:
    left, middle, right = st.columns([3, 1, 3])
    with left:
        st.selectbox(
            t("basics.types.left"),
            list(DTYPES),
            key=state.LEFT_KEY,
            on_change=state.dtype_changed,
            args=("left",),
        )
        st.text_input(t("basics.types.value"), key=state.LEFT_VALUE_KEY, max_chars=40)
    with middle:
        st.segmented_control(
            t("basics.types.op"),
            ["add", "mul"],
            format_func=lambda o: {"add": "+", "mul": "*"}[o],
            required=True,
            key=state.OP_KEY,
        )
    with right:
        kind = st.selectbox(
            t("basics.types.right_kind"),
            [k.value for k in OperandKind],
            format_func=lambda k: t(f"basics.types.kinds.{k}"),
            key=state.RIGHT_KIND_KEY,
            on_change=state.dtype_changed,
            args=("right",),
        )
        st.selectbox(
            t("basics.types.right"),
            list(state.right_choices(kind)),
            key=state.RIGHT_KEY,
            on_change=state.dtype_changed,
            args=("right",),
        )
        st.text_input(t("basics.types.value"), key=state.RIGHT_VALUE_KEY, max_chars=40)


def _promotion_result(found: Promotion) -> None:
    st.code(found.code, language="python", wrap_lines=True)
    if found.outcome is Outcome.RAISED:
        st.markdown(t("basics.types.result_type", dtype=found.result_type))
        _torch_said(found.torch_message or "")
        if found.int_overflow:
            st.info(t("basics.types.int_overflow"), icon=":material/info:")
        elif found.derivation is not None:
            st.caption(state.derivation_text(found, language()))
        return
    with _metric_row():
        st.metric(t("basics.types.metric_result_type"), found.result_type)
        st.metric(t("basics.types.metric_value"), found.value or "—")
        st.metric(t("basics.types.metric_exact"), draw.exact_short(found))
    outcome_text = t(f"basics.types.outcome.{found.outcome}", dtype=found.op_dtype or "")
    if found.outcome in (Outcome.WRAPPED, Outcome.ROUNDED, Outcome.OVERFLOWED):
        st.warning(outcome_text, icon=":material/warning:")
    elif found.outcome is Outcome.NOT_FINITE:
        st.info(outcome_text, icon=":material/info:")
    else:
        st.success(outcome_text, icon=":material/check:")
    st.markdown("  \n".join(state.promotion_notes(found, language())))
    st.caption(state.derivation_text(found, language()))


def _promotion_table() -> None:
    st.subheader(t("basics.types.table"), anchor=False)
    st.caption(t("basics.types.table_caption"))
    kind = st.segmented_control(
        t("basics.types.table_kind"),
        [k.value for k in OperandKind],
        format_func=lambda k: t(f"basics.types.table_kinds.{k}"),
        required=True,
        key=state.TABLE_KIND_KEY,  # its value is set by the room (kept across sections)
    )
    st.html(state.table_view(kind, language(), palette()))
    st.caption(t("basics.types.table_legend"))


def _creation() -> None:
    with st.expander(t("basics.types.creation"), icon=":material/add_box:"):
        st.markdown(state.creation_text(language()))


# ======================================================================= broadcasting

BROADCAST_EXAMPLES = {
    "weights": "(2, 3, 5, 5) (3, 1, 1)",
    "weights_wrong": "(2, 3, 5, 5) (3,)",
    "outer": "(4, 1) (3,)",
    "mismatch": "(2, 3) (4,)",
}


@guarded
def _broadcasting() -> None:
    _section(Section.BROADCASTING, "broadcast", _broadcast_inputs, state.current_broadcast,
             _broadcast_result)  # fmt: skip


broadcasting = st.fragment(_broadcasting)


def _broadcast_inputs() -> None:
    columns = st.columns(len(BROADCAST_EXAMPLES))
    for column, (name, shapes) in zip(columns, BROADCAST_EXAMPLES.items(), strict=True):
        column.button(
            t(f"basics.broadcast.examples.{name}"),
            key=f"{state.BROADCAST_EXAMPLE_PREFIX}{name}",
            on_click=state.set_values,
            args=({state.SHAPES_KEY: shapes},),
            width="stretch",
        )
    st.text_input(
        t("basics.broadcast.shapes"),
        key=state.SHAPES_KEY,
        max_chars=200,
        help=t("basics.broadcast.shapes_help"),
    )


def _broadcast_result(found: Broadcast) -> None:
    lang = language()
    st.html(state.aligned_picture(found, lang, palette()))
    st.caption(t("basics.broadcast.legend"))
    st.code(found.code, language="python")
    if found.ok:
        assert found.result is not None
        st.success(t("basics.broadcast.result", shape=draw.shape_text(found.result)),
                   icon=":material/check:")  # fmt: skip
        for number, operand in enumerate(found.operands):
            if any(operand.stretched):
                name = "abcd"[number]
                st.markdown(
                    t(
                        "basics.broadcast.expand_line",
                        name=name,
                        shape=draw.shape_text(operand.shape),
                        result=draw.shape_text(found.result),
                        strides=draw.shape_text(operand.expanded_strides or ()),
                    )
                )
                _strides_link(
                    state.expand_link(operand.shape, found.result),
                    "basics.broadcast.see_in_strides",
                )
        return
    st.error(
        t(
            "basics.broadcast.fails",
            dim=found.failing_dim,
            sizes=", ".join(map(str, found.failing_sizes)),
        ),
        icon=":material/close:",
    )
    _torch_said(found.torch_message or "")
    if found.fix is None:
        st.info(t("basics.broadcast.no_fix"))
        return
    fix = found.fix
    name = "abcd"[fix.operand]
    st.info(
        t(
            "basics.broadcast.fix",
            name=name,
            index=fix.index,
            shape=draw.shape_text(fix.new_shape),
            dims=", ".join(map(str, fix.unsqueezes)),
            result=draw.shape_text(fix.result),
        ),
        icon=":material/build:",
    )
    shapes = [fix.new_shape if i == fix.operand else s for i, s in enumerate(found.shapes)]
    st.button(
        t("basics.broadcast.apply_fix"),
        key=state.APPLY_FIX_KEY,
        on_click=state.set_values,
        args=({state.SHAPES_KEY: " ".join(draw.shape_text(s) for s in shapes)},),
    )


# ======================================================================= einsum

EINSUM_EXAMPLES = {
    "grayscale": ("...chw,c->...hw", "(2, 3, 5, 5) (3,)"),
    "matmul": ("ij,jk->ik", "(2, 3) (3, 4)"),
    "batch": ("bij,bjk->bik", "(2, 2, 3) (2, 3, 4)"),
    "trace": ("ii->i", "(4, 4)"),
    "transpose": ("ij->ji", "(2, 3)"),
    "chain": ("ij,jk,kl->il", "(2, 3) (3, 4) (4, 5)"),
}
EINSUM_TARGETS = {
    name: {state.EQUATION_KEY: equation, state.EINSUM_SHAPES_KEY: shapes}
    for name, (equation, shapes) in EINSUM_EXAMPLES.items()
}


@guarded
def _einsum() -> None:
    _section(Section.EINSUM, "einsum", _einsum_inputs, state.current_einsum,
             _unless_refused("einsum", _einsum_plan))  # fmt: skip


einsum = st.fragment(_einsum)


def _einsum_inputs() -> None:
    st.selectbox(
        t("basics.einsum.examples_label"),
        list(EINSUM_EXAMPLES),
        index=None,
        placeholder=t("basics.einsum.examples_placeholder"),
        format_func=lambda k: t(f"basics.einsum.examples.{k}"),
        key=state.EINSUM_EXAMPLE_KEY,
        on_change=state.load_example,
        args=(state.EINSUM_EXAMPLE_KEY, EINSUM_TARGETS),
    )
    left, right = st.columns([1, 1])
    left.text_input(t("basics.einsum.equation"), key=state.EQUATION_KEY, max_chars=80)
    right.text_input(
        t("basics.einsum.shapes"),
        key=state.EINSUM_SHAPES_KEY,
        max_chars=200,
        help=t("basics.broadcast.shapes_help"),
    )


def _einsum_plan(plan: EinsumPlan) -> None:
    lang = language()
    st.html(state.einsum_picture(plan, lang, palette()))
    with _metric_row():
        st.metric(t("basics.einsum.metric_output"), draw.shape_text(plan.output_shape))
        st.metric(t("basics.einsum.metric_summed"), ", ".join(plan.summed) or "—")
        st.metric(t("basics.einsum.metric_terms"), format_count(plan.products))
    if not plan.explicit:
        st.caption(t("basics.einsum.implicit", output="".join(plan.output) or "—"))
    loops, broadcast_form = st.columns(2)
    with loops:
        st.markdown(f"**{t('basics.einsum.loops')}**")
        st.code(plan.loop_code, language="python")
    with broadcast_form:
        st.markdown(f"**{t('basics.einsum.broadcast')}**")
        st.code(plan.broadcast_code + "\n" + plan.einsum_code, language="python")
        if plan.checked is True:
            st.success(t("basics.einsum.checked"), icon=":material/check:")
        elif plan.checked is None:
            st.caption(t("basics.einsum.not_run"))
    st.markdown(state.einsum_text(plan, lang))


# ======================================================================= indexing

INDEX_EXAMPLES = (
    "x[1:, ::2]",
    "x[:, 1]",
    "x[None, 1:]",
    "x[..., -1]",
    "x[:, [0, 2]]",
    "x[x > 5]",
    "x[x % 2 == 0]",
    "x[[0, 2], [1, 3]]",
    "x[1:, None, ..., [0, 2]]",
)


@guarded
def _indexing() -> None:
    _section(Section.INDEXING, "index", _index_inputs, state.current_index,
             _unless_refused("index", _index_result))  # fmt: skip


indexing = st.fragment(_indexing)


def _index_inputs() -> None:
    shape_column, expression_column = st.columns([1, 2])
    shape_column.text_input(t("basics.index.shape"), key=state.INDEX_SHAPE_KEY, max_chars=60)
    expression_column.text_input(
        t("basics.index.expression"),
        key=state.INDEX_KEY,
        max_chars=120,
        help=t("basics.index.expression_help"),
    )
    st.pills(
        t("basics.index.examples"),
        list(INDEX_EXAMPLES),
        key=state.INDEX_EXAMPLE_KEY,
        on_change=state.load_example,
        args=(state.INDEX_EXAMPLE_KEY, {text: {state.INDEX_KEY: text} for text in INDEX_EXAMPLES}),
    )


def _index_result(result: IndexResult) -> None:
    lang = language()
    view = result.is_view
    verdict = t(
        "basics.index.verdict_view" if view else "basics.index.verdict_copy",
        expression=result.expression,
    )
    (st.success if view else st.info)(verdict, icon=":material/link:" if view else
                                      ":material/content_copy:")  # fmt: skip
    st.html(state.index_view(result, palette(), lang))
    st.caption(t("basics.index.legend"))
    st.markdown(
        "  \n".join(f"**{label}**: `{value}`" for label, value in draw.index_facts(result, lang))
    )
    st.code(result.code, language="python")
    _strides_link(state.index_link(result), "basics.index.see_in_strides")


# ======================================================================= saving


@guarded
def _saving() -> None:
    _section(Section.SAVING, "save", _save_inputs, state.current_save, _save_report)


saving = st.fragment(_saving)


def _save_inputs() -> None:
    first, second, third = st.columns([2, 2, 1])
    first.text_input(t("basics.save.shape"), key=state.SAVE_SHAPE_KEY, max_chars=60)
    second.text_input(t("basics.save.view"), key=state.SAVE_VIEW_KEY, max_chars=120)
    third.selectbox("dtype", list(SAVE_DTYPES), key=state.SAVE_DTYPE_KEY)


def _save_report(report: SaveReport) -> None:
    st.code(report.code, language="python")
    with _metric_row():
        st.metric(t("basics.save.metric_view"), format_bytes(report.saved_view))
        st.metric(t("basics.save.metric_clone"), format_bytes(report.saved_clone))
        st.metric(t("basics.save.metric_storage"), format_bytes(report.storage_bytes))
    if report.view_is_view and report.saved_view > 2 * report.saved_clone:
        st.warning(
            t(
                "basics.save.whole_storage",
                view=report.view_expression,
                shape=draw.shape_text(report.view_shape),
                view_bytes=format_bytes(report.view_bytes),
                storage=format_bytes(report.storage_bytes),
            ),
            icon=":material/warning:",
        )
    elif not report.view_is_view:
        st.info(t("basics.save.not_a_view", view=report.view_expression))
    _strides_link(state.save_link(report), "basics.save.see_in_strides")
    bars = (
        t("basics.save.bar_full"),
        t("basics.save.bar_view"),
        t("basics.save.bar_clone"),
        t("basics.save.bar_h5_file"),
        t("basics.save.bar_h5_tail"),
    )
    st.html(state.save_picture(report, bars, palette()))
    # everything else is text: one Markdown element, built once per report and language
    st.markdown(state.save_text(report, language()))
    hdf = report.hdf5
    if hdf.error_code is not None:
        error = BasicsValueError(
            hdf.error_code, dtype=report.dtype, torch_message=hdf.torch_message or ""
        )
        error_card(error, warning=True)


# ======================================================================= quiz


def quiz(section: Section) -> None:
    """Predict, then reveal: a question drawn from a seed, graded by torch when revealed
    (left out while the student follows a class, whose questions come from the teacher)."""
    if not room_questions_shown():
        return
    with st.container(border=True):
        st.subheader(t("basics.quiz.header"), anchor=False)
        score = st.empty()  # above the question, filled once this run's reveal is graded
        seed = state.quiz_seed(section)
        question = state.question(section, seed)
        shown = tuple(_choice_text(choice) for choice in question.choices)
        predict_reveal(
            state.quiz_key(section, seed),
            prompt=f"{t(f'basics.quiz.prompt.{section}')}\n\n```python\n{question.code}\n```",
            grade=lambda given: state.grade_prediction(section, seed, given, shown),
            options=shown,
        )
        right, answered = state.score(section)
        score.caption(t("basics.quiz.score", right=right, answered=answered))
        st.button(
            t("basics.quiz.next"),
            key=f"{state.QUIZ_NEXT_PREFIX}{section}",
            on_click=state.next_question,
            args=(section,),
        )


def _choice_text(choice: str) -> str:
    if choice in (ERROR_CHOICE, VIEW, COPY):
        return t(f"basics.quiz.choices.{choice}")
    if choice.startswith("≈"):
        return t("basics.quiz.size_choice", size=choice)
    return choice
