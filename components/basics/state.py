"""The basics room's state: its link, its session keys, and its cached engine calls.

Every session key starts with ``basics_``; the link (``torchatlas/basics/link.py``: ``b_sec``
the section, then one field per input) is read on a session's first run through the kit
(:data:`LINK`); the URL follows the inputs on every run, holding only what differs from the
defaults, and never touches other keys (``lang``, other rooms'). Links into the strides room
go through :func:`torchatlas.rooms.link_into` (this room never imports another).

Every computation whose sizes, values or structure a visitor chooses (a promotion's operand
values, shapes, an einsum, an index, the saving demo) runs as a sandbox job
(:mod:`torchatlas.basics.jobs`) through :func:`torchatlas.sandboxed.run_room_job`: the server
only parses the text first (its refusals are the clear, translated ones) and renders the
validated reply. Outcomes live in :data:`ROOM_CACHE`, one process-wide cache bounded by bytes,
keyed by what visitors type or share; a class opening the same link runs one job, and a
transient failure (a full line, a crash) is not kept. The promotion table and the creation
panel take no visitor input and stay in the server (built once per process).

Streamlit forgets the value of a widget a run does not draw, and a section draws only its own
widgets: every full run re-owns the room's inputs (:func:`keep_values`), so a section's inputs
and result are as they were when a visitor comes back to it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import streamlit as st

from components.basics.draw import (
    aligned_html,
    cells_html,
    creation_markdown,
    einsum_html,
    einsum_markdown,
    promotion_frame,
    promotion_html,
    promotion_titles,
    save_markdown,
    shape_text,
    side_by_side_html,
    size_bars,
)
from components.basics.draw import (
    derivation_text as derivation_caption,
)
from components.basics.draw import (
    promotion_notes as promotion_notes_text,
)
from components.kit.room_state import RoomState
from components.theme import Palette
from components.widgets import keep_values as keep_widget_values
from torchatlas.basics import (
    DEFAULT_VALUES,
    DTYPES,
    SCALAR_TYPES,
    BasicsValueError,
    Broadcast,
    Creation,
    DTypeSpec,
    EinsumPlan,
    ErrorCode,
    IndexResult,
    Op,
    OperandKind,
    Promotion,
    PromotionTable,
    SaveReport,
    creation,
    jobs,
    parse_index_expression,
    parse_shape,
    parse_shapes,
    parse_value,
    promotion_table,
)
from torchatlas.basics import link as basics_link
from torchatlas.basics.limits import MAX_EINSUM_TEXT, MAX_REAL_ELEMENTS, MAX_SAVE_ELEMENTS
from torchatlas.basics.quiz import Question, Section, grade, make_question
from torchatlas.basics.shapes import check_footprint
from torchatlas.clients import Visitor
from torchatlas.i18n import translate
from torchatlas.links import QueryValue
from torchatlas.quiz import Grade
from torchatlas.rooms import link_into, link_of
from torchatlas.sandboxed import JobFailure, RoomJob, run_room_job
from torchatlas.shown_tensors import MAX_SHOWN_ELEMENTS

SECTIONS = tuple(Section)

# One cache for the room's job outcomes and its drawings, keyed by what visitors type or share.
CACHE_BYTES = 32 * 2**20
ROOM = RoomState(basics_link.LINK, cache_bytes=CACHE_BYTES)
LINK = ROOM.link
ROOM_CACHE = ROOM.cache
SECTION_KEY = LINK.key("b_sec")
LEFT_KEY, LEFT_VALUE_KEY, OP_KEY = LINK.key("b_l"), LINK.key("b_lv"), LINK.key("b_op")
RIGHT_KIND_KEY, RIGHT_KEY, RIGHT_VALUE_KEY = LINK.key("b_rk"), LINK.key("b_r"), LINK.key("b_rv")
SHAPES_KEY = LINK.key("b_shapes")
EQUATION_KEY, EINSUM_SHAPES_KEY = LINK.key("b_eq"), LINK.key("b_es")
INDEX_SHAPE_KEY, INDEX_KEY = LINK.key("b_ishape"), LINK.key("b_ix")
SAVE_SHAPE_KEY, SAVE_VIEW_KEY = LINK.key("b_sshape"), LINK.key("b_sv")
SAVE_DTYPE_KEY = LINK.key("b_sdt")
# widgets that are not in the link
TABLE_KIND_KEY = "basics_table_kind"
BROADCAST_EXAMPLE_PREFIX = "basics_broadcast_example_"
APPLY_FIX_KEY = "basics_apply_fix"
EINSUM_EXAMPLE_KEY = "basics_einsum_example"
INDEX_EXAMPLE_KEY = "basics_index_example"
QUIZ_NEXT_PREFIX = "basics_quiz_next_"
QUIZ_PREFIX = "basics_q_"  # each question's prediction, under its section and seed
UNFOLD_KEY = "basics_unfold"  # a following student's "change the values yourself" button
_DEFAULTS: dict[str, str] = {LINK.key(item.name): item.default for item in LINK.spec.fields}
# Each section's inputs (session keys): a section's run can change only these.
SECTION_FIELDS: dict[str, tuple[str, ...]] = {
    section: tuple(LINK.key(name) for name in names)
    for section, names in basics_link.SECTION_FIELDS.items()
}


def start() -> None:
    """First run of a session: a shared link's values, else the defaults (keys a test or an
    earlier run already set are kept; a value the room would never write keeps its default
    and is named in the notice). Later runs do nothing."""
    if LINK.start() is not None:
        _fit_right_operand()
    st.session_state.setdefault(TABLE_KIND_KEY, OperandKind.TENSOR.value)


notice = ROOM.notice


def keep_values() -> None:
    """Re-own every input of every section (and the quiz predictions) for this run: a
    section's widgets are drawn only while it is shown, and Streamlit forgets the value of a
    widget a run does not draw. Call on every full run, before any widget is drawn."""
    keep_widget_values((*_DEFAULTS, TABLE_KIND_KEY), prefixes=(QUIZ_PREFIX,))


# The address bar in step with the inputs (only this room's names; each change is a browser
# history entry, so only real changes are written).
write_link = ROOM.write_link


def section() -> Section:
    value = st.session_state.get(SECTION_KEY) or Section.TYPES.value
    return Section(value if value in tuple(Section) else Section.TYPES.value)


def value(key: str) -> str:
    return str(st.session_state.get(key, _DEFAULTS[key]))


def set_values(values: dict[str, str]) -> None:
    """An example button's callback: its inputs (session key → text) replace the boxes'."""
    for key, text in values.items():
        st.session_state[key] = text


def load_example(picker: str, targets: dict[str, dict[str, str]]) -> None:
    """An examples picker's callback: the picked example's inputs replace the boxes', and the
    picker empties (the same example can be picked again)."""
    chosen = st.session_state.get(picker)
    if chosen in targets:
        set_values(targets[chosen])
    st.session_state[picker] = None


# --------------------------------------------------------------------------- types


def right_choices(kind: str) -> tuple[str, ...]:
    return tuple(SCALAR_TYPES) if kind == OperandKind.SCALAR else tuple(DTYPES)


def _fit_right_operand() -> None:
    """A Python scalar has no torch dtype, a tensor no Python type: keep the pair valid."""
    kind = value(RIGHT_KIND_KEY)
    if value(RIGHT_KEY) not in right_choices(kind):
        st.session_state[RIGHT_KEY] = "int" if kind == OperandKind.SCALAR else "int64"


def dtype_changed(side: str) -> None:
    """A dtype or kind was picked: its operand's value becomes that dtype's example value."""
    if side == "right":
        _fit_right_operand()
    dtype_key, value_key = (
        (LEFT_KEY, LEFT_VALUE_KEY) if side == "left" else (RIGHT_KEY, RIGHT_VALUE_KEY)
    )
    st.session_state[value_key] = _value_text(DEFAULT_VALUES[value(dtype_key)])


def _value_text(number: object) -> str:
    if isinstance(number, complex):
        return f"{number.real:g}{number.imag:+g}j" if number.real else f"{number.imag:g}j"
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e16:
        return f"{number:.1f}"
    return repr(number)


def current_promotion() -> Promotion:
    """The explorer's ``a ⊕ b``, computed in the sandbox. Raises BasicsError for a value the
    room or torch refuses, :class:`NoResult` when the job has no result."""
    params = {
        "left": value(LEFT_KEY),
        "left_value": value(LEFT_VALUE_KEY).strip(),
        "right_kind": value(RIGHT_KIND_KEY),
        "right": value(RIGHT_KEY),
        "right_value": value(RIGHT_VALUE_KEY).strip(),
        "op": value(OP_KEY),
    }
    # first wall, in the server: the text is read (no torch), the refusals are the room's own
    parse_value(params["left_value"])
    parse_value(params["right_value"])
    DTypeSpec(OperandKind(params["right_kind"]), params["right"], 0)
    DTypeSpec(OperandKind.TENSOR, params["left"], 0)
    Op(params["op"])
    return run(jobs.PROMOTE, params)


def promotion_notes(found: Promotion, lang: str) -> list[str]:
    """The exact digits and notes under the explorer (built once per result and language:
    an exact product of two tiny floats has thousands of digits)."""
    key = ("promotion_notes", found, lang)
    return ROOM.cached(key, lambda: promotion_notes_text(found, lang))


def derivation_text(found: Promotion, lang: str) -> str:
    """Where the result dtype comes from, read off torch's result (empty when torch named no
    dtype): a comparison with each operand's own dtype, for every operand kind."""
    derivation = found.derivation
    if derivation is None:
        return ""
    raised = found.op_dtype is None
    key = ("derivation_text", derivation, raised, lang)
    return ROOM.cached(key, lambda: derivation_caption(derivation, lang, raised=raised))


def table() -> PromotionTable:
    return promotion_table()


def table_view(kind: str, lang: str, colours: Palette) -> str:
    """One block of the promotion table as HTML: built once per block, language and theme."""
    return ROOM.cached(
        ("table_view", kind, lang, colours),
        lambda: promotion_html(
            promotion_frame(promotion_table(), kind, lang),
            colours,
            promotion_titles(promotion_table(), kind, lang),
            label=translate("basics.a11y.promotion_table", lang),
        ),
    )


def created() -> Creation:
    return ROOM.cached(("creation",), creation)


def creation_text(lang: str) -> str:
    """The creation panel as one Markdown text, built once per language."""
    return ROOM.cached(("creation_text", lang), lambda: creation_markdown(created(), lang))


# --------------------------------------------------------------------------- broadcasting


def current_broadcast() -> Broadcast:
    shapes = parse_shapes(value(SHAPES_KEY))
    return run(jobs.BROADCAST, {"shapes": [list(shape) for shape in shapes]})


def aligned_picture(found: Broadcast, lang: str, colours: Palette) -> str:
    return ROOM.cached(
        ("aligned", found.shapes, lang, colours), lambda: aligned_html(found, colours, lang)
    )


STRIDES = "strides"


def strides_page() -> str:
    """The strides room's page (what a link into it opens)."""
    return link_of(STRIDES).script


def _into_strides(shape: tuple[int, ...], dtype: str, op: str) -> dict[str, QueryValue]:
    """The strides room's link for ``op`` on a ``shape`` tensor of ``dtype`` (its own field
    names, from its declaration)."""
    return link_into(
        STRIDES, {"s_shape": ",".join(map(str, shape)), "s_dtype": dtype, "s_ops": (op,)}
    )


def expand_link(shape: tuple[int, ...], result: tuple[int, ...]) -> dict[str, QueryValue] | None:
    """The strides room's link for ``torch.ones(shape).expand(result)``, when that room can
    show it (it starts from at least one dimension and holds a tensor it can show)."""
    if not shape or math.prod(result) > MAX_SHOWN_ELEMENTS:
        return None
    return _into_strides(shape, "float32", f".expand({', '.join(map(str, result))})")


# --------------------------------------------------------------------------- einsum


def current_einsum() -> EinsumPlan:
    equation = value(EQUATION_KEY)
    if len(equation) > MAX_EINSUM_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(equation), limit=MAX_EINSUM_TEXT)
    shapes = parse_shapes(value(EINSUM_SHAPES_KEY))
    return run(jobs.EINSUM, {"equation": equation, "shapes": [list(shape) for shape in shapes]})


def einsum_picture(plan: EinsumPlan, lang: str, colours: Palette) -> str:
    return ROOM.cached(
        ("einsum_html", plan.equation, plan.shapes, lang, colours),
        lambda: einsum_html(plan, colours, lang),
    )


def einsum_text(plan: EinsumPlan, lang: str) -> str:
    key = ("einsum_text", plan.equation, plan.shapes, lang)
    return ROOM.cached(key, lambda: einsum_markdown(plan, lang))


# --------------------------------------------------------------------------- indexing


def index_shape() -> tuple[int, ...]:
    shape = parse_shape(value(INDEX_SHAPE_KEY), max_elements=MAX_REAL_ELEMENTS)
    check_footprint(shape, MAX_REAL_ELEMENTS)
    return shape


def current_index() -> IndexResult:
    shape = index_shape()
    expression = value(INDEX_KEY)
    parse_index_expression(expression)  # the room's own refusals, before any job
    return run(jobs.INDEX, {"shape": list(shape), "expression": expression})


def index_view(result: IndexResult, colours: Palette, lang: str) -> str:
    """The source (its picked cells lit) and the result side by side under their titles, both
    with their numbers, in one piece of HTML (a picture too large to draw says so)."""

    def build() -> str:
        values = tuple(range(math.prod(result.shape)))
        source = cells_html(result.shape, values, colours, frozenset(result.picked))
        picked = cells_html(result.result_shape or (), result.values, colours, name="y")
        source_title = translate("basics.index.source", lang, shape=shape_text(result.shape))
        result_shape = shape_text(result.result_shape or ())
        result_title = translate("basics.index.result", lang, shape=result_shape)
        return side_by_side_html(
            ((source_title, source), (result_title, picked)),
            translate("basics.index.too_big", lang),
        )

    return ROOM.cached(("index_view", result.shape, result.expression, colours, lang), build)


def index_link(result: IndexResult) -> dict[str, QueryValue] | None:
    """The strides room's link for this index on ``arange(numel).reshape(shape)``."""
    if result.strides_op is None or not result.shape or not result.ok:
        return None
    return _into_strides(result.shape, "int64", result.strides_op)


# --------------------------------------------------------------------------- saving


def current_save() -> SaveReport:
    shape = parse_shape(value(SAVE_SHAPE_KEY), max_elements=MAX_SAVE_ELEMENTS)
    check_footprint(shape, MAX_SAVE_ELEMENTS)
    view = value(SAVE_VIEW_KEY)
    parse_index_expression(view)
    dtype = value(SAVE_DTYPE_KEY)
    return run(jobs.SAVE, {"shape": list(shape), "view": view, "dtype": dtype})


def save_picture(report: SaveReport, labels: tuple[str, ...], colours: Palette) -> str:
    """The file sizes as bars: torch.save of x, of the view, of its clone, and HDF5's file and
    partial read (labels in that order, in the reader's language)."""

    def build() -> str:
        sizes = [report.saved_full, report.saved_view, report.saved_clone]
        if report.hdf5.error_code is None:
            sizes += [report.hdf5.file_bytes, report.hdf5.tail_bytes]
        items = dict(zip(labels, sizes, strict=False))
        return size_bars(items, colours, highlight=labels[1])

    key = ("save_bars", report.shape, report.view_expression, report.dtype, labels, colours)
    return ROOM.cached(key, build)


def save_text(report: SaveReport, lang: str) -> str:
    key = ("save_text", report.shape, report.view_expression, report.dtype, lang)
    return ROOM.cached(key, lambda: save_markdown(report, lang))


def save_link(report: SaveReport) -> dict[str, QueryValue] | None:
    """The strides room's link for the saved view: its storage is x's whole storage."""
    if not report.view_is_view or math.prod(report.shape) > MAX_SHOWN_ELEMENTS:
        return None
    return _into_strides(report.shape, report.dtype, report.view_expression.removeprefix("x"))


# --------------------------------------------------------------------------- quiz


def quiz_seed(section: Section) -> int:
    return int(st.session_state.setdefault(f"basics_quiz_seed_{section}", 1))


def next_question(section: Section) -> None:
    st.session_state[f"basics_quiz_seed_{section}"] = quiz_seed(section) + 1


def quiz_key(section: Section, seed: int) -> str:
    """The question's name in this session (its prediction and verdict live under it)."""
    return f"{QUIZ_PREFIX}{section}_{seed}"


def question(section: Section, seed: int) -> Question:
    return ROOM.cached(("question", section, seed), lambda: make_question(section, seed))


def grade_prediction(section: Section, seed: int, given: str, shown: tuple[str, ...]) -> Grade:
    """Grade the picked option (``given``, one of ``shown``: the question's choices as the
    page words them) by asking torch now; each question counts once in the score, however
    often its verdict is shown."""
    found = grade(question(section, seed), shown.index(given), shown)
    graded = st.session_state.setdefault("basics_graded", {})
    graded.setdefault((str(section), seed), found.correct)
    return found


def score(section: Section) -> tuple[int, int]:
    """(right, answered) in this section, this session."""
    graded = st.session_state.get("basics_graded", {})
    marks = [right for (where, _), right in graded.items() if where == str(section)]
    return sum(marks), len(marks)


# --------------------------------------------------------------------------- the sandbox
# Each job is small (tens of milliseconds in a warm child); the deadline leaves a visitor an
# answer within a few seconds even when the job reaches it.
JOB_TIMEOUT_S = 2.0


class NoResult(Exception):
    """A sandbox job ended without a result: ``failure`` says why (the page shows
    :func:`components.contained.failure_card`)."""

    def __init__(self, failure: JobFailure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


def _job(job: str, params: dict[str, Any], who: Visitor) -> RoomJob[Any]:
    # Without a sandbox, run_room_job's failure is "unavailable": the same card as before.
    return run_room_job(
        job,
        params,
        jobs.RETURNS[job],
        visitor=who,
        timeout_s=JOB_TIMEOUT_S,
        limits=jobs.REPLY_LIMITS,
    )


def run(job: str, params: dict[str, Any]) -> Any:
    """``job`` on ``params`` in the sandbox, once per distinct input for the whole server
    (visitors asking at the same moment share the one run); its validated value. Raises the
    engine's coded refusal as :class:`BasicsValueError`, or :class:`NoResult`."""
    key = ("job", job, json.dumps(params, sort_keys=True))
    outcome: RoomJob[Any] = ROOM.job(key, lambda who: _job(job, params, who))
    if outcome.refused is not None:
        refusal = _refusal(*outcome.refused)
        if refusal is None:
            raise NoResult(JobFailure("untrusted"))
        raise refusal
    if outcome.failure is not None:
        raise NoResult(outcome.failure)
    return outcome.value


def _refusal(code: str, params: dict[str, Any]) -> BasicsValueError | None:
    """The engine's refusal from the child, as the room's own error (None when the code is
    not one of the room's or its text cannot be filled: the reply is not trusted)."""
    try:
        return BasicsValueError(ErrorCode(code), **params)
    except Exception:  # an unknown code or missing parameters: an untrusted reply
        return None
