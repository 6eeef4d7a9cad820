"""The dtypes of the room: every one torch can build a start tensor in, by name.

A start tensor is ``torch.arange(n).to(dtype)``: its value at each storage cell is that
cell's index. Torch declares more dtypes than it can build that way (bit-packed and
sub-byte integers, quantized types have no ``copy_`` from int64); those are left out, and
``tests/unit/test_strides_dtypes.py`` checks this list against the installed torch.
"""

from __future__ import annotations

import warnings

import torch

# Names as ``torch.<name>`` spells them, in the order the room offers them: the common ones
# first, then the rest by family. Names this torch does not have are skipped.
_NAMES = (
    "float32", "float64", "float16", "bfloat16",
    "int64", "int32", "int16", "int8", "uint8",
    "bool",
    "complex64", "complex128", "complex32", "bcomplex32",
    "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
)  # fmt: skip
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in _NAMES
    if isinstance(getattr(torch, name, None), torch.dtype)
}
START_DTYPES: tuple[str, ...] = tuple(DTYPES)
# Aliases a student may type after ``torch.``; they name the same dtypes.
DTYPE_ALIASES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "chalf": "complex32",
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _exact_up_to(dtype: torch.dtype) -> int:
    """The largest n such that every whole number 0..n is exact in ``dtype`` (-1 when 0 is
    not: float8_e8m0fnu holds only powers of two)."""
    if dtype == torch.bool:
        return 1
    if not (dtype.is_floating_point or dtype.is_complex):
        return int(torch.iinfo(dtype).max)
    info = torch.finfo(dtype)
    # A float with m mantissa bits (eps = 2**-m) holds every integer up to 2**(m + 1).
    bound = int(min(2 / info.eps, info.max))
    probe = torch.arange(min(bound, 4096) + 2, dtype=torch.float64)
    with warnings.catch_warnings():  # complex32 and bcomplex32 warn that they are experimental
        warnings.simplefilter("ignore")
        back = probe.to(dtype)
        back = (back.real if back.is_complex() else back).to(torch.float64)
    wrong = (back != probe).nonzero()
    return int(wrong[0]) - 1 if wrong.numel() else bound


# Largest n such that every integer 0..n is exact in the dtype: past it the start values
# (the storage indices) round, wrap or turn True, while the indices themselves stay exact.
EXACT_UP_TO: dict[str, int] = {name: _exact_up_to(dtype) for name, dtype in DTYPES.items()}


def start_values_exact(numel: int, dtype: str) -> bool:
    """Whether a start tensor of ``numel`` elements holds exactly its storage indices."""
    return numel - 1 <= EXACT_UP_TO[dtype]
