"""The nn.Module room's panels, in page order: the side-by-side table, the inspector for
pasted code, one training step and the loss curve, predict-then-reveal, train/eval modes,
saving and loading, uninitialised memory.

Widgets and ``st.*`` output only: engine calls and session keys go through ``state``; every
table, figure and code cell comes from ``draw``.
"""

from __future__ import annotations

import streamlit as st

from components.contained import guarded
from components.format import format_bytes, format_count
from components.i18n import language, t
from components.kit.code_editor import CodeEditor
from components.kit.error_card import error_card
from components.kit.predict_reveal import predict_reveal
from components.modules import draw, state
from components.theme import palette
from torchatlas.modules import (
    SAVE_MODELS,
    TRAINABLE,
    ModelsError,
    ModeModel,
    Severity,
    TensorKind,
    TrainingTrace,
)
from torchatlas.modules.compare import SOURCE as COMPARE_SOURCE
from torchatlas.modules.quiz import Question

EDITOR_HEIGHT = 340


def intro() -> str:
    """The room's introduction and its section picker; returns the section to show."""
    state.start()
    state.keep_values()
    st.markdown(t("modules.intro"))
    state.notice()
    st.segmented_control(
        t("modules.sections.label"),
        state.SECTIONS,
        key=state.SECTION,
        format_func=lambda section: t(f"modules.sections.{section}"),
        on_change=state.write_link,
    )
    return state.current_section()


def show(section: str) -> None:
    """The chosen section's panels (one at a time: a rerun draws only what is shown)."""
    if section == "inspect":
        inspector()
    elif section == "compare":
        side_by_side()
    elif section == "train":
        training()
    elif section == "quiz":
        quiz()
    elif section == "modes":
        modes()
    elif section == "save":
        save_load()
    else:
        memory()


# ---------------------------------------------------------------- side by side
def side_by_side() -> None:
    st.header(t("modules.compare.header"), anchor=False)
    st.markdown(t("modules.compare.lead"))
    left, right = st.columns(2)
    lang = language()
    left.table(state.comparison_table(lang))
    right.code(COMPARE_SOURCE, language="python")
    st.caption(t("modules.compare.caption"))


# ---------------------------------------------------------------- the inspector
def _editor() -> CodeEditor:
    return CodeEditor(
        source_key=state.SOURCE,
        label=t("modules.inspect.code"),
        help=t("modules.inspect.code_help"),
        height=EDITOR_HEIGHT,
        form_key=state.FORM,
        run_label=t("modules.inspect.run"),
        run_icon=":material/search:",
        run_key=state.INSPECT_BUTTON,
        preset_key=state.PRESET,
        preset_label=t("modules.inspect.preset"),
        preset_options=tuple(state.preset_labels()),
        on_preset=state.on_preset_change,
    )


def _queued(place: int) -> str:
    return t("modules.queued", place=place)


def _model_box() -> None:
    st.text_input(
        t("modules.inspect.model"),
        key=state.MODEL,
        max_chars=state.MAX_MODEL_CHARS,
        help=t("modules.inspect.model_help"),
    )


def inspector() -> None:
    st.header(t("modules.inspect.header"), anchor=False)
    st.markdown(t("modules.inspect.lead"))
    editor = _editor()
    submitted, _ = editor.form(fields=_model_box)
    if submitted or state.needs_inspection():
        editor.run(state.inspect, running=t("modules.inspect.running"), queued=_queued)
    inspection = state.last_inspection()
    _report(inspection)
    with st.expander(t("modules.inspect.code_title"), icon=":material/code:"):
        st.code(draw.inspection_code(inspection.source, inspection.model), language="python")


def _report(inspection: state.Inspection) -> None:
    """The report's error, or its summary, findings, tensor table and module tree."""
    lang = language()
    report = inspection.report
    if report.error is not None:
        with st.container(border=True, key=state.ERROR_BOX):
            error_card(report.error)
            st.markdown(report.error.text(lang, "hint"))
            if report.error.line:
                st.caption(t("modules.inspect.at_line", line=report.error.line))
            for refusal in report.error.refusals[:10]:
                st.caption(
                    t(
                        "modules.inspect.refused_line",
                        line=refusal.line,
                        reason=t(f"modules.refusals.{refusal.code}")
                        if refusal.code in _REFUSAL_CODES
                        else refusal.detail,
                    )
                )
            detail = report.error.params.get("detail")
            if detail:
                st.code(str(detail), language="text")
        return
    counts = draw.kind_counts(report)
    # A horizontal container wraps its metrics: three to a row on a phone, not six rows.
    with st.container(key=state.SUMMARY_BOX, horizontal=True, gap="medium"):
        st.metric(
            t("modules.summary.parameters"),
            format_count(report.total_params),
            help=t("modules.summary.parameters_help"),
            width=110,
        )
        for label, value in (
            ("parameter_tensors", counts[TensorKind.PARAMETER]),
            ("buffers", counts[TensorKind.BUFFER]),
            ("plain", counts[TensorKind.PLAIN]),
            ("state_dict", len(report.state_dict_keys)),
            ("optimizer", report.optimizer_tensors),
        ):
            st.metric(t(f"modules.summary.{label}"), value, width=110)
    for finding in report.findings:
        text = f"**{finding.text('title', lang)}** — {finding.text('message', lang)}"
        if finding.severity is Severity.WARNING:
            st.warning(text, icon=":material/warning:")
        else:
            st.info(text, icon=":material/info:")
        if finding.fix:
            st.code(finding.fix, language="python")
    st.subheader(t("modules.table.title"), anchor=False)
    if report.tensors:
        st.dataframe(
            state.tensor_table(inspection, lang),
            hide_index=True,
            width="stretch",
            key=state.TENSOR_TABLE,
        )
        st.caption(t("modules.table.registered_help"))
    else:
        st.info(t("modules.table.none"))
    if report.truncated:
        st.caption(t("modules.table.truncated"))
    st.subheader(t("modules.tree.title"), anchor=False)
    table_tab, graph_tab = st.tabs([t("modules.tree.table_tab"), t("modules.tree.graph_tab")])
    with table_tab:
        st.dataframe(
            state.module_tree(inspection, lang),
            hide_index=True,
            width="stretch",
        )
    with graph_tab:
        colours = palette()
        dot = state.module_dot(inspection, colours, lang)
        if dot is None:
            st.caption(t("modules.tree.too_large", limit=draw.MAX_DOT_NODES))
        else:
            st.graphviz_chart(dot, width="stretch")


_REFUSAL_CODES = frozenset(
    {
        "construct",
        "import",
        "dunder",
        "forbidden_name",
        "format",
        "internals",
        "forbidden_attribute",
        "syntax",
        "type",
        "too_large",
        "evaluates_text",
        "string_dunder",
        "string_code",
        "too_complex",
        "other",
    }
)


# ---------------------------------------------------------------- training
def training() -> None:
    st.header(t("modules.training.header"), anchor=False)
    st.markdown(t("modules.training.lead"))
    _training()


@st.fragment
@guarded
def _training() -> None:
    lang = language()
    _training_controls()
    job = _editor().run(state.trace_job, queued=_queued)
    if job.value is None:
        with st.container(border=True, key=state.TRAIN_FAILED_BOX):
            if job.refused is not None:
                code, params = job.refused
                error_card(ModelsError(code, **params))
            else:
                error_card(job.failure)
        return
    trace = job.value
    if trace.optimizer_error:
        with st.container(border=True, key=state.TRAIN_REFUSED_BOX):
            st.error(t("modules.training.refused"), icon=":material/block:")
            st.code(f"{trace.optimizer_error}\n{trace.backward_error}", language="text")
    total = len(trace.steps)
    step = _training_step(trace, total, lang)
    _training_curve(trace, step, total, lang)


def _training_controls() -> None:
    """The model, learning rate, steps and the forget-zero_grad switch (kept in the link)."""
    controls = st.columns([3, 3, 3, 3])
    controls[0].selectbox(
        t("modules.training.model"),
        TRAINABLE,
        key=state.TRAIN_MODEL,
        format_func=lambda key: t(f"modules.models.{key}"),
        on_change=state.write_link,
    )
    controls[1].select_slider(
        t("modules.training.lr"),
        state.LR_CHOICES,
        key=state.LR,
        on_change=state.write_link,
        help=t("modules.training.lr_help"),
    )
    controls[2].select_slider(
        t("modules.training.steps"),
        state.STEP_CHOICES,
        key=state.STEPS,
        on_change=state.write_link,
    )
    controls[3].toggle(
        t("modules.training.forget"),
        key=state.FORGET,
        on_change=state.write_link,
        help=t("modules.training.forget_help"),
    )


def _training_step(trace: TrainingTrace, total: int, lang: str) -> int:
    """The step and phase controls, and what that phase of that step did; returns the step."""
    state.clamp_step(total)
    step_column, phase_column, button_column = st.columns([3, 4, 1], vertical_alignment="bottom")
    if total > 1:
        step_column.slider(t("modules.training.step_control"), 1, total, key=state.STEP)
    phase_column.segmented_control(
        t("modules.training.phase"),
        state.PHASES,
        key=state.PHASE,
        format_func=lambda phase: t(f"modules.training.phases.{phase}"),
    )
    button_column.button(
        t("modules.training.next"),
        key=state.NEXT_BUTTON,
        icon=":material/skip_next:",
        on_click=state.next_phase,
        args=(total,),
    )
    step = int(st.session_state[state.STEP])
    phase = st.session_state.get(state.PHASE) or state.PHASES[0]
    record = trace.steps[step - 1]
    loss = draw.number(record.loss)
    st.markdown(t(f"modules.training.explain.{phase}", step=step, loss=loss, lr=f"{trace.lr:g}"))
    st.dataframe(
        state.step_table(trace, step, phase, lang),
        hide_index=True,
        width="stretch",
        key=state.STEP_TABLE,
    )
    if trace.diverged_at is not None:
        st.warning(
            t("modules.training.diverged", step=trace.diverged_at + 1, lr=f"{trace.lr:g}"),
            icon=":material/trending_up:",
        )
    if trace.forget_zero_grad and total > 1 and not trace.optimizer_error:
        st.info(t("modules.training.accumulating"), icon=":material/add_circle:")
    return step


def _training_curve(trace: TrainingTrace, step: int, total: int, lang: str) -> None:
    """The loss curve up to ``step`` with its numbers as a table, and the loop's code."""
    colours = palette()
    st.plotly_chart(
        state.loss_figure(trace, step, colours, lang),
        theme="streamlit",
        key=state.LOSS_CHART,
    )
    with st.expander(t("modules.training.loss_numbers"), icon=":material/table:"):
        # The curve's numbers as a table: what a screen reader or a keyboard reaches.
        st.dataframe(
            {t("modules.training.loss_step"): list(range(1, len(trace.losses) + 1)),
             t("modules.training.loss_value"): [draw.number(v) for v in trace.losses]},
            hide_index=True,
        )  # fmt: skip
    if trace.stopped_at is not None:
        st.caption(t("modules.training.stopped", step=trace.stopped_at + 1))
    if trace.steps and not trace.optimizer_error:
        st.caption(
            t(
                "modules.training.summary",
                first=draw.number(trace.losses[0]),
                last=draw.number(trace.losses[-1]),
                steps=total,
            )
        )
    with st.expander(t("modules.training.code_title"), icon=":material/code:"):
        st.code(
            draw.training_code(
                trace.model_key, trace.lr, trace.steps_requested, trace.forget_zero_grad
            ),
            language="python",
        )


def quiz() -> None:
    st.header(t("modules.quiz.header"), anchor=False)
    for question in Question:
        _question(question)


@st.fragment
@guarded
def _question(question: Question) -> None:
    """One question through the kit: the prediction, then torch's answer from a live run and
    the run's own numbers (or torch's refusal) as the explanation."""
    with st.container(border=True, key=state.QUESTION_BOX + question.value):
        predict_reveal(
            state.quiz_key(question),
            prompt=f"**{t(f'modules.quiz.{question.value}.question')}**",
            grade=lambda given: state.quiz_grade(question, given),
            options=tuple(state.option_labels(question).values()),
            explain=lambda grade: _why(question),
        )


def _why(question: Question) -> None:
    st.markdown(t(f"modules.quiz.{question.value}.why"))
    trace = state.quiz_answer(question).trace
    if trace.optimizer_error:
        st.code(f"{trace.optimizer_error}\n{trace.backward_error}", language="text")
    else:
        st.dataframe(
            draw.step_frame(trace, min(2, len(trace.steps)), "backward", language()),
            hide_index=True,
            width="stretch",
        )


# ---------------------------------------------------------------- modes
def modes() -> None:
    st.header(t("modules.modes.header"), anchor=False)
    st.markdown(t("modules.modes.lead"))
    _modes()


@st.fragment
@guarded
def _modes() -> None:
    lang = language()
    st.segmented_control(
        t("modules.modes.model"),
        [m.value for m in ModeModel],
        key=state.MODE,
        format_func=lambda key: t(f"modules.modes.models.{key}"),
        on_change=state.write_link,
    )
    key = st.session_state.get(state.MODE) or ModeModel.DROPOUT.value
    report = state.mode_report(key)
    frames = state.mode_tables(key, lang)
    columns = st.columns(len(frames))
    for column, (title, frame) in zip(columns, frames.items(), strict=True):
        column.markdown(f"**{title}**")
        column.dataframe(frame, hide_index=True, width="stretch")
    if report.model_key is ModeModel.DROPOUT:
        st.markdown(
            t(
                "modules.modes.dropout_facts",
                zeros=report.zeros_in_train,
                total=sum(len(row) for row in report.input),
                p=report.dropout_p,
                scale=f"{1 / (1 - report.dropout_p):g}",
                again=draw.mark(report.train_output != report.train_output_again, lang),
                stable=draw.mark(report.eval_output == report.eval_output_again, lang),
            )
        )
    else:
        stats = state.running_stats_table(key, lang)
        st.markdown(
            t(
                "modules.modes.batchnorm_facts",
                momentum=f"{report.momentum:g}",
                tracked=report.batches_tracked,
                normalised=draw.variance_text(report, report.normalised_with, lang),
                towards=draw.variance_text(report, report.running_var_towards, lang),
            )
        )
        if stats is not None:
            st.dataframe(stats, hide_index=True, width="stretch")


# ---------------------------------------------------------------- saving and loading
def save_load() -> None:
    with st.container(key=state.SAVE_PANEL):
        st.header(t("modules.save.header"), anchor=False)
        st.markdown(t("modules.save.lead"))
        _save_load()


@st.fragment
@guarded
def _save_load() -> None:
    lang = language()
    st.segmented_control(
        t("modules.save.model"),
        SAVE_MODELS,
        key=state.SAVE_MODEL,
        format_func=lambda key: t(f"modules.models.{key}"),
        on_change=state.write_link,
    )
    key = st.session_state.get(state.SAVE_MODEL) or SAVE_MODELS[0]
    report = state.serialization(key)
    left, right = st.columns(2)
    left.markdown(f"**{t('modules.save.state_title')}**")
    left.dataframe(
        state.state_dict_table(key, lang),
        hide_index=True,
        width="stretch",
    )
    right.markdown(f"**{t('modules.save.zip_title', size=format_bytes(report.file_size))}**")
    right.dataframe(
        state.zip_table(key, lang),
        hide_index=True,
        width="stretch",
    )
    st.download_button(
        t("modules.save.download"),
        data=report.file_bytes,
        file_name=f"{key}_state_dict.pt",
        mime="application/octet-stream",
        key=state.DOWNLOAD_BUTTON,
        icon=":material/download:",
    )
    st.markdown(
        t(
            "modules.save.loaded",
            count=len(report.loaded_keys),
            equal=draw.mark(report.round_trip_equal, lang),
        )
    )
    st.markdown(f"**{t('modules.save.refusal_title')}**")
    st.markdown(t("modules.save.refusal_lead", default=draw.mark(report.default_refuses, lang)))
    st.code(report.refusal, language="text", wrap_lines=True)
    st.markdown(f"**{t('modules.save.attempts_title')}**")
    st.dataframe(
        state.attempts_table(key, lang),
        hide_index=True,
        width="stretch",
    )
    st.caption(t("modules.save.attempts_caption"))
    with st.expander(t("modules.save.code_title"), icon=":material/code:"):
        st.code(draw.save_code(key), language="python")


# ---------------------------------------------------------------- memory
def memory() -> None:
    with st.container(key=state.MEMORY_PANEL):
        st.header(t("modules.memory.header"), anchor=False)
        st.markdown(t("modules.memory.lead"))
        _memory()


@st.fragment
@guarded
def _memory() -> None:
    lang = language()
    again = st.button(
        t("modules.memory.again"), key=state.MEMORY_AGAIN_BUTTON, icon=":material/refresh:"
    )
    report = state.memory(fresh=again)
    if report.failure is not None:
        error_card(report.failure)
    frames = draw.memory_frames(report, lang)
    columns = st.columns(len(frames))
    for column, (title, frame) in zip(columns, frames.items(), strict=True):
        column.markdown(f"**{title}**")
        column.dataframe(frame, hide_index=True, width="stretch")
    st.markdown(
        t(
            "modules.memory.facts",
            bound=f"{report.bound:.4f}",
            fan_in=report.in_features,
            within=draw.mark(report.within_bound, lang),
            nonfinite=report.nonfinite_in_empty,
        )
    )
    if report.words:
        st.caption(
            t(
                "modules.memory.masked",
                masked=report.masked_words,
                words=report.words,
                cell=t("modules.memory.masked_cell"),
            )
        )
