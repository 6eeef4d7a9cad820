"""The basics room's state: its session keys, its URL, and its cached engine calls.

Every session key starts with ``basics_``; every URL key with ``b_`` (``b_sec`` the section,
then one per input, listed in :data:`FIELDS`). A shared link's values are read on a session's
first run; the URL follows the inputs on every run, holding only what differs from the
defaults, and never touches other keys (``lang``, other rooms').

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
from dataclasses import dataclass
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
    save_markdown,
    size_bars,
)
from components.basics.draw import (
    promotion_notes as promotion_notes_text,
)
from components.contained import session_id
from components.sandbox import sandbox_pool
from components.strides.state import URL_DTYPE as STRIDES_DTYPE
from components.strides.state import URL_OPS as STRIDES_OPS
from components.strides.state import URL_SHAPE as STRIDES_SHAPE
from components.theme import Palette
from components.widgets import keep_values as keep_widget_values
from torchatlas.basics import (
    DEFAULT_VALUES,
    DTYPES,
    SAVE_DTYPES,
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
from torchatlas.basics.limits import MAX_EINSUM_TEXT, MAX_REAL_ELEMENTS, MAX_SAVE_ELEMENTS
from torchatlas.basics.quiz import Grade, Question, Section, grade, make_question
from torchatlas.basics.shapes import check_footprint
from torchatlas.cache import BoundedCache
from torchatlas.sandboxed import JobFailure, RoomJob, run_room_job
from torchatlas.strides.limits import MAX_ELEMENTS as STRIDES_MAX_ELEMENTS

SECTIONS = tuple(Section)
STRIDES_PAGE = "views/strides.py"


@dataclass(frozen=True)
class Field:
    key: str  # session key
    url: str  # URL key
    default: str
    choices: tuple[str, ...] = ()  # a closed set (a link's other values fall back)
    max_chars: int = 200


FIELDS: dict[str, Field] = {
    field.key: field
    for field in (
        Field("basics_section", "b_sec", Section.TYPES.value, tuple(s.value for s in Section)),
        Field("basics_left", "b_l", "int8", tuple(DTYPES)),
        Field("basics_left_value", "b_lv", "100", max_chars=40),
        Field("basics_right_kind", "b_rk", OperandKind.SCALAR.value, tuple(OperandKind)),
        Field("basics_right", "b_r", "int", (*DTYPES, *SCALAR_TYPES)),
        Field("basics_right_value", "b_rv", "1000", max_chars=40),
        Field("basics_op", "b_op", Op.ADD.value, tuple(Op)),
        Field("basics_shapes", "b_shapes", "(2, 3, 5, 5) (3, 1, 1)"),
        Field("basics_equation", "b_eq", "...chw,c->...hw", max_chars=80),
        Field("basics_einsum_shapes", "b_es", "(2, 3, 5, 5) (3,)"),
        Field("basics_index_shape", "b_ishape", "3, 4", max_chars=60),
        Field("basics_index", "b_ix", "x[1:, ::2]", max_chars=120),
        Field("basics_save_shape", "b_sshape", "1000, 4", max_chars=60),
        Field("basics_save_view", "b_sv", "x[:2]", max_chars=120),
        Field("basics_save_dtype", "b_sdt", "float32", SAVE_DTYPES),
    )
}
SECTION_KEY = "basics_section"
LINK_BROKEN_KEY = "basics_link_broken"


def _valid(field: Field, value: str) -> bool:
    if field.choices:
        return value in field.choices
    # Every number, shape, equation and index this room writes is ASCII: a link with "²" or
    # "①" (digits to str.isdigit, not to int) was not written by it
    return len(value) <= field.max_chars and value.isascii()


READY_KEY = "basics_ready"
WRITTEN_KEY = "basics_url_written"
# Each section's inputs: a section's run can change only these (and the section itself).
SECTION_FIELDS: dict[str, tuple[str, ...]] = {
    Section.TYPES: ("basics_left", "basics_left_value", "basics_right_kind", "basics_right",
                    "basics_right_value", "basics_op"),
    Section.BROADCASTING: ("basics_shapes",),
    Section.EINSUM: ("basics_equation", "basics_einsum_shapes"),
    Section.INDEXING: ("basics_index_shape", "basics_index"),
    Section.SAVING: ("basics_save_shape", "basics_save_view", "basics_save_dtype"),
}  # fmt: skip


def initial_state() -> None:
    """First run of a session: a shared link's values, else the defaults. Keys a test or an
    earlier run already set are kept; a link's value that this room would never write (too
    long, not one of the choices) is dropped and the reader told once. Later runs pay one
    session-state read here (each read takes locks and walks the widget state)."""
    if READY_KEY in st.session_state:
        return
    query = st.query_params
    for field in FIELDS.values():
        if field.key in st.session_state:
            continue
        value = field.default
        if field.url in query:
            shared = query.get(field.url, "")
            if _valid(field, shared):
                value = shared
            else:
                st.session_state[LINK_BROKEN_KEY] = True
        st.session_state[field.key] = value
    _fit_right_operand()
    st.session_state.setdefault(TABLE_KIND_KEY, OperandKind.TENSOR.value)
    st.session_state[READY_KEY] = True


TABLE_KIND_KEY = "basics_table_kind"
QUIZ_ANSWER_PREFIX = "basics_quiz_answer_"


def keep_values() -> None:
    """Re-own every input of every section (and the quiz predictions) for this run: a
    section's widgets are drawn only while it is shown, and Streamlit forgets the value of a
    widget a run does not draw. Call on every full run, before any widget is drawn."""
    keep_widget_values((*FIELDS, TABLE_KIND_KEY), prefixes=(QUIZ_ANSWER_PREFIX,))


def take_link_broken() -> bool:
    return bool(st.session_state.pop(LINK_BROKEN_KEY, False))


def write_url(shown: Section) -> None:
    """Only this room's keys, only those that differ from the defaults, and only the shown
    section's (no other section's inputs can change while it runs); the query string is
    touched only when they changed since the last write."""
    keys = (SECTION_KEY, *SECTION_FIELDS[shown])
    values = tuple(str(st.session_state.get(key, FIELDS[key].default)) for key in keys)
    written = st.session_state.get(WRITTEN_KEY)
    if written == (keys, values):
        return
    st.session_state[WRITTEN_KEY] = (keys, values)
    query = st.query_params
    for key, value in zip(keys, values, strict=True):
        field = FIELDS[key]
        if value == field.default or not _valid(field, value):
            if field.url in query:
                del query[field.url]
        elif query.get(field.url) != value:
            query[field.url] = value


def section() -> Section:
    value = st.session_state.get(SECTION_KEY) or Section.TYPES.value
    return Section(value if value in FIELDS[SECTION_KEY].choices else Section.TYPES.value)


def value(key: str) -> str:
    return str(st.session_state.get(key, FIELDS[key].default))


def set_values(**values: str) -> None:
    """An example button's callback: its inputs replace the boxes'."""
    for key, text in values.items():
        st.session_state[f"basics_{key}"] = text


# --------------------------------------------------------------------------- types


def right_choices(kind: str) -> tuple[str, ...]:
    return tuple(SCALAR_TYPES) if kind == OperandKind.SCALAR else tuple(DTYPES)


def _fit_right_operand() -> None:
    """A Python scalar has no torch dtype, a tensor no Python type: keep the pair valid."""
    kind = value("basics_right_kind")
    if value("basics_right") not in right_choices(kind):
        st.session_state["basics_right"] = "int" if kind == OperandKind.SCALAR else "int64"


def dtype_changed(side: str) -> None:
    """A dtype or kind was picked: its operand's value becomes that dtype's example value."""
    if side == "right":
        _fit_right_operand()
    dtype = value(f"basics_{side}")
    st.session_state[f"basics_{side}_value"] = _value_text(DEFAULT_VALUES[dtype])


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
        "left": value("basics_left"),
        "left_value": value("basics_left_value").strip(),
        "right_kind": value("basics_right_kind"),
        "right": value("basics_right"),
        "right_value": value("basics_right_value").strip(),
        "op": value("basics_op"),
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
    return ROOM_CACHE.get_or_compute(key, lambda: promotion_notes_text(found, lang))


def table() -> PromotionTable:
    return promotion_table()


def table_view(kind: str, lang: str, colours: Palette) -> str:
    """One block of the promotion table as HTML: built once per block, language and theme."""
    return ROOM_CACHE.get_or_compute(
        ("table_view", kind, lang, colours),
        lambda: promotion_html(promotion_frame(promotion_table(), kind, lang), colours),
    )


def created() -> Creation:
    return ROOM_CACHE.get_or_compute(("creation",), creation)


def creation_text(lang: str) -> str:
    """The creation panel as one Markdown text, built once per language."""
    return ROOM_CACHE.get_or_compute(
        ("creation_text", lang), lambda: creation_markdown(created(), lang)
    )


# --------------------------------------------------------------------------- broadcasting


def current_broadcast() -> Broadcast:
    shapes = parse_shapes(value("basics_shapes"))
    return run(jobs.BROADCAST, {"shapes": [list(shape) for shape in shapes]})


def aligned_picture(found: Broadcast, lang: str, colours: Palette) -> str:
    return ROOM_CACHE.get_or_compute(
        ("aligned", found.shapes, lang, colours), lambda: aligned_html(found, colours, lang)
    )


def expand_link(shape: tuple[int, ...], result: tuple[int, ...]) -> dict[str, Any] | None:
    """The strides room's URL state for ``torch.ones(shape).expand(result)``, when that room
    can show it (it starts from at least one dimension and holds a bounded tensor)."""
    if not shape or math.prod(result) > STRIDES_MAX_ELEMENTS:
        return None
    return {
        STRIDES_SHAPE: ",".join(map(str, shape)),
        STRIDES_DTYPE: "float32",
        STRIDES_OPS: [f".expand({', '.join(map(str, result))})"],
    }


# --------------------------------------------------------------------------- einsum


def current_einsum() -> EinsumPlan:
    equation = value("basics_equation")
    if len(equation) > MAX_EINSUM_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(equation), limit=MAX_EINSUM_TEXT)
    shapes = parse_shapes(value("basics_einsum_shapes"))
    return run(jobs.EINSUM, {"equation": equation, "shapes": [list(shape) for shape in shapes]})


def einsum_picture(plan: EinsumPlan, lang: str, colours: Palette) -> str:
    return ROOM_CACHE.get_or_compute(
        ("einsum_html", plan.equation, plan.shapes, lang, colours),
        lambda: einsum_html(plan, colours, lang),
    )


def einsum_text(plan: EinsumPlan, lang: str) -> str:
    key = ("einsum_text", plan.equation, plan.shapes, lang)
    return ROOM_CACHE.get_or_compute(key, lambda: einsum_markdown(plan, lang))


# --------------------------------------------------------------------------- indexing


def index_shape() -> tuple[int, ...]:
    shape = parse_shape(value("basics_index_shape"), max_elements=MAX_REAL_ELEMENTS)
    check_footprint(shape, MAX_REAL_ELEMENTS)
    return shape


def current_index() -> IndexResult:
    shape = index_shape()
    expression = value("basics_index")
    parse_index_expression(expression)  # the room's own refusals, before any job
    return run(jobs.INDEX, {"shape": list(shape), "expression": expression})


def index_pictures(result: IndexResult, colours: Palette) -> tuple[str | None, str | None]:
    """The source with the picked cells lit, and the result, both with their numbers (None
    where too many cells to draw)."""

    def build() -> tuple[str | None, str | None]:
        values = tuple(range(math.prod(result.shape)))
        source = cells_html(result.shape, values, colours, frozenset(result.picked))
        picked = cells_html(result.result_shape or (), result.values, colours, name="y")
        return source, picked

    key = ("index_html", result.shape, result.expression, colours)
    return ROOM_CACHE.get_or_compute(key, build)


def index_link(result: IndexResult) -> dict[str, Any] | None:
    """The strides room's URL state for this index on ``arange(numel).reshape(shape)``."""
    if result.strides_op is None or not result.shape or not result.ok:
        return None
    return {
        STRIDES_SHAPE: ",".join(map(str, result.shape)),
        STRIDES_DTYPE: "int64",
        STRIDES_OPS: [result.strides_op],
    }


# --------------------------------------------------------------------------- saving


def current_save() -> SaveReport:
    shape = parse_shape(value("basics_save_shape"), max_elements=MAX_SAVE_ELEMENTS)
    check_footprint(shape, MAX_SAVE_ELEMENTS)
    view = value("basics_save_view")
    parse_index_expression(view)
    dtype = value("basics_save_dtype")
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
    return ROOM_CACHE.get_or_compute(key, build)


def save_text(report: SaveReport, lang: str) -> str:
    key = ("save_text", report.shape, report.view_expression, report.dtype, lang)
    return ROOM_CACHE.get_or_compute(key, lambda: save_markdown(report, lang))


def save_link(report: SaveReport) -> dict[str, Any] | None:
    """The strides room's URL state for the saved view: its storage is x's whole storage."""
    if not report.view_is_view or math.prod(report.shape) > STRIDES_MAX_ELEMENTS:
        return None
    return {
        STRIDES_SHAPE: ",".join(map(str, report.shape)),
        STRIDES_DTYPE: report.dtype,
        STRIDES_OPS: [report.view_expression.removeprefix("x")],
    }


# --------------------------------------------------------------------------- quiz


def quiz_seed(section: Section) -> int:
    return int(st.session_state.setdefault(f"basics_quiz_seed_{section}", 1))


def next_question(section: Section) -> None:
    st.session_state[f"basics_quiz_seed_{section}"] = quiz_seed(section) + 1


def question(section: Section, seed: int) -> Question:
    return ROOM_CACHE.get_or_compute(
        ("question", section, seed), lambda: make_question(section, seed)
    )


NO_ANSWER = "no_answer"


def reveal(section: Section, seed: int, given: str | None) -> None:
    """The reveal button's callback: graded by torch before the page draws, so the score
    above the question is already up to date; each question counts once, however often it
    is revealed."""
    key = f"basics_quiz_revealed_{section}"
    if given is None:
        st.session_state[key] = (seed, NO_ANSWER)
        return
    result = grade(question(section, seed), given)
    st.session_state[key] = (seed, result)
    graded = st.session_state.setdefault("basics_graded", {})
    graded.setdefault((str(section), seed), result.correct)


def revealed(section: Section, seed: int) -> Grade | str | None:
    """This question's revealed grade (or NO_ANSWER), None before a reveal."""
    stored = st.session_state.get(f"basics_quiz_revealed_{section}")
    if stored is None or stored[0] != seed:
        return None
    return stored[1]


def score(section: Section) -> tuple[int, int]:
    """(right, answered) in this section, this session."""
    graded = st.session_state.get("basics_graded", {})
    marks = [right for (where, _), right in graded.items() if where == str(section)]
    return sum(marks), len(marks)


# --------------------------------------------------------------------------- the sandbox
CACHE_BYTES = 32 * 2**20
ROOM_CACHE: BoundedCache[tuple, Any] = BoundedCache(CACHE_BYTES)
# Each job is small (tens of milliseconds in a warm child); the deadline leaves a visitor an
# answer within a few seconds even when the job reaches it.
JOB_TIMEOUT_S = 2.0


class NoResult(Exception):
    """A sandbox job ended without a result: ``failure`` says why (the page shows
    :func:`components.contained.failure_card`)."""

    def __init__(self, failure: JobFailure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


def _job(job: str, params: dict[str, Any]) -> RoomJob[Any]:
    pool = sandbox_pool()
    if pool is None:
        return RoomJob(failure=JobFailure("unavailable"))
    return run_room_job(
        job,
        params,
        jobs.RETURNS[job],
        session_id=session_id(),
        timeout_s=JOB_TIMEOUT_S,
        limits=jobs.REPLY_LIMITS,
        pool=pool,
    )


def run(job: str, params: dict[str, Any]) -> Any:
    """``job`` on ``params`` in the sandbox, once per distinct input for the whole server
    (visitors asking at the same moment share the one run); its validated value. Raises the
    engine's coded refusal as :class:`BasicsValueError`, or :class:`NoResult`."""
    key = ("job", job, json.dumps(params, sort_keys=True))
    outcome: RoomJob[Any] = ROOM_CACHE.get_or_compute_once(
        key, lambda: _job(job, params), keep=lambda found: found.worth_keeping
    )
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
