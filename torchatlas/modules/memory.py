"""What ``torch.empty`` and ``torch.FloatTensor`` hold, and how ``nn.Linear`` initialises instead.

The uninitialised tensors are allocated in a sandbox child (job ``modules.memory``), never in
the server: their bytes are whatever the allocator hands back, and in a server that serves a
class they could be the remains of another visitor's data. A fresh single-use child of the
sandbox's zygote has only ever run trusted warm-up code, so its leftovers are safe to show.
The ``nn.Linear`` part is initialised memory and runs here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchatlas.modules.report import ErrorKind, ModuleError
from torchatlas.sandbox.schema import Dict, List, Str, validate

MEMORY = "modules.memory"
ROWS, COLUMNS = 4, 3
Rows = tuple[tuple[float, ...], ...]
# repr() of a float32 widened to a Python float: "nan", "-inf", "1.2e-41", "7.25".
_FLOAT = Str(40, pattern=r"-?(nan|inf|[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?)")
_GRID = List(List(_FLOAT, COLUMNS), ROWS)
VALUES_SCHEMA = Dict({"empty": _GRID, "float_tensor": _GRID}, required=("empty", "float_tensor"))


def uninitialised_values(namespace: dict[str, Any]) -> dict[str, Any]:
    """Job ``modules.memory`` (in a sandbox child): fresh uninitialised tensors, as text.

    A tensor filled with a pattern is freed first: its block often comes straight back from
    the allocator, so the "random" values are visibly an earlier tensor's data."""
    scratch = torch.full((ROWS, COLUMNS), 7.25)
    del scratch
    empty = torch.empty(ROWS, COLUMNS)
    float_tensor = torch.FloatTensor(ROWS, COLUMNS)

    def text(tensor: torch.Tensor) -> list[list[str]]:
        return [[repr(float(value)) for value in row] for row in tensor.tolist()]

    return {"empty": text(empty), "float_tensor": text(float_tensor)}


@dataclass(frozen=True)
class InitReport:
    """``torch.empty`` / ``torch.FloatTensor`` values next to ``nn.Linear``'s initialisation."""

    empty: Rows
    float_tensor: Rows
    linear_weight: Rows
    linear_bias: tuple[float, ...]
    in_features: int
    bound: float  # 1/√in_features: both weight and bias are drawn from U(−bound, bound)
    within_bound: bool
    nonfinite_in_empty: int = 0
    error: ModuleError | None = field(default=None)


def _rows(tensor: torch.Tensor) -> Rows:
    return tuple(tuple(row) for row in tensor.detach().tolist())


def _grid(values: list[list[str]]) -> Rows:
    return tuple(tuple(float(value) for value in row) for row in values)


def init_report(value: Any, error: ModuleError | None) -> InitReport:
    """The report from the job's reply (checked against :data:`VALUES_SCHEMA`) or its error,
    with a fresh ``nn.Linear(3, 4)`` as torch initialises it. Never raises."""
    linear = nn.Linear(3, 4)  # reset_parameters: kaiming_uniform_(a=√5) and a uniform bias
    bound = 1 / math.sqrt(linear.in_features)
    within = bool(linear.weight.abs().max() <= bound and linear.bias.abs().max() <= bound)
    empty: Rows = ()
    float_tensor: Rows = ()
    if error is None:
        try:
            checked = validate(value, VALUES_SCHEMA)
            empty, float_tensor = _grid(checked["empty"]), _grid(checked["float_tensor"])
        except (TypeError, ValueError):  # a reply outside its schema (SchemaError)
            params = {"detail": "", "timeout": "", "lines": 1}
            error = ModuleError(ErrorKind.UNTRUSTED, params=params)
    return InitReport(
        empty=empty,
        float_tensor=float_tensor,
        linear_weight=_rows(linear.weight),
        linear_bias=tuple(linear.bias.tolist()),
        in_features=linear.in_features,
        bound=bound,
        within_bound=within,
        nonfinite_in_empty=sum(not math.isfinite(v) for row in empty for v in row),
        error=error,
    )
