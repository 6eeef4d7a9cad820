"""Shape explorer: every layer's output shape for pasted model code, on the meta device.

:func:`explore` is the public entry point. It never runs the pasted source in this process:
it hands the source to :mod:`torchatlas.sandbox`, whose isolated worker executes it and calls
the job :func:`analyze_namespace`; the JSON that comes back becomes a :class:`ShapeReport`.

>>> report = explore(source, [[1, 1, 32, 32]])            # doctest: +SKIP
>>> [row.output_shapes for row in report.layers][:2]      # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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
from torchatlas.shapes.report import (
    REPORT_SCHEMA,
    WHY_META_SCHEMA,
    LayerRow,
    ShapeError,
    ShapeReport,
    WhyMetaPoint,
    WhyMetaReport,
)

__all__ = [
    "DTYPES",
    "REPORT_SCHEMA",
    "WHY_META_SCHEMA",
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
    "too_many_jobs": "Wait for your analysis that is already running or queued to finish, then "
    "press the button once.",
    "untrusted": "The code's process sent back something other than an analysis, so nothing of "
    "it is shown. Run the analysis again; if it happens again, simplify the code.",
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


LOG = logging.getLogger(__name__)
UNTRUSTED_MESSAGE = "The worker sent a result that could not be trusted; try again."


def _untrusted(exc: Exception) -> ShapeError:
    """A reply outside its schema: named for the server log, never echoed to the page."""
    LOG.warning("shape explorer: the sandbox's result was refused: %s", str(exc)[:300])
    return ShapeError(kind="untrusted", message=UNTRUSTED_MESSAGE, hint=SANDBOX_HINTS["untrusted"])


def _run(
    source: str,
    job: str,
    params: dict[str, Any],
    timeout_s: float,
    session_id: str | None,
    on_queued: Callable[[int], None] | None = None,
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
    extra = {"on_queued": on_queued} if on_queued is not None else {}
    result = run_job(source, job, params, timeout_s=timeout_s, session_id=session_id, **extra)
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
    on_queued: Callable[[int], None] | None = None,
) -> ShapeReport:
    """Each layer's shapes, params and FLOPs for the model ``source`` defines, on meta.

    ``source`` runs only inside the sandbox. Never raises for bad code or bad inputs: the
    report's ``error`` says what went wrong and how to fix it. The sandbox's reply is checked
    against :data:`REPORT_SCHEMA` before it becomes a report (error kind ``untrusted`` when it
    does not match). ``on_queued(position)`` is called while the job waits in line (1 = next,
    0 = it starts), so a page can say "queued, 3rd in line".
    """
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return ShapeReport(error=exc.error)
    params = {**_params(shapes, dtypes, model), "symbolic": bool(symbolic)}
    value, error = _run(source, "shapes.analyze", params, timeout_s, session_id, on_queued)
    if error is None:
        try:
            return ShapeReport.from_dict(value)
        except (TypeError, KeyError, ValueError) as exc:  # SchemaError is a ValueError
            error = _untrusted(exc)
    return ShapeReport(model=model or "", input_shapes=shapes, input_dtypes=dtypes, error=error)


def why_meta(
    source: str,
    input_shapes: Sequence[Sequence[int]],
    *,
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    timeout_s: float = 20,
    session_id: str | None = None,
    on_queued: Callable[[int], None] | None = None,
) -> WhyMetaReport:
    """Time the model on small real inputs and on meta inputs of growing batch (sandboxed);
    the reply is checked against :data:`WHY_META_SCHEMA` (see :func:`explore`)."""
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
    except AnalysisError as exc:
        return WhyMetaReport(error=exc.error)
    params = _params(shapes, dtypes, model)
    value, error = _run(source, "shapes.why_meta", params, timeout_s, session_id, on_queued)
    if error is None:
        try:
            return WhyMetaReport.from_dict(value)
        except (TypeError, KeyError, ValueError) as exc:
            error = _untrusted(exc)
    return WhyMetaReport(error=error)
