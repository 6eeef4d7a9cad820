"""The strides room's panels, in page order: setup, step picker, explorer, facts and history,
then the tabs (code, write-through, byte lens, quiz).

Widgets and ``st.*`` output only: session keys, the link and every engine call go through
``state``, which also builds (and keeps) the figures and HTML, asked once per picture; errors
are shown with the kit's error card; the small text pieces come from ``draw``. Panels take the
engine's frozen dataclasses (:class:`~torchatlas.strides.Step` and friends). They live here
rather than in views/strides.py because Streamlit compiles the page file on every rerun.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from components.i18n import t
from components.kit.error_card import error_card, error_text
from components.kit.follow import folded, unfold_button
from components.kit.predict_reveal import predict_reveal
from components.strides import state
from components.strides.draw import (
    MAX_DRAWN,
    flatten,
    format_index,
    format_value,
    heading_markdown,
    markdown_table,
    tuple_text,
    unravel,
)
from components.strides.state import Room
from components.widgets import keep_values
from torchatlas.sandboxed import RoomJob
from torchatlas.strides import (  # types and limits only: engine calls go through state
    DTYPES,
    MAX_CHAIN_TEXT,
    MAX_INDEX_TEXT,
    MAX_OP_TEXT,
    MAX_OPS,
    MAX_SHAPE_TEXT,
    START_DTYPES,
    Step,
    StepError,
    StridesError,
)
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.quiz import CHOICES, Question

OP_TEMPLATES = (
    ".t()", ".transpose(0, 1)", ".permute(1, 0)", "[1:, ::2]", "[..., 0]", "[None]",
    ".select(0, 1)", ".narrow(1, 1, 2)", ".view(-1)", ".reshape(-1)", ".flatten()",
    ".unflatten(0, (1, -1))", ".squeeze()", ".unsqueeze(0)", ".expand(2, -1, -1)",
    ".as_strided((2, 2), (1, 1))", ".diagonal()", ".unfold(0, 2, 1)", ".chunk(2)[0]",
    ".split(1)[0]", ".contiguous()", ".clone()", ".flip(0)", ".to(torch.float16)",
    ".view(torch.int32)", ".detach()", ".mT", ".T", ".movedim(0, -1)", "einsum('ij->ji')",
    ".to(memory_format=torch.channels_last)",
)  # fmt: skip


# --------------------------------------------------------------------------- text pieces


def show_step_error(error: StepError) -> None:
    error_card(error.as_error())
    if error.torch_message:
        st.caption(t("strides.errors.pytorch_said", message=error.torch_message))


def show_outcome_problem(outcome: RoomJob[Any]) -> None:
    """A job without a result: the engine's own refusal in the room's words, or the
    sandbox's failure (time, memory, a busy server …) as the shared card."""
    if outcome.refused is not None:
        code, params = outcome.refused
        error_card(StridesError(code, **params))
    elif outcome.failure is not None:
        error_card(outcome.failure)


def step_label(step: Step) -> str:
    return "x" if step.index == 0 else f"{step.name} = …{step.op}"


def kind_text(step: Step) -> str:
    kind = step.storage_kind
    assert kind is not None
    return t(f"strides.kind.{kind}", storage=step.storage_id, nbytes=step.storage_nbytes)


def facts_markdown(step: Step) -> str:
    yes, no = t("strides.facts.yes"), t("strides.facts.no")
    assert step.byte_range is not None
    first, end = step.byte_range
    rows = [
        (t("strides.facts.size"), f"`{tuple_text(step.size or ())}`"),
        (t("strides.facts.stride"), f"`{tuple_text(step.stride or ())}`"),
        (t("strides.facts.stride_bytes"), f"`{tuple_text(step.stride_bytes or ())}`"),
        (t("strides.facts.offset"), f"`{step.storage_offset}`"),
        (t("strides.facts.dtype"), f"`{step.dtype}` · {step.element_size} B"),
        (t("strides.facts.contiguous"), yes if step.is_contiguous else no),
    ]
    if step.is_channels_last is not None:
        rows.append((t("strides.facts.channels_last"), yes if step.is_channels_last else no))
    rows.append((t("strides.facts.storage"), kind_text(step)))
    if step.numel:
        read = t("strides.facts.bytes_value", first=first, end=end - 1)
    else:  # a zero-element view reads nothing, wherever its offset points
        read = t("strides.facts.bytes_none", offset=step.storage_offset)
    rows.append((t("strides.facts.bytes"), read))
    return markdown_table((t("strides.facts.what"), t("strides.facts.value")), rows)


def formula_text(step: Step, element: tuple[int, ...], cell: int) -> str:
    terms = " + ".join(f"{i}·{s}" for i, s in zip(element, step.stride or (), strict=True))
    sum_text = f"{step.storage_offset} + {terms}" if terms else f"{step.storage_offset}"
    return t(
        "strides.explore.reads",
        element=f"{step.name}{format_index(element)}" if element else step.name,
        formula=sum_text,
        cell=cell,
    )


# --------------------------------------------------------------------------- setup


def intro() -> None:
    """The room's first lines, left out while the room is folded (kit.follow)."""
    if not folded():
        st.markdown(t("strides.intro"))


def setup() -> Room:
    """The setup box (shape, dtype, example menu, op chain, op picker) and the chain it
    holds; a refused shape or chain is explained and ends the run. For a student following a
    class (kit.follow), the button that unfolds the box instead: the room opens on the
    teacher's chain, whose code the tabs' place shows."""
    state.start()
    state.LINK.notice()
    # The write and quiz tabs' inputs are drawn only while their tab is open.
    keep_values((state.WRITE_TEXT_KEY,), prefixes=(state.QUIZ_PREFIX,))
    if folded():
        keep_values((state.SHAPE_KEY, state.DTYPE_KEY, state.OPS_KEY, state.PANEL_KEY))
        unfold_button(state.UNFOLD_KEY)
    else:
        _setup_box()
    state.write_link()  # the boxes as typed: a link restores even a refused shape
    try:
        room = state.read_room()
    except StridesError as problem:
        error_card(problem)
        st.stop()
    except state.ChainUnavailable as missing:
        show_outcome_problem(missing.outcome)
        st.stop()
    if room.too_many_ops:
        st.warning(t("strides.setup.too_many_ops", limit=MAX_OPS))
    note = room.start_note
    if note is not None:
        key, params = note
        st.caption(t(key, **params))
    failed = room.failed
    if failed is not None and failed.error is not None:
        show_step_error(failed.error)
    return room


def _setup_box() -> None:
    with st.container(border=True):
        # A wrapping flex row, not st.columns: three fewer blocks on every rerun, and on a
        # phone shape and dtype share a line while the example picker wraps below them.
        setup_row = st.container(horizontal=True)
        setup_row.text_input(
            t("strides.setup.shape"), key=state.SHAPE_KEY, max_chars=MAX_SHAPE_TEXT,
            help=t("strides.setup.shape_help"),
        )  # fmt: skip
        setup_row.selectbox(t("strides.setup.dtype"), START_DTYPES, key=state.DTYPE_KEY)
        setup_row.selectbox(
            t("strides.setup.example"),
            list(EXAMPLES),
            index=None,
            placeholder=t("strides.setup.example_placeholder"),
            format_func=lambda key: t(f"strides.examples.{key}"),
            key=state.EXAMPLE_KEY,
            on_change=state.load_example,
        )
        st.text_area(
            t("strides.setup.ops"),
            key=state.OPS_KEY,
            height=140,
            max_chars=MAX_CHAIN_TEXT,
            help=t("strides.setup.ops_help", limit=MAX_OPS),
        )
        st.selectbox(  # picking (or typing and pressing Enter) appends the op: no extra button
            t("strides.setup.add_op"),
            OP_TEMPLATES,
            index=None,
            placeholder=t("strides.setup.add_placeholder"),
            key=state.ADD_OP_KEY,
            accept_new_options=True,
            on_change=state.add_op,
        )


def step_picker(room: Room) -> int:
    """The step shown below (the chain's last step when the chain changes)."""
    ok_steps = room.ok_steps
    last = state.shown_step(room)
    shown = st.segmented_control(
        t("strides.step_picker"),
        options=list(range(last + 1)),
        format_func=lambda i: step_label(ok_steps[i]),
        key=state.STEP_KEY,
        required=True,
        on_change=state.step_picked,
        args=(last,),
    )
    state.write_link()  # a new chain asks for its last step
    return int(shown if shown is not None else last)


# --------------------------------------------------------------------------- explorer fragment


@st.fragment
def explorer(chain: state.Chain, steps: list[Step], shown: int) -> None:
    """The storage strip and the logical tensor, side by side; a click on either lights the
    other. Reruns alone on a click."""
    step = steps[shown]
    assert step.size is not None and step.numel is not None and step.storage_cells is not None
    view = state.explorer_view(chain, steps, shown)
    drawable, focus_element, cell, lit_elements = view.drawable, view.focus, view.cell, view.lit

    left, right = st.columns([1, 1], gap="medium")
    with left:
        storage_caption = t(
            "strides.storage.caption",
            storage=step.storage_id,
            cells=step.storage_cells,
            nbytes=step.storage_nbytes,
            dtype=step.dtype,
        )
        st.markdown(heading_markdown(t("strides.storage.title"), storage_caption, kind_text(step)))
        if drawable:
            st.plotly_chart(
                view.storage,
                key=state.STORAGE_CHART,
                on_select=lambda: state.chart_clicked(state.STORAGE_CHART, "cell", step.index),
                selection_mode="points",
                theme="streamlit",
                width="stretch",
                config={"displayModeBar": False},
            )
    with right:
        tensor_caption = t("strides.tensor.caption", name=step.name, size=tuple_text(step.size))
        st.markdown(heading_markdown(t("strides.tensor.title"), tensor_caption))
        if drawable:
            st.plotly_chart(
                view.tensor,
                key=state.TENSOR_CHART,
                on_select=lambda: state.chart_clicked(state.TENSOR_CHART, "element", step.index),
                selection_mode="points",
                theme="streamlit",
                width="stretch",
                config={"displayModeBar": False},
            )
            if len(step.size) >= 3:
                st.caption(t("strides.tensor.small_multiples"))
    if not drawable:
        st.info(
            t("strides.explore.summarised", numel=f"{step.numel:,}", limit=f"{MAX_DRAWN:,}"),
            icon=":material/compress:",
        )

    if cell is not None and drawable:
        assert step.storage_values is not None
        readers = sorted(lit_elements)
        value = format_value(step.storage_values[cell])
        if readers:
            shown_readers = ", ".join(
                f"{step.name}{format_index(unravel(i, step.size))}" for i in readers[:12]
            )
            more = t("strides.explore.more", count=len(readers) - 12) if len(readers) > 12 else ""
            about_cell = t(
                "strides.explore.cell_readers",
                cell=cell,
                value=value,
                count=len(readers),
                readers=shown_readers + more,
            )
        else:
            about_cell = t("strides.explore.cell_unread", cell=cell, value=value)
        if focus_element is not None:  # one element, not two: each costs every rerun
            element = unravel(focus_element, step.size)
            st.success(formula_text(step, element, cell) + "\n\n" + about_cell)
        else:
            st.markdown(about_cell)
    elif drawable:
        st.caption(t("strides.explore.hint"))
    _typing(step)


def _typing(step: Step) -> None:
    """Select by typing: an element index or a storage cell (keyboard, phone)."""
    assert step.size is not None and step.storage_cells is not None
    typing = st.expander(
        t("strides.explore.type_title"),
        icon=":material/keyboard:",
        key=state.TYPING_KEY,
        on_change="rerun",
    )
    if not typing.open:
        return
    with typing:
        typed_left, typed_right = st.columns(2)
        typed_left.text_input(
            t("strides.explore.type_element", example=tuple_text([0] * len(step.size))),
            key=state.TYPED_ELEMENT_KEY,
            max_chars=MAX_INDEX_TEXT,
            on_change=state.typed_element,
            args=(step,),
        )
        problem = state.typed_problem()
        if problem:
            code, params = problem
            typed_left.caption(error_text(StridesError(code, **params)))
        typed_right.number_input(
            t("strides.explore.type_cell", last=max(step.storage_cells - 1, 0)),
            min_value=0,
            max_value=max(step.storage_cells - 1, 0),
            value=None,
            step=1,
            key=state.TYPED_CELL_KEY,
            on_change=state.typed_cell,
            args=(step,),
        )
        if st.button(t("strides.explore.clear"), key=state.CLEAR_KEY):
            state.clear_selection()
            st.rerun(scope="fragment")


# --------------------------------------------------------------------------- facts and history


def facts_and_history(room: Room, shown: int) -> None:
    step = room.ok_steps[shown]
    facts, history = st.columns([1, 2], gap="medium")
    with facts:
        note = t("strides.facts.named_tensors")
        st.markdown(
            f"## {t('strides.facts.title')}\n\n{facts_markdown(step)}\n\n:gray[:small[{note}]]"
        )
    with history:
        st.html(state.history_view(room, shown))


# --------------------------------------------------------------------------- tabs


def tabs(room: Room, shown: int) -> None:
    """Code, write-through, byte lens and quiz. Only the open tab runs (on_change="rerun" +
    .open): the others cost nothing on a rerun, which keeps clicks on a 64×64 tensor quick.
    Folded (kit.follow): the code alone, the chain the teacher set."""
    if folded():
        _code(room)
        return
    panel_labels = [
        t("strides.tabs.code"),
        t("strides.tabs.write"),
        t("strides.tabs.bytes"),
        t("strides.tabs.quiz"),
    ]
    code_tab, write_tab, bytes_tab, quiz_tab = st.tabs(
        panel_labels, key=state.PANEL_KEY, on_change="rerun", default=panel_labels[0]
    )
    if code_tab.open:
        with code_tab:
            _code(room)
    if write_tab.open:
        with write_tab:
            write_panel(room)
    if bytes_tab.open:
        with bytes_tab:
            byte_lens_panel(room.ok_steps[shown])
    if quiz_tab.open:
        with quiz_tab:
            quiz_panel()


def _code(room: Room) -> None:
    # The caption travels as the code's first comment: one element fewer each rerun.
    st.code(f"# {t('strides.code.caption')}\n{state.cached_code(*room.chain)}", language="python")


def write_panel(room: Room) -> None:
    st.caption(t("strides.write.caption"))
    ok_steps = room.ok_steps
    # The default lives in the session (not in value=): the box's text is kept across tabs.
    st.session_state.setdefault(state.WRITE_TEXT_KEY, state.DEFAULT_WRITE)
    with st.form(state.WRITE_FORM, border=False):
        left, right = st.columns([1, 1])
        target = left.selectbox(
            t("strides.write.step"),
            options=[s.index for s in ok_steps],
            index=len(ok_steps) - 1,
            format_func=lambda i: step_label(ok_steps[i]),
            key=state.WRITE_STEP_KEY,
        )
        write = right.text_input(
            t("strides.write.write"),
            key=state.WRITE_TEXT_KEY,
            max_chars=MAX_OP_TEXT,
            help=t("strides.write.help"),
        )
        submitted = st.form_submit_button(t("strides.write.apply"), icon=":material/edit:")
    if submitted:
        state.remember_write(room, int(target), write)
    applied = state.last_write(room)
    if applied is None:
        return
    target_index, outcome = applied
    result = outcome.value
    if result is None:
        show_outcome_problem(outcome)
        return
    if result.error is not None:
        show_step_error(result.error)
        return
    st.code(result.code, language="python")
    changed = set(result.changed_steps)
    rows = []
    for step in ok_steps:
        index = step.index
        after = result.values_after.get(index)
        status = (
            t("strides.write.target")
            if index == target_index
            else t("strides.write.changed")
            if index in changed
            else t("strides.write.unchanged")
        )
        count = result.changed_counts.get(index, 0)
        preview = "…" if after is None else _preview(after)
        rows.append((f"`{step.name}`", str(step.storage_id), status, str(count), f"`{preview}`"))
    header = (
        t("strides.write.col_step"),
        t("strides.facts.storage"),
        t("strides.write.col_status"),
        t("strides.write.col_count"),
        t("strides.write.col_values"),
    )
    st.markdown(markdown_table(header, rows))
    others = sorted(changed - {target_index})
    st.info(
        t("strides.write.summary", steps=", ".join(room.steps[i].name for i in others))
        if others
        else t("strides.write.summary_none"),
        icon=":material/share:",
    )


def _preview(values: Any) -> str:
    flat = flatten(values)
    text = ", ".join(format_value(v) for v in flat[:12])
    return text + (" …" if len(flat) > 12 else "")


def byte_lens_panel(step: Step) -> None:
    st.caption(t("strides.bytes.caption"))
    stride, numel = step.stride or (), step.numel or 0
    rows = []
    for name, dtype in DTYPES.items():
        size = dtype.itemsize
        rows.append(
            (f"`torch.{name}`", str(size), f"`{tuple_text(s * size for s in stride)}`",
             f"{numel * size:,}")
        )  # fmt: skip
    header = (
        t("strides.bytes.dtype"),
        t("strides.bytes.element_size"),
        t("strides.bytes.stride_bytes"),
        t("strides.bytes.total"),
    )
    st.markdown(markdown_table(header, rows))
    st.markdown(t("strides.bytes.reinterpret"))
    st.button(
        t("strides.bytes.try_example"),
        key=state.BYTES_EXAMPLE_KEY,
        on_click=state.load_example,
        args=("view_dtype",),
    )


def _question_code(question: Question) -> tuple[str, str]:
    """The question's chain as code, and the name of its last tensor."""
    to = "" if question.dtype == "float32" else f".to(torch.{question.dtype})"
    code_lines = [f"x = torch.arange(...){to}.reshape{tuple_text(question.shape)}"]
    name = "x"
    for number, op in enumerate(question.ops, start=1):
        code_lines.append(f"y{number} = {name}{op}")
        name = f"y{number}"
    return "\n".join(code_lines), name


@st.fragment
def quiz_panel() -> None:
    st.caption(t("strides.quiz.caption"))
    seed, dtype = state.quiz_seed(), state.quiz_dtype()
    outcome = state.cached_question(seed, dtype)
    if not outcome.ok:
        show_outcome_problem(outcome)
        return
    item = outcome.value
    if item is None:  # no question for this seed: the next one
        state.next_question(seed)
        st.rerun(scope="fragment")
        return
    question = item.question
    code, name = _question_code(question)
    st.code(code, language="python")
    prompt_params = {"name": name, "op": question.ops[-1]}
    if question.element is not None:
        prompt_params["element"] = f"{name}{format_index(question.element)}"
    words = {word: t(f"strides.quiz.choices.{word}") for word in CHOICES.get(question.kind, ())}
    predict_reveal(
        state.quiz_key(seed, dtype),
        prompt=t(f"strides.quiz.kinds.{question.kind}", **prompt_params),
        grade=lambda given: state.grade_answer(item, given, words),
        options=tuple(words.values()),
        explain=lambda grade: _torch_says(item),
        placeholder=t(f"strides.quiz.placeholder.{question.kind}") if not words else "",
    )
    if st.button(t("strides.quiz.next"), key=f"{state.NEXT_QUESTION_PREFIX}{seed}"):
        state.next_question(seed)
        st.rerun()


def _torch_says(item: state.QuizItem) -> None:
    """What PyTorch reports for the question's last tensor (or its own words, when it
    refused the op)."""
    last = item.steps[-1]
    if last.error is not None:
        st.caption(t("strides.errors.pytorch_said", message=last.error.torch_message or ""))
        return
    st.caption(
        t(
            "strides.quiz.torch_says",
            size=tuple_text(last.size or ()),
            stride=tuple_text(last.stride or ()),
            offset=last.storage_offset,
            kind=t(f"strides.quiz.outcomes.{last.storage_kind}"),  # the step label's word
        )
    )
