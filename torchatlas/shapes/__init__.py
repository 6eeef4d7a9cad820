"""Shape explorer: every layer's output shape for pasted model code, on the meta device.

:func:`explore` is the public entry point. It never runs the pasted source in this process:
it hands the source to :mod:`torchatlas.sandbox`, whose isolated worker executes it and calls
the job :func:`analyze_namespace`; the JSON that comes back becomes a :class:`ShapeReport`
(frozen dataclasses; an error is an :class:`ErrorKind` and parameters, whose text is in
``assets/translations/<lang>/shapes.json``). :data:`JOBS` names the jobs for the sandbox, and
:func:`register_jobs` registers them (with their warm-up) on a sandbox pool.

>>> report = explore(source, [[1, 1, 32, 32]])            # doctest: +SKIP
>>> [row.output_shapes for row in report.layers][:2]      # doctest: +SKIP
>>> report.error.message if report.error else ""          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torchatlas.clients import Visitor
from torchatlas.sandboxed import (
    JobFailure,
    run_room_job,
    transient_error,
)
from torchatlas.shapes.analysis import (
    DTYPES,
    AnalysisError,
    analyze_module,
    analyze_namespace,
    format_shape,
    parse_constructor,
    parse_shapes,
    validate_inputs,
    why_meta_namespace,
)
from torchatlas.shapes.jobs import ANALYZE, JOBS, WHY_META, register_jobs
from torchatlas.shapes.report import (
    REPORT_SCHEMA,
    WHY_META_SCHEMA,
    Constraint,
    DeviceMove,
    ErrorKind,
    LayerRow,
    MoveKind,
    MovePhase,
    RefusalCode,
    RefusedLine,
    RowKind,
    ShapeError,
    ShapeReport,
    SymbolicIssue,
    WhyMetaPoint,
    WhyMetaReport,
)

__all__ = [
    "DTYPES",
    "JOBS",
    "REPORT_SCHEMA",
    "WHY_META_SCHEMA",
    "AnalysisError",
    "Constraint",
    "DeviceMove",
    "ErrorKind",
    "LayerRow",
    "MoveKind",
    "MovePhase",
    "RefusalCode",
    "RefusedLine",
    "RowKind",
    "ShapeError",
    "ShapeReport",
    "SymbolicIssue",
    "WhyMetaPoint",
    "WhyMetaReport",
    "analyze_module",
    "analyze_namespace",
    "explore",
    "format_shape",
    "parse_constructor",
    "parse_shapes",
    "register_jobs",
    "transient",
    "why_meta",
    "why_meta_namespace",
]


def _params(
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str | None] | None,
    model: str | None,
) -> dict[str, Any]:
    return {
        "input_shapes": [list(shape) for shape in input_shapes],
        "input_dtypes": list(input_dtypes) if input_dtypes else None,
        "model": model or None,
    }


def _failure_error(failure: JobFailure, timeout_s: float) -> ShapeError:
    """The sandbox's failure as the room's error (its kind selects our translated text)."""
    return ShapeError.of_failure(
        failure, timeout_s,
        lambda item: RefusedLine(item.line, item.col, RefusalCode.of(item.code), item.detail),
    )  # fmt: skip


def transient(error: ShapeError | None) -> bool:
    """Whether ``error`` is a failure of the moment (torchatlas.sandboxed.TRANSIENT_KINDS): a
    cache shares it with whoever asked at the same time but does not keep it."""
    return transient_error(error)


def explore(
    source: str,
    input_shapes: Sequence[Sequence[int]],
    *,
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    symbolic: bool = False,
    timeout_s: float = 10,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> ShapeReport:
    """Each layer's shapes, params and FLOPs for the model ``source`` defines, on meta.

    ``source`` runs only inside the sandbox (:func:`torchatlas.sandboxed.run_room_job`). Never
    raises for bad code or bad inputs: the report's ``error`` says what went wrong and how to
    fix it. The sandbox's reply is checked against :data:`REPORT_SCHEMA` before it becomes a
    report (error kind ``untrusted`` when it does not match). ``on_queued(position)`` is
    called while the job waits in line (1 = next, 0 = it starts), so a page can say "queued,
    3rd in line". Every call runs a job: the page keeps reports (components/shapes/state.py).
    """
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return ShapeReport(error=exc.error)
    params = {**_params(shapes, dtypes, model), "symbolic": bool(symbolic)}
    job = run_room_job(
        ANALYZE, params, source=source, reader=ShapeReport.from_dict, visitor=visitor,
        timeout_s=timeout_s, on_queued=on_queued,
    )  # fmt: skip
    if job.failure is None:
        return job.value
    error = _failure_error(job.failure, timeout_s)
    return ShapeReport(model=model or "", input_shapes=shapes, input_dtypes=dtypes, error=error)


def why_meta(
    source: str,
    input_shapes: Sequence[Sequence[int]],
    *,
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    timeout_s: float = 20,
    visitor: Visitor | str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> WhyMetaReport:
    """Time the model on small real inputs and on meta inputs of growing batch (sandboxed);
    the reply is checked against :data:`WHY_META_SCHEMA` (see :func:`explore`)."""
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return WhyMetaReport(error=exc.error)
    job = run_room_job(
        WHY_META, _params(shapes, dtypes, model), source=source, reader=WhyMetaReport.from_dict,
        visitor=visitor, timeout_s=timeout_s, on_queued=on_queued,
    )  # fmt: skip
    if job.failure is None:
        return job.value
    return WhyMetaReport(error=_failure_error(job.failure, timeout_s))
