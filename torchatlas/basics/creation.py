"""Creating tensors: uninitialised vs initialised memory, the dtypes torch picks when none
is given, casting (and ``to`` returning the same tensor when nothing changes), and named
tensors, which the pinned torch no longer has. Each answer is what torch returned just now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from torchatlas.basics.errors import torch_words


@dataclass(frozen=True)
class Made:
    """One creation call and what it gave."""

    code: str
    dtype: str
    shape: tuple[int, ...]
    values: tuple[str, ...]  # as torch prints them (flat)
    initialised: bool  # the call promises these values; torch.empty promises nothing


@dataclass(frozen=True)
class Attempt:
    """A call that is expected to raise: torch's exception type and words."""

    code: str
    raised: str | None  # the exception's type name, None when it did not raise
    message: str | None


@dataclass(frozen=True)
class Cast:
    code: str
    dtype: str
    same_object: bool  # ``to`` handed back the very tensor (nothing needed converting)
    shares_storage: bool


@dataclass(frozen=True)
class Creation:
    default_dtype: str
    made: tuple[Made, ...]  # empty / zeros / ones / rand
    defaults: tuple[Made, ...]  # arange, linspace, tensor(...) without a dtype
    casts: tuple[Cast, ...]
    named: tuple[Attempt, ...]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _values(tensor: torch.Tensor) -> tuple[str, ...]:
    flat = tensor.reshape(-1)
    if flat.dtype.is_floating_point:
        return tuple(f"{v:.4g}" for v in flat.tolist())
    return tuple(str(v) for v in flat.tolist())


def _made(code: str, call: Callable[[], torch.Tensor], initialised: bool = True) -> Made:
    tensor = call()
    return Made(code, _name(tensor.dtype), tuple(tensor.shape), _values(tensor), initialised)


def _attempt(code: str, call: Callable[[], object]) -> Attempt:
    try:
        call()
    except Exception as exc:  # torch's own refusal is the lesson, whatever its type
        return Attempt(code, type(exc).__name__, torch_words(exc))
    return Attempt(code, None, None)


def _cast(code: str, source: torch.Tensor, call: Callable[[torch.Tensor], torch.Tensor]) -> Cast:
    out = call(source)
    shares = out.untyped_storage().data_ptr() == source.untyped_storage().data_ptr()
    return Cast(code, _name(out.dtype), out is source, shares)


def creation() -> Creation:
    """Every answer of the Types section's creation panel, from the running torch."""
    generator = torch.Generator().manual_seed(0)
    made = (
        _made("torch.empty(2, 3)", lambda: torch.empty(2, 3), initialised=False),
        _made("torch.zeros(2, 3)", lambda: torch.zeros(2, 3)),
        _made("torch.ones(2, 3, dtype=torch.double)", lambda: torch.ones(2, 3, dtype=torch.double)),
        _made("torch.rand(2, 3)", lambda: torch.rand(2, 3, generator=generator)),
    )
    defaults = (
        _made("torch.arange(5)", lambda: torch.arange(5)),
        _made("torch.arange(5.0)", lambda: torch.arange(5.0)),
        _made("torch.arange(0, 1, 0.25)", lambda: torch.arange(0, 1, 0.25)),
        _made("torch.linspace(0, 1, 5)", lambda: torch.linspace(0, 1, 5)),
        _made("torch.tensor([1, 2])", lambda: torch.tensor([1, 2])),
        _made("torch.tensor([1.0, 2.0])", lambda: torch.tensor([1.0, 2.0])),
        _made("torch.tensor([True, False])", lambda: torch.tensor([True, False])),
        _made(
            "torch.tensor([[1, 2], [3, 4]], dtype=torch.short)",
            lambda: torch.tensor([[1, 2], [3, 4]], dtype=torch.short),
        ),
    )
    points = torch.ones(3, 2)
    casts = (
        _cast("points.double()", points, lambda t: t.double()),
        _cast("points.to(dtype=torch.short)", points, lambda t: t.to(dtype=torch.short)),
        _cast("points.to(torch.float32)", points, lambda t: t.to(torch.float32)),
        _cast("points.float()", points, lambda t: t.float()),
    )
    named = (
        _attempt("torch.zeros(2, 3, names=('rows', 'cols'))",
                 lambda: torch.zeros(2, 3, names=("rows", "cols"))),  # type: ignore[call-overload]
        _attempt("torch.tensor([1, 2], names=['n'])",
                 lambda: torch.tensor([1, 2], names=["n"])),  # type: ignore[call-overload]
    )  # fmt: skip
    return Creation(_name(torch.get_default_dtype()), made, defaults, casts, named)
