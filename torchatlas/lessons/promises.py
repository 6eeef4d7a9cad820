"""What a step's narrative promises about its room, each promise a check against the room.

A narrative sentence such as "the room marks the line and says what `fc1` expects" is a claim
about the room's output. A step lists each such claim under ``promises``: the phrase (in every
language, a part of that language's narrative) and a named check from :data:`CHECKS` that asks
the room's own engine, for the step's link state, whether it does show it. Sentences that
sound like a promise (:data:`CUES`: "quotes", "shows", "lists", "the table", ...) must carry a
listed promise; ``tests/unit/test_lesson_promises.py`` enforces both.

A check returns ``None`` when the room does what the phrase says, else a short reason (for the
test's message, never shown to a visitor).

The checks call each room's pure engine functions in this process (the shapes explorer's
analysis, basics' promotion, broadcasting, indexing and saving, the strides trace, the
autograd interpreter, the modules inspector and trainer, the devices inventory and
demonstrations, classify's preprocessing). They only ever run the repository's own lesson
states (the link fields and sources of ``assets/lessons/*.toml``), never a visitor's input,
which the rooms send to their sandbox jobs instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchatlas.lessons.loader import Step

# A sentence with one of these makes a claim about what the room shows ("lists" and "listed",
# not "list": "a Python list" claims nothing).
CUES: dict[str, re.Pattern[str]] = {
    "en": re.compile(
        r"\b(quot(?:e|es|ing)|shows?|lists|listed|marks?|reports?|says?|the room|this page"
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


def _run_lesson_source(source: str) -> dict[str, Any]:
    """The namespace a lesson step's model code defines. Only the repository's own lesson
    files and presets come here (a visitor's code goes to the rooms' sandbox jobs)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<lesson step>", "exec"), namespace)
    return namespace


def _in_order(wanted: list[str], shown: list[str], what: str) -> str | None:
    """None when every item of ``wanted`` appears in ``shown`` in this order, else why not."""
    at = 0
    for item in wanted:
        if item not in shown[at:]:
            return f"{item} not {what} after {shown[:at]} in {shown}"
        at = shown.index(item, at) + 1
    return None


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
    namespace = _run_lesson_source(source)
    return ShapeReport.from_dict(analyze_namespace(namespace, input_shapes=shapes, model=model))


def _shapes_layers(step: Step, layers: list[str], error: bool = False) -> str | None:
    """The table lists these layers in this order (each with an output shape)."""
    report = shapes_report(step)
    if (report.error is not None) != error:
        return f"error is {report.error!r}"
    names = [row.name or row.type for row in report.layers if row.output_shapes]
    return _in_order(layers, names, "listed")


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


def _room_label(step: Step, key: str, head: bool = False) -> str | None:
    """The room has the element the narrative names: its label (translation ``key``) is the
    bold name the phrase uses, in every language (``head``: the label's part before its first
    colon, for a label that goes on to describe itself)."""
    from torchatlas.i18n import translate

    for lang, phrase in step_phrases(step, key).items():
        label = translate(key, lang)
        name = label.split(": ")[0] if head else label
        if f"**{name}**" not in phrase:
            return f"{lang}: **{name}** not in {phrase!r}"
    return None


def _devices_finding(_step: Step, key: str, variant: str, finding: str) -> str | None:
    """The devices room's demonstration ``key``/``variant`` shows ``finding`` as holding."""
    from torchatlas.devices.demos import run_demonstration

    demo = run_demonstration(key, variant)
    return None if demo.finding(finding).holds else f"{finding} does not hold"


def _devices_inventory(_step: Step) -> str | None:
    """The devices page reports this server's own accelerators (torch's answer now), and
    where there is none its verdict says so and that ``.cuda()`` would raise, in every
    language."""
    import torch

    from torchatlas.devices.inventory import take_inventory
    from torchatlas.i18n import LANGUAGES, translate

    found = take_inventory()
    if found.has_accelerator != torch.accelerator.is_available():
        return f"inventory says {found.has_accelerator}, torch says otherwise"
    if not found.has_accelerator:
        for lang in LANGUAGES:
            if ".cuda()" not in translate(
                "devices.inventory.no_accelerator", lang, built_for="cpu"
            ):
                return f"{lang}: the verdict does not say .cuda() would raise"
    return None


# basics: each section computed from the step's link, with the room's own parsers


def _basics_promotion(
    step: Step, op: str, left: str, right: str, default_float: bool = False
) -> str | None:
    """The Types explorer computes ``left op right`` (dtypes as named) with a value, beside
    the exact value (``default_float``: its result dtype is torch's default float dtype)."""
    import torch

    from torchatlas.basics import DTypeSpec, Op, OperandKind, parse_value, promote

    f = step.fields()
    a = DTypeSpec(OperandKind.TENSOR, str(f["b_l"]), parse_value(str(f["b_lv"])))
    b = DTypeSpec(OperandKind(str(f["b_rk"])), str(f["b_r"]), parse_value(str(f["b_rv"])))
    found = promote(a, b, Op(str(f["b_op"])))
    if (found.op.value, found.a.dtype, found.b.dtype) != (op, left, right):
        return f"the explorer computes {found.a.dtype} {found.op.value} {found.b.dtype}"
    if found.value is None or found.exact is None:
        return f"no value beside the exact one ({found.torch_message})"
    default = str(torch.get_default_dtype()).removeprefix("torch.")
    if default_float and found.op_dtype != default:
        return f"result dtype {found.op_dtype}, not the default {default}"
    return None


def _basics_creation(_step: Step, calls: list[str]) -> str | None:
    """The **Creating tensors** panel makes a tensor with each of ``calls``."""
    from torchatlas.basics import creation

    made = " ".join(repr(item) for item in creation().made)
    missing = [call for call in calls if call not in made]
    return f"{missing} not made" if missing else None


def _basics_index(step: Step) -> str | None:
    """The indexing picture lights the cells of ``x`` the result reads, and the verdict says
    whether torch answered with a view or a copy."""
    from torchatlas.basics.indexing import index
    from torchatlas.basics.shapes import parse_shape

    f = step.fields()
    found = index(list(parse_shape(str(f["b_ishape"]))), str(f["b_ix"]))
    if not found.ok or not found.picked:
        return f"no cells picked ({found.torch_message})"
    return "no view/copy verdict" if found.is_view is None else None


def _basics_broadcast_error(step: Step, dim: int) -> str | None:
    """Broadcasting fails: the room shows torch's own message and marks column ``dim``."""
    from torchatlas.basics.broadcasting import broadcast
    from torchatlas.basics.shapes import parse_shapes

    found = broadcast(parse_shapes(str(step.fields()["b_shapes"])))
    if found.ok or not found.torch_message:
        return f"no refusal in torch's words: {found.result}"
    return None if found.failing_dim == dim else f"column {found.failing_dim} is marked"


def _basics_saving(step: Step) -> str | None:
    """The saving section counts the bytes the HDF5 reads really take (the file's, opening
    it, and the slice's)."""
    from torchatlas.basics.saving import serialize
    from torchatlas.basics.shapes import parse_shape

    f = step.fields()
    report = serialize(list(parse_shape(str(f["b_sshape"]))), str(f["b_sv"]), str(f["b_sdt"]))
    hdf = report.hdf5
    if hdf.error_code is not None:
        return f"HDF5 refused: {hdf.error_code}"
    return None if hdf.tail_bytes else "no bytes counted for the read"


# strides


def strides_steps(step: Step) -> list[Any]:
    """The strides room's trace for the step's link (start shape, dtype, op chain)."""
    from torchatlas.strides.trace import parse_shape, trace

    f = step.fields()
    return trace(parse_shape(str(f["s_shape"])), str(f["s_dtype"]), list(f.get("s_ops", ())))


def _strides_steps(step: Step, count: int, storage: str | None = None) -> str | None:
    """The room shows ``count`` steps (the start tensor and each op), none failing;
    ``storage``: every step reads that one storage."""
    steps = strides_steps(step)
    if len(steps) != count or any(s.error is not None for s in steps):
        return f"{len(steps)} steps, errors {[s.error for s in steps if s.error]}"
    storages = {s.storage_id for s in steps}
    if storage is not None and storages != {storage}:
        return f"storages {sorted(map(str, storages))}"
    return None


# autograd: the example program the link names, run by the room's interpreter


def _autograd_trace(step: Step) -> tuple[Any, Any]:
    from torchatlas.autograd import trace_and_backward
    from torchatlas.autograd.examples import EXAMPLES

    f = step.fields()
    example = EXAMPLES[str(f["a_ex"])]
    return trace_and_backward(example.program, example.root, seed=int(str(f.get("a_seed", 0))))


def _autograd_variables(step: Step, names: list[str]) -> str | None:
    """The variables table lists each of ``names``."""
    graph, _ = _autograd_trace(step)
    listed = [v.name for v in graph.variables]
    missing = [name for name in names if name not in listed]
    return f"{missing} not in {listed}" if missing else None


def _autograd_backward_error(step: Step, code: str) -> str | None:
    """Backward stops with error ``code`` by the link's step (``a_step``): the card names
    the tensor's ``_version`` and torch's own words come with it."""
    _, found = _autograd_trace(step)
    error = found.error if found is not None else None
    if error is None or error.code.value != code:
        return f"backward error is {error!r}"
    if "version" not in error.params or not error.torch_message:
        return "no _version or no torch message"
    at = int(str(step.fields().get("a_step", 0)))
    return None if found.total_steps <= at else f"{found.total_steps} steps, link at {at}"


def _autograd_freeze(_step: Step, trainable: list[str]) -> str | None:
    """The Freezing tab runs a real ResNet-18 and counts the parameters that still train."""
    from torchatlas.autograd.freeze import freeze

    report = freeze(trainable=tuple(trainable))
    return None if report.trainable_numel > 0 else "nothing counted as trainable"


def _autograd_history(_step: Step, cases: int) -> str | None:
    """The Then vs now tab runs ``cases`` old spellings on this torch, each beside what
    replaces it now."""
    from torchatlas.autograd.history import then_and_now

    found = then_and_now()
    if len(found) != cases or not all(case.now for case in found):
        return f"{len(found)} cases"
    return None


# modules: the inspector and the trainer on the step's preset (or source) and controls


def modules_report(step: Step) -> Any:
    """The modules room's inspection of the step's model, computed in this process the way
    the sandbox job computes it."""
    from torchatlas.modules import PRESETS, ModuleReport
    from torchatlas.modules.inspector import inspect_namespace

    f = step.fields()
    preset = PRESETS[str(f.get("nn_preset", "mylinear_plain"))]
    source = step.source if step.source is not None else preset.source
    namespace = _run_lesson_source(source)
    return ModuleReport.from_dict(
        inspect_namespace(namespace, model=str(f.get("nn_model") or preset.model))
    )


def _modules_tensors(step: Step, names: list[str], registered: bool) -> str | None:
    """The table of every tensor lists ``names``, each in ``parameters()`` or not."""
    report = modules_report(step)
    rows = {row.name: row for row in report.tensors}
    for name in names:
        if name not in rows or rows[name].in_parameters != registered:
            return f"{name}: {rows.get(name)!r}"
    return None


def _modules_submodule(step: Step, path: str) -> str | None:
    """The module tree shows ``path`` as a submodule, and the outer module's parameter count
    includes all of its parameters."""
    report = modules_report(step)
    rows = {row.path: row for row in report.modules}
    child, root = rows.get(path), rows.get("")
    if child is None or root is None or child.depth != 1:
        return f"no submodule {path} in {sorted(rows)}"
    ok = child.total_params > 0 and root.total_params == child.total_params
    return None if ok else f"{root.total_params} vs {child.total_params}"


def _modules_training(step: Step, tensors: list[str]) -> str | None:
    """The trainer runs the link's steps, records a loss for each (the chart), and updates
    ``tensors`` (registered parameters) in place."""
    from torchatlas.modules import train_steps

    f = step.fields()
    steps = int(str(f["nn_steps"]))
    trace = train_steps(
        str(f["nn_train"]),
        lr=float(str(f["nn_lr"])),
        steps=steps,
        forget_zero_grad=str(f.get("nn_forget", "0")) == "1",
    )
    if len(trace.losses) != steps or trace.optimizer_error or trace.backward_error:
        return f"{len(trace.losses)} losses"
    registered = dict(zip(trace.names, trace.registered, strict=True))
    missing = [name for name in tensors if not registered.get(name)]
    return f"{missing} not trained" if missing else None


# classify


def _classify_steps(step: Step, kinds: list[str]) -> str | None:
    """The room follows the first sample photo through each preprocessing step of the link's
    model, in this order."""
    from torchatlas.classify.samples import SAMPLES, sample_bytes
    from torchatlas.classify.transforms import preprocess_steps

    shown = [s.key.value for s in preprocess_steps(sample_bytes(next(iter(SAMPLES))),
                                                   str(step.fields()["c_model"]))]  # fmt: skip
    return _in_order(kinds, shown, "shown")


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
    "devices.inventory": _devices_inventory,
    "basics.promotion": _basics_promotion,
    "basics.creation": _basics_creation,
    "basics.index": _basics_index,
    "basics.broadcast_error": _basics_broadcast_error,
    "basics.saving": _basics_saving,
    "strides.steps": _strides_steps,
    "autograd.variables": _autograd_variables,
    "autograd.backward_error": _autograd_backward_error,
    "autograd.freeze": _autograd_freeze,
    "autograd.history": _autograd_history,
    "modules.tensors": _modules_tensors,
    "modules.submodule": _modules_submodule,
    "modules.training": _modules_training,
    "classify.steps": _classify_steps,
    "fact": _fact,
}


def run_check(step: Step, promise: Promise) -> str | None:
    """``None`` when the room keeps ``promise`` for ``step``'s link state, else why not."""
    return CHECKS[promise.check](step, **{k: _thawed(v) for k, v in promise.args})
