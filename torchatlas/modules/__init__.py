"""nn.Module from the inside: parameters, buffers and plain tensors, modes, one training step,
saving and loading.

- :func:`inspect_module` for pasted code: it never runs the source in this process; the
  sandbox's worker builds the model on the meta device and runs the job ``modules.inspect``
  (:mod:`.inspector`); the JSON that comes back is checked against
  :data:`~torchatlas.modules.report.REPORT_SCHEMA` and becomes a :class:`ModuleReport`.
- :func:`train_contained` runs the training the visitor's controls chose (model, learning
  rate, steps, zero_grad) in a sandbox child, job ``modules.train``: the steps set the work
  and the record's size, the learning rate the values. :func:`train_steps` is the same run in
  this process, for fixed settings only (the quiz's two questions, tests, notebooks).
- :func:`modes` and :func:`save_load` run fixed computations on the server: a closed menu
  (two layers, four models) with no size or value from the visitor, each computed once.
- :func:`uninitialised_memory` allocates its uninitialised tensors in a sandbox child
  (:mod:`.memory` says why, and why address-like words are masked).

Errors and findings are codes and parameters; their text is in
``assets/translations/<lang>/modules.json``.

>>> preset = PRESETS["mylinear_plain"]
>>> report = inspect_module(preset.source, model=preset.model)  # doctest: +SKIP
>>> [(row.name, row.in_parameters) for row in report.tensors]  # doctest: +SKIP
[('W', False), ('b', False)]
"""

from __future__ import annotations

from collections.abc import Callable

from torchatlas.clients import Visitor
from torchatlas.modelcode import MAX_MODEL_CHARS
from torchatlas.modules.jobs import (
    INSPECT,
    JOBS,
    MEMORY_LIMITS,
    TRACE_LIMITS,
    TRAIN,
    WARM_UP,
    register_jobs,
)
from torchatlas.modules.memory import MEMORY, InitReport, MemoryValues, init_report
from torchatlas.modules.presets import DEFAULT_PRESET, PRESETS, Preset
from torchatlas.modules.report import (
    REPORT_SCHEMA,
    Container,
    ErrorKind,
    Finding,
    FindingCode,
    ModuleError,
    ModuleReport,
    ModuleRow,
    RefusedLine,
    Severity,
    TensorKind,
    TensorRow,
)
from torchatlas.modules.serialization import (
    SAVE_MODELS,
    LoadAttempt,
    LoadCase,
    SerializationReport,
    save_load,
)
from torchatlas.modules.training import (
    MAX_STEPS,
    TRAINABLE,
    ModelsError,
    ModeModel,
    ModeReport,
    StepRecord,
    TrainingError,
    TrainingTrace,
    modes,
    train_steps,
)
from torchatlas.sandboxed import (
    JobFailure,
    RoomJob,
    run_room_job,
    transient_error,
)

__all__ = [
    "DEFAULT_PRESET",
    "INSPECT",
    "JOBS",
    "MAX_STEPS",
    "PRESETS",
    "REPORT_SCHEMA",
    "SAVE_MODELS",
    "TRAINABLE",
    "WARM_UP",
    "Container",
    "ErrorKind",
    "Finding",
    "FindingCode",
    "InitReport",
    "LoadAttempt",
    "LoadCase",
    "MemoryValues",
    "ModeModel",
    "ModeReport",
    "ModelsError",
    "ModuleError",
    "ModuleReport",
    "ModuleRow",
    "Preset",
    "RefusedLine",
    "SerializationReport",
    "Severity",
    "StepRecord",
    "TensorKind",
    "TensorRow",
    "TrainingError",
    "TrainingTrace",
    "check_boxes",
    "inspect_module",
    "modes",
    "register_jobs",
    "save_load",
    "train_contained",
    "train_steps",
    "transient",
    "uninitialised_memory",
]


def _failure_error(failure: JobFailure, timeout_s: float) -> ModuleError:
    """The sandbox's failure as the room's error (its kind selects our translated text)."""
    return ModuleError.of_failure(
        failure, timeout_s, lambda item: RefusedLine(item.line, item.col, item.code, item.detail)
    )


def transient(error: ModuleError | None) -> bool:
    """Whether ``error`` is a failure of the moment (torchatlas.sandboxed.TRANSIENT_KINDS): a
    cache shares it with whoever asked at the same time but does not keep it."""
    return transient_error(error)


def check_boxes(source: str, model: str | None) -> ModuleError | None:
    """The server's own checks of the two boxes, before any worker is asked."""
    from torchatlas.sandbox.policy import MAX_SOURCE_CHARS

    if len(source) > MAX_SOURCE_CHARS:
        return ModuleError(
            ErrorKind.SOURCE_TOO_LONG,
            params={"length": f"{len(source):,}", "limit": f"{MAX_SOURCE_CHARS:,}"},
        )
    if model and len(model) > MAX_MODEL_CHARS:
        return ModuleError(
            ErrorKind.MODEL_TOO_LONG,
            params={"length": f"{len(model):,}", "limit": f"{MAX_MODEL_CHARS:,}"},
        )
    return None


def inspect_module(
    source: str,
    *,
    model: str | None = None,
    timeout_s: float = 10,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> ModuleReport:
    """Every module, parameter, buffer and plain tensor of the model ``source`` defines.

    ``source`` runs only inside the sandbox, where the model is built on the meta device;
    ``model`` is the constructor call ("MyLinear(3, 2)"; default: the last nn.Module class
    the source defines). Never raises for bad code: the report's ``error`` says what went
    wrong and how to fix it. The worker's reply is checked against :data:`REPORT_SCHEMA`
    before it becomes a report (error kind ``untrusted`` when it does not match).
    ``on_queued(position)`` hears the job's place in the sandbox's line (0: it starts).
    Every call runs a job: the page keeps reports (components/modules/state.py).
    """
    model = (model or "").strip() or None
    error = check_boxes(source, model)
    if error is not None:
        return ModuleReport(model=model or "", error=error)
    job = run_room_job(
        INSPECT,
        {"model": model},
        source=source,
        reader=ModuleReport.from_dict,
        visitor=visitor,
        timeout_s=timeout_s,
        on_queued=on_queued,
    )
    if job.failure is None:
        return job.value
    return ModuleReport(model=model or "", error=_failure_error(job.failure, timeout_s))


TRAIN_TIMEOUT_S = 5.0  # a 500-step MLP run with every value recorded takes well under 1 s


def train_contained(
    model_key: str,
    *,
    lr: float,
    steps: int,
    forget_zero_grad: bool = False,
    seed: int = 0,
    visitor: Visitor | str | None = None,
    timeout_s: float = TRAIN_TIMEOUT_S,
    on_queued: Callable[[int], None] | None = None,
) -> RoomJob[TrainingTrace]:
    """:func:`train_steps` in a sandbox child (job ``modules.train``), its trace rebuilt within
    :data:`TRACE_LIMITS`. Never raises: ``.value`` is the trace, ``.refused`` the engine's
    coded refusal (a :class:`TrainingError` value and its parameters), ``.failure`` why the
    sandbox gave no result (a limit, a full line, a reply outside the type)."""
    params = {
        "model": str(model_key),
        "lr": float(lr),
        "steps": int(steps),
        "forget": bool(forget_zero_grad),
        "seed": int(seed),
    }
    return run_room_job(
        TRAIN,
        params,
        TrainingTrace,
        visitor=visitor,
        timeout_s=timeout_s,
        on_queued=on_queued,
        limits=TRACE_LIMITS,
    )


def uninitialised_memory(
    *,
    timeout_s: float = 10,
    visitor: Visitor | str | None = None,
    run: Callable[..., RoomJob[MemoryValues]] | None = None,
) -> InitReport:
    """Fresh uninitialised tensors, allocated in a sandbox child (never in this process: its
    heap may hold another visitor's data), address-like words masked, beside a fresh
    ``nn.Linear(3, 4)``. ``run`` replaces :func:`~torchatlas.sandboxed.run_room_job` (tests).
    Never raises: without the sandbox, ``failure`` says why."""
    job = (run or run_room_job)(
        MEMORY,
        {},
        MemoryValues,
        visitor=visitor,
        timeout_s=timeout_s,
        limits=MEMORY_LIMITS,
    )
    return init_report(
        job.value,
        job.failure,
        untrusted=lambda: JobFailure("untrusted", "a value that is not a float32"),
    )
