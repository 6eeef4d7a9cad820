"""The analysis that runs inside a sandbox worker (trusted code; the model code is not).

- :func:`analyze_namespace` (job ``shapes.analyze``): find the model in the namespace the pasted
  source defined, build it on meta, trace it (and, on request, trace it symbolically).
- :func:`why_meta_namespace` (job ``shapes.why_meta``): time the same model on small real
  inputs and on meta inputs of growing size.
- :func:`analyze_module`: the same analysis for a model class or builder you already trust
  (notebooks, tests, the benchmark's baseline).

Every failure becomes a :class:`ShapeError` in the returned data: a job must never raise.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from torchatlas.shapes.hints import attribute_path, explain_layer_failure, shape_text
from torchatlas.shapes.report import (
    LayerRow,
    ShapeError,
    ShapeReport,
    WhyMetaPoint,
    WhyMetaReport,
)
from torchatlas.shapes.symbolic import SymbolicInputs, dim_names
from torchatlas.shapes.trace import ShapeTracer, tensors_in, user_line_of

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
_BUILDERS_WITH_WEIGHTS = ("weights", "pretrained", "weights_backbone")


class AnalysisError(Exception):
    def __init__(self, error: ShapeError) -> None:
        super().__init__(error.message)
        self.error = error


def _fail(kind: str, message: str, hint: str = "", **params: Any) -> AnalysisError:
    return AnalysisError(ShapeError(kind=kind, message=message, hint=hint, params=params))


# ---------------------------------------------------------------------------- inputs
def normalise_dtype(name: str | None) -> str:
    key = (name or "float32").strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise _fail(
            "bad_dtype",
            f"Unknown dtype {name!r}.",
            f"Use one of: {', '.join(DTYPES)}.",
            dtype=str(name),
            choices=", ".join(DTYPES),
        )
    return key


def validate_inputs(
    input_shapes: Sequence[Sequence[int]], input_dtypes: Sequence[str | None] | None
) -> tuple[list[list[int]], list[str]]:
    if not input_shapes:
        raise _fail(
            "bad_shape",
            "No input shape given.",
            "Type one shape per forward argument, e.g. 1×3×224×224.",
            text="",
        )
    if len(input_shapes) > MAX_INPUTS:
        raise _fail(
            "too_many_inputs",
            f"{len(input_shapes)} inputs given; at most {MAX_INPUTS} are supported.",
            "Give one shape per forward argument.",
            count=len(input_shapes),
            limit=MAX_INPUTS,
        )
    shapes: list[list[int]] = []
    for shape in input_shapes:
        sizes = list(shape)
        if len(sizes) > MAX_DIMS or not all(
            isinstance(size, int) and not isinstance(size, bool) and 0 < size <= MAX_SIZE
            for size in sizes
        ):
            text = "×".join(str(size) for size in sizes)
            raise _fail(
                "bad_shape",
                f"The shape {text or '()'} is not valid: use up to {MAX_DIMS} whole sizes "
                f"between 1 and 2^40.",
                "Type sizes separated by × or commas, e.g. 1×3×224×224.",
                text=text,
            )
        shapes.append(sizes)
    dtypes = list(input_dtypes or [])
    dtypes += ["float32"] * (len(shapes) - len(dtypes))
    return shapes, [normalise_dtype(dtype) for dtype in dtypes[: len(shapes)]]


# Longest text each box of the explorer accepts. Honest use needs far less (eight inputs of
# eight sizes fit in the shapes limit); every parser refuses longer text before reading it,
# because shared links and scripts reach the parsers without the boxes' own limits.
MAX_SHAPES_CHARS = 500
MAX_DTYPES_CHARS = 200
MAX_MODEL_CHARS = 500

# Single character classes with one quantifier: every match attempt is one forward scan.
_OPENER = re.compile(r"[\(\[]")
_CLOSER = re.compile(r"[\)\]]")
_SIZE_SPLIT = re.compile(r"[×xX*,\s]+")
_INPUT_SPLIT = re.compile(r"[;\n]")
_DTYPE_SPLIT = re.compile(r"[;,\s]+")


def check_length(text: str, limit: int | None, kind: str) -> None:
    """Refuse ``text`` longer than ``limit`` (None: no limit) with the error ``kind``, before
    any parsing: a parser's cost then never depends on more than ``limit`` characters."""
    if limit is not None and len(text) > limit:
        raise _fail(
            kind,
            f"This box holds {len(text):,} characters; it accepts at most {limit:,}.",
            f"Shorten it to {limit:,} characters or fewer.",
            length=f"{len(text):,}",
            limit=f"{limit:,}",
        )


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
    check_length(text, max_chars, "shapes_too_long")
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
            raise _fail(
                "bad_shape",
                f"Could not read {group.strip()!r} as a shape.",
                "Type sizes separated by × or commas, e.g. 1×3×224×224; separate inputs with ;.",
                text=group.strip(),
            ) from None
    if not shapes:
        raise _fail(
            "bad_shape",
            "No input shape given.",
            "Type one shape per forward argument, e.g. 1×3×224×224.",
            text=text,
        )
    return validate_inputs(shapes, None)[0]


def parse_dtypes(text: str, *, max_chars: int | None = MAX_DTYPES_CHARS) -> list[str]:
    """``"float32, long"`` → ``["float32", "long"]`` (names are checked by
    :func:`validate_inputs`). Text longer than ``max_chars`` is refused (``dtypes_too_long``)."""
    check_length(text, max_chars, "dtypes_too_long")
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
def parse_constructor(
    text: str, *, max_chars: int | None = MAX_MODEL_CHARS
) -> tuple[str, list[Any], dict[str, Any]]:
    """``"ResNetGenerator(3, 3, n_blocks=6)"`` → name, literal args, literal kwargs (no eval).

    Text longer than ``max_chars`` is refused (``model_too_long``) before it is parsed."""
    check_length(text, max_chars, "model_too_long")
    hint = "Write a class name, or a call with literal arguments: ResNetGenerator(n_blocks=6)."
    # Deep nesting makes Python's parser give up with RecursionError or MemoryError (its own
    # stack, not the process's memory): that is a malformed call like any other.
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        message = f"{text!r} is not a constructor call."
        raise _fail("bad_constructor", message, hint, text=text) from None
    if isinstance(node, ast.Name):
        return node.id, [], {}
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise _fail("bad_constructor", f"{text!r} is not a constructor call.", hint, text=text)
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise _fail(
            "bad_constructor",
            f"The arguments in {text!r} must be literals (numbers, strings, lists, True, None).",
            hint,
            text=text,
        ) from None
    if any(kw.arg is None for kw in node.keywords):
        raise _fail("bad_constructor", f"{text!r} uses **kwargs.", hint, text=text)
    return node.func.id, args, kwargs


def is_user_module_class(value: Any) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, nn.Module)
        and not (value.__module__ or "").startswith(("torch", "torchvision"))
    )


def user_files_of(namespace: dict[str, Any]) -> frozenset[str]:
    """Filenames of code compiled from the pasted source (not files on disk)."""
    files: set[str] = set()

    def add(function: Any) -> None:
        code = getattr(function, "__code__", None)
        if code is not None and not os.path.exists(code.co_filename):
            files.add(code.co_filename)

    for value in namespace.values():
        if inspect.isfunction(value):
            add(value)
        elif is_user_module_class(value):
            for attribute in vars(value).values():
                add(attribute)
                add(getattr(attribute, "fget", None))
    return frozenset(files)


def _user_def_line(function: Any, user_files: frozenset[str]) -> int | None:
    """The ``def`` line of ``function`` when the pasted source defines it (None otherwise)."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is not None and code.co_filename in user_files:
        return code.co_firstlineno
    return None


def _method_line(owner: type, name: str, user_files: frozenset[str]) -> int | None:
    """The line of the first ``name`` method in ``owner``'s MRO, if the pasted source has it."""
    for klass in getattr(owner, "__mro__", ()):
        if name in vars(klass):
            return _user_def_line(vars(klass)[name], user_files)
    return None


def _signature_text(name: str, target: Any) -> str:
    try:
        return f"{name}{inspect.signature(target)}"
    except (TypeError, ValueError):
        return f"{name}(…)"


def find_model(
    namespace: dict[str, Any], model: str | None, user_files: frozenset[str] = frozenset()
) -> tuple[Callable[..., Any], list[Any], dict[str, Any], str]:
    """The callable that builds the model, its arguments, and a label for it."""
    if model and model.strip():
        name, args, kwargs = parse_constructor(model)
        target = namespace.get(name)
        if target is None or not callable(target) or name.startswith("_"):
            available = [key for key, value in namespace.items() if is_user_module_class(value)]
            raise _fail(
                "model_not_found",
                f"There is no class or function named {name!r} in the code.",
                "Use one of: " + (", ".join(available) or "(no nn.Module classes defined)") + ".",
                name=name,
                available=", ".join(available) or "—",
            )
        label = model.strip()
    else:
        classes = [(key, value) for key, value in namespace.items() if is_user_module_class(value)]
        if not classes:
            raise _fail(
                "no_module",
                "The code defines no nn.Module class.",
                "Define a class that subclasses nn.Module (with __init__ and forward), or name a "
                "torchvision builder in the model box, e.g. resnet50().",
            )
        name, target = classes[-1]
        args, kwargs = [], {}
        label = f"{name}()"
    for key in _BUILDERS_WITH_WEIGHTS:
        if kwargs.get(key) not in (None, False):
            raise _fail(
                "weights_not_needed",
                f"{key}={kwargs[key]!r} asks for pretrained weights, which cannot be downloaded "
                "here and do not change any shape.",
                f"Remove {key}=… from the model box.",
                argument=key,
            )
    try:
        inspect.signature(target).bind(*args, **kwargs)
    except TypeError as exc:
        signature = _signature_text(name, target)
        error = _fail(
            "constructor_args",
            f"{signature} cannot be called as {label}: {exc}.",
            f"Give the arguments in the model box, e.g. {_example_call(name, target)}.",
            signature=signature,
            example=_example_call(name, target),
            detail=str(exc),
        )
        # Point at the ``def __init__`` (or builder ``def``) whose arguments are missing.
        error.error.line = (
            _method_line(target, "__init__", user_files)
            if isinstance(target, type)
            else _user_def_line(target, user_files)
        )
        raise error from None
    except ValueError:  # builtins without a signature: let the call itself decide
        pass
    return target, args, kwargs, label


def _example_call(name: str, target: Any) -> str:
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return f"{name}(…)"
    required = [
        f"{parameter.name}=…"
        for parameter in parameters
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    return f"{name}({', '.join(required)})"


# The in-place initialisers of torch.nn.init (kaiming_normal_, uniform_, zeros_, ...).
META_INIT_FUNCTIONS = tuple(
    name
    for name in dir(nn.init)
    if name.endswith("_") and not name.startswith("_") and callable(getattr(nn.init, name))
)


@contextlib.contextmanager
def meta_initialisers_skipped() -> Iterator[None]:
    """Initialisers return meta tensors untouched while a model is built.

    A meta tensor has no values, so initialising one computes nothing a shape summary can
    use, yet it costs most of a model's construction: 64 of 79 ms for torchvision's
    ResNet-50 here, each init op going through the dispatcher. Real tensors are still
    initialised, so a notebook thread building a real model meanwhile is unaffected.
    """

    def skip_on_meta(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def initialise(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
            return original(tensor, *args, **kwargs)

        return initialise

    saved = {name: getattr(nn.init, name) for name in META_INIT_FUNCTIONS}
    try:
        for name, original in saved.items():
            setattr(nn.init, name, skip_on_meta(original))
        yield
    finally:
        for name, original in saved.items():
            setattr(nn.init, name, original)


def build_on_meta(
    target: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], label: str,
    user_files: frozenset[str] = frozenset(),
) -> nn.Module:  # fmt: skip
    try:
        with meta_initialisers_skipped(), torch.device("meta"):
            built = target(*args, **kwargs)
    except Exception as exc:
        raise AnalysisError(
            ShapeError(
                kind="constructor_error",
                message=f"Building {label} failed: {type(exc).__name__}: {exc}",
                hint="Fix the line marked in the code; it runs while the model is being built "
                "(__init__).",
                line=user_line_of(exc, user_files),
                params={"model": label, "detail": f"{type(exc).__name__}: {exc}"},
            )
        ) from None
    if not isinstance(built, nn.Module):
        raise _fail(
            "not_a_module",
            f"{label} returned a {type(built).__name__}, not an nn.Module.",
            "Name an nn.Module class or a function that returns one.",
            model=label,
            got=type(built).__name__,
        )
    return built


# ---------------------------------------------------------------------------- analysis
def _fold_rows(rows: list[LayerRow]) -> list[LayerRow]:
    """Drop the deepest levels until the table fits in MAX_ROWS."""
    depth = max((row.depth for row in rows), default=0)
    while len(rows) > MAX_ROWS and depth > 0:
        depth -= 1
        rows = [row for row in rows if row.depth <= depth or row.failed]
    return rows[:MAX_ROWS]


def _totals(report: ShapeReport, model: nn.Module) -> None:
    seen: set[int] = set()
    for parameter in model.parameters():  # shared parameters count once
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        report.total_params += parameter.numel()
        report.trainable_params += parameter.numel() if parameter.requires_grad else 0
        report.param_bytes += parameter.numel() * parameter.element_size()
    report.activation_bytes = sum(row.activation_bytes for row in report.layers if row.leaf)


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
        text = f"forward{signature}"
        error = _fail(
            "inputs_mismatch",
            f"{type(model).__name__}.{text} takes {len(parameters)} required input(s), "
            f"but {count} shape(s) were given.",
            f"Give one shape per argument of {text}, separated by ';'.",
            signature=text,
            expected=len(parameters),
            got=count,
        )
        error.error.line = _method_line(type(model), "forward", user_files)  # the def line
        raise error from None


def analyze_module(
    build: Callable[[], nn.Module] | nn.Module,
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str | None] | None = None,
    *,
    symbolic: bool = False,
    label: str = "",
    user_files: frozenset[str] = frozenset(),
) -> ShapeReport:
    """Trace a trusted model (a class, builder, or module already on meta). Never raises."""
    started = time.perf_counter()
    report = ShapeReport(model=label, symbolic=symbolic)
    try:
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
        report.input_shapes, report.input_dtypes = shapes, dtypes
        if isinstance(build, nn.Module):
            model = build
        else:
            model = build_on_meta(build, [], {}, label or getattr(build, "__name__", "model"))
        report.model = report.model or type(model).__name__
        _trace_into(report, model, shapes, dtypes, user_files)
        if symbolic and report.error is None:
            _symbolic_into(report, model, shapes, dtypes)
    except AnalysisError as exc:
        report.error = exc.error
    except Exception as exc:  # a job must return data, never raise
        report.error = ShapeError(
            kind="internal",
            message=f"The analysis stopped unexpectedly: {type(exc).__name__}: {exc}",
            hint="Try a simpler input, or report this model to the teacher.",
            params={"detail": f"{type(exc).__name__}: {exc}"},
        )
    report.elapsed_s = time.perf_counter() - started
    return report


def _trace_into(
    report: ShapeReport,
    model: nn.Module,
    shapes: list[list[int]],
    dtypes: list[str],
    user_files: frozenset[str],
) -> None:
    _check_forward_arguments(model, len(shapes), report.model, user_files)
    model.eval()  # BatchNorm/Dropout in eval mode, as a shape summary expects
    tracer = ShapeTracer(model, user_files=user_files)
    try:
        with torch.no_grad():
            output = tracer.run(meta_inputs(shapes, dtypes))
    except Exception as exc:
        report.layers = _fold_rows(tracer.rows)
        state = tracer.state
        row = tracer.rows[state.failed_row] if state.failed_row is not None else None
        report.error = explain_layer_failure(
            exc,
            layer=row.name if row else "",
            module=state.failed_module if row is not None and row.kind == "module" else None,
            op=row.type if row is not None and row.kind == "function" else None,
            input_shapes=row.input_shapes if row else shapes,
            line=user_line_of(exc, user_files) or (row.line if row else None),
        )
        _totals(report, model)
        return
    report.layers = _fold_rows(tracer.rows)
    report.outputs = [list(tensor.shape) for tensor in tensors_in(output)]
    report.flops = tracer.total_flops
    _totals(report, model)


def _symbolic_into(
    report: ShapeReport, model: nn.Module, shapes: list[list[int]], dtypes: list[str]
) -> None:
    names = dim_names(shapes, dtypes)
    report.dim_names = names
    try:
        inputs = SymbolicInputs(shapes, [DTYPES[dtype] for dtype in dtypes], names)
        claimed = 0
        rows: list[LayerRow] = []

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
        report.symbolic_note = (
            f"Formulas are not available for this model: {type(exc).__name__}: {first_line[:300]}"
        )
        return
    report.symbolic_inputs = [[inputs.size(size) for size in t.shape] for t in inputs.tensors]
    report.symbolic_outputs = [[inputs.size(size) for size in t.shape] for t in tensors_in(output)]
    if len(rows) != len(report.layers) or any(
        (a.name, a.type) != (b.name, b.type) for a, b in zip(rows, report.layers, strict=False)
    ):
        report.symbolic_note = (
            "The model takes a different path when sizes are symbols, so formulas are shown "
            "for the outputs only."
        )
        return
    for concrete, formula in zip(report.layers, rows, strict=True):
        concrete.symbolic_output_shapes = formula.output_shapes
        concrete.constraints = formula.constraints
        for constraint in formula.constraints:
            report.constraints.append(
                {"layer": attribute_path(concrete.name) if concrete.name else report.model,
                 "constraint": constraint}
            )  # fmt: skip


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
        built = build_on_meta(target, args, kwargs, label, user_files)
    except AnalysisError as exc:
        report = ShapeReport(model=model or "", symbolic=symbolic, error=exc.error)
        report.elapsed_s = time.perf_counter() - started
        return report.to_dict()
    except Exception as exc:
        report = ShapeReport(
            error=ShapeError(kind="internal", message=f"{type(exc).__name__}: {exc}")
        )
        return report.to_dict()
    report = analyze_module(
        built, input_shapes, input_dtypes, symbolic=symbolic, label=label, user_files=user_files
    )
    report.elapsed_s = time.perf_counter() - started
    return report.to_dict()


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
    with torch.device("meta"):
        model(*meta_inputs(shapes, dtypes))
    return time.perf_counter() - started


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
    report = WhyMetaReport()
    user_files = user_files_of(namespace)
    try:
        target, args, kwargs, label = find_model(namespace, model, user_files)
        shapes, dtypes = validate_inputs(input_shapes, input_dtypes)
        meta_model = build_on_meta(target, args, kwargs, label).eval()
        _check_forward_arguments(meta_model, len(shapes), label, user_files)
        params = sum(parameter.numel() for parameter in meta_model.parameters())
        real_model = None
        if params <= MAX_REAL_PARAMS:
            real_model = target(*args, **kwargs).eval()
        spent = 0.0
        with torch.no_grad():
            first = _with_batch(shapes, batches[0])
            with torch.device("meta"):  # warm-up: first calls pay one-off dispatch costs
                meta_model(*meta_inputs(first, dtypes))
            if real_model is not None and _input_bytes(first, dtypes) <= MAX_REAL_INPUT_BYTES:
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
                    real_model(*tensors)
                    real_s = time.perf_counter() - started
                    spent += real_s
                    del tensors
                report.points.append(WhyMetaPoint(batch, batch_shapes, meta_s, real_s, size))
    except AnalysisError as exc:
        report.error = exc.error
    except Exception as exc:
        report.error = ShapeError(
            kind="forward_error",
            message=f"The comparison stopped: {type(exc).__name__}: {exc}",
            hint="Run the shape analysis first; it explains errors in detail.",
            params={
                "op": "why meta?",
                "shapes": shape_text(list(input_shapes[0]) if input_shapes else []),
                "layer": "model",
                "detail": f"{type(exc).__name__}: {exc}",
            },
        )
    return report.to_dict()
