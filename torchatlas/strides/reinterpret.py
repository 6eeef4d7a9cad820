"""``view(dtype)`` to a dtype of another element size: every condition PyTorch checks, computed
from the tensor itself, and a fix found by running it.

Reading the same bytes as a dtype whose elements are ``ratio`` times smaller or larger is a
view only when the layout allows it. Each condition is computed here from the tensor's size,
stride and storage offset (never guessed from PyTorch's wording), in the order PyTorch checks
them, so the first that fails is the one PyTorch names; a fix is offered only after PyTorch
accepted it on this very tensor and the result read the intended bytes.

>>> import torch
>>> x = torch.arange(12.0).reshape(3, 4).t()
>>> [(c.condition.value, c.got) for c in failing(x, torch.float16)]
[('last_stride', 4)]
>>> find_fix(x, torch.float16)
('.contiguous()',)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import torch

from torchatlas.strides.parser import parse_op


class Condition(StrEnum):
    """One condition of ``view(dtype)`` across element sizes (PyTorch's own checks)."""

    RANK = "rank"  # self.dim() > 0
    LAST_SIZE = "last_size"  # larger elements: self.size(-1) divisible by the ratio
    OFFSET = "offset"  # larger elements: self.storage_offset() divisible by the ratio
    LAST_STRIDE = "last_stride"  # self.stride(-1) == 1
    STRIDE = "stride"  # larger elements: self.stride(d) divisible by the ratio, d < last


@dataclass(frozen=True)
class Check:
    """A condition on this tensor: whether it holds, and the number it reads (``got``)."""

    condition: Condition
    holds: bool
    got: int
    dim: int | None = None  # for STRIDE: which dimension's stride


def ratio_of(tensor: torch.Tensor, dtype: torch.dtype) -> tuple[int, bool]:
    """How many times larger one element is than the other, and whether the new one is the
    larger (1 and False for the same element size)."""
    old, new = tensor.element_size(), dtype.itemsize
    return (new // old, True) if new > old else (old // new, False)


def checks(tensor: torch.Tensor, dtype: torch.dtype) -> list[Check]:
    """Every condition ``tensor.view(dtype)`` needs, in the order PyTorch checks them (none
    for a dtype of the same element size: that view always works)."""
    ratio, larger = ratio_of(tensor, dtype)
    if ratio == 1 and tensor.element_size() == dtype.itemsize:
        return []
    out = [Check(Condition.RANK, tensor.dim() > 0, tensor.dim())]
    if tensor.dim() == 0:
        return out
    size, stride, offset = tensor.shape, tensor.stride(), tensor.storage_offset()
    last_stride = Check(Condition.LAST_STRIDE, stride[-1] == 1, stride[-1])
    if not larger:
        return [*out, last_stride]
    out.append(Check(Condition.LAST_SIZE, size[-1] % ratio == 0, size[-1]))
    out.append(Check(Condition.OFFSET, offset % ratio == 0, offset))
    out.append(last_stride)
    out += [
        Check(Condition.STRIDE, stride[d] % ratio == 0, stride[d], d)
        for d in range(tensor.dim() - 1)
    ]
    return out


def failing(tensor: torch.Tensor, dtype: torch.dtype) -> list[Check]:
    """The conditions that fail, in PyTorch's order (the first is the one it names)."""
    return [check for check in checks(tensor, dtype) if not check.holds]


def apply_ops(tensor: torch.Tensor, ops: Sequence[str]) -> torch.Tensor:
    for text in ops:
        tensor = parse_op(text).apply(tensor)
    return tensor


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements, row-major, as raw bytes: viewed as bytes before anything is
    copied (a copy in a dtype such as bool may normalise what it copies), or, where that
    view is refused, copied once into fresh contiguous memory first."""
    shaped = tensor.reshape(1) if tensor.dim() == 0 else tensor
    try:
        raw = shaped.view(torch.uint8)
    except RuntimeError:
        raw = shaped.clone(memory_format=torch.contiguous_format).view(torch.uint8)
    return raw.reshape(-1)


def _shape_fixes(tensor: torch.Tensor, dtype: torch.dtype) -> list[tuple[str, ...]]:
    """Ops that give the tensor a shape whose bytes fill whole elements of ``dtype``: none
    when the shape fits; otherwise every byte (flatten), then the most that fit (a slice)."""
    ratio, larger = ratio_of(tensor, dtype)
    if tensor.dim() == 0:
        return [(".unsqueeze(0)",)] if not larger else []
    if not larger or tensor.shape[-1] % ratio == 0:
        return [()]
    fixes: list[tuple[str, ...]] = []
    if tensor.numel() % ratio == 0 and tensor.dim() > 1:
        fixes.append((".flatten()",))
    last = tensor.shape[-1] // ratio * ratio
    if last:
        fixes.append((f"[..., :{last}]",))
    whole = tensor.numel() // ratio * ratio
    if whole and tensor.dim() > 1:
        fixes.append((".flatten()", f"[:{whole}]"))
    return fixes


LAYOUT_FIXES: tuple[tuple[str, ...], ...] = (
    (),
    (".contiguous()",),
    (".clone()",),
    (".clone(memory_format=torch.contiguous_format)",),
)


def fix_works(
    tensor: torch.Tensor, view_text: str, fix: Sequence[str], shaped: Sequence[str] = ()
) -> bool:
    """Whether PyTorch accepts ``fix`` then ``view_text`` on ``tensor``, and the result reads
    the bytes of ``tensor`` after the ``shaped`` part of the fix (which keeps the bytes it
    keeps: a flatten keeps all, a slice the first ones), as the new dtype."""
    try:
        fixed = apply_ops(tensor, fix)
        result = parse_op(view_text).apply(fixed)
    except Exception:
        return False
    reference = apply_ops(tensor, shaped)
    return torch.equal(_bytes(result), _bytes(reference))


def find_fix(
    tensor: torch.Tensor, dtype: torch.dtype, view_text: str | None = None
) -> tuple[str, ...] | None:
    """The shortest ops to put before ``view_text`` (default ``.view(torch.<dtype>)``) that
    PyTorch accepts on ``tensor``, each tried on it; None when no such fix exists (fewer
    bytes than one element of ``dtype``)."""
    view_text = view_text or f".view(torch.{str(dtype).removeprefix('torch.')})"
    for shaped in _shape_fixes(tensor, dtype):
        for layout in LAYOUT_FIXES:
            fix = (*shaped, *layout)
            if fix and fix_works(tensor, view_text, fix, shaped):
                return fix
    return None
