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

import logging
from collections.abc import Callable, Sequence
from typing import Any

from torchatlas.cache import BoundedCache
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
    SANDBOX_KINDS,
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
    "why_meta",
    "why_meta_namespace",
]

LOG = logging.getLogger(__name__)


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


def _sandbox_params(timeout_s: float, detail: str = "", lines: int = 1) -> dict[str, Any]:
    """What the texts of the sandbox's kinds need: the time limit, the number of refused
    lines, and the sandbox's own English message as a detail."""
    return {"timeout": f"{timeout_s:g}", "lines": lines, "detail": detail}


def _sandbox_error(error: Any, timeout_s: float) -> ShapeError:
    """The sandbox's error as the room's: its kind selects our translated text; its English
    message is kept only as a detail, which the page shows beside that text."""
    kind = getattr(error, "kind", ErrorKind.UNAVAILABLE.value)
    kind = ErrorKind(kind) if kind in SANDBOX_KINDS else ErrorKind.JOB_ERROR
    refusals = [
        RefusedLine(r.line, r.col, RefusalCode.of(r.code), r.message)
        for r in getattr(error, "refusals", []) or []
    ]
    lines = max(1, len({refusal.line for refusal in refusals}))
    return ShapeError(
        kind,
        params=_sandbox_params(timeout_s, str(getattr(error, "message", "") or error), lines),
        line=getattr(error, "line", None),
        col=getattr(error, "col", None),
        refusals=refusals,
    )


def _untrusted(exc: Exception, timeout_s: float) -> ShapeError:
    """A reply outside its schema: named for the server log, never echoed to the page."""
    LOG.warning("shape explorer: the sandbox's result was refused: %s", str(exc)[:300])
    return ShapeError(ErrorKind.UNTRUSTED, params=_sandbox_params(timeout_s))


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
        from torchatlas.sandboxed import shared_pool

        run_job = sandbox.run_job
        shared_pool()  # the process-wide pool runs only registered jobs, every room's at once
    except (ImportError, AttributeError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        return None, ShapeError(ErrorKind.UNAVAILABLE, params=_sandbox_params(timeout_s, detail))
    extra = {"on_queued": on_queued} if on_queued is not None else {}
    result = run_job(source, job, params, timeout_s=timeout_s, session_id=session_id, **extra)
    if not result.ok or result.value is None:
        return None, _sandbox_error(result.error, timeout_s)
    return result.value, None


# Reports shared by every caller in this process, keyed by everything that decides them: a
# class analysing the same preset at once runs it once, and later presses are answered at once.
REPORT_CACHE_BYTES = 64 << 20
REPORTS: BoundedCache[tuple[Any, ...], ShapeReport] = BoundedCache(REPORT_CACHE_BYTES)
# Outcomes of the moment (a full line, a loaded server's timeout, a crash, an unreadable reply)
# are shared with whoever asked at the same time but not kept: the next press may succeed.
TRANSIENT_KINDS = frozenset(
    {
        ErrorKind.TIMEOUT, ErrorKind.MEMORY, ErrorKind.CRASHED, ErrorKind.BUSY,
        ErrorKind.TOO_MANY_JOBS, ErrorKind.UNTRUSTED, ErrorKind.JOB_ERROR, ErrorKind.UNAVAILABLE,
    }
)  # fmt: skip


def _worth_keeping(report: ShapeReport) -> bool:
    return report.error is None or report.error.kind not in TRANSIENT_KINDS


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
    key = (source, tuple(map(tuple, shapes)), tuple(dtypes), model or None, bool(symbolic))

    def analyse() -> ShapeReport:
        value, error = _run(source, ANALYZE, params, timeout_s, session_id, on_queued)
        if error is None:
            try:
                return ShapeReport.from_dict(value)
            except (TypeError, KeyError, ValueError) as exc:  # SchemaError is a ValueError
                error = _untrusted(exc, timeout_s)
        return ShapeReport(model=model or "", input_shapes=shapes, input_dtypes=dtypes, error=error)

    return REPORTS.get_or_compute_once(key, analyse, keep=_worth_keeping)


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
    value, error = _run(source, WHY_META, params, timeout_s, session_id, on_queued)
    if error is None:
        try:
            return WhyMetaReport.from_dict(value)
        except (TypeError, KeyError, ValueError) as exc:
            error = _untrusted(exc, timeout_s)
    return WhyMetaReport(error=error)
