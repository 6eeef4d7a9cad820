"""The room's side-by-side table: a plain tensor, an ``nn.Parameter`` and a buffer on one tiny
model, each fact measured live with torch on CPU (trusted code on the server), never by rule.

:func:`side_by_side` builds the model, asks ``parameters()`` and ``state_dict()``, runs a real
``.to(torch.float64)``, a real backward pass and a real optimiser step, and records what
happened to each of the three tensors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum

import torch
from torch import nn


class Fact(StrEnum):
    """One row of the table (``modules.compare.facts.<value>``)."""

    REQUIRES_GRAD = "requires_grad"
    IN_PARAMETERS = "in_parameters"
    IN_STATE_DICT = "in_state_dict"
    MOVED_BY_DEVICE = "moved_by_device"
    CONVERTED_BY_DTYPE = "converted_by_dtype"
    GETS_GRAD = "gets_grad"
    CHANGED_BY_STEP = "changed_by_step"


COLUMNS = ("plain", "parameter", "buffer")
SOURCE = """class Demo(nn.Module):
    def __init__(self):
        super().__init__()
        self.plain = torch.ones(2)
        self.parameter = nn.Parameter(torch.ones(2))
        self.register_buffer("buffer", torch.ones(2))

    def forward(self, x):
        return (x * self.plain * self.parameter * self.buffer).sum()
"""


@dataclass(frozen=True)
class ComparisonRow:
    fact: Fact
    plain: bool
    parameter: bool
    buffer: bool

    def value(self, column: str) -> bool:
        return bool(getattr(self, column))


class _Demo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plain = torch.ones(2)
        self.parameter = nn.Parameter(torch.ones(2))
        self.register_buffer("buffer", torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.plain * self.parameter * self.buffer).sum()


def _moved_by_device(model: _Demo) -> dict[str, bool]:
    """``model.to(device)`` on a copy, torch's own ``Module.to``: this server may have no
    second device, so each tensor torch hands over to be moved is marked instead (the
    inspector's check, :class:`~torchatlas.modules.inspector.DeviceMove`)."""
    from torchatlas.modules.inspector import MOVE_DEVICE, DeviceMove

    twin = copy.deepcopy(model)
    marker = torch.complex64
    with DeviceMove(marker):
        twin.to(MOVE_DEVICE)
    return {
        "plain": twin.plain.dtype == marker,
        "parameter": twin.parameter.dtype == marker,
        "buffer": twin.buffer.dtype == marker,
    }


def side_by_side() -> tuple[ComparisonRow, ...]:
    """Each fact of :class:`Fact` for the three tensors, measured on a fresh model."""
    model = _Demo()

    def tensors() -> dict[str, torch.Tensor]:
        return {"plain": model.plain, "parameter": model.parameter, "buffer": model.buffer}

    facts: dict[Fact, dict[str, bool]] = {}
    start = tensors()
    parameter_ids = {id(p) for p in model.parameters()}
    state_ids = {id(v) for v in model.state_dict(keep_vars=True).values()}
    facts[Fact.REQUIRES_GRAD] = {k: t.requires_grad for k, t in start.items()}
    facts[Fact.IN_PARAMETERS] = {k: id(t) in parameter_ids for k, t in start.items()}
    facts[Fact.IN_STATE_DICT] = {k: id(t) in state_ids for k, t in start.items()}
    facts[Fact.MOVED_BY_DEVICE] = _moved_by_device(model)
    model.to(torch.float64)
    facts[Fact.CONVERTED_BY_DTYPE] = {k: t.dtype == torch.float64 for k, t in tensors().items()}
    model.to(torch.float32)
    model.plain = model.plain.float()  # .to() left it behind: put it back for the step
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    before = {k: t.detach().clone() for k, t in tensors().items()}
    model(torch.ones(2)).backward()
    facts[Fact.GETS_GRAD] = {k: t.grad is not None for k, t in tensors().items()}
    optimizer.step()
    facts[Fact.CHANGED_BY_STEP] = {k: not torch.equal(t, before[k]) for k, t in tensors().items()}
    return tuple(
        ComparisonRow(fact, values["plain"], values["parameter"], values["buffer"])
        for fact, values in facts.items()
    )
