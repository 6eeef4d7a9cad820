"""Errors that teach: turn a failed meta forward into the layer, the shapes, and the fix.

The layer that was running and the shapes it received are more reliable than PyTorch's message
text (on meta, ``F.linear`` says "a and b must have same reduction dim", a convolution only
"Invalid channel dimensions"), so hints come from the module first and the message second.
Each explanation is a code and the parameters its texts need (the fix as code, the sizes);
the sentences live in the translation tables under ``shapes.errors.<kind>``.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch
from torch import nn

from torchatlas.shapes.report import ErrorKind, Shape, ShapeError
from torchatlas.shapes.trace import RealForwardError, RealKernelCheck

_MATMUL = re.compile(r"\((\d+)x(\d+) and (\d+)x(\d+)\)|\[(\d+), (\d+)\] X \[(\d+), (\d+)\]")
# PyTorch's words for a step that needs values → the code that step is written as.
_DATA_DEPENDENT = (
    ("item() cannot be called on meta", "Tensor.item() / bool(tensor)"),
    ("Cannot copy out of meta tensor", ".tolist() / .numpy() / .cpu()"),
    ("torch.nonzero()", "nonzero() / x[mask]"),
    ("aten::nonzero", "nonzero() / x[mask]"),
    ("aten::masked_select", "masked_select()"),
    ("aten::_unique", "unique()"),
    ("aten::unique", "unique()"),
    ("data-dependent", None),  # the failing op's own name, when known
    ("aten::_local_scalar_dense", "Tensor.item() / bool(tensor)"),
)


def attribute_path(name: str) -> str:
    """``classifier.1`` → ``classifier[1]``: how the layer is written in Python."""
    if not name:
        return "model"
    parts = name.split(".")
    out = "model" if parts[0].isdigit() else parts[0]
    for part in parts[1 if not parts[0].isdigit() else 0 :]:
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


def shape_text(shape: Shape) -> str:
    """``2×3``; a scalar is ``()``, as Python writes an empty shape."""
    return "×".join(str(size) for size in shape) if shape else "()"


def shapes_text(shapes: list[Shape]) -> str:
    return ", ".join(shape_text(shape) for shape in shapes) or "—"


# ---------------------------------------------------------------------------- fixes
_SKIPPED = frozenset({"self", "device"})


def _constructor_values(module: nn.Module) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """What builds ``module`` again, read off the module itself: the names its class's
    ``__init__`` requires, every argument's value (``bias`` as whether it has one, ``dtype``
    as its parameters' dtype when not the default) and their defaults. Raises KeyError for
    an argument the module does not keep (it cannot be rebuilt faithfully)."""
    signature = inspect.signature(type(module).__init__)
    required: list[str] = []
    values: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if name in _SKIPPED or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name == "dtype":
            weights = [p for p in module.parameters(recurse=False) if p.is_floating_point()]
            dtype = weights[0].dtype if weights else None
            values[name] = None if dtype in (None, torch.get_default_dtype()) else dtype
        elif name == "bias":
            values[name] = getattr(module, "bias", None) is not None
        elif hasattr(module, name):
            values[name] = getattr(module, name)
        else:
            raise KeyError(name)
        if parameter.default is parameter.empty:
            required.append(name)
        else:
            defaults[name] = parameter.default
    return required, values, defaults


def _plain_value(value: Any) -> Any:
    """A size tuple whose entries agree as the one number the constructor widens again."""
    if isinstance(value, tuple) and value and all(item == value[0] for item in value):
        return value[0]
    return value


def _value_text(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value)  # "torch.float64"
    return repr(value)


def _call_text(
    module: nn.Module, change: dict[str, Any]
) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]] | None:
    """``nn.Conv2d(6, 8, kernel_size=3, stride=2, groups=2, bias=False)``: the constructor
    of ``module`` with ``change`` applied and every other argument as the module has it
    (an argument equal to its default is left out), with the positional and keyword values
    the text passes and every argument's value. None for a class outside torch.nn or one
    whose arguments the module does not keep."""
    kind = type(module)
    if getattr(nn, kind.__name__, None) is not kind:
        return None
    try:
        required, values, defaults = _constructor_values(module)
    except (KeyError, TypeError, ValueError):
        return None
    values = {**values, **change}
    # The first two required arguments by position (``nn.Linear(256, 120)``), any further
    # one by name (``kernel_size=5``), then each optional one that is not its default.
    positional = [_plain_value(values[name]) for name in required[:2]]
    keywords = {name: _plain_value(values[name]) for name in required[2:]}
    keywords |= {
        name: _plain_value(values[name])
        for name in defaults
        if _plain_value(values[name]) != _plain_value(defaults[name])
    }
    parts = [_value_text(value) for value in positional]
    parts += [f"{name}={_value_text(value)}" for name, value in keywords.items()]
    return f"nn.{kind.__name__}({', '.join(parts)})", positional, keywords, values


def _same(a: Any, b: Any) -> bool:
    return _plain_value(a) == _plain_value(b)


def checked_fix(module: nn.Module, change: dict[str, Any], args: tuple, kwargs: dict) -> str:
    """The constructor call that fixes ``module`` by ``change`` alone, or "" when there is
    none to offer. The call is built exactly as its text says and re-traced on the very
    inputs the layer received (meta, with the real kernels' dtype check); it is offered only
    when that runs and the new layer keeps every other argument of the old one."""
    call = _call_text(module, change)
    if call is None:
        return ""
    text, positional, keywords, values = call
    try:
        with torch.device("meta"):
            fixed = type(module)(*positional, **keywords)
        before = _constructor_values(module)[1]
        after = _constructor_values(fixed)[1]
        if set(before) != set(after) or any(
            not _same(after[name], values[name] if name in change else before[name])
            for name in before
        ):
            return ""
        if not args:
            return ""
        with torch.no_grad(), RealKernelCheck():
            fixed(*args, **kwargs)
    except Exception:
        return ""
    return text


def _size_mismatch(
    module: nn.Module | None, first: Shape
) -> tuple[ErrorKind, str, int, int] | None:
    """A layer whose size attribute disagrees with its first input's shape: the error's
    kind, the constructor argument to change, what the input has and what the layer
    expected (None: no such disagreement)."""
    if isinstance(module, nn.Linear) and first and first[-1] != module.in_features:
        return ErrorKind.LINEAR_IN_FEATURES, "in_features", first[-1], module.in_features
    if (
        isinstance(module, nn.modules.conv._ConvNd)
        and first
        and len(first) >= len(module.kernel_size) + 1
    ):
        channels = first[-len(module.kernel_size) - 1]
        if channels != module.in_channels:
            return ErrorKind.CONV_IN_CHANNELS, "in_channels", channels, module.in_channels
    if isinstance(module, nn.modules.batchnorm._NormBase) and len(first) >= 2:
        channels = first[1]
        if channels != module.num_features:
            return ErrorKind.NORM_FEATURES, "num_features", channels, module.num_features
    return None


def explain_layer_failure(
    exc: BaseException,
    *,
    layer: str,
    module: nn.Module | None,
    op: str | None,
    input_shapes: list[Shape],
    line: int | None,
    args: tuple = (),
    kwargs: dict | None = None,
) -> ShapeError:
    """The most specific explanation we can give for ``exc`` raised inside ``layer``.
    ``args`` and ``kwargs``: what the failed module received (meta tensors), on which a
    suggested fix is re-traced before it is offered (none is offered without them)."""
    kwargs = kwargs or {}
    text = str(exc)
    where = attribute_path(layer)
    common: dict[str, Any] = {"layer": where, "shapes": shapes_text(input_shapes)}

    def error(kind: ErrorKind, **params: Any) -> ShapeError:
        return ShapeError(
            kind=kind,
            params={**common, **params},
            line=line,
            layer=where,
            input_shapes=input_shapes,
        )

    for needle, what in _DATA_DEPENDENT:
        if needle in text:
            return error(ErrorKind.DATA_DEPENDENT, what=what or op or where)

    if isinstance(exc, RealForwardError):  # meta ran it; the real kernel refuses the dtypes
        return error(
            ErrorKind.DTYPE_MISMATCH,
            dtypes=", ".join(exc.dtypes),
            works=exc.works,
            op=exc.op,
            detail=str(exc),
        )

    def fix(change: dict[str, Any]) -> str:
        call = checked_fix(module, change, args, kwargs) if module is not None else ""
        return f"{where} = {call}" if call else ""

    first = input_shapes[0] if input_shapes else []
    mismatch = _size_mismatch(module, first) if op is None else None
    if mismatch is not None:
        kind, attribute, got, expected = mismatch
        return error(kind, got=got, expected=expected, fix=fix({attribute: got}))
    if op is None and isinstance(module, nn.Embedding) and "scalar types" in text:
        return error(ErrorKind.EMBEDDING_DTYPE)
    match = _MATMUL.search(text)
    if match:
        numbers = [int(value) for value in match.groups() if value is not None]
        rows, inner, other_inner, cols = numbers
        return error(
            ErrorKind.MATMUL_MISMATCH,
            got=inner,
            expected=other_inner,
            rows=rows,
            cols=cols,
        )
    summary = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return error(ErrorKind.FORWARD_ERROR, op=op or where, detail=f"{type(exc).__name__}: {summary}")
