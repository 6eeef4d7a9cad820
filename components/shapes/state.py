"""The shape explorer's state: session keys, the URL, and the cached engine calls.

Every session key starts with ``shapes_``; the link (``m_*``: the editor's code, the preset,
the model, shapes and dtypes boxes, the formulas toggle) is declared in
``torchatlas/shapes/link.py`` and read and written by the kit (:data:`LINK`): read once, when
a session first opens the room, and written after each analysis.

The analysis runs in the sandbox's worker (``torchatlas.shapes.explore``); its report is kept
as an :class:`Analysis` (the source it is about and the frozen report) until the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from components.i18n import t
from components.kit.room_state import SESSION, RoomState
from components.shapes import draw
from components.upkeep import warm_up
from torchatlas import links
from torchatlas.clients import Visitor
from torchatlas.links import encode_source as encode_source
from torchatlas.presets import DEFAULT_PRESET, PRESETS
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS
from torchatlas.shapes import (
    AnalysisError,
    ErrorKind,
    ShapeReport,
    WhyMetaReport,
    explore,
    parse_shapes,
    transient,
    validate_inputs,
    why_meta,
)
from torchatlas.shapes import link as shapes_link
from torchatlas.shapes.analysis import (
    MAX_DTYPES_CHARS as MAX_DTYPES_CHARS,
)
from torchatlas.shapes.analysis import (
    MAX_MODEL_CHARS as MAX_MODEL_CHARS,
)
from torchatlas.shapes.analysis import (
    MAX_SHAPES_CHARS as MAX_SHAPES_CHARS,
)
from torchatlas.shapes.analysis import (
    check_length,
    parse_constructor,
    parse_dtypes,
)

# ---------------------------------------------------------------- keys
# The room's link (torchatlas/shapes/link.py) names the session keys it fills; the rest are
# the page's own. One cache: reports (shared by every visitor) and listings.
REPORT_CACHE_BYTES = 64 << 20
LISTING_CACHE_BYTES = 16 * 2**20
ROOM = RoomState(
    shapes_link.LINK,
    cache_bytes=REPORT_CACHE_BYTES + LISTING_CACHE_BYTES,
    link_values=lambda: link_values(),  # defined below
)
LINK = ROOM.link
SOURCE, MODEL, SHAPES, DTYPES, SYMBOLIC = (
    LINK.key("m_src"), LINK.key("m_model"), LINK.key("m_shapes"), LINK.key("m_dtypes"),
    LINK.key("m_sym"),
)  # fmt: skip
PRESET_KEY = LINK.key("m_preset")  # the chosen preset's key; PRESET holds its translated label
PRESET = "shapes_preset"
RESULT, WHY = "shapes_result", "shapes_why"
FORM = "shapes_form"  # the editor's form
DEPTH, FLOW_DEPTH = "shapes_depth", "shapes_flow_depth"  # the table's and the flow's sliders
MAX_URL_SOURCE_CHARS = shapes_link.MAX_LINK_SOURCE_CHARS
ANALYSE_TIMEOUT_S = 10
WHY_TIMEOUT_S = 30


@dataclass(frozen=True)
class Analysis:
    """The last analysis: the source it read (the listing marks errors only while the editor
    still holds that source) and its report."""

    source: str
    report: ShapeReport


# ---------------------------------------------------------------- shared link
def decode_source(
    token: str,
    max_chars: int = MAX_SOURCE_CHARS,
    max_token_chars: int | None = MAX_URL_SOURCE_CHARS,
) -> str | None:
    """The source a shared link carries (:func:`torchatlas.links.decode_source` within this
    room's bounds), or None if the link is damaged or carries more than the page writes."""
    return links.decode_source(token, max_chars, max_token_chars)


# ---------------------------------------------------------------- presets and the URL
def preset_labels() -> dict[str, str]:
    """Translated label → preset key, in the presets' order."""
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
    """The preset selectbox's callback: load the chosen preset into the editor and boxes."""
    load_preset(preset_labels().get(st.session_state[PRESET], DEFAULT_PRESET))


# The boxes a preset fills, with the link field that carries each (None there: the preset's).
_PRESET_BOXES = (("m_src", "source"), ("m_model", "model"), ("m_shapes", "shapes"),
                 ("m_dtypes", "dtypes"))  # fmt: skip


def start() -> None:
    """Every run, before the widgets. On a session's first run the link's values (the kit
    reads it; a part it cannot use keeps its default and is named in :func:`notice`), then
    the chosen preset's own code and boxes where the link leaves them out."""
    if LINK.start() is None:
        return
    state = st.session_state
    preset = PRESETS[state[PRESET_KEY]]
    LINK.fill_unset({name: getattr(preset, attribute) for name, attribute in _PRESET_BOXES})
    state[PRESET] = t(f"shapes.presets.{preset.key}")


notice = ROOM.notice


def link_values() -> dict[str, Any]:
    """The room's link fields now: the code and boxes the preset has anyway are left to the
    preset (None). A source whose token is longer than the page writes is left out (the
    link names the preset)."""
    values = LINK.values()
    preset = PRESETS[values["m_preset"]]
    for name, attribute in _PRESET_BOXES:
        if values[name] == getattr(preset, attribute):
            values[name] = None
    return values


write_link = ROOM.write_link
sandbox_health = ROOM.sandbox_health


# ---------------------------------------------------------------- analysis
def needs_analysis() -> bool:
    """A fresh session (or a new preset) is analysed on arrival."""
    return RESULT not in st.session_state


# Reports shared by every visitor of this server, keyed by everything that decides them: a
# class analysing the same preset at once runs one job, and later presses are answered at
# once. A failure of the moment (a full line, a crash) is shared with whoever asked at the
# same time but not kept: the next press may succeed.
REPORTS = ROOM.part("reports")


def shared_report(
    source: str,
    shapes_text: str,
    dtypes_text: str,
    model_text: str,
    symbolic: bool,
    *,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> ShapeReport:
    """The report for what the boxes hold, from :data:`REPORTS` or one sandbox job. Every box
    is checked here, before a worker is asked: each parser refuses over-long text at once
    (the boxes' ``max_chars`` does not bind shared links or scripts)."""
    model = model_text.strip()
    try:
        check_length(source, MAX_SOURCE_CHARS, ErrorKind.SOURCE_TOO_LONG)
        shapes, dtypes = validate_inputs(parse_shapes(shapes_text), parse_dtypes(dtypes_text))
        if model:
            parse_constructor(model)
    except AnalysisError as exc:
        return ShapeReport(error=exc.error)
    key = (source, tuple(map(tuple, shapes)), tuple(dtypes), model or None, bool(symbolic))
    return ROOM.job(
        key,
        lambda who: explore(
            source,
            shapes,
            input_dtypes=dtypes,
            model=model or None,
            symbolic=bool(symbolic),
            timeout_s=ANALYSE_TIMEOUT_S,
            visitor=who,
            on_queued=on_queued,
        ),
        keep=lambda report: not transient(report.error),
        cache=REPORTS,
        who=visitor,
    )


@warm_up("shapes")
def warm_default_analysis() -> ShapeReport:
    """At server start: the default preset's analysis, as a visitor's first run asks for it
    (the same boxes, so the same key): that first analysis is then answered at once."""
    preset = PRESETS[DEFAULT_PRESET]
    return shared_report(preset.source, preset.shapes, preset.dtypes, preset.model, False)


def analyse(on_queued: Callable[[int], None] | None = None) -> Analysis:
    """Analyse what the boxes hold (:func:`shared_report`), keep it in the session, and put
    it in the URL. ``on_queued(position)`` hears the analysis's place in the sandbox's line
    while it waits."""
    source = st.session_state[SOURCE]
    report = shared_report(
        source,
        st.session_state[SHAPES],
        st.session_state[DTYPES],
        st.session_state[MODEL],
        st.session_state[SYMBOLIC],
        visitor=SESSION,  # this session's place in the sandbox's line
        on_queued=on_queued,
    )
    analysis = Analysis(source, report)
    st.session_state[RESULT] = analysis
    st.session_state.pop(WHY, None)
    write_link()  # the analysed boxes (the editor's source is the one analysed)
    return analysis


def last_analysis() -> Analysis:
    return st.session_state[RESULT]


def current_source() -> str:
    return st.session_state[SOURCE]


def compare_real_and_meta(
    analysis: Analysis, on_queued: Callable[[int], None] | None = None
) -> WhyMetaReport:
    """Time the analysed model on real and meta inputs (in the sandbox) and keep the result."""
    report = analysis.report
    outcome = ROOM.job(
        None,  # a timing: asked again, measured again
        lambda who: why_meta(
            analysis.source,
            report.input_shapes,
            input_dtypes=report.input_dtypes,
            model=report.model or None,
            timeout_s=WHY_TIMEOUT_S,
            visitor=who,
            on_queued=on_queued,
        ),
    )
    st.session_state[WHY] = outcome
    return outcome


def last_comparison() -> WhyMetaReport | None:
    return st.session_state.get(WHY)


# ---------------------------------------------------------------- listing
# The coloured lines of a source, per source and theme: lexing a long source is the costly
# part of the listing, and every rerun shows it. Entries weigh what their source does.
_LISTINGS = ROOM.part("listings")


def code_lines(source: str, dark: bool) -> tuple[str, ...]:
    """The coloured HTML lines of ``source`` (:func:`draw.code_lines_html`), kept in a
    byte-bounded cache."""
    return _LISTINGS.get_or_compute(
        (source, dark), lambda: tuple(draw.code_lines_html(source, dark))
    )
