"""Write-through: an in-place write on one step, and which other steps see it.

The chain runs first, then the write lands on the chosen step's tensor, then every step is
read again through its own view. Views of the written storage change; copies made earlier do
not. An overlapping write (one storage cell behind several elements) surfaces PyTorch's error.

A write keeps the tensor's dtype, as in PyTorch: a bool tensor takes any number as "nonzero is
True" (``fill_(7)`` makes every element True), and a write whose result the dtype cannot hold
(``add_(1)`` on bool, ``add_(0.5)`` on int64, ``fill_(300)`` on int8, an op with no kernel for
the dtype) is PyTorch's refusal, explained like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from torchatlas.strides.errors import OpParseError, StepError, from_parse_error
from torchatlas.strides.explain import explain
from torchatlas.strides.limits import MAX_LISTED, MAX_OP_TEXT
from torchatlas.strides.parser import OpKind, ParsedOp, ParsedWrite, parse_write
from torchatlas.strides.trace import run_chain


@dataclass(frozen=True)
class WriteResult:
    write: str
    step_index: int
    code: str = ""
    error: StepError | None = None
    changed_steps: list[int] = field(default_factory=list)
    # step index → flat (row-major) indices of its elements that changed (the first
    # ``listed_up_to``) and how many changed in all
    changed_elements: dict[int, list[int]] = field(default_factory=dict)
    changed_counts: dict[int, int] = field(default_factory=dict)
    # storage id → byte positions that changed
    changed_bytes: dict[str, list[int]] = field(default_factory=dict)
    # step index → its values after the write (nested like its size; None past listed_up_to)
    values_after: dict[int, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["error"] = self.error.to_dict() if self.error else None
        return data


def _equal(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Element by element: unchanged (NaN stays NaN, in real and complex dtypes alike)."""
    same = before == after
    if before.is_floating_point() or before.is_complex():
        same |= before.isnan() & after.isnan()
    return same


def _bytes_of(tensor: torch.Tensor) -> torch.Tensor:
    storage = tensor.untyped_storage()
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),), (1,))


def write_through(
    shape: Sequence[int],
    dtype: str,
    ops: Sequence[str | ParsedOp],
    step_index: int,
    write: str | ParsedWrite,
    *,
    listed_up_to: int = MAX_LISTED,
) -> WriteResult:
    """Apply ``write`` (``fill_(7)``, ``add_(1)``, ``[0, 1] = 5`` …) to step ``step_index`` of
    the chain and report every step whose values changed. Lists (values, changed elements
    and bytes) stop at ``listed_up_to`` items; the counts are exact."""
    if isinstance(write, ParsedWrite):  # parsed already (a sandbox child gets it as data)
        parsed, text = write, write.text
    else:
        text = write.strip()
        try:  # an unreadable write costs nothing: refused before the chain runs
            parsed = parse_write(text)
        except OpParseError as error:
            shown = str(error.params.get("text", text))
            return WriteResult(text[:MAX_OP_TEXT], step_index, error=from_parse_error(error, shown))
    chain = run_chain(shape, dtype, ops, listed_up_to=0)  # only the tensors are needed
    if not 0 <= step_index < len(chain.tensors):
        raise IndexError(f"step {step_index} is not a step of this chain")
    target = chain.tensors[step_index]
    name = chain.steps[step_index].name
    before = [tensor.clone() for tensor in chain.tensors]
    storage_ids = [step.storage_id for step in chain.steps if step.error is None]
    raw_before: dict[str, torch.Tensor] = {}
    for storage_id, tensor in zip(storage_ids, chain.tensors, strict=False):
        raw_before.setdefault(str(storage_id), _bytes_of(tensor).clone())
    try:
        parsed.apply(target)
    except Exception as exc:  # PyTorch's refusal (e.g. an overlapping write) is the lesson
        as_op = ParsedOp(text=text, kind=OpKind.WRITE, name=parsed.name)
        return WriteResult(
            text, step_index, code=parsed.code(name), error=explain(exc, as_op, target)
        )
    changed_steps, changed_elements, changed_counts, values_after = [], {}, {}, {}
    for index, (old, tensor) in enumerate(zip(before, chain.tensors, strict=True)):
        differs = ~_equal(old, tensor)
        if bool(differs.any()):
            changed_steps.append(index)
            flat = differs.reshape(-1).nonzero().reshape(-1)
            changed_elements[index] = flat[:listed_up_to].tolist()
            changed_counts[index] = int(flat.numel())
        values_after[index] = tensor.tolist() if tensor.numel() <= listed_up_to else None
    changed_bytes: dict[str, list[int]] = {}
    seen: set[str] = set()
    for storage_id, tensor in zip(storage_ids, chain.tensors, strict=False):
        key = str(storage_id)
        if key in seen:
            continue
        seen.add(key)
        moved = (raw_before[key] != _bytes_of(tensor)).nonzero().reshape(-1)
        if moved.numel():
            changed_bytes[key] = moved[:listed_up_to].tolist()
    return WriteResult(
        text,
        step_index,
        code=parsed.code(name),
        changed_steps=changed_steps,
        changed_elements=changed_elements,
        changed_counts=changed_counts,
        changed_bytes=changed_bytes,
        values_after=values_after,
    )
