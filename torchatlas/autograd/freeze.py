"""Freezing a pretrained network: the curriculum's recipe on a real torchvision ResNet-18.

Random weights (``weights=None``: nothing is downloaded; the lesson is about flags, not
accuracy), the classifier replaced by ``nn.Linear(512, 100)``, ``requires_grad`` switched off
for every block not in ``trainable``, then one forward and backward on a small batch.
The report holds each parameter's flag and whether its ``.grad`` stayed None, trainable vs
frozen counts and bytes, what an optimiser built from ``model.parameters()`` holds compared
with one built from the trainable parameters only, and the bytes autograd saved for backward
with and without freezing, counted with saved-tensor hooks.

The model is built once per process and reused under a lock (building it costs more than the
lesson's forward pass); each call resets the flags and gradients it changes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from torchatlas.autograd.errors import AutogradError, ErrorCode, exception_text

BLOCKS: tuple[str, ...] = ("stem", "layer1", "layer2", "layer3", "layer4", "fc")
STEM = ("conv1", "bn1")
BATCH: tuple[int, int, int, int] = (2, 3, 64, 64)
MODELS = ("resnet18",)


@dataclass(frozen=True)
class ParamInfo:
    name: str
    block: str
    shape: tuple[int, ...]
    numel: int
    requires_grad: bool
    grad_is_none: bool  # after one backward


@dataclass(frozen=True)
class BlockInfo:
    name: str
    trainable: bool
    tensors: int
    numel: int
    bytes: int


@dataclass(frozen=True)
class OptimizerView:
    """What ``torch.optim.SGD(<source>)`` holds: its parameter groups, as torch built them."""

    source: str  # the Python expression the optimiser was built from
    groups: int
    tensors: int
    numel: int
    frozen_tensors: int  # tensors it holds that never get a gradient
    refused: str | None = None  # torch's words when it refused to build the optimiser


@dataclass(frozen=True)
class FreezeReport:
    model_name: str
    trainable: tuple[str, ...]
    new_fc: tuple[int, int]
    batch: tuple[int, ...]
    params: tuple[ParamInfo, ...]
    blocks: tuple[BlockInfo, ...]
    optimizers: tuple[OptimizerView, ...]
    saved_bytes: int  # saved for backward with this freezing (distinct storages)
    saved_tensors: int
    saved_bytes_unfrozen: int  # the same forward with every parameter trainable
    saved_tensors_unfrozen: int

    @property
    def trainable_numel(self) -> int:
        return sum(p.numel for p in self.params if p.requires_grad)

    @property
    def frozen_numel(self) -> int:
        return sum(p.numel for p in self.params if not p.requires_grad)

    @property
    def frozen_tensors(self) -> int:
        return sum(not p.requires_grad for p in self.params)

    @property
    def grads_none(self) -> int:
        return sum(p.grad_is_none for p in self.params)


def block_of(name: str) -> str:
    top = name.split(".", 1)[0]
    return "stem" if top in STEM else top


_LOCK = threading.Lock()
_MODEL: dict[tuple[str, tuple[int, int]], torch.nn.Module] = {}
_UNFROZEN: dict[tuple[str, tuple[int, int]], tuple[int, int]] = {}


def _model(model_name: str, new_fc: tuple[int, int]) -> torch.nn.Module:
    key = (model_name, new_fc)
    if key not in _MODEL:
        import torchvision

        with torch.random.fork_rng():  # random init without touching anyone's RNG state
            torch.manual_seed(0)
            model = torchvision.models.resnet18(weights=None)
            model.fc = torch.nn.Linear(*new_fc)
        _MODEL.clear()  # one model per process
        _MODEL[key] = model.train()
    return _MODEL[key]


def _forward_backward(model: torch.nn.Module) -> tuple[int, int]:
    """One forward (saved tensors counted) and backward on a fixed batch."""
    storages: dict[tuple[int, int], int] = {}

    def pack(tensor: torch.Tensor) -> Any:
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), storage.nbytes())] = storage.nbytes()
        return tensor

    batch = torch.randn(BATCH, generator=torch.Generator().manual_seed(0))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = model(batch)
    if out.requires_grad:
        out.sum().backward()
    return sum(storages.values()), len(storages)


def _set_flags(model: torch.nn.Module, trainable: Sequence[str]) -> None:
    for name, param in model.named_parameters():
        param.requires_grad_(block_of(name) in trainable)
        param.grad = None


def freeze(
    model_name: str = "resnet18",
    trainable: Sequence[str] = ("fc",),
    new_fc: tuple[int, int] = (512, 100),
) -> FreezeReport:
    """The recipe with ``trainable`` blocks (of :data:`BLOCKS`) left trainable."""
    if model_name not in MODELS:
        raise AutogradError(ErrorCode.NOT_ALLOWED, what=model_name)
    unknown = [b for b in trainable if b not in BLOCKS]
    if unknown:
        raise AutogradError(ErrorCode.NOT_ALLOWED, what=", ".join(unknown))
    if new_fc[0] != 512 or not 1 <= new_fc[1] <= 1000:
        raise AutogradError(ErrorCode.BAD_SIZE, what=str(new_fc))
    trainable = tuple(b for b in BLOCKS if b in trainable)
    key = (model_name, new_fc)
    with _LOCK:
        model = _model(model_name, new_fc)
        if key not in _UNFROZEN:
            _set_flags(model, BLOCKS)
            _UNFROZEN[key] = _forward_backward(model)
        _set_flags(model, trainable)
        saved_bytes, saved_tensors = _forward_backward(model)
        params = tuple(
            ParamInfo(
                name, block_of(name), tuple(p.shape), p.numel(), p.requires_grad, p.grad is None
            )
            for name, p in model.named_parameters()
        )
        everything = list(model.parameters())
        chosen = [p for p in everything if p.requires_grad]
        only_fc = trainable == ("fc",)
        views = [
            _optimizer("model.parameters()", everything),
            _optimizer(
                "model.fc.parameters()"
                if only_fc
                else "[p for p in model.parameters() if p.requires_grad]",
                list(model.fc.parameters()) if only_fc else chosen,
            ),
        ]
        _set_flags(model, BLOCKS)
    blocks = tuple(
        BlockInfo(
            block,
            block in trainable,
            sum(1 for p in params if p.block == block),
            sum(p.numel for p in params if p.block == block),
            sum(p.numel * 4 for p in params if p.block == block),
        )
        for block in BLOCKS
    )
    unfrozen_bytes, unfrozen_tensors = _UNFROZEN[key]
    return FreezeReport(
        model_name, trainable, new_fc, BATCH, params, blocks, tuple(views),
        saved_bytes, saved_tensors, unfrozen_bytes, unfrozen_tensors,
    )  # fmt: skip


def _optimizer(source: str, params: list[torch.nn.Parameter]) -> OptimizerView:
    """What torch builds from ``params``, or its refusal (an empty list: "optimizer got an
    empty parameter list"): torch decides, the room only reports."""
    try:
        optimizer = torch.optim.SGD(params, lr=0.01)
    except ValueError as error:
        return OptimizerView(source, 0, 0, 0, 0, refused=exception_text(error, 300))
    held = [p for group in optimizer.param_groups for p in group["params"]]
    return OptimizerView(
        source,
        len(optimizer.param_groups),
        len(held),
        sum(p.numel() for p in held),
        sum(not p.requires_grad for p in held),
    )
