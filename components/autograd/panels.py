"""The autograd room's widgets and output, in page order. Every engine call and every
drawing goes through ``state`` (asked once per thing shown); every string through ``t``;
errors through the kit's error card."""

from __future__ import annotations

import streamlit as st

from components.autograd import state
from components.autograd.state import Room
from components.contained import guarded
from components.i18n import t
from components.kit.error_card import error_card, error_text
from components.kit.predict_reveal import predict_reveal, room_questions_shown
from components.widgets import keep_values
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.freeze import BATCH, BLOCKS
from torchatlas.autograd.link import MAX_SEED
from torchatlas.autograd.parser import MAX_ELEMENTS, MAX_LOOP, MAX_SOURCE, MAX_STATEMENTS
from torchatlas.autograd.quiz import ERROR, options


def intro() -> None:
    st.markdown(t("autograd.intro"))


# --------------------------------------------------------------------------- program


def program() -> Room:
    """The example menu, the program box, the seed and the root; the program traced (or
    refused, or stopped by torch, each explained)."""
    state.start()
    state.LINK.notice()
    # The freezing toggles are drawn only while their tab is open.
    keep_values(prefixes=(state.TRAIN_PREFIX,))
    st.header(t("autograd.program.header"))
    options = [*EXAMPLES, state.CUSTOM]
    st.selectbox(
        t("autograd.program.example"),
        options,
        key=state.EXAMPLE_KEY,
        format_func=lambda key: t(f"autograd.examples.{key}"),
        on_change=state.load_example,
    )
    st.text_area(
        t("autograd.program.text"),
        key=state.PROGRAM_KEY,
        height=200,
        max_chars=MAX_SOURCE,
        on_change=state.program_edited,
        help=t(
            "autograd.program.help", loop=MAX_LOOP, statements=MAX_STATEMENTS, elements=MAX_ELEMENTS
        ),
    )
    room = state.read_room()
    state.write_link()  # also when the program is refused: the link restores what was typed
    for key, params in state.notes():
        st.warning(t(f"autograd.program.{key}", **params), icon=":material/link_off:")
    row = st.container(horizontal=True)
    row.number_input(
        t("autograd.program.seed"),
        min_value=0,
        max_value=MAX_SEED,
        step=1,
        key=state.SEED_KEY,
        help=t("autograd.program.seed_help"),
        on_change=state.set_step,
        args=(0,),
    )
    if room.graph is not None and room.graph.roots and room.graph.error is None:
        row.selectbox(
            t("autograd.program.root"),
            list(room.graph.roots),
            key=state.ROOT_KEY,
            help=t("autograd.program.root_help"),
            on_change=state.root_picked,
        )
    if room.failure is not None:
        error_card(room.failure)
    elif room.refusal is not None:
        error_card(room.refusal)
        st.caption(t("autograd.program.refused"))
    elif room.graph is not None and room.graph.error is not None:
        _program_error(room, stopped=t("autograd.program.stopped", line=room.graph.error.line))
    elif room.graph is not None and room.root is None:
        st.info(t("autograd.program.no_root"), icon=":material/info:")
    return room


def _program_error(room: Room, stopped: str) -> None:
    stop = state.program_stop(room)
    assert stop is not None
    st.error(stopped + " " + error_text(stop.error), icon=":material/error:")
    if stop.note:
        st.warning(stop.note, icon=":material/counter_1:")
    if stop.torch_said:
        st.caption(t("autograd.program.torch_said", message=stop.torch_said))


# --------------------------------------------------------------------------- quiz


def predict(room: Room) -> None:
    """Predict requires_grad / is_leaf / .grad is None for a few variables, one True/False
    question at a time (the kit's predict-then-reveal), each graded against what torch
    reported; the answers so far in one table, the score at the end. Left out while the
    student follows a class (its questions come from the teacher)."""
    if not room_questions_shown():
        return
    questions = state.quiz_questions(room)
    if not questions:
        return
    current = state.quiz_current(room)
    with st.expander(
        t("autograd.quiz.header"), expanded=current is not None, icon=":material/quiz:"
    ):
        st.caption(t("autograd.quiz.caption", root=room.root or "loss"))
        table = state.quiz_table(room)
        if table is not None:
            st.markdown(table)
        if current is not None:
            number, variable, question = current
            # torch's own words (True, False), and its refusal in the reader's language
            shown = {word: t("autograd.quiz.error") if word == ERROR else word
                     for word in options(question)}  # fmt: skip
            words = {label: word for word, label in shown.items()}
            grade = predict_reveal(
                state.quiz_key(variable, question),
                prompt=t("autograd.quiz.progress", number=number, total=len(questions))
                + " · "
                + t(f"autograd.quiz.prompts.{question}", name=variable),
                grade=lambda given: state.grade(room, variable, question, words.get(given, given)),
                options=tuple(shown.values()),
            )
            if grade is not None and number < len(questions):
                st.button(t("autograd.quiz.next"), key=state.NEXT_QUESTION_KEY, type="primary")
        score = state.quiz_score(room)  # this run may have revealed the last answer
        if score is not None:
            right, asked = score
            st.success(t("autograd.quiz.score", correct=right, total=asked))
            st.button(t("autograd.quiz.again"), key=state.AGAIN_KEY, on_click=state.forget_quiz)


# --------------------------------------------------------------------------- graph


@st.fragment
@guarded
def graph(room: Room) -> None:
    """The graph and the step control: each click reruns only this part."""
    if room.graph is None or room.graph.error is not None:
        return
    st.header(t("autograd.graph.header"))
    st.caption(t("autograd.graph.legend"))
    if not room.graph.nodes:
        st.info(t("autograd.graph.no_nodes"), icon=":material/info:")
    step = state.shown_step(room)
    total = room.total_steps
    if room.trace is not None:
        row = st.container(horizontal=True)
        row.button(
            t("autograd.graph.reset"),
            key=state.RESET_KEY,
            on_click=state.set_step,
            args=(0,),
            disabled=step == 0,
            icon=":material/first_page:",
        )
        row.button(
            t("autograd.graph.prev"),
            key=state.PREV_KEY,
            on_click=state.set_step,
            args=(step - 1,),
            disabled=step == 0,
            icon=":material/chevron_left:",
        )
        row.button(
            t("autograd.graph.next"),
            key=state.NEXT_KEY,
            on_click=state.set_step,
            args=(step + 1,),
            disabled=step >= total,
            type="primary",
            icon=":material/chevron_right:",
        )
        row.button(
            t("autograd.graph.all"),
            key=state.ALL_KEY,
            on_click=state.set_step,
            args=(total,),
            disabled=step >= total,
            icon=":material/last_page:",
        )
    view = state.graph_view(room, step)
    if view.step_text is not None:
        st.info(view.step_text, icon=":material/footprint:")
    with st.container(key=state.GRAPH_BOX):
        st.graphviz_chart(view.dot, width="stretch")
    if room.trace is not None:
        if room.trace.error is not None and step >= total:
            _program_error(room, stopped=t("autograd.program.backward_stopped", root=room.root))
        elif step >= total and total:
            st.success(t("autograd.graph.done", total=total), icon=":material/check_circle:")
        st.markdown(
            f"**{t('autograd.grads.header')}**\n\n" + (view.grads or ""),
            unsafe_allow_html=True,
        )
    state.write_link()
    _share()


def _share() -> None:
    with st.container(key=state.SHARE_BOX):
        st.markdown(f"**{t('autograd.code.share')}** · {t('autograd.code.share_caption')}")
        st.code(state.share_link(), language=None, wrap_lines=True)


# --------------------------------------------------------------------------- lessons


def lessons(room: Room) -> None:
    """Variables and code, freezing, then vs now. Only the open tab runs (on_change="rerun"
    + .open): the others cost nothing on a rerun, which keeps stepping quick."""
    labels = [t("autograd.tabs.details"), t("autograd.tabs.freeze"), t("autograd.tabs.history")]
    details_tab, freeze_tab, history_tab = st.tabs(
        labels, key=state.PANEL_KEY, on_change="rerun", default=labels[0]
    )
    if details_tab.open:
        with details_tab:
            details(room)
    if freeze_tab.open:
        with freeze_tab:
            freezing()
    if history_tab.open:
        with history_tab:
            then_and_now()


def details(room: Room) -> None:
    """Every variable as torch reports it, what the nodes saved, and the code to copy."""
    if room.graph is None:
        return
    view = state.details_view(room)
    st.header(t("autograd.variables.header"))
    if view.variables is not None:
        st.markdown(view.variables, unsafe_allow_html=True)
    if room.graph.others:
        names = ", ".join(f"`{o.name}` = {o.text}" for o in room.graph.others)
        st.caption(t("autograd.variables.others", names=names))
    saved = view.saved
    if saved:
        with st.expander(t("autograd.variables.saved_header"), icon=":material/inventory_2:"):
            st.markdown("\n".join(saved))
    if room.code is not None:
        st.header(t("autograd.code.header"))
        st.caption(t("autograd.code.caption"))
        code = room.code
        if room.root is not None and room.graph.error is None:
            code += t("autograd.code.backward_line", root=room.root) + "\n"
        st.code(code, language="python")


# --------------------------------------------------------------------------- freezing


def freezing() -> None:
    st.header(t("autograd.freeze.header"))
    batch = "×".join(map(str, BATCH))
    st.markdown(t("autograd.freeze.intro", batch=batch))
    st.markdown(f"**{t('autograd.freeze.trainable')}**")
    trainable = state.trainable()
    row = st.container(horizontal=True)
    for block in BLOCKS:
        row.toggle(block, key=f"{state.TRAIN_PREFIX}{block}")
    with st.spinner(t("autograd.freeze.running")):
        view = state.freeze_view(trainable)
    report = view.report
    saved, unfrozen = view.saved
    metrics = st.container(horizontal=True)
    metrics.metric(t("autograd.freeze.trainable_params"), f"{report.trainable_numel:,}")
    metrics.metric(t("autograd.freeze.frozen_params"), f"{report.frozen_numel:,}")
    metrics.metric(t("autograd.freeze.grads_none"), f"{report.grads_none} / {len(report.params)}")
    metrics.metric(
        t("autograd.freeze.saved"),
        saved,
        delta=t("autograd.freeze.saved_delta", bytes=unfrozen),
        delta_color="off",
    )
    if not report.trainable:
        st.info(t("autograd.freeze.none_trainable"), icon=":material/ac_unit:")
    st.markdown(view.bar, unsafe_allow_html=True)
    st.markdown(f"**{t('autograd.freeze.optimizer_header')}**")
    st.markdown(view.table, unsafe_allow_html=True)
    st.caption(t("autograd.freeze.optimizer_note"))
    with st.expander(t("autograd.freeze.code"), icon=":material/code:"):
        st.code(view.code, language="python")


# --------------------------------------------------------------------------- then vs now


def then_and_now() -> None:
    st.header(t("autograd.history.header"))
    st.markdown(t("autograd.history.intro"))
    for case in state.history_view():
        st.markdown(t(f"autograd.history.cases.{case.key}"))
        then, now = st.columns(2)
        then.markdown(f"**{t('autograd.history.then')}**")
        (code, text), *nows = case.outcomes
        then.code("from torch.autograd import Variable\n" + code, language="python")
        then.markdown(text)
        now.markdown(f"**{t('autograd.history.now')}**")
        for code, text in nows:
            now.code(code, language="python")
            now.markdown(text)
