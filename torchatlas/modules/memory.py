"""What ``torch.empty`` and ``torch.FloatTensor`` hold, and how ``nn.Linear`` initialises instead.

The uninitialised tensors are allocated in a sandbox child (job ``modules.memory``), never in
the server: their bytes are whatever the allocator hands back, and in a server that serves a
class they could be the remains of another visitor's data. A fresh single-use child of the
sandbox's zygote has only ever run trusted warm-up code, so its leftovers are safe to show,
with one exception: the allocator leaves pointers behind (a freed block remembers where the
next free block is), and every child is forked from the same zygote, so those addresses are
the same in every child: shown raw, they would hand every visitor the sandbox's address
layout. So each 8-byte word whose value lies where this machine's user-space addresses live
(:func:`looks_like_address`) is masked, in the child and again on the server, and the page
says how many were and why. Every other value is shown exactly as the allocator left it.
The ``nn.Linear`` part is initialised memory and runs here.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

MEMORY = "modules.memory"
ROWS, COLUMNS = 4, 3
# x86-64 and arm64 user space: addresses below 2**48 (47 bits on x86-64, 48 on arm64), and the
# first 64 KiB are never mapped (mmap_min_addr). A word in between may be a pointer.
ADDRESS_LOW, ADDRESS_HIGH = 1 << 16, 1 << 48
WORD_MASK = (1 << 64) - 1
Rows = tuple[tuple[float, ...], ...]
Cells = tuple[tuple[float | None, ...], ...]  # None: a float32 half of a masked word


def looks_like_address(word: int) -> bool:
    """Whether the unsigned 64-bit ``word`` lies where user-space addresses live."""
    return ADDRESS_LOW <= (word & WORD_MASK) < ADDRESS_HIGH


@dataclass(frozen=True)
class MemoryValues:
    """The job's reply: each tensor's float32 values, row by row; None where masked."""

    empty: Cells
    float_tensor: Cells


def _cells(tensor: torch.Tensor) -> Cells:
    """``tensor``'s values with both float32 halves of every address-like word masked. Its
    storage is 64-byte aligned (torch's CPU allocator), so elements 2k and 2k+1 are one
    8-byte word of the allocator's memory."""
    flat = tensor.reshape(-1)
    words = flat.view(torch.int64).tolist()
    values = flat.tolist()
    cells = [None if looks_like_address(words[i // 2]) else v for i, v in enumerate(values)]
    return tuple(tuple(cells[r * COLUMNS : (r + 1) * COLUMNS]) for r in range(ROWS))


def allocate() -> MemoryValues:
    """Fresh uninitialised tensors, read back with addresses masked (runs in a child).

    A tensor filled with a pattern is freed first: its block often comes straight back from
    the allocator, so the "random" values are visibly an earlier tensor's data."""
    scratch = torch.full((ROWS, COLUMNS), 7.25)
    del scratch
    empty = torch.empty(ROWS, COLUMNS)
    float_tensor = torch.FloatTensor(ROWS, COLUMNS)
    return MemoryValues(_cells(empty), _cells(float_tensor))


@dataclass(frozen=True)
class InitReport:
    """``torch.empty`` / ``torch.FloatTensor`` values next to ``nn.Linear``'s initialisation;
    ``failure`` is a :class:`~torchatlas.sandboxed.JobFailure` when the child gave none."""

    empty: Cells
    float_tensor: Cells
    linear_weight: Rows
    linear_bias: tuple[float, ...]
    in_features: int
    bound: float  # 1/√in_features: both weight and bias are drawn from U(−bound, bound)
    within_bound: bool
    nonfinite_in_empty: int = 0
    masked_words: int = 0  # 8-byte words hidden because they looked like addresses
    words: int = 0  # 8-byte words shown in both tensors
    failure: Any = field(default=None)


@dataclass(frozen=True)
class Untrusted:
    """A reply refused by the server's own check (a failure of kind ``untrusted``), for
    callers that pass no failure of their own (this module imports no sandbox)."""

    kind: str = "untrusted"
    detail: str = "a value that is not a float32"

    @property
    def transient(self) -> bool:
        return True


UNTRUSTED = Untrusted()


def _float32_bits(value: float) -> int | None:
    """The float32 bit pattern of ``value``; None when it is not a float32 value."""
    if math.isnan(value):
        return 0x7FC00000  # any NaN: its exponent bits alone decide the mask below
    try:
        packed = struct.pack("<f", value)
    except OverflowError:
        return None
    if struct.unpack("<f", packed)[0] != value:
        return None
    return int.from_bytes(packed, "little")


def remask(cells: Cells) -> tuple[Cells, int] | None:
    """The server's own mask over a reply (the child's is the first): every pair of cells
    whose 8-byte word looks like an address is masked; returns the cells and the number of
    masked words, or None when a value is not a float32 or the grid has the wrong shape."""
    if len(cells) != ROWS or any(len(row) != COLUMNS for row in cells):
        return None
    flat = [value for row in cells for value in row]
    masked = 0
    for start in range(0, len(flat), 2):
        low, high = flat[start], flat[start + 1]
        if low is None or high is None:
            flat[start] = flat[start + 1] = None
            masked += 1
            continue
        low_bits, high_bits = _float32_bits(low), _float32_bits(high)
        if low_bits is None or high_bits is None:
            return None
        if looks_like_address(low_bits | high_bits << 32):
            flat[start] = flat[start + 1] = None
            masked += 1
    grid = tuple(tuple(flat[r * COLUMNS : (r + 1) * COLUMNS]) for r in range(ROWS))
    return grid, masked


def _rows(tensor: torch.Tensor) -> Rows:
    return tuple(tuple(row) for row in tensor.detach().tolist())


def init_report(
    values: MemoryValues | None,
    failure: Any = None,
    untrusted: Callable[[], Any] = lambda: UNTRUSTED,
) -> InitReport:
    """The report from the job's checked reply (or its ``failure``), with a fresh
    ``nn.Linear(3, 4)`` as torch initialises it; a reply that is not float32 memory becomes
    ``untrusted()`` (the caller's :class:`~torchatlas.sandboxed.JobFailure`). Never raises."""
    linear = nn.Linear(3, 4)  # reset_parameters: kaiming_uniform_(a=√5) and a uniform bias
    bound = 1 / math.sqrt(linear.in_features)
    within = bool(linear.weight.abs().max() <= bound and linear.bias.abs().max() <= bound)
    empty: Cells = ()
    float_tensor: Cells = ()
    masked = 0
    if values is not None and failure is None:
        first, second = remask(values.empty), remask(values.float_tensor)
        if first is None or second is None:
            failure = untrusted()
        else:
            (empty, masked_a), (float_tensor, masked_b) = first, second
            masked = masked_a + masked_b
    return InitReport(
        empty=empty,
        float_tensor=float_tensor,
        linear_weight=_rows(linear.weight),
        linear_bias=tuple(linear.bias.tolist()),
        in_features=linear.in_features,
        bound=bound,
        within_bound=within,
        nonfinite_in_empty=sum(
            v is not None and not math.isfinite(v) for row in empty for v in row
        ),
        masked_words=masked,
        words=(len(empty) + len(float_tensor)) * COLUMNS // 2,
        failure=failure,
    )
