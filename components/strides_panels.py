"""Streamlit panels of the strides room (state, URL, explorer, write-through, byte lens, quiz).

They live here rather than in views/strides.py because Streamlit compiles the page file on
every rerun; the page itself stays a short script that wires these panels together. Panels
take plain data (``Step.to_dict()`` dictionaries) and call the engine only through the cached
wrappers below.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from components.i18n import t
from components.strides import (
    MAX_DRAWN,
    flatten,
    format_index,
    format_value,
    history_html,
    ravel,
    storage_figure,
    tensor_figure,
    unravel,
)
from components.theme import DARK, LIGHT, is_dark
from torchatlas.cache import BoundedCache
from torchatlas.strides import (
    DTYPES,
    MAX_CHAIN_TEXT,
    MAX_INDEX_TEXT,
    MAX_OP_TEXT,
    MAX_OPS,
    MAX_SHAPE_TEXT,
    START_DTYPES,
    OpParseError,
    chain_code,
    parse_chain,
    parse_index,
    trace,
)
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.quiz import MAX_ANSWER_TEXT, Question, grade, make_question
from torchatlas.strides.writes import WriteResult, write_through

SHAPE_KEY, DTYPE_KEY, OPS_KEY = "strides_shape", "strides_dtype", "strides_ops"
STEP_KEY, SELECTION_KEY, SEED_KEY = "strides_step", "strides_selection", "strides_seed"
TENSOR_CHART, STORAGE_CHART = "strides_tensor_chart", "strides_storage_chart"
PANEL_KEY = "strides_panel"
URL_SHAPE, URL_DTYPE, URL_OPS, URL_SEED = "s_shape", "s_dtype", "s_ops", "s_seed"
DEFAULT = EXAMPLES["transpose_contiguous"]
OP_TEMPLATES = (
    ".t()", ".transpose(0, 1)", ".permute(1, 0)", "[1:, ::2]", "[..., 0]", "[None]",
    ".select(0, 1)", ".narrow(1, 1, 2)", ".view(-1)", ".reshape(-1)", ".flatten()",
    ".unflatten(0, (1, -1))", ".squeeze()", ".unsqueeze(0)", ".expand(2, -1, -1)",
    ".as_strided((2, 2), (1, 1))", ".diagonal()", ".unfold(0, 2, 1)", ".chunk(2)[0]",
    ".split(1)[0]", ".contiguous()", ".clone()", ".flip(0)", ".to(torch.float16)",
    ".view(torch.int32)", ".detach()", ".mT", ".T", ".movedim(0, -1)", "einsum('ij->ji')",
    ".to(memory_format=torch.channels_last)",
)  # fmt: skip


# --------------------------------------------------------------------------- state and URL


LINK_BROKEN_KEY = "strides_link_broken"


def _link_values(query: Any) -> tuple[str, str, str] | None:
    """Shape, dtype and op chain text of a shared link, or None when it carries more than
    this room ever writes into a link (then none of it is used)."""
    shape = query.get(URL_SHAPE, "")
    ops = "\n".join(op for op in query.get_all(URL_OPS)[:MAX_OPS] if op.strip())
    if len(shape) > MAX_SHAPE_TEXT or len(ops) > MAX_CHAIN_TEXT:
        return None
    dtype = query.get(URL_DTYPE, DEFAULT.dtype)
    return shape, dtype if dtype in START_DTYPES else DEFAULT.dtype, ops


def initial_state() -> None:
    """First run of a session: a shared link's state, else the default example. Keys a test
    or an earlier run already set are kept."""
    query = st.query_params
    shape, dtype, ops = ", ".join(map(str, DEFAULT.shape)), DEFAULT.dtype, "\n".join(DEFAULT.ops)
    if URL_SHAPE in query and SHAPE_KEY not in st.session_state:
        shared = _link_values(query)
        if shared is None:
            st.session_state[LINK_BROKEN_KEY] = True
        else:
            shape, dtype, ops = shared
    st.session_state.setdefault(SHAPE_KEY, shape)
    st.session_state.setdefault(DTYPE_KEY, dtype)
    st.session_state.setdefault(OPS_KEY, ops)
    if SEED_KEY not in st.session_state:
        seed = query.get(URL_SEED, "1")
        st.session_state[SEED_KEY] = int(seed) if seed.isdigit() and len(seed) < 10 else 1


def write_url(shape_text: str, dtype: str, ops: list[str]) -> None:
    """Keep only this room's keys in sync; never touch the others (``lang``)."""
    query = st.query_params
    wanted: dict[str, Any] = {
        URL_SHAPE: shape_text.replace(" ", ""),
        URL_DTYPE: dtype,
        URL_SEED: str(st.session_state[SEED_KEY]),
    }
    for key, value in wanted.items():
        if query.get(key) != value:
            query[key] = value
    if query.get_all(URL_OPS) != ops:
        if ops:
            query[URL_OPS] = ops
        elif URL_OPS in query:
            del query[URL_OPS]


def ops_lines() -> list[str]:
    """The chain box's ops, one per non-empty line. Raises OpParseError (chain_too_long)."""
    return parse_chain(str(st.session_state[OPS_KEY]))


def load_example() -> None:
    key = st.session_state.get("strides_example")
    if key in EXAMPLES:
        example = EXAMPLES[key]
        st.session_state[SHAPE_KEY] = ", ".join(map(str, example.shape))
        st.session_state[DTYPE_KEY] = example.dtype
        st.session_state[OPS_KEY] = "\n".join(example.ops)
        st.session_state.pop(STEP_KEY, None)
        st.session_state.pop(SELECTION_KEY, None)


def add_op() -> None:
    """Append the op just picked (or typed) to the chain, and empty the picker for the next."""
    op = st.session_state.get("strides_add_op")
    if op:
        # A typed op reaches here without a length limit: one character past the op limit
        # is enough for the op to be refused as too long, and keeps the box bounded.
        lines = parse_chain(str(st.session_state[OPS_KEY]), max_chars=None)[: MAX_OPS - 1]
        st.session_state[OPS_KEY] = "\n".join([*lines, str(op).strip()[: MAX_OP_TEXT + 1]])
        st.session_state.pop(STEP_KEY, None)
    st.session_state["strides_add_op"] = None


# --------------------------------------------------------------------------- cached engine calls
# Everything the room keeps between reruns lives in one process-wide cache bounded by bytes
# (torchatlas.cache): its keys are what visitors type or share, so an entry-count bound
# would let a few heavy chains take gigabytes. Each entry is measured when it is stored.
# Lookups stay cheap on the hot path (one lock, one dict), unlike st.cache_data, which
# hashes every argument and unpickles a copy on each call. Values are shared read-only
# across sessions: nobody mutates them (the flat index arrays are read-only to hold
# everyone to that).
CACHE_BYTES = 64 * 2**20
# The pictures draw steps of up to MAX_DRAWN elements, so steps keep per-element lists only
# up to that size: a 24-op chain then weighs at most a few megabytes, however large its
# tensors (their numbers, footprints and code stay exact at every size).
LISTED_UP_TO = MAX_DRAWN
ROOM_CACHE: BoundedCache[tuple, Any] = BoundedCache(CACHE_BYTES)

Chain = tuple[tuple[int, ...], str, tuple[str, ...]]


def cached_steps(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> list[dict]:
    """Shared read-only across sessions: a 64×64 chain's nested lists would cost more to
    unpickle on every rerun (cache_data) than the page spends on everything else."""
    return ROOM_CACHE.get_or_compute(
        ("steps", shape, dtype, ops),
        lambda: [s.to_dict() for s in trace(shape, dtype, list(ops), listed_up_to=LISTED_UP_TO)],
    )


def cached_code(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...]) -> str:
    return ROOM_CACHE.get_or_compute(
        ("code", shape, dtype, ops),
        lambda: chain_code(shape, dtype, trace(shape, dtype, list(ops), listed_up_to=0)),
    )


def cached_write(
    shape: tuple[int, ...], dtype: str, ops: tuple[str, ...], step: int, write: str
) -> WriteResult:
    return ROOM_CACHE.get_or_compute(
        ("write", shape, dtype, ops, step, write),
        lambda: write_through(shape, dtype, list(ops), step, write, listed_up_to=LISTED_UP_TO),
    )


class ReadyHtml(str):
    """Finished HTML for st.html. A plain string goes through textwrap.dedent, whose regex
    scans every character: 0.2 ms a rerun for a 10-step history, on a page that reruns on
    every click. st.html takes an object's ``_repr_html_`` as it is."""

    def _repr_html_(self) -> str:
        return str(self)


def cached_history(
    chain: Chain, labels: tuple[tuple[str, str], ...], shown: int, dark: bool
) -> ReadyHtml:
    def build() -> ReadyHtml:
        steps = [step for step in cached_steps(*chain) if step["error"] is None]
        return ReadyHtml(history_html(steps, dict(labels), shown, DARK if dark else LIGHT, dark))

    return ROOM_CACHE.get_or_compute(("history", chain, labels, shown, dark), build)


def cached_question(seed: int) -> Question:
    return ROOM_CACHE.get_or_compute(("question", seed), lambda: make_question(seed))


def _ok_step(chain: Chain, index: int) -> dict:
    return next(s for s in cached_steps(*chain) if s["index"] == index and s["error"] is None)


def flat_indices(chain: Chain, index: int) -> np.ndarray | None:
    """The storage cell of every element of a step, flat (row-major); read-only."""

    def build() -> np.ndarray | None:
        indices = _ok_step(chain, index)["storage_indices"]
        if indices is None:
            return None
        flat = np.asarray(flatten(indices), dtype=np.int64)
        flat.flags.writeable = False
        return flat

    return ROOM_CACHE.get_or_compute(("flat", chain, index), build)


def _serialised(figure: go.Figure) -> go.Figure:
    figure.to_dict()  # FrozenFigure keeps its JSON: measured with the figure, done once
    return figure


# Figures are cached as objects (never mutated): building and validating a
# 4,096-point Plotly figure costs more than the rest of a rerun, and most reruns (another
# widget, another tab) do not change what the figures show.
def cached_tensor_figure(
    chain: Chain, index: int, lit: frozenset[int], focus: int | None, dark: bool
) -> go.Figure:
    return ROOM_CACHE.get_or_compute(
        ("tensor_figure", chain, index, lit, focus, dark),
        lambda: _serialised(
            tensor_figure(_ok_step(chain, index), lit, focus, DARK if dark else LIGHT, dark)
        ),
    )


def cached_storage_figure(chain: Chain, index: int, cell: int | None, dark: bool) -> go.Figure:
    def build() -> go.Figure:
        lit = {cell} if cell is not None else set()
        step = _ok_step(chain, index)
        return _serialised(storage_figure(step, lit, cell, DARK if dark else LIGHT, dark))

    return ROOM_CACHE.get_or_compute(("storage_figure", chain, index, cell, dark), build)


# --------------------------------------------------------------------------- helpers


def error_text(error: dict) -> str:
    params = {k: v for k, v in error["params"].items()}
    params.setdefault("text", error["text"])
    return t(f"strides.errors.{error['code']}", **params)


def show_step_error(error: dict) -> None:
    st.error(error_text(error), icon=":material/block:")
    if error.get("torch_message"):
        st.caption(t("strides.errors.pytorch_said", message=error["torch_message"]))


def step_label(step: dict) -> str:
    return "x" if step["index"] == 0 else f"{step['name']} = …{step['op']}"


def kind_text(step: dict) -> str:
    if step["index"] == 0:
        return t("strides.kind.start", storage=step["storage_id"], nbytes=step["storage_nbytes"])
    if step["returned_input"]:
        return t("strides.kind.same", storage=step["storage_id"])
    if step["is_view"]:
        return t("strides.kind.view", storage=step["storage_id"])
    return t("strides.kind.copy", storage=step["storage_id"], nbytes=step["storage_nbytes"])


def tuple_text(values: Any) -> str:
    values = list(values)
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


def facts_markdown(step: dict) -> str:
    yes, no = t("strides.facts.yes"), t("strides.facts.no")
    rows = [
        (t("strides.facts.size"), f"`{tuple_text(step['size'])}`"),
        (t("strides.facts.stride"), f"`{tuple_text(step['stride'])}`"),
        (t("strides.facts.stride_bytes"), f"`{tuple_text(step['stride_bytes'])}`"),
        (t("strides.facts.offset"), f"`{step['storage_offset']}`"),
        (t("strides.facts.dtype"), f"`{step['dtype']}` · {step['element_size']} B"),
        (t("strides.facts.contiguous"), yes if step["is_contiguous"] else no),
    ]
    if step["is_channels_last"] is not None:
        rows.append((t("strides.facts.channels_last"), yes if step["is_channels_last"] else no))
    first, end = step["byte_range"]
    rows.append((t("strides.facts.storage"), kind_text(step)))
    rows.append(
        (t("strides.facts.bytes"), t("strides.facts.bytes_value", first=first, end=end - 1))
    )
    header = f"| {t('strides.facts.what')} | {t('strides.facts.value')} |\n|---|---|\n"
    return header + "\n".join(f"| {name} | {value} |" for name, value in rows)


def heading_markdown(title: str, caption: str, lead: str = "") -> str:
    """A subheader, an optional bold lead line and a caption as one markdown element: every
    element costs 0.15-0.2 ms of Streamlit bookkeeping on each rerun (measured in the app
    shell), and this room reruns on every click."""
    lead_line = f"**{lead}**  \n" if lead else ""
    return f"### {title}\n\n{lead_line}:gray[:small[{caption}]]"


def formula_text(step: dict, element: tuple[int, ...], cell: int) -> str:
    terms = " + ".join(f"{i}·{s}" for i, s in zip(element, step["stride"], strict=True))
    sum_text = f"{step['storage_offset']} + {terms}" if terms else f"{step['storage_offset']}"
    return t(
        "strides.explore.reads",
        element=f"{step['name']}{format_index(element)}" if element else step["name"],
        formula=sum_text,
        cell=cell,
    )


# --------------------------------------------------------------------------- explorer fragment


def _chart_clicked(chart_key: str, kind: str, step_index: int) -> None:
    event = st.session_state.get(chart_key) or {}
    points = (event.get("selection") or {}).get("points") or []
    if points:
        custom = points[0].get("customdata")
        # Every trace carries the element/cell id as customdata; lit cells are drawn twice.
        if isinstance(custom, list):
            custom = custom[0] if custom else None
        value = custom if isinstance(custom, int | float) else points[0]["point_index"]
        st.session_state[SELECTION_KEY] = (step_index, kind, int(value))


def _typed_element(step: dict) -> None:
    text = str(st.session_state.get("strides_typed_element", ""))
    try:
        index = parse_index(text, step["size"])
    except OpParseError as problem:
        st.session_state["strides_typed_problem"] = (problem.code, problem.params)
        return
    st.session_state.pop("strides_typed_problem", None)
    st.session_state[SELECTION_KEY] = (step["index"], "element", ravel(index, step["size"]))


def _typed_cell(step: dict) -> None:
    cell = st.session_state.get("strides_typed_cell")
    if cell is not None:
        st.session_state[SELECTION_KEY] = (step["index"], "cell", int(cell))


def _resolve_selection(
    chain: Chain, step: dict, steps: list[dict]
) -> tuple[int | None, int | None]:
    """(focused element, lit cell) on ``step``; a selection made on another step carries over
    through the storage cell when both steps share a storage."""
    selection = st.session_state.get(SELECTION_KEY)
    if not selection:
        return None, None
    origin_index, kind, value = selection
    origin = next((s for s in steps if s["index"] == origin_index and s["error"] is None), None)
    if origin is None:
        return None, None
    if kind == "element":
        if not 0 <= value < origin["numel"]:
            return None, None
        # offset + Σ index·stride: exact at any size, with no per-element list
        index = unravel(value, origin["size"])
        cell = origin["storage_offset"] + sum(
            i * s for i, s in zip(index, origin["stride"], strict=True)
        )
        element = value if origin_index == step["index"] else None
    else:
        cell, element = value, None
    if origin["storage_id"] != step["storage_id"] or origin["dtype"] != step["dtype"]:
        return None, None
    if step["storage_cells"] is not None and cell >= step["storage_cells"]:
        return None, None
    return element, cell


@st.fragment
def explorer(chain: Chain, steps: list[dict], shown: int) -> None:
    step = steps[shown]
    dark = is_dark()
    drawable = (
        step["storage_indices"] is not None
        and step["storage_values"] is not None
        and step["numel"] <= MAX_DRAWN
        and step["storage_cells"] <= MAX_DRAWN
    )
    focus_element, cell = _resolve_selection(chain, step, steps)
    lit_elements: set[int] = set()
    if drawable and cell is not None:
        lit_elements = set(np.flatnonzero(flat_indices(chain, step["index"]) == cell).tolist())

    left, right = st.columns([1, 1], gap="medium")
    with left:
        storage_caption = t(
            "strides.storage.caption",
            storage=step["storage_id"],
            cells=step["storage_cells"],
            nbytes=step["storage_nbytes"],
            dtype=step["dtype"],
        )
        st.markdown(heading_markdown(t("strides.storage.title"), storage_caption, kind_text(step)))
        if drawable:
            st.plotly_chart(
                cached_storage_figure(chain, step["index"], cell, dark),
                key=STORAGE_CHART,
                on_select=lambda: _chart_clicked(STORAGE_CHART, "cell", step["index"]),
                selection_mode="points",
                theme="streamlit",
                width="stretch",
                config={"displayModeBar": False},
            )
    with right:
        tensor_caption = t(
            "strides.tensor.caption", name=step["name"], size=tuple_text(step["size"])
        )
        st.markdown(heading_markdown(t("strides.tensor.title"), tensor_caption))
        if drawable:
            st.plotly_chart(
                cached_tensor_figure(
                    chain, step["index"], frozenset(lit_elements), focus_element, dark
                ),
                key=TENSOR_CHART,
                on_select=lambda: _chart_clicked(TENSOR_CHART, "element", step["index"]),
                selection_mode="points",
                theme="streamlit",
                width="stretch",
                config={"displayModeBar": False},
            )
            if len(step["size"]) >= 3:
                st.caption(t("strides.tensor.small_multiples"))
    if not drawable:
        st.info(
            t("strides.explore.summarised", numel=f"{step['numel']:,}", limit=f"{MAX_DRAWN:,}"),
            icon=":material/compress:",
        )

    if cell is not None and drawable:
        readers = sorted(lit_elements)
        size = step["size"]
        value = format_value(step["storage_values"][cell])
        if readers:
            shown_readers = ", ".join(
                f"{step['name']}{format_index(unravel(i, size))}" for i in readers[:12]
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
            st.success(formula_text(step, unravel(focus_element, size), cell) + "\n\n" + about_cell)
        else:
            st.markdown(about_cell)
    elif drawable:
        st.caption(t("strides.explore.hint"))

    typing = st.expander(
        t("strides.explore.type_title"),
        icon=":material/keyboard:",
        key="strides_typing",
        on_change="rerun",
    )
    if not typing.open:
        return
    with typing:
        typed_left, typed_right = st.columns(2)
        typed_left.text_input(
            t("strides.explore.type_element", example=tuple_text([0] * len(step["size"]))),
            key="strides_typed_element",
            max_chars=MAX_INDEX_TEXT,
            on_change=_typed_element,
            args=(step,),
        )
        problem = st.session_state.get("strides_typed_problem")
        if problem:
            code, params = problem
            if code == "not_an_index":
                message = t(
                    "strides.explore.type_problem",
                    text=params["text"],
                    size=tuple_text(step["size"]),
                )
            else:
                message = t(f"strides.errors.{code}", **params)
            typed_left.caption(message)
        typed_right.number_input(
            t("strides.explore.type_cell", last=max(step["storage_cells"] - 1, 0)),
            min_value=0,
            max_value=max(step["storage_cells"] - 1, 0),
            value=None,
            step=1,
            key="strides_typed_cell",
            on_change=_typed_cell,
            args=(step,),
        )
        if st.button(t("strides.explore.clear"), key="strides_clear"):
            st.session_state.pop(SELECTION_KEY, None)
            st.rerun(scope="fragment")


# --------------------------------------------------------------------------- panels


def history_panel(chain: tuple[tuple[int, ...], str, tuple[str, ...]], shown: int) -> None:
    labels = {
        "start": t("strides.kind.start"),
        "same": t("strides.kind.same"),
        "view": t("strides.kind.view"),
        "copy": t("strides.kind.copy"),
        "op": t("strides.history.op"),
        "size": t("strides.facts.size"),
        "stride": t("strides.facts.stride"),
        "offset": t("strides.facts.offset"),
        "storage": t("strides.facts.storage"),
        "footprint": t("strides.history.footprint"),
    }
    labels["caption"] = t("strides.history.caption")
    labels["title"] = t("strides.history.title")
    st.html(cached_history(chain, tuple(sorted(labels.items())), shown, is_dark()))


def write_panel(shape: tuple[int, ...], dtype: str, ops: tuple[str, ...], steps: list) -> None:
    st.caption(t("strides.write.caption"))
    ok_steps = [s for s in steps if s["error"] is None]
    with st.form("strides_write_form", border=False):
        left, right = st.columns([1, 1])
        target = left.selectbox(
            t("strides.write.step"),
            options=[s["index"] for s in ok_steps],
            index=len(ok_steps) - 1,
            format_func=lambda i: step_label(ok_steps[i]),
            key="strides_write_step",
        )
        write = right.text_input(
            t("strides.write.write"),
            value="fill_(-1)",
            key="strides_write_text",
            max_chars=MAX_OP_TEXT,
            help=t("strides.write.help"),
        )
        submitted = st.form_submit_button(t("strides.write.apply"), icon=":material/edit:")
    if not submitted and "strides_write_result" not in st.session_state:
        return
    if submitted:
        st.session_state["strides_write_result"] = (shape, dtype, ops, int(target), write)
    key = st.session_state["strides_write_result"]
    if key[:3] != (shape, dtype, ops):
        return
    try:
        result = cached_write(*key)
    except IndexError:
        return
    if result.error is not None:
        show_step_error(result.error.to_dict())
        return
    st.code(result.code, language="python")
    changed = set(result.changed_steps)
    target_index = key[3]
    rows = []
    for step in ok_steps:
        index = step["index"]
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
        rows.append(
            f"| `{step['name']}` | {step['storage_id']} | {status} | {count} | `{preview}` |"
        )
    header = (
        f"| {t('strides.write.col_step')} | {t('strides.facts.storage')} | "
        f"{t('strides.write.col_status')} | {t('strides.write.col_count')} | "
        f"{t('strides.write.col_values')} |\n|---|---|---|---|---|\n"
    )
    st.markdown(header + "\n".join(rows))
    others = sorted(changed - {target_index})
    st.info(
        t("strides.write.summary", steps=", ".join(steps[i]["name"] for i in others))
        if others
        else t("strides.write.summary_none"),
        icon=":material/share:",
    )


def _preview(values: Any) -> str:
    flat = flatten(values)
    text = ", ".join(format_value(v) for v in flat[:12])
    return text + (" …" if len(flat) > 12 else "")


def byte_lens_panel(step: dict) -> None:
    st.caption(t("strides.bytes.caption"))
    rows = []
    for name, dtype in DTYPES.items():
        size = dtype.itemsize
        rows.append(
            f"| `torch.{name}` | {size} | `{tuple_text(s * size for s in step['stride'])}` | "
            f"{step['numel'] * size:,} |"
        )
    st.markdown(
        f"| {t('strides.bytes.dtype')} | {t('strides.bytes.element_size')} | "
        f"{t('strides.bytes.stride_bytes')} | {t('strides.bytes.total')} |\n|---|---|---|---|\n"
        + "\n".join(rows)
    )
    st.markdown(t("strides.bytes.reinterpret"))
    st.button(
        t("strides.bytes.try_example"),
        key="strides_bytes_example",
        on_click=_load_named_example,
        args=("view_dtype",),
    )


def _load_named_example(key: str) -> None:
    st.session_state["strides_example"] = key
    load_example()


@st.fragment
def quiz_panel() -> None:
    st.caption(t("strides.quiz.caption"))
    seed = int(st.session_state[SEED_KEY])
    try:
        question: Question = cached_question(seed)
    except RuntimeError:
        st.session_state[SEED_KEY] = seed + 1
        st.rerun(scope="fragment")
        return
    code_lines = [f"x = torch.arange(...).reshape{tuple_text(question.shape)}"]
    name = "x"
    for number, op in enumerate(question.ops, start=1):
        code_lines.append(f"y{number} = {name}{op}")
        name = f"y{number}"
    st.code("\n".join(code_lines), language="python")
    prompt_params = {"name": name, "op": question.ops[-1]}
    if question.element is not None:
        prompt_params["element"] = f"{name}{format_index(question.element)}"
    st.markdown(t(f"strides.quiz.kinds.{question.kind}", **prompt_params))
    answer_key = f"strides_quiz_answer_{seed}"
    if question.kind in ("view_or_copy", "view_works"):
        options = ["view", "copy"] if question.kind == "view_or_copy" else ["yes", "no"]
        answer = st.radio(
            t("strides.quiz.answer"),
            options,
            index=None,
            format_func=lambda o: t(f"strides.quiz.choices.{o}"),
            horizontal=True,
            key=answer_key,
        )
    else:
        answer = st.text_input(
            t("strides.quiz.answer"),
            key=answer_key,
            max_chars=MAX_ANSWER_TEXT,
            placeholder=t(f"strides.quiz.placeholder.{question.kind}"),
        )
    check, next_question = st.columns([1, 1])
    checked = check.button(
        t("strides.quiz.check"), key=f"strides_quiz_check_{seed}", type="primary"
    )
    if next_question.button(t("strides.quiz.next"), key=f"strides_quiz_next_{seed}"):
        st.session_state[SEED_KEY] = seed + 1
        st.rerun()
    if checked:
        if not answer:
            st.warning(t("strides.quiz.no_answer"))
            return
        try:
            result = grade(question, str(answer))
        except OpParseError as problem:  # answer_too_long
            st.warning(t(f"strides.errors.{problem.code}", **problem.params))
            return
        expected = result.expected
        if question.kind in ("view_or_copy", "view_works"):
            expected = t(f"strides.quiz.choices.{expected}")
        if result.correct:
            st.success(t("strides.quiz.right", expected=expected), icon=":material/check:")
        else:
            st.error(t("strides.quiz.wrong", expected=expected), icon=":material/close:")
        last = result.steps[-1]
        if last.error is not None:
            st.caption(t("strides.errors.pytorch_said", message=last.error.torch_message or ""))
        else:
            view_or_copy = "view" if last.is_view else "copy"
            st.caption(
                t(
                    "strides.quiz.torch_says",
                    size=tuple_text(last.size or ()),
                    stride=tuple_text(last.stride or ()),
                    offset=last.storage_offset,
                    kind=t(f"strides.quiz.choices.{view_or_copy}"),
                )
            )
