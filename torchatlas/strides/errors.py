"""PyTorch's refusals in plain words: the cause and the fix, with a stable ``code``.

The page shows ``t(f"strides.errors.{code}", **params)``; ``message`` is the same text in
English for notebooks and tests. PyTorch's own message always travels along.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from torchatlas.strides.parser import OpParseError, ParsedOp
from torchatlas.strides.trace import MAX_ELEMENTS, StepError

TEMPLATES: dict[str, str] = {
    "view_incompatible": (
        "`{text}` cannot be a view: the elements are not laid out in storage so that the new "
        "shape can walk them with fixed strides. Use reshape (which will copy here), or call "
        ".contiguous() first."
    ),
    "negative_step": (
        "`{text}` asks for a negative step. PyTorch has no negative strides; flip() copies "
        "the elements in reverse order instead."
    ),
    "negative_stride": (
        "`{text}` asks for a negative stride. PyTorch has no negative strides; flip() copies "
        "the elements in reverse order instead."
    ),
    "as_strided_out_of_bounds": (
        "`{text}`: element {element} would read storage cell {cell}, but the storage has only "
        "{cells} cells (0 to {last_cell}). Make the size, stride or offset smaller."
    ),
    "dim_out_of_range": (
        "`{text}`: dimension {dim} does not exist. The tensor has {rank} dimensions, so use "
        "{low} to {high}."
    ),
    "index_out_of_range": (
        "`{text}`: index {index} is past the end of dimension {dim}, which has size {size}. "
        "Use 0 to {last} (or -{size} to -1)."
    ),
    "expand_mismatch": (
        "`{text}`: expand can only stretch dimensions of size 1 (it gives them stride 0); "
        "dimension {dim} has size {size}, not 1. Use -1 to keep it, or unsqueeze first."
    ),
    "shape_invalid": (
        "`{text}`: the new shape {shape} does not hold {numel} elements. The sizes must "
        "multiply to {numel} (use -1 for one size to let PyTorch work it out)."
    ),
    "view_dtype": (
        "`{text}`: to reinterpret the bytes as a dtype of a different size, the last "
        "dimension must have stride 1 and its bytes must divide evenly. Call .contiguous() "
        "first, or pick a last size that fits."
    ),
    "channels_last_rank": (
        "`{text}`: channels_last describes 4-D tensors (N, C, H, W); this tensor has {rank} "
        "dimensions. Reshape to 4-D first."
    ),
    "overlap_write": (
        "More than one element of this tensor reads the same storage cell (a stride of 0, "
        "as expand makes), so an in-place write would hit one cell several times. PyTorch "
        "refuses; clone() the tensor first to give every element its own cell."
    ),
    "too_large": (
        "`{text}` would make {numel} elements; this room works with at most {limit} so a "
        "classroom can share the server. Use smaller sizes."
    ),
    "piece_out_of_range": (
        "`{text}` gave {pieces} pieces; [{pick}] is not one of them. Pick a piece from 0 to {last}."
    ),
    "wrong_type": "`{text}`: {detail}. Check the arguments' types and count.",
    "torch_error": "`{text}`: PyTorch refused this op. Check its arguments against the sizes.",
}


def _error(code: str, text: str, torch_message: str | None = None, **params: Any) -> StepError:
    params = {"text": text, **params}
    return StepError(code, text, TEMPLATES[code].format(**params), params, torch_message)


def too_large(text: str, numel: int) -> StepError:
    return _error("too_large", text, numel=f"{numel:,}", limit=f"{MAX_ELEMENTS:,}")


def overlap_write(text: str, torch_message: str) -> StepError:
    return _error("overlap_write", text, torch_message)


def _first_outside(op: ParsedOp, tensor: torch.Tensor) -> dict[str, Any] | None:
    """For an out-of-bounds as_strided: the first element (row-major) outside the storage."""
    named = dict(zip(("size", "stride", "storage_offset"), op.args, strict=False))
    named.update(op.kwargs)
    size, stride = tuple(named.get("size", ())), tuple(named.get("stride", ()))
    offset = named.get("storage_offset", tensor.storage_offset())
    if len(size) != len(stride) or any(s < 0 for s in stride) or any(n <= 0 for n in size):
        return None
    cells = tensor.untyped_storage().nbytes() // tensor.element_size()
    total = 1
    for n in size:
        total *= n
    element: tuple[int, ...]
    if total <= MAX_ELEMENTS:
        reads = offset + sum(
            torch.arange(n).reshape([-1 if d == i else 1 for d in range(len(size))]) * s
            for i, (n, s) in enumerate(zip(size, stride, strict=True))
        )
        reads = torch.as_tensor(reads).reshape(-1)
        outside = (reads >= cells).nonzero()
        if outside.numel() == 0:
            return None
        flat = int(outside[0])
        element = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), size))
        cell = int(reads[flat])
    else:
        element = tuple(n - 1 if s > 0 else 0 for n, s in zip(size, stride, strict=True))
        cell = offset + sum(i * s for i, s in zip(element, stride, strict=True))
        if cell < cells:
            return None
    return {
        "element": "(" + ", ".join(map(str, element)) + ("," if len(element) == 1 else "") + ")",
        "cell": cell,
        "cells": cells,
        "last_cell": cells - 1,
    }


def explain(exc: BaseException, op: ParsedOp, tensor: torch.Tensor) -> StepError:
    """The cause and fix for an exception PyTorch raised while applying ``op``."""
    text = op.text
    message = str(exc).strip()
    if isinstance(exc, OpParseError):
        params = {k: v for k, v in exc.params.items() if k != "text"}
        if exc.code == "piece_out_of_range":
            params["last"] = int(params["pieces"]) - 1
        return _error(exc.code, text, None, **params)
    first_line = message.splitlines()[0] if message else type(exc).__name__
    if "view size is not compatible" in message:
        return _error("view_incompatible", text, first_line)
    if "step must be greater than zero" in message:
        return _error("negative_step", text, first_line)
    if "Negative strides are not supported" in message:
        return _error("negative_stride", text, first_line)
    if "out of bounds for storage" in message and op.name == "as_strided":
        where = _first_outside(op, tensor)
        if where is not None:
            return _error("as_strided_out_of_bounds", text, first_line, **where)
    if match := re.search(r"Dimension out of range \(expected to be in range of "
                          r"\[(-?\d+), (-?\d+)\], but got (-?\d+)\)", message):  # fmt: skip
        low, high, dim = (int(g) for g in match.groups())
        return _error(
            "dim_out_of_range", text, first_line, dim=dim, rank=high + 1, low=low, high=high
        )
    if match := re.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)",
                          message):  # fmt: skip
        index, dim, size = (int(g) for g in match.groups())
        return _error(
            "index_out_of_range", text, first_line, index=index, dim=dim, size=size, last=size - 1
        )
    if match := re.search(r"expanded size of the tensor \((-?\d+)\) must match the existing "
                          r"size \((\d+)\) at non-singleton dimension (\d+)", message):  # fmt: skip
        _, size, dim = (int(g) for g in match.groups())
        return _error("expand_mismatch", text, first_line, dim=dim, size=size)
    if match := re.search(r"shape '(\[[^\]]*\])' is invalid for input of size (\d+)", message):
        return _error(
            "shape_invalid", text, first_line, shape=match.group(1), numel=int(match.group(2))
        )
    if "different element sizes" in message:
        return _error("view_dtype", text, first_line)
    if "channels_last format" in message:
        return _error("channels_last_rank", text, first_line, rank=tensor.dim())
    if "refers to a single memory location" in message:
        return _error("overlap_write", text, first_line)
    if isinstance(exc, TypeError):
        detail = first_line.split(" (Triggered internally")[0]
        return _error("wrong_type", text, first_line, detail=detail[:160])
    return _error("torch_error", text, first_line)
