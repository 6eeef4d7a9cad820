"""Errors that teach: turn a failed meta forward into the layer, the shapes, and the fix.

The layer that was running and the shapes it received are more reliable than PyTorch's message
text (on meta, ``F.linear`` says "a and b must have same reduction dim", a convolution only
"Invalid channel dimensions"), so hints come from the module first and the message second.
"""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from torchatlas.shapes.report import Shape, ShapeError

_MATMUL = re.compile(r"\((\d+)x(\d+) and (\d+)x(\d+)\)|\[(\d+), (\d+)\] X \[(\d+), (\d+)\]")
_DATA_DEPENDENT = (
    ("item() cannot be called on meta", "Tensor.item() / bool(tensor)"),
    ("Cannot copy out of meta tensor", ".tolist() / .numpy() / .cpu()"),
    ("torch.nonzero()", "nonzero() / boolean mask"),
    ("aten::nonzero", "nonzero() / boolean mask"),
    ("aten::masked_select", "masked_select()"),
    ("aten::_unique", "unique()"),
    ("aten::unique", "unique()"),
    ("data-dependent", "a value-dependent operation"),
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
    return "×".join(str(size) for size in shape) if shape else "scalar"


def shapes_text(shapes: list[Shape]) -> str:
    return ", ".join(shape_text(shape) for shape in shapes) or "no tensors"


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
    shapes = shapes_text(input_shapes)
    common: dict[str, Any] = {"layer": where, "shapes": shapes}

    def error(kind: str, message: str, hint: str, **params: Any) -> ShapeError:
        return ShapeError(
            kind=kind,
            message=message,
            hint=hint,
            line=line,
            layer=where,
            params={**common, **params},
            input_shapes=input_shapes,
        )

    for needle, what in _DATA_DEPENDENT:
        if needle in text:
            return error(
                "data_dependent",
                f"`{where}` uses {what}, which needs the tensor's values; "
                "meta tensors have shapes but no values.",
                "Keep forward shape-only: branch on x.shape or x.size(), use torch.where instead "
                "of boolean masks, and move value checks (if x.sum() > 0, .item()) out of the "
                "model.",
                what=what,
            )

    first = input_shapes[0] if input_shapes else []
    if op is None and isinstance(module, nn.Linear) and first and first[-1] != module.in_features:
        got, expected = first[-1], module.in_features
        fix = f"{where} = nn.Linear({got}, {module.out_features})"
        return error(
            "linear_in_features",
            f"`{where}` expects {expected} input features but receives {got} "
            f"(input {shape_text(first)}).",
            f"Set `{fix}`, or change the layers before it so they output {expected} features.",
            got=got,
            expected=expected,
            fix=fix,
        )
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
                "conv_in_channels",
                f"`{where}` expects {module.in_channels} input channels but receives {channels} "
                f"(input {shape_text(first)}).",
                f"Set `{fix}`, or make the layer before it output {module.in_channels} channels.",
                got=channels,
                expected=module.in_channels,
                fix=fix,
            )
    if op is None and isinstance(module, nn.modules.batchnorm._NormBase) and len(first) >= 2:
        channels = first[1]
        if channels != module.num_features:
            fix = f"{where} = nn.{type(module).__name__}({channels})"
            return error(
                "norm_features",
                f"`{where}` normalises {module.num_features} channels but receives {channels} "
                f"(input {shape_text(first)}).",
                f"Set `{fix}` to match the layer before it.",
                got=channels,
                expected=module.num_features,
                fix=fix,
            )
    if op is None and isinstance(module, nn.Embedding) and "scalar types" in text:
        return error(
            "embedding_dtype",
            f"`{where}` looks up token ids, so its input must be integers, not floats.",
            "Set this input's dtype to long (token ids) in the inputs box.",
        )
    match = _MATMUL.search(text)
    if match:
        numbers = [int(value) for value in match.groups() if value is not None]
        rows, inner, other_inner, cols = numbers
        return error(
            "matmul_mismatch",
            f"`{where}` multiplies a {rows}×{inner} matrix by a {other_inner}×{cols} one: "
            f"the inner sizes {inner} and {other_inner} must be equal.",
            f"Make the input's last size {other_inner}, or change the layer to accept {inner}.",
            got=inner,
            expected=other_inner,
        )
    summary = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return error(
        "forward_error",
        f"{op or where} failed on inputs {shapes}: {type(exc).__name__}: {summary}",
        "Check the shapes going into this step against what it expects; the table above shows "
        "every shape up to here.",
        op=op or where,
        detail=f"{type(exc).__name__}: {summary}",
    )
