"""Errors that teach: turn a failed meta forward into the layer, the shapes, and the fix.

The layer that was running and the shapes it received are more reliable than PyTorch's message
text (on meta, ``F.linear`` says "a and b must have same reduction dim", a convolution only
"Invalid channel dimensions"), so hints come from the module first and the message second.
Each explanation is a code and the parameters its texts need (the fix as code, the sizes);
the sentences live in the translation tables under ``shapes.errors.<kind>``.
"""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from torchatlas.shapes.report import ErrorKind, Shape, ShapeError

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


def _conv_call(module: nn.modules.conv._ConvNd, in_channels: int) -> str:
    kind = type(module).__name__
    kernel = module.kernel_size[0] if len(set(module.kernel_size)) == 1 else module.kernel_size
    extras = [f"kernel_size={kernel}"]
    if any(stride != 1 for stride in module.stride):
        stride = module.stride[0] if len(set(module.stride)) == 1 else module.stride
        extras.append(f"stride={stride}")
    if isinstance(module.padding, str) or any(module.padding):
        padding = module.padding
        if not isinstance(padding, str) and len(set(padding)) == 1:
            padding = padding[0]
        extras.append(f"padding={padding!r}" if isinstance(padding, str) else f"padding={padding}")
    return f"nn.{kind}({in_channels}, {module.out_channels}, {', '.join(extras)})"


def explain_layer_failure(
    exc: BaseException,
    *,
    layer: str,
    module: nn.Module | None,
    op: str | None,
    input_shapes: list[Shape],
    line: int | None,
) -> ShapeError:
    """The most specific explanation we can give for ``exc`` raised inside ``layer``."""
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

    first = input_shapes[0] if input_shapes else []
    if op is None and isinstance(module, nn.Linear) and first and first[-1] != module.in_features:
        got, expected = first[-1], module.in_features
        fix = f"{where} = nn.Linear({got}, {module.out_features})"
        return error(ErrorKind.LINEAR_IN_FEATURES, got=got, expected=expected, fix=fix)
    if (
        op is None
        and isinstance(module, nn.modules.conv._ConvNd)
        and first
        and len(first) >= len(module.kernel_size) + 1
    ):
        channels = first[-len(module.kernel_size) - 1]
        if channels != module.in_channels:
            fix = f"{where} = {_conv_call(module, channels)}"
            return error(
                ErrorKind.CONV_IN_CHANNELS, got=channels, expected=module.in_channels, fix=fix
            )
    if op is None and isinstance(module, nn.modules.batchnorm._NormBase) and len(first) >= 2:
        channels = first[1]
        if channels != module.num_features:
            fix = f"{where} = nn.{type(module).__name__}({channels})"
            return error(
                ErrorKind.NORM_FEATURES, got=channels, expected=module.num_features, fix=fix
            )
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
