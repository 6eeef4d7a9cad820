"""The analysis that runs inside a sandbox worker (trusted code; the model code is not).

- :func:`analyze_namespace` (job ``shapes.analyze``): find the model in the namespace the pasted
  source defined, build it on meta, trace it (and, on request, trace it symbolically).
- :func:`why_meta_namespace` (job ``shapes.why_meta``): time the same model on small real
  inputs and on meta inputs of growing size.
- :func:`analyze_module`: the same analysis for a model class or builder you already trust
  (notebooks, tests, the benchmark's baseline).

Every failure becomes a :class:`ShapeError` in the returned data: a job must never raise.
Errors are codes and parameters (:class:`~torchatlas.shapes.report.ErrorKind`); their text is
in the translation tables.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import UninitializedParameter

from torchatlas import modelcode
from torchatlas.modelcode import (
    MAX_MODEL_CHARS,
    DeviceLog,
    KeepOnHome,
    ModelCodeError,
    user_files_of,
    user_line_of,
)
from torchatlas.shapes.hints import attribute_path, explain_layer_failure, shapes_text
from torchatlas.shapes.report import (
    Constraint,
    ErrorKind,
    ShapeError,
    ShapeReport,
    SymbolicIssue,
    WhyMetaPoint,
    WhyMetaReport,
)
from torchatlas.shapes.symbolic import SymbolicInputs, dim_names
from torchatlas.shapes.trace import (
    ShapeTracer,
    TraceRow,
    device_moves,
    named_tensors_in,
    tensors_in,
)

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "long": torch.long,
    "int32": torch.int32,
    "bool": torch.bool,
}
DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int64": "long", "int": "int32",
    "torch.float32": "float32", "torch.long": "long", "torch.int64": "long",
}  # fmt: skip
MAX_INPUTS = 8
MAX_DIMS = 8
MAX_SIZE = 2**40  # meta tensors cost nothing, but sizes must still fit in int64 products
MAX_ROWS = 3000  # deeper levels are folded away beyond this, so the JSON stays small
MAX_REAL_PARAMS = 40_000_000  # "why meta?" builds the model for real only below this
MAX_REAL_INPUT_BYTES = 64 * 2**20


class AnalysisError(Exception):
    """Raised by the parsers and the model finder; ``error`` is what the page shows."""

    def __init__(self, error: ShapeError) -> None:
        super().__init__(error.message)
        self.error = error


def _fail(kind: ErrorKind, line: int | None = None, **params: Any) -> AnalysisError:
    return AnalysisError(ShapeError(kind=kind, params=params, line=line))


_detail = modelcode.detail


# ---------------------------------------------------------------------------- inputs
def normalise_dtype(name: str | None) -> str:
    key = (name or "float32").strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise _fail(ErrorKind.BAD_DTYPE, dtype=str(name), choices=", ".join(DTYPES))
    return key


def validate_inputs(
    input_shapes: Sequence[Sequence[int]], input_dtypes: Sequence[str | None] | None
) -> tuple[list[list[int]], list[str]]:
    if not input_shapes:
        raise _fail(ErrorKind.BAD_SHAPE, text="", max_dims=MAX_DIMS)
    if len(input_shapes) > MAX_INPUTS:
        raise _fail(ErrorKind.TOO_MANY_INPUTS, count=len(input_shapes), limit=MAX_INPUTS)
    shapes: list[list[int]] = []
    for shape in input_shapes:
        sizes = list(shape)
        if len(sizes) > MAX_DIMS or not all(
            isinstance(size, int) and not isinstance(size, bool) and 0 < size <= MAX_SIZE
            for size in sizes
        ):
            text = "×".join(str(size) for size in sizes) or "()"
            raise _fail(ErrorKind.BAD_SHAPE, text=text, max_dims=MAX_DIMS)
        shapes.append(sizes)
    dtypes = list(input_dtypes or [])
    dtypes += ["float32"] * (len(shapes) - len(dtypes))
    return shapes, [normalise_dtype(dtype) for dtype in dtypes[: len(shapes)]]


# Longest text each box of the explorer accepts. Honest use needs far less (eight inputs of
# eight sizes fit in the shapes limit); every parser refuses longer text before reading it,
# because shared links and scripts reach the parsers without the boxes' own limits.
MAX_SHAPES_CHARS = 500
MAX_DTYPES_CHARS = 200

# Single character classes with one quantifier: every match attempt is one forward scan.
_OPENER = re.compile(r"[\(\[]")
_CLOSER = re.compile(r"[\)\]]")
_SIZE_SPLIT = re.compile(r"[×xX*,\s]+")
_INPUT_SPLIT = re.compile(r"[;\n]")
_DTYPE_SPLIT = re.compile(r"[;,\s]+")


def check_length(text: str, limit: int | None, kind: ErrorKind | str) -> None:
    """Refuse ``text`` longer than ``limit`` (None: no limit) with the error ``kind``, before
    any parsing: a parser's cost then never depends on more than ``limit`` characters."""
    if limit is not None and len(text) > limit:
        raise _fail(ErrorKind(kind), length=f"{len(text):,}", limit=f"{limit:,}")


def _bracket_groups(text: str) -> list[str]:
    """The text inside each ``(...)`` or ``[...]``, left to right (a group ends at its first
    closing bracket). One forward pass: each search starts where the last one stopped, and
    once no closing bracket is left, no later group can close either."""
    groups: list[str] = []
    position = 0
    while opener := _OPENER.search(text, position):
        closer = _CLOSER.search(text, opener.end())
        if closer is None:
            break
        groups.append(text[opener.end() : closer.start()])
        position = closer.end()
    return groups


def parse_shapes(text: str, *, max_chars: int | None = MAX_SHAPES_CHARS) -> list[list[int]]:
    """``"1×3×224×224; 1×10"`` or ``"(1, 3, 224, 224), (1, 10)"`` → one size list per input.

    Linear in the text; text longer than ``max_chars`` is refused (kind ``shapes_too_long``)."""
    check_length(text, max_chars, ErrorKind.SHAPES_TOO_LONG)
    text = text.strip()
    bracketed = "(" in text or "[" in text
    groups = _bracket_groups(text) if bracketed else _INPUT_SPLIT.split(text)
    shapes: list[list[int]] = []
    for group in groups:
        parts = [part for part in _SIZE_SPLIT.split(group.strip()) if part]
        if not parts:
            continue
        try:
            shapes.append([int(part) for part in parts])
        except ValueError:
            raise _fail(ErrorKind.BAD_SHAPE, text=group.strip(), max_dims=MAX_DIMS) from None
    if not shapes:
        raise _fail(ErrorKind.BAD_SHAPE, text=text, max_dims=MAX_DIMS)
    return validate_inputs(shapes, None)[0]


def parse_dtypes(text: str, *, max_chars: int | None = MAX_DTYPES_CHARS) -> list[str]:
    """``"float32, long"`` → ``["float32", "long"]`` (names are checked by
    :func:`validate_inputs`). Text longer than ``max_chars`` is refused (``dtypes_too_long``)."""
    check_length(text, max_chars, ErrorKind.DTYPES_TOO_LONG)
    return [part for part in _DTYPE_SPLIT.split(text.strip()) if part]


def format_shape(shape: Sequence[Any]) -> str:
    return " × ".join(str(size) for size in shape) if len(shape) else "scalar"


def meta_inputs(shapes: list[list[int]], dtypes: list[str]) -> list[torch.Tensor]:
    """Inputs created directly on meta: a 1024×3×65536×65536 input costs nothing."""
    return [
        torch.empty(shape, dtype=DTYPES[dtype], device="meta")
        for shape, dtype in zip(shapes, dtypes, strict=True)
    ]


# ---------------------------------------------------------------------------- the model
@contextlib.contextmanager
def _as_shape_error() -> Iterator[None]:
    """A pasted model that cannot be found or built (:mod:`torchatlas.modelcode`) as this
    room's error: the code's value is the same here, and the page has its text."""
    try:
        yield
    except ModelCodeError as exc:
        raise _fail(ErrorKind(exc.code.value), exc.line, **exc.params) from None


def parse_constructor(
    text: str, *, max_chars: int | None = MAX_MODEL_CHARS
) -> tuple[str, list[Any], dict[str, Any]]:
    """:func:`torchatlas.modelcode.parse_constructor`, its refusal as this room's error."""
    with _as_shape_error():
        return modelcode.parse_constructor(text, max_chars=max_chars)


def find_model(
    namespace: dict[str, Any], model: str | None, user_files: frozenset[str] = frozenset()
) -> tuple[Callable[..., Any], list[Any], dict[str, Any], str]:
    """:func:`torchatlas.modelcode.find_model`, its refusal as this room's error."""
    with _as_shape_error():
        return modelcode.find_model(namespace, model, user_files)


def build_on_meta(
    target: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], label: str,
    user_files: frozenset[str] = frozenset(), moves: DeviceLog | None = None,
) -> nn.Module:  # fmt: skip
    """:func:`torchatlas.modelcode.build_on_meta`, its refusal as this room's error."""
    with _as_shape_error():
        return modelcode.build_on_meta(target, args, kwargs, label, user_files, moves)


# ---------------------------------------------------------------------------- analysis
@dataclass
class _Draft:
    """A report while the analysis fills it in; :meth:`report` freezes it."""

    model: str
    symbolic: bool
    rows: list[TraceRow] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    total_params: int = 0
    trainable_params: int = 0
    param_bytes: int = 0
    activation_bytes: int = 0
    flops: int = 0
    input_shapes: list[list[int]] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)
    dim_names: list[list[str]] = field(default_factory=list)
    symbolic_inputs: list[list[str]] = field(default_factory=list)
    symbolic_outputs: list[list[str]] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    symbolic_issue: SymbolicIssue | None = None
    symbolic_detail: str = ""
    error: ShapeError | None = None
    output_names: list[str] = field(default_factory=list)
    moves: DeviceLog = field(default_factory=DeviceLog)
    unmaterialised_params: int = 0

    def report(self, elapsed_s: float) -> ShapeReport:
        return ShapeReport(
            layers=[row.freeze() for row in self.rows],
            outputs=self.outputs,
            total_params=self.total_params,
            trainable_params=self.trainable_params,
            param_bytes=self.param_bytes,
            activation_bytes=self.activation_bytes,
            flops=self.flops,
            model=self.model,
            input_shapes=self.input_shapes,
            input_dtypes=self.input_dtypes,
            symbolic=self.symbolic,
            dim_names=self.dim_names,
            symbolic_inputs=self.symbolic_inputs,
            symbolic_outputs=self.symbolic_outputs,
            constraints=self.constraints,
            symbolic_issue=self.symbolic_issue,
            symbolic_detail=self.symbolic_detail,
            error=self.error,
            elapsed_s=elapsed_s,
            output_names=self.output_names,
            device_moves=device_moves(self.moves),
            unmaterialised_params=self.unmaterialised_params,
        )


def _fold_rows(rows: list[TraceRow]) -> list[TraceRow]:
    """Drop the deepest levels until the table fits in MAX_ROWS."""
    depth = max((row.depth for row in rows), default=0)
    while len(rows) > MAX_ROWS and depth > 0:
        depth -= 1
        rows = [row for row in rows if row.depth <= depth or row.failed]
    return rows[:MAX_ROWS]


def _totals(draft: _Draft, model: nn.Module) -> None:
    seen: set[int] = set()
    for parameter in model.parameters():  # shared parameters count once
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        if isinstance(parameter, UninitializedParameter):  # a lazy module never reached
            draft.unmaterialised_params += 1
            continue
        draft.total_params += parameter.numel()
        draft.trainable_params += parameter.numel() if parameter.requires_grad else 0
        draft.param_bytes += parameter.numel() * parameter.element_size()
    draft.activation_bytes = sum(row.activation_bytes for row in draft.rows if row.leaf)


def _check_forward_arguments(
    model: nn.Module, count: int, label: str, user_files: frozenset[str] = frozenset()
) -> None:
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * count))
    except TypeError:
        parameters = [
            p
            for p in signature.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        raise _fail(
            ErrorKind.INPUTS_MISMATCH,
            line=modelcode.method_line(type(model), "forward", user_files),  # the def line
            signature=f"forward{signature}",
            expected=len(parameters),
            got=count,
        ) from None


def analyze_module(
    build: Callable[[], nn.Module] | nn.Module,
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str | None] | None = None,
    *,
    symbolic: bool = False,
    label: str = "",
    user_files: frozenset[str] = frozenset(),
    moves: DeviceLog | None = None,
) -> ShapeReport:
    """Trace a trusted model (a class, builder, or module already on meta). Never raises.
    ``moves`` holds the device moves noted while the model was built, if it was."""
    started = time.perf_counter()
    draft = _Draft(model=label, symbolic=symbolic, moves=moves or DeviceLog(user_files))
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
        draft.input_shapes, draft.input_dtypes = shapes, dtypes
        if isinstance(build, nn.Module):
            model = build
        else:
            name = label or getattr(build, "__name__", "model")
            model = build_on_meta(build, [], {}, name, user_files, draft.moves)
        draft.model = draft.model or type(model).__name__
        _trace_into(draft, model, shapes, dtypes, user_files)
        if symbolic and draft.error is None:
            _symbolic_into(draft, model, shapes, dtypes)
    except AnalysisError as exc:
        draft.error = exc.error
    except Exception as exc:  # a job must return data, never raise
        draft.error = ShapeError(ErrorKind.INTERNAL, params={"detail": _detail(exc)})
    return draft.report(time.perf_counter() - started)


def _trace_into(
    draft: _Draft,
    model: nn.Module,
    shapes: list[list[int]],
    dtypes: list[str],
    user_files: frozenset[str],
) -> None:
    _check_forward_arguments(model, len(shapes), draft.model, user_files)
    model.eval()  # BatchNorm/Dropout in eval mode, as a shape summary expects
    tracer = ShapeTracer(model, user_files=user_files, moves=draft.moves)
    try:
        with torch.no_grad():
            output = tracer.run(meta_inputs(shapes, dtypes))
    except Exception as exc:
        draft.rows = _fold_rows(tracer.rows)
        state = tracer.state
        row = tracer.rows[state.failed_row] if state.failed_row is not None else None
        draft.error = explain_layer_failure(
            exc,
            layer=row.name if row else "",
            module=state.failed_module if row is not None and row.kind == "module" else None,
            op=row.type if row is not None and row.kind == "function" else None,
            input_shapes=row.input_shapes if row else shapes,
            line=user_line_of(exc, user_files) or (row.line if row else None),
            args=state.failed_args,
            kwargs=state.failed_kwargs,
        )
        _totals(draft, model)
        return
    draft.rows = _fold_rows(tracer.rows)
    named = named_tensors_in(output)
    draft.outputs = [list(tensor.shape) for _, tensor in named]
    draft.output_names = [name for name, _ in named]
    draft.flops = tracer.total_flops
    _totals(draft, model)


def _path_step(row: TraceRow) -> tuple[str, str, str]:
    """What must match between the concrete and the symbolic pass, row by row: the module
    and, for an op, which op (a lazy module's class changes at its first call, its row not)."""
    return (row.name, row.kind, row.type if row.kind == "function" else "")


def _symbolic_into(
    draft: _Draft, model: nn.Module, shapes: list[list[int]], dtypes: list[str]
) -> None:
    names = dim_names(shapes, dtypes)
    draft.dim_names = names
    try:
        inputs = SymbolicInputs(shapes, [DTYPES[dtype] for dtype in dtypes], names)
        claimed = 0
        rows: list[TraceRow] = []

        def claim(index: int) -> None:
            nonlocal claimed
            rows[index].constraints.extend(inputs.guards_since(claimed))
            claimed = inputs.guard_count()

        tracer = ShapeTracer(model, size_of=inputs.size, count_flops=False, on_boundary=claim)
        rows = tracer.rows
        with torch.no_grad():
            output = tracer.run(inputs.tensors, extra_modes=[inputs.mode])
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        draft.symbolic_issue = SymbolicIssue.FAILED
        draft.symbolic_detail = f"{type(exc).__name__}: {first_line[:300]}"
        return
    draft.symbolic_inputs = [[inputs.size(size) for size in t.shape] for t in inputs.tensors]
    draft.symbolic_outputs = [[inputs.size(size) for size in t.shape] for t in tensors_in(output)]
    if len(rows) != len(draft.rows) or any(
        _path_step(a) != _path_step(b) for a, b in zip(rows, draft.rows, strict=False)
    ):
        draft.symbolic_issue = SymbolicIssue.PATH_DIFFERS
        return
    for concrete, formula in zip(draft.rows, rows, strict=True):
        concrete.symbolic_output_shapes = formula.output_shapes
        concrete.constraints = formula.constraints
        layer = attribute_path(concrete.name) if concrete.name else draft.model
        draft.constraints.extend(Constraint(layer, item) for item in formula.constraints)


def analyze_namespace(
    namespace: dict[str, Any],
    *,
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    symbolic: bool = False,
) -> dict[str, Any]:
    """Job ``shapes.analyze``: the report for the model the pasted source defines, as a dict."""
    started = time.perf_counter()
    user_files = user_files_of(namespace)
    try:
        target, args, kwargs, label = find_model(namespace, model, user_files)
        validate_inputs(input_shapes, input_dtypes)
        moves = DeviceLog(user_files)
        built = build_on_meta(target, args, kwargs, label, user_files, moves)
    except AnalysisError as exc:
        elapsed = time.perf_counter() - started
        return ShapeReport(
            model=model or "", symbolic=symbolic, error=exc.error, elapsed_s=elapsed
        ).to_dict()
    except Exception as exc:
        return ShapeReport(
            error=ShapeError(ErrorKind.INTERNAL, params={"detail": _detail(exc)})
        ).to_dict()
    report = analyze_module(
        built, input_shapes, input_dtypes, symbolic=symbolic, label=label, user_files=user_files,
        moves=moves,
    )  # fmt: skip
    return {**report.to_dict(), "elapsed_s": time.perf_counter() - started}


# ---------------------------------------------------------------------------- why meta?
def _with_batch(shapes: list[list[int]], batch: int) -> list[list[int]]:
    return [[batch, *shape[1:]] if len(shape) >= 2 else list(shape) for shape in shapes]


def _real_inputs(shapes: list[list[int]], dtypes: list[str]) -> list[torch.Tensor]:
    tensors = []
    for shape, dtype in zip(shapes, dtypes, strict=True):
        if DTYPES[dtype].is_floating_point:
            tensors.append(torch.randn(shape, dtype=DTYPES[dtype]))
        else:  # token ids: 0 is a valid index for any embedding
            tensors.append(torch.zeros(shape, dtype=DTYPES[dtype]))
    return tensors


def _input_bytes(shapes: list[list[int]], dtypes: list[str]) -> int:
    total = 0
    for shape, dtype in zip(shapes, dtypes, strict=True):
        numel = 1
        for size in shape:
            numel *= size
        total += numel * torch.empty((), dtype=DTYPES[dtype]).element_size()
    return total


def _time_meta(model: nn.Module, shapes: list[list[int]], dtypes: list[str]) -> float:
    started = time.perf_counter()
    with torch.device("meta"), KeepOnHome(DeviceLog()):
        model(*meta_inputs(shapes, dtypes))
    return time.perf_counter() - started


def _on_cpu() -> KeepOnHome:
    """The real run's device moves (``.to("cuda")``) stay on the CPU: the sandbox has no GPU."""
    return KeepOnHome(DeviceLog(home=torch.device("cpu")))


def why_meta_namespace(
    namespace: dict[str, Any],
    *,
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str | None] | None = None,
    model: str | None = None,
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 1024, 65536),
    real_budget_s: float = 3.0,
) -> dict[str, Any]:
    """Job ``shapes.why_meta``: the same model timed on real and meta inputs of growing batch."""
    points: list[WhyMetaPoint] = []
    error: ShapeError | None = None
    user_files = user_files_of(namespace)
    try:
        target, args, kwargs, label = find_model(namespace, model, user_files)
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
        meta_model = build_on_meta(target, args, kwargs, label).eval()
        _check_forward_arguments(meta_model, len(shapes), label, user_files)
        params = sum(
            parameter.numel()
            for parameter in meta_model.parameters()
            if not isinstance(parameter, UninitializedParameter)
        )
        real_model = None
        if params <= MAX_REAL_PARAMS:
            with _on_cpu():
                real_model = target(*args, **kwargs).eval()
        spent = 0.0
        with torch.no_grad():
            first = _with_batch(shapes, batches[0])
            with torch.device("meta"), KeepOnHome(DeviceLog()):  # warm-up: one-off costs
                meta_model(*meta_inputs(first, dtypes))
            if real_model is not None and _input_bytes(first, dtypes) <= MAX_REAL_INPUT_BYTES:
                with _on_cpu():
                    real_model(*_real_inputs(first, dtypes))
            for batch in batches:
                batch_shapes = _with_batch(shapes, batch)
                size = _input_bytes(batch_shapes, dtypes)
                meta_s = min(_time_meta(meta_model, batch_shapes, dtypes) for _ in range(3))
                real_s = None
                affordable = size <= MAX_REAL_INPUT_BYTES and spent < real_budget_s
                if real_model is not None and affordable:
                    tensors = _real_inputs(batch_shapes, dtypes)
                    started = time.perf_counter()
                    with _on_cpu():
                        real_model(*tensors)
                    real_s = time.perf_counter() - started
                    spent += real_s
                    del tensors
                points.append(WhyMetaPoint(batch, batch_shapes, meta_s, real_s, size))
    except AnalysisError as exc:
        error = exc.error
    except Exception as exc:
        shapes_given = [list(shape) for shape in input_shapes] if input_shapes else []
        error = ShapeError(
            ErrorKind.COMPARISON_ERROR,
            params={"shapes": shapes_text(shapes_given), "detail": _detail(exc)},
        )
    return WhyMetaReport(points=points, error=error).to_dict()
