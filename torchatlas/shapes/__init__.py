"""Shape explorer: every layer's output shape for pasted model code, on the meta device.

:func:`explore` is the public entry point. It never runs the pasted source in this process:
it hands the source to :mod:`torchatlas.sandbox`, whose isolated worker executes it and calls
the job :func:`analyze_namespace`; the JSON that comes back becomes a :class:`ShapeReport`.

>>> report = explore(source, [[1, 1, 32, 32]])            # doctest: +SKIP
>>> [row.output_shapes for row in report.layers][:2]      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
from torchatlas.shapes.report import LayerRow, ShapeError, ShapeReport, WhyMetaPoint, WhyMetaReport

__all__ = [
    "DTYPES",
    "AnalysisError",
    "LayerRow",
    "ShapeError",
    "ShapeReport",
    "WhyMetaPoint",
    "WhyMetaReport",
    "analyze_module",
    "analyze_namespace",
    "explore",
    "format_shape",
    "parse_constructor",
    "parse_shapes",
    "why_meta",
    "why_meta_namespace",
]

# Hints for what the sandbox itself reports (the job reports its own errors with hints).
SANDBOX_HINTS = {
    "refused": "Remove or rewrite the marked lines; only model code (torch, nn, F, math, "
    "torchvision.models) is accepted here.",
    "syntax": "Fix the Python syntax at the marked line and column.",
    "code_error": "Fix the marked line: the code runs once, before the model is analysed.",
    "timeout": "Look for a very long loop in __init__ or forward; shape analysis of a normal "
    "model takes well under a second.",
    "memory": "Something allocated real tensors; build layers and tensors without data, or "
    "make them smaller.",
    "crashed": "The worker running your code stopped; simplify the code and try again.",
    "output_too_large": "The model has too many layers to show; try a smaller one.",
    "busy": "Many people are analysing models right now; wait a few seconds and try again.",
    "job_error": "This is a bug in Torch Atlas, not in your code; try another model.",
    "unavailable": "The isolated worker could not start on this server; try again later.",
}


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


def _sandbox_error(error: Any, timeout_s: float) -> ShapeError:
    kind = getattr(error, "kind", "unavailable")
    refusals = [
        {"line": r.line, "col": r.col, "code": r.code, "message": r.message}
        for r in getattr(error, "refusals", []) or []
    ]
    return ShapeError(
        kind=kind,
        message=getattr(error, "message", str(error)),
        line=getattr(error, "line", None),
        col=getattr(error, "col", None),
        hint=SANDBOX_HINTS.get(kind, ""),
        params={"timeout": f"{timeout_s:g}"},
        refusals=refusals,
    )


def _run(
    source: str, job: str, params: dict[str, Any], timeout_s: float, session_id: str | None
) -> tuple[dict[str, Any] | None, ShapeError | None]:
    """The job's JSON result from the sandbox, or why there is none."""
    try:
        from torchatlas import sandbox

        run_job = sandbox.run_job
    except (ImportError, AttributeError) as exc:
        return None, ShapeError(
            kind="unavailable",
            message=f"The sandbox that runs pasted code is not available: {exc}",
            hint=SANDBOX_HINTS["unavailable"],
        )
    result = run_job(source, job, params, timeout_s=timeout_s, session_id=session_id)
    if not result.ok or result.value is None:
        return None, _sandbox_error(result.error, timeout_s)
    return result.value, None


def explore(
    source: str,
    input_shapes: Sequence[Sequence[int]],
    *,
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    symbolic: bool = False,
    timeout_s: float = 10,
    session_id: str | None = None,
) -> ShapeReport:
    """Each layer's shapes, params and FLOPs for the model ``source`` defines, on meta.

    ``source`` runs only inside the sandbox. Never raises for bad code or bad inputs: the
    report's ``error`` says what went wrong and how to fix it.
    """
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return ShapeReport(error=exc.error)
    params = {**_params(shapes, dtypes, model), "symbolic": bool(symbolic)}
    value, error = _run(source, "shapes.analyze", params, timeout_s, session_id)
    if error is not None:
        return ShapeReport(model=model or "", input_shapes=shapes, input_dtypes=dtypes, error=error)
    try:
        return ShapeReport.from_dict(value)
    except (TypeError, KeyError, ValueError) as exc:
        return ShapeReport(
            error=ShapeError(kind="job_error", message=f"Unreadable result: {exc}",
                             hint=SANDBOX_HINTS["job_error"])
        )  # fmt: skip


def why_meta(
    source: str,
    input_shapes: Sequence[Sequence[int]],
    *,
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    timeout_s: float = 20,
    session_id: str | None = None,
) -> WhyMetaReport:
    """Time the model on small real inputs and on meta inputs of growing batch (sandboxed)."""
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return WhyMetaReport(error=exc.error)
    value, error = _run(
        source, "shapes.why_meta", _params(shapes, dtypes, model), timeout_s, session_id
    )
    if error is not None:
        return WhyMetaReport(error=error)
    try:
        return WhyMetaReport.from_dict(value)
    except (TypeError, KeyError, ValueError) as exc:
        return WhyMetaReport(
            error=ShapeError(kind="job_error", message=f"Unreadable result: {exc}",
                             hint=SANDBOX_HINTS["job_error"])
        )  # fmt: skip
