"""The nn.Module room's state: session keys, the URL, and the cached engine calls.

Every session key starts with ``modules_``; the link (``nn_*``: section, preset, pasted code,
model box, the training model, learning rate, steps, forgotten zero_grad, mode model, saved
model) is declared in ``torchatlas/modules/link.py`` and read and written by the kit
(:data:`LINK`): read once, when a session first opens the room, and written when a value
changes, only the room's own names.

Pasted code is inspected only in the sandbox (``torchatlas.modules.inspect_module``; its
reports are shared between visitors here, :data:`REPORTS`). The training run the controls
(or a link) choose runs in a sandbox job too (``train_contained``): its steps set the work
and its learning rate the values. The uninitialised-memory demo allocates in a sandbox
child. Modes, saving and the side-by-side table are fixed computations on a closed menu (no
size or value comes from the visitor) and run here, once each. Every result is cached per
distinct setting, shared by every visitor, so a rerun recomputes nothing and a class opening
one link runs one job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from components.i18n import t
from components.kit.room_state import SESSION, RoomState
from components.modules import draw
from components.widgets import keep_values as keep_widget_values
from torchatlas.cache import deep_size
from torchatlas.clients import Visitor
from torchatlas.modules import (
    DEFAULT_PRESET,
    PRESETS,
    InitReport,
    ModeReport,
    ModuleReport,
    SerializationReport,
    TrainingTrace,
    check_boxes,
    inspect_module,
    modes,
    save_load,
    train_contained,
    transient,
    uninitialised_memory,
)
from torchatlas.modules import MAX_MODEL_CHARS as MAX_MODEL_CHARS
from torchatlas.modules import link as modules_link
from torchatlas.modules.compare import ComparisonRow, side_by_side
from torchatlas.modules.quiz import OPTIONS, Answer, Question, answer
from torchatlas.quiz import Grade, grade_choice
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS as MAX_SOURCE_CHARS
from torchatlas.sandboxed import RoomJob

# ---------------------------------------------------------------- keys
# The room's link (torchatlas/modules/link.py) names the session keys it fills; the rest are
# the page's own. One cache for the room: reports, traces, fixed results, drawings, answers.
ROOM = RoomState(
    modules_link.LINK,
    cache_bytes=(32 + 32 + 32 + 8 + 4 + 1) << 20,
    link_values=lambda: link_values(),  # defined below
)
LINK = ROOM.link
SOURCE, MODEL, PRESET_KEY = LINK.key("nn_src"), LINK.key("nn_model"), LINK.key("nn_preset")
PRESET = "modules_preset"  # the preset picker's translated label
RESULT = "modules_result"
TRAIN_MODEL, LR, STEPS, FORGET = (
    LINK.key("nn_train"),
    LINK.key("nn_lr"),
    LINK.key("nn_steps"),
    LINK.key("nn_forget"),
)
STEP, PHASE = "modules_step", "modules_phase"
# The page's widgets and boxes (tests and the e2e select them as ``.st-key-<key>``).
FORM, INSPECT_BUTTON, ERROR_BOX = "modules_form", "modules_inspect", "modules_error"
SUMMARY_BOX, TENSOR_TABLE = "modules_summary", "modules_tensors"
TRAIN_FAILED_BOX, TRAIN_REFUSED_BOX = "modules_train_failed", "modules_train_refused"
NEXT_BUTTON, STEP_TABLE, LOSS_CHART = "modules_next", "modules_step_table", "modules_loss_chart"
SAVE_PANEL, DOWNLOAD_BUTTON = "modules_save_panel", "modules_download"
MEMORY_PANEL, MEMORY_AGAIN_BUTTON = "modules_memory_panel", "modules_memory_again"
QUESTION_BOX = "modules_question_"  # + the question's value
MODE, SAVE_MODEL, MEMORY = LINK.key("nn_mode"), LINK.key("nn_save"), "modules_memory"
QUIZ = "modules_quiz_"  # + the question's value: the kit's predict-then-reveal keys
SECTION = LINK.key("nn_section")
# One section at a time: the room has many tables and a chart, and a rerun draws only what is
# shown (each section's widgets rerun only their own fragment).
SECTIONS = modules_link.SECTIONS

# The CPU deadline of one inspection: the largest torchvision models take well under 1 s in
# the child (bench), and a visitor whose model never finishes building hears why within 3 s.
INSPECT_TIMEOUT_S = 2.5
LR_CHOICES, DEFAULT_LR = modules_link.LR_CHOICES, modules_link.DEFAULT_LR
STEP_CHOICES, DEFAULT_STEPS = modules_link.STEP_CHOICES, modules_link.DEFAULT_STEPS
PHASES = ("forward", "loss", "backward", "step", "zero_grad")


@dataclass(frozen=True)
class Inspection:
    """The last inspection: the source and model box it read, and its report."""

    source: str
    model: str
    report: ModuleReport


# ---------------------------------------------------------------- presets and the URL
def preset_labels() -> dict[str, str]:
    """Translated label → preset key, in the presets' order."""
    return {t(f"modules.presets.{key}"): key for key in PRESETS}


def load_preset(key: str) -> None:
    preset = PRESETS[key]
    st.session_state[PRESET_KEY] = key
    st.session_state[SOURCE] = preset.source
    st.session_state[MODEL] = preset.model
    st.session_state.pop(RESULT, None)


# The code and model box a preset fills, with the link field that carries each (None there:
# the preset's own).
_PRESET_BOXES = (("nn_src", "source"), ("nn_model", "model"))


def start() -> None:
    """Every run, before the widgets. On a session's first run the link's values (the kit
    reads it; a part it cannot use keeps its default and is named in :func:`notice`), then
    the chosen preset's code and model box where the link leaves them out."""
    if LINK.start() is None:
        return
    state = st.session_state
    preset = PRESETS[state[PRESET_KEY]]
    LINK.fill_unset({name: getattr(preset, attribute) for name, attribute in _PRESET_BOXES})
    state[PRESET] = t(f"modules.presets.{preset.key}")
    state.setdefault(STEP, 1)
    state.setdefault(PHASE, PHASES[0])


notice = ROOM.notice


# Widgets whose values outlive their section: Streamlit forgets a widget's value once a run
# does not draw it, so every full run hands these values back to session state first.
KEPT = (
    SOURCE,
    MODEL,
    PRESET,
    TRAIN_MODEL,
    LR,
    STEPS,
    FORGET,
    STEP,
    PHASE,
    MODE,
    SAVE_MODEL,
    SECTION,
)


def keep_values() -> None:
    """Re-own the kept widget values (and the quiz answers) for this run."""
    keep_widget_values(KEPT, prefixes=(QUIZ,))


def on_preset_change() -> None:
    """The preset selectbox's callback: load the chosen preset into the editor."""
    load_preset(preset_labels().get(st.session_state[PRESET], DEFAULT_PRESET))


def link_values() -> dict[str, Any]:
    """The room's link fields now: the code and model box the preset has anyway are left to
    the preset (None); the section is the one shown."""
    values = LINK.values()
    preset = PRESETS[values["nn_preset"]]
    for name, attribute in _PRESET_BOXES:
        if values[name] == getattr(preset, attribute):
            values[name] = None
    values["nn_section"] = current_section()
    return values


# The room's settings as a shareable link (also the widgets' on_change): only the room's own
# names, and only those that differ from the default (a source too long for a link is left
# out: the preset's).
write_link = ROOM.write_link


def current_section() -> str:
    """The section shown (a cleared segmented control falls back to the first)."""
    value = st.session_state.get(SECTION)
    return value if value in SECTIONS else SECTIONS[0]


# ---------------------------------------------------------------- the sandbox


def needs_inspection() -> bool:
    return RESULT not in st.session_state


# Reports shared by every visitor of this server, keyed by the source and the constructor: a
# class inspecting the same preset at once runs one job, and later presses are answered at
# once. A failure of the moment is shared with whoever asked at the same time, not kept.
REPORTS = ROOM.part("reports")


def shared_report(
    source: str,
    model_text: str,
    *,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> ModuleReport:
    """The report for the source and model box, from :data:`REPORTS` or one sandbox job
    (the boxes' lengths are checked first, by the engine, before any worker is asked)."""
    model = model_text.strip() or None
    refused = check_boxes(source, model)
    if refused is not None:
        return ModuleReport(model=model or "", error=refused)
    return ROOM.job(
        (source, model),
        lambda who: inspect_module(
            source,
            model=model,
            timeout_s=INSPECT_TIMEOUT_S,
            visitor=who,
            on_queued=on_queued,
        ),
        keep=lambda report: not transient(report.error),
        cache=REPORTS,
        who=visitor,
    )


def inspect(on_queued: Callable[[int], None] | None = None) -> Inspection:
    """Inspect what the boxes hold (in the sandbox), keep it, and put it in the URL."""
    source, model = st.session_state[SOURCE], st.session_state[MODEL].strip()
    report = shared_report(source, model, visitor=SESSION, on_queued=on_queued)
    inspection = Inspection(source, model, report)
    st.session_state[RESULT] = inspection
    write_link()
    return inspection


def last_inspection() -> Inspection:
    return st.session_state[RESULT]


# ---------------------------------------------------------------- built-in models (cached)
# The fixed computations (a closed menu of models), each computed once per server.
_FIXED = ROOM.part("fixed")


def comparison() -> tuple[ComparisonRow, ...]:
    return _FIXED.get_or_compute(("compare", ""), side_by_side)


# Traces weigh what their steps do (a 500-step MLP run holds ~75,000 numbers): byte-bounded,
# shared by every visitor, and never copied on a hit.
_NUMBER_BYTES = 40  # a float in a tuple, with its share of the tuple (measured: ~38)


def _job_bytes(job: RoomJob[TrainingTrace]) -> int:
    """A cached run's weight without walking it: its recorded numbers, plus a fixed part."""
    trace = job.value
    if trace is None:
        return 4096
    per_step = sum(len(values) for values in trace.initial) * 3 + 1
    return _NUMBER_BYTES * per_step * (len(trace.steps) + 1) + 16_384


_TRACES = ROOM.part("traces", nbytes=_job_bytes)


def trace_job(on_queued: Callable[[int], None] | None = None) -> RoomJob[TrainingTrace]:
    """The run the training controls describe, from a sandbox job (computed once per distinct
    setting for the whole server; a transient failure is not kept)."""
    key = trace_key()
    return ROOM.job(
        key,
        lambda who: train_contained(
            key[0],
            lr=key[1],
            steps=key[2],
            forget_zero_grad=key[3],
            visitor=who,
            on_queued=on_queued,
        ),
        cache=_TRACES,
    )


def mode_report(model_key: str) -> ModeReport:
    return _FIXED.get_or_compute(("modes", model_key), lambda: modes(model_key))


def serialization(model_key: str) -> SerializationReport:
    return _FIXED.get_or_compute(("save", model_key), lambda: save_load(model_key))


_FIRST_MEMORY = ROOM.part("first_memory")


def memory(fresh: bool = False) -> InitReport:
    """What fresh uninitialised tensors hold. Everyone opening the section shares one child's
    allocation (a class opening it at once runs one job); "allocate again" runs this visitor
    a fresh child, kept in the session."""
    if fresh:
        st.session_state[MEMORY] = ROOM.job(None, lambda who: uninitialised_memory(visitor=who))
    if MEMORY in st.session_state:
        return st.session_state[MEMORY]
    return ROOM.job(
        "first",
        lambda who: uninitialised_memory(visitor=who),
        keep=lambda report: report.failure is None or not report.failure.transient,
        cache=_FIRST_MEMORY,
    )


# What the panels draw from cached results (tables, figures, DOT), built once per result,
# language and theme: a rerun then only hands them to Streamlit. Entries weigh their data.
def _drawn_size(value: Any) -> int:
    if isinstance(value, pd.DataFrame):
        return int(value.memory_usage(deep=True).sum()) + 1024
    if isinstance(value, dict):
        return sum(_drawn_size(item) for item in value.values()) + 1024
    if hasattr(value, "to_plotly_json"):  # a Plotly figure: its numbers and layout
        return 64 * sum(len(trace.y or ()) for trace in value.data) + 16_384
    return deep_size(value)


_DRAWN = ROOM.part("drawn", nbytes=_drawn_size)


def _drawn(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()`` kept under ``key`` (a result's identity, the language, the theme)."""
    return _DRAWN.get_or_compute(key, build)


# What the panels show, each asked once per thing shown: drawn by ``draw`` from the cached
# results above and kept in :data:`_DRAWN`.
def comparison_table(lang: str) -> pd.DataFrame:
    return _drawn(("compare", lang), lambda: draw.comparison_frame(comparison(), lang))


def tensor_table(inspection: Inspection, lang: str) -> pd.DataFrame:
    key = ("tensors", inspection.source, inspection.model, lang)
    return _drawn(key, lambda: draw.tensor_frame(inspection.report, lang))


def module_tree(inspection: Inspection, lang: str) -> pd.DataFrame:
    key = ("tree", inspection.source, inspection.model, lang)
    return _drawn(key, lambda: draw.tree_frame(inspection.report, lang))


def module_dot(inspection: Inspection, colours: Any, lang: str) -> str | None:
    """The module tree as DOT (None: too large to draw)."""
    key = ("dot", inspection.source, inspection.model, colours, lang)
    return _drawn(key, lambda: draw.tree_dot(inspection.report, colours, lang))


def step_table(trace: TrainingTrace, step: int, phase: str, lang: str) -> pd.DataFrame:
    """The numbers of ``step`` at ``phase`` of the run the controls describe (``trace``)."""
    key = ("step", trace_key(), step, phase, lang)
    return _drawn(key, lambda: draw.step_frame(trace, step, phase, lang))


def loss_figure(trace: TrainingTrace, step: int, colours: Any, lang: str) -> Any:
    key = ("loss", trace_key(), step, colours, lang)
    return _drawn(key, lambda: draw.loss_figure(trace, colours, lang, step))


def mode_tables(model_key: str, lang: str) -> dict[str, pd.DataFrame]:
    key = ("modes", model_key, lang)
    return _drawn(key, lambda: draw.mode_frames(mode_report(model_key), lang))


def running_stats_table(model_key: str, lang: str) -> pd.DataFrame:
    key = ("stats", model_key, lang)
    return _drawn(key, lambda: draw.running_stats_frame(mode_report(model_key), lang))


def state_dict_table(model_key: str, lang: str) -> pd.DataFrame:
    key = ("state", model_key, lang)
    return _drawn(key, lambda: draw.state_frame(serialization(model_key), lang))


def zip_table(model_key: str, lang: str) -> pd.DataFrame:
    key = ("zip", model_key, lang)
    return _drawn(key, lambda: draw.zip_frame(serialization(model_key), lang))


def attempts_table(model_key: str, lang: str) -> pd.DataFrame:
    key = ("attempts", model_key, lang)
    return _drawn(key, lambda: draw.attempts_frame(serialization(model_key), lang))


def trace_key() -> tuple[Any, ...]:
    """The training controls' values: what a trace (and every drawing of it) depends on."""
    return (
        st.session_state[TRAIN_MODEL],
        float(st.session_state[LR]),
        int(st.session_state[STEPS]),
        bool(st.session_state[FORGET]),
    )


# torch's answer to each question, from one live run per server (fixed settings).
_ANSWERS = ROOM.part("answers")


def quiz_key(question: Question) -> str:
    """The question's key for the kit's predict-then-reveal (kept across sections)."""
    return QUIZ + question.value


def option_labels(question: Question) -> dict[str, str]:
    """Each option of ``question`` → its text in the reader's language, in order."""
    return {
        option: t(f"modules.quiz.{question.value}.options.{option}") for option in OPTIONS[question]
    }


def quiz_answer(question: Question) -> Answer:
    """torch's answer and the run it was read from (computed once per server)."""
    return _ANSWERS.get_or_compute(question.value, lambda: answer(question))


def quiz_grade(question: Question, given: str) -> Grade:
    """The picked option (as shown) against torch's answer (as shown)."""
    labels = option_labels(question)
    shown = tuple(labels.values())
    picked = shown.index(given) if given in shown else -1
    return grade_choice(shown, picked, labels[quiz_answer(question).expected])


# ---------------------------------------------------------------- the step control
def next_phase(total_steps: int) -> None:
    """The ▶ button's callback: the next phase, and after zero_grad the next step's forward."""
    index = PHASES.index(st.session_state.get(PHASE, PHASES[0]))
    if index + 1 < len(PHASES):
        st.session_state[PHASE] = PHASES[index + 1]
        return
    st.session_state[PHASE] = PHASES[0]
    st.session_state[STEP] = min(total_steps, int(st.session_state.get(STEP, 1)) + 1)


def clamp_step(total_steps: int) -> None:
    """A shorter run (fewer steps, or a run that stopped) keeps the step control inside it."""
    st.session_state[STEP] = max(1, min(int(st.session_state.get(STEP, 1)), total_steps))
