"""What a step's narrative promises about its room, each promise a check against the room.

A narrative sentence such as "the room marks the line and says what `fc1` expects" is a claim
about the room's output. A step lists each such claim under ``promises``: the phrase (in every
language, a part of that language's narrative) and a named check from :data:`CHECKS` that asks
the room's own engine, for the step's link state, whether it does show it. Sentences that
sound like a promise (:data:`CUES`: "quotes", "shows", "lists", "the table", ...) must carry a
listed promise; ``tests/unit/test_lesson_promises.py`` enforces both.

A check returns ``None`` when the room does what the phrase says, else a short reason (for the
test's message, never shown to a visitor).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchatlas.lessons.loader import Step

# A sentence with one of these makes a claim about what the room shows.
CUES: dict[str, re.Pattern[str]] = {
    "en": re.compile(
        r"\b(quot(?:e|es|ing)|shows?|lists?|marks?|reports?|says?|the room|this page"
        r"|the table|this table|tab|below|above)\b",
        re.IGNORECASE,
    ),
    "ko": re.compile(r"(보여|인용|나열|표시|표를|표에|표의|방은|이 페이지|아래|위의|탭)"),
}
SENTENCE_END = re.compile(r"(?<=[.!?。])\s+|\n+")


def sentences(text: str) -> list[str]:
    return [part.strip() for part in SENTENCE_END.split(text) if part.strip()]


def promising_sentences(text: str, lang: str) -> list[str]:
    """The sentences of ``text`` that promise something about the room (a question asks,
    it promises nothing)."""
    return [
        sentence
        for sentence in sentences(text)
        if CUES[lang].search(sentence) and not sentence.endswith("?")
    ]


@dataclass(frozen=True)
class Promise:
    """``phrase`` (language → words of the narrative) is true of the room when ``check`` with
    ``args`` holds for the step's link state."""

    check: str
    args: tuple[tuple[str, Any], ...]
    phrase: dict[str, str]


# --------------------------------------------------------------------------- room engines


def _thawed(value: Any) -> Any:
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


def shapes_report(step: Step) -> Any:
    """The shapes room's report for the step's link (the preset's or the step's source, its
    shapes and model), computed in this process the way the sandbox job computes it."""
    from torchatlas.presets import PRESETS
    from torchatlas.shapes import ShapeReport, analyze_namespace, parse_shapes

    fields = step.fields()
    preset = PRESETS[str(fields.get("m_preset", "net"))]
    source = step.source if step.source is not None else preset.source
    model = str(fields.get("m_model") or preset.model)
    shapes = parse_shapes(str(fields.get("m_shapes") or preset.shapes))
    namespace: dict[str, Any] = {}
    exec(compile(source, "<lesson step>", "exec"), namespace)  # repository files only
    return ShapeReport.from_dict(analyze_namespace(namespace, input_shapes=shapes, model=model))


def _shapes_layers(step: Step, layers: list[str], error: bool = False) -> str | None:
    """The table lists these layers in this order (each with an output shape)."""
    report = shapes_report(step)
    if (report.error is not None) != error:
        return f"error is {report.error!r}"
    names = [row.name or row.type for row in report.layers if row.output_shapes]
    at = 0
    for layer in layers:
        if layer not in names[at:]:
            return f"{layer} not listed after {names[:at]} in {names}"
        at = names.index(layer, at) + 1
    return None


def _shapes_error(step: Step, kind: str, layer: str, marks_line: bool = True, **params: Any):
    """The analysis stops with error ``kind`` at ``layer`` (its parameters include
    ``params``); ``marks_line``: the card marks a line of the source."""
    report = shapes_report(step)
    error = report.error
    if error is None or error.kind.value != kind or error.layer != layer:
        return f"error is {error!r}"
    for key, value in params.items():
        if error.params.get(key) != value:
            return f"{key} is {error.params.get(key)!r}, not {value!r}"
    if marks_line and not error.line:
        return "no line is marked"
    return None


def _shapes_quotes_torch(step: Step, words: str) -> str | None:
    """The error card shows torch's own message containing ``words``."""
    error = shapes_report(step).error
    if error is None:
        return "no error"
    # the card: its text, and torch's message as the detail below it (the page's error_detail)
    shown = " ".join([error.text("en"), error.text("ko"), str(error.params.get("detail", ""))])
    return None if words in shown else f"{words!r} not on the card"


def _room_label(step: Step, key: str) -> str | None:
    """The room has the element the narrative names: its label (translation ``key``) is the
    bold name the phrase uses, in every language."""
    from torchatlas.i18n import translate

    for lang, phrase in step_phrases(step, key).items():
        label = translate(key, lang)
        if f"**{label}**" not in phrase:
            return f"{lang}: **{label}** not in {phrase!r}"
    return None


def _devices_finding(_step: Step, key: str, variant: str, finding: str) -> str | None:
    """The devices room's demonstration ``key``/``variant`` shows ``finding`` as holding."""
    from torchatlas.devices.demos import run_demonstration

    demo = run_demonstration(key, variant)
    return None if demo.finding(finding).holds else f"{finding} does not hold"


def _fact(_step: Step, fact: str, value: str, args: dict | None = None) -> str | None:
    """Fact ``fact`` (the facts registry: torch now) is ``value``."""
    from torchatlas.lessons.facts import evaluate

    got = evaluate(fact, {k: _thawed(v) for k, v in (args or {}).items()})
    return None if got == value else f"{fact} is {got!r}, not {value!r}"


def step_phrases(step: Step, key: str) -> dict[str, str]:
    """The phrases of the step's promise whose args name ``key`` (for checks that read them)."""
    for promise in step.promises:
        if dict(promise.args).get("key") == key:
            return promise.phrase
    return {}


CHECKS: dict[str, Callable[..., str | None]] = {
    "shapes.layers": _shapes_layers,
    "shapes.error": _shapes_error,
    "shapes.quotes_torch": _shapes_quotes_torch,
    "room.label": _room_label,
    "devices.finding": _devices_finding,
    "fact": _fact,
}


def run_check(step: Step, promise: Promise) -> str | None:
    """``None`` when the room keeps ``promise`` for ``step``'s link state, else why not."""
    return CHECKS[promise.check](step, **{k: _thawed(v) for k, v in promise.args})
