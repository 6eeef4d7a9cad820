"""PyTorch's refusals, explained: an exception PyTorch raised while applying a parsed op (an op
of the chain, or an in-place write) becomes a :class:`~torchatlas.strides.errors.StepError`,
the cause and the fix as a code and parameters; PyTorch's own words always travel along as
a :class:`~torchatlas.errors.TorchRefusal`. It reads the parsed op, so it sits above both
``errors`` and ``parser``.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from torchatlas.errors import TorchRefusal
from torchatlas.strides.dtypes import dtype_name
from torchatlas.strides.errors import ErrorCode, OpParseError, StepError, encode_conditions
from torchatlas.strides.limits import MAX_ELEMENTS
from torchatlas.strides.parser import OpKind, ParsedOp
from torchatlas.strides.reinterpret import apply_ops, failing, find_fix, ratio_of


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
    farthest = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if total <= MAX_ELEMENTS and farthest < 2**63:  # int64 arithmetic cannot overflow
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


# PyTorch's messages name dtypes by their C++ scalar type; the room names them as torch does.
_SCALAR_TYPES = {
    "Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32",
    "Long": "int64", "Half": "float16", "Float": "float32", "Double": "float64",
    "BFloat16": "bfloat16", "ComplexHalf": "complex32", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
}  # fmt: skip


def _value_range(dtype: torch.dtype) -> tuple[str, str]:
    """The lowest and highest number ``dtype`` holds, as the error shows them."""
    if dtype == torch.bool:
        return "0", "1"
    info = torch.finfo(dtype) if dtype.is_floating_point or dtype.is_complex else None
    if info is None:
        integer = torch.iinfo(dtype)
        return f"{integer.min:,}", f"{integer.max:,}"
    return f"{info.min:g}", f"{info.max:g}"


def explain_safely(exc: BaseException, op: ParsedOp, tensor: torch.Tensor) -> StepError:
    """:func:`explain`, which never raises: an exception while explaining (an argument too
    large for the arithmetic that locates the problem) keeps PyTorch's own words."""
    try:
        return explain(exc, op, tensor)
    except Exception:
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        refusal = TorchRefusal.of(exc, first_line[:300], call=op.text)
        return StepError(ErrorCode.TORCH_ERROR, op.text, {}, refusal)


def _view_dtype(op: ParsedOp) -> torch.dtype | None:
    """The dtype of ``.view(torch.<dtype>)`` (positional or keyword), else None."""
    if op.kind is not OpKind.METHOD or op.name != "view" or op.pick is not None:
        return None
    dtype = op.kwargs.get("dtype", op.args[0] if len(op.args) == 1 else None)
    return dtype if isinstance(dtype, torch.dtype) else None


def view_dtype_refusal(op: ParsedOp, tensor: torch.Tensor) -> dict[str, Any] | None:
    """For ``.view(dtype)`` across element sizes: the parameters of its refusal, computed
    from the tensor (the first failing condition, the others that fail, and a fix PyTorch
    accepted when the room ran it); None when every condition holds (then PyTorch refused
    for another reason, and its own words are shown)."""
    dtype = _view_dtype(op)
    if dtype is None or dtype.itemsize == tensor.element_size():
        return None
    failed = failing(tensor, dtype)
    if not failed:
        return None
    ratio, larger = ratio_of(tensor, dtype)
    parts = [(check.condition.value, check.got, check.dim) for check in failed]
    fix = find_fix(tensor, dtype, op.text)
    return {
        "condition": encode_conditions(parts[:1]),
        "others": encode_conditions(parts[1:]),
        "ratio": ratio,
        "larger": larger,
        "old": dtype_name(tensor.dtype),
        "new": dtype_name(dtype),
        "old_size": tensor.element_size(),
        "new_size": dtype.itemsize,
        "nbytes": tensor.numel() * tensor.element_size(),
        "numel": tensor.numel(),
        "kept": tensor.numel() if fix is None else apply_ops(tensor, fix).numel(),
        "fix": "" if fix is None else " → ".join(f"`{line}`" for line in fix),
    }


def explain(exc: BaseException, op: ParsedOp, tensor: torch.Tensor) -> StepError:
    """The cause and fix for an exception PyTorch raised while applying ``op`` to ``tensor``
    (an op of the chain, or an in-place write)."""
    text = op.text
    if isinstance(exc, OpParseError):
        params = {k: v for k, v in exc.params.items() if k != "text"}
        if exc.code == ErrorCode.PIECE_OUT_OF_RANGE:
            params["last"] = int(params["pieces"]) - 1
        return StepError(exc.code, text, params)
    message_text = str(exc).strip()[:4000]
    first_line = message_text.splitlines()[0][:500] if message_text else type(exc).__name__

    def error(code: ErrorCode, **params: Any) -> StepError:
        # the condition is the room's lesson, read from the tensor (none for torch_error)
        condition = "" if code is ErrorCode.TORCH_ERROR else code.value
        return StepError(code, text, params, TorchRefusal.of(exc, first_line, call=text,
                                                             condition=condition))  # fmt: skip

    refusal = view_dtype_refusal(op, tensor)
    if refusal is not None:  # decided from the tensor's layout, not from PyTorch's words
        return error(ErrorCode.VIEW_DTYPE, **refusal)
    if "view size is not compatible" in message_text:
        return error(ErrorCode.VIEW_INCOMPATIBLE)
    if "step must be greater than zero" in message_text:
        return error(ErrorCode.NEGATIVE_STEP)
    if "Negative strides are not supported" in message_text:
        return error(ErrorCode.NEGATIVE_STRIDE)
    if "out of bounds for storage" in message_text and op.name == "as_strided":
        where = _first_outside(op, tensor)
        if where is not None:
            return error(ErrorCode.AS_STRIDED_OUT_OF_BOUNDS, **where)
    if match := re.search(r"Dimension out of range \(expected to be in range of "
                          r"\[(-?\d+), (-?\d+)\], but got (-?\d+)\)", message_text):  # fmt: skip
        low, high, dim = (int(g) for g in match.groups())
        return error(ErrorCode.DIM_OUT_OF_RANGE, dim=dim, rank=high + 1, low=low, high=high)
    if match := re.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)",
                          message_text):  # fmt: skip
        index, dim, size = (int(g) for g in match.groups())
        return error(ErrorCode.INDEX_OUT_OF_RANGE, index=index, dim=dim, size=size, last=size - 1)
    if match := re.search(r"expanded size of the tensor \((-?\d+)\) must match the existing "
                          r"size \((\d+)\) at non-singleton dimension (\d+)",
                          message_text):  # fmt: skip
        _, size, dim = (int(g) for g in match.groups())
        return error(ErrorCode.EXPAND_MISMATCH, dim=dim, size=size)
    if match := re.search(r"shape '(\[[^\]]*\])' is invalid for input of size (\d+)",
                          message_text):  # fmt: skip
        return error(ErrorCode.SHAPE_INVALID, shape=match.group(1), numel=int(match.group(2)))
    if "channels_last format" in message_text:
        return error(ErrorCode.CHANNELS_LAST_RANK, rank=tensor.dim())
    if "refers to a single memory location" in message_text:
        return error(ErrorCode.OVERLAP_WRITE)
    if match := re.search(r"result type (\w+) can't be cast to the desired output type (\w+)",
                          message_text):  # fmt: skip
        result = _SCALAR_TYPES.get(match.group(1), match.group(1))
        return error(ErrorCode.WRITE_CAST, result=result, dtype=dtype_name(tensor.dtype))
    if "without overflow" in message_text:
        low, high = _value_range(tensor.dtype)
        return error(ErrorCode.WRITE_OVERFLOW, dtype=dtype_name(tensor.dtype), low=low, high=high)
    if "not implemented for" in message_text:
        return error(ErrorCode.DTYPE_UNSUPPORTED, dtype=dtype_name(tensor.dtype))
    if isinstance(exc, TypeError):
        detail = first_line.split(" (Triggered internally")[0]
        return error(ErrorCode.WRONG_TYPE, detail=detail[:160])
    return error(ErrorCode.TORCH_ERROR)
