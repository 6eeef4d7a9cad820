"""The shape explorer against plain torch: every preset and a table of tricky models.

The truth is computed here, with plain torch on small REAL tensors on the CPU (never with the
engine): each module call's input and output shapes (forward hooks), each op the model's own
code calls (a function mode that sees only calls made from the pasted file), parameter counts
by identity after the forward pass (so lazy modules are materialised), the outputs where
forward put them, and the device moves each line of the source asks for. A sentence the
room shows is checked by its claim (how many tensors went to which device, on which line;
a weight counted once, in the first row using it; a device move changes no shape).

Sources that name a GPU (``.cuda()``, ``"cuda"``) cannot run for real here: their twin, with
the CPU named instead, is what plain torch runs; a device move never changes a shape, which
is exactly the claim the room makes.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import keystr, tree_flatten_with_path

from torchatlas.i18n import LANGUAGES, translate
from torchatlas.presets import PRESETS
from torchatlas.shapes import (
    DeviceMove,
    MoveKind,
    MovePhase,
    RowKind,
    ShapeReport,
    analyze_module,
    analyze_namespace,
    parse_shapes,
)

FILENAME = "<pasted model>"
# Where torch's Python wrappers hand a call to the function mode: frames to look past.
DISPATCH_FILES = tuple(
    os.path.join("torch", *parts)
    for parts in (("overrides.py",), ("_tensor.py",), ("functional.py",),
                  ("nn", "functional.py"), ("_jit_internal.py",))
)  # fmt: skip
HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def namespace_of(source: str) -> dict[str, Any]:
    """Trusted test code only: the app never executes source in-process."""
    namespace: dict[str, Any] = {"__name__": "pasted_model"}
    exec(compile(source, FILENAME, "exec"), namespace)
    return namespace


def engine_report(source: str, shapes: list[list[int]], dtypes: list[str], model: str | None):
    data = analyze_namespace(
        namespace_of(source), input_shapes=shapes, input_dtypes=dtypes, model=model
    )
    json.dumps(data)  # what crosses the sandbox
    return ShapeReport.from_dict(data)


# ---------------------------------------------------------------------------- the truth
@dataclass
class Call:
    name: str
    type: str
    module: nn.Module
    depth: int
    parents: list[int]
    inputs: list[list[int]] = field(default_factory=list)
    outputs: list[list[int]] = field(default_factory=list)
    new_bytes: int = 0  # bytes of the outputs' storages the call did not receive or hold
    storages: set[int] = field(default_factory=set)


@dataclass
class Truth:
    calls: list[Call]
    ops: list[list[list[int]]]  # output shapes of each op the pasted code called in forward
    op_bytes: list[int]  # new storage bytes of each of those ops' outputs
    outputs: list[tuple[str, list[int]]]
    model: nn.Module


def shapes_of(value: Any) -> list[list[int]]:
    leaves, _ = tree_flatten_with_path(value)
    return [list(leaf.shape) for _, leaf in leaves if isinstance(leaf, torch.Tensor)]


def real_storages(value: Any) -> set[int]:
    leaves, _ = tree_flatten_with_path(value)
    return {
        t.untyped_storage().data_ptr()
        for _, t in leaves
        if isinstance(t, torch.Tensor) and not isinstance(t, nn.parameter.UninitializedTensorMixin)
    }


def new_storage_bytes(output: Any, held: set[int]) -> int:
    """Bytes of the real storages ``output``'s tensors hold that are not in ``held``, each
    storage once: the memory a real call allocated for what it returned."""
    leaves, _ = tree_flatten_with_path(output)
    seen, total = set(held), 0
    for _, tensor in leaves:
        if isinstance(tensor, torch.Tensor):
            storage = tensor.untyped_storage()
            if storage.nbytes() and storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


class UserOps(TorchFunctionMode):
    """Plain torch's view of the ops the pasted code itself calls (its own frames only)."""

    def __init__(self, record: list, sizes: list | None = None) -> None:
        super().__init__()
        self.record = record
        self.sizes = sizes if sizes is not None else []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        held = real_storages((args, kwargs))
        result = func(*args, **(kwargs or {}))
        caller = sys._getframe(1)  # past torch's own dispatch (F.relu → handle_torch_function)
        while caller is not None and caller.f_code.co_filename.endswith(DISPATCH_FILES):
            caller = caller.f_back
        if caller is not None and caller.f_code.co_filename == FILENAME:
            shapes = shapes_of(result)
            attribute = getattr(getattr(func, "__self__", None), "__name__", "")
            if shapes and attribute not in ("data", "grad", "_base"):  # .T, .mT are ops
                self.record.append(shapes)
                self.sizes.append(new_storage_bytes(result, held))
        return result


def real_inputs(shapes: list[list[int]], dtypes: list[str]) -> list[torch.Tensor]:
    tensors = []
    for shape, dtype in zip(shapes, dtypes, strict=True):
        if dtype == "long":
            tensors.append(torch.zeros(shape, dtype=torch.long))
        else:
            tensors.append(torch.randn(shape, dtype=getattr(torch, dtype)))
    return tensors


def truth_of(
    build: Callable[[], nn.Module],
    inputs: list[torch.Tensor],
    unpack: Callable[[Any], dict[str, torch.Tensor]] | None = None,
    user_ops: bool = True,
) -> Truth:
    torch.manual_seed(0)
    model = build().eval()
    names = {id(m): n for n, m in model.named_modules()}
    types = {id(m): type(m).__name__ for m in model.modules()}  # before a lazy call changes it
    calls: list[Call] = []
    stack: list[int] = []

    def pre(module, args, kwargs):
        calls.append(Call(names[id(module)], types[id(module)], module, len(stack), list(stack)))
        calls[-1].inputs = shapes_of((args, kwargs))
        held = [*module.parameters(), *module.buffers()]
        calls[-1].storages = real_storages((args, kwargs, held))
        stack.append(len(calls) - 1)

    def post(module, args, kwargs, output):
        call = calls[stack.pop()]
        call.outputs = shapes_of(output)
        call.new_bytes = new_storage_bytes(output, call.storages)

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True, prepend=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True))
    ops: list = []
    op_bytes: list = []
    with torch.no_grad():
        if user_ops:
            with UserOps(ops, op_bytes):
                output = model(*inputs)
        else:
            output = model(*inputs)
    for handle in handles:
        handle.remove()
    if unpack is not None:
        outputs = [(name, list(t.shape)) for name, t in unpack(output).items()]
        calls[0].outputs = [shape for _, shape in outputs]  # hooks see the object, not inside
        calls[0].new_bytes = new_storage_bytes(list(unpack(output).values()), calls[0].storages)
    else:
        leaves, _ = tree_flatten_with_path(output)
        outputs = [(keystr(p), list(t.shape)) for p, t in leaves if isinstance(t, torch.Tensor)]
    return Truth(calls, ops, op_bytes, outputs, model)


def expected_params(calls: list[Call]) -> list[tuple[int, int, int]]:
    """(params, trainable, shared) per call: a parameter counts in a call unless an earlier
    call that does not enclose it holds the same parameter (identity)."""
    result = []
    for index, call in enumerate(calls):
        earlier: set[int] = set()
        for other in range(index):
            if other not in call.parents:
                earlier |= {id(p) for p in calls[other].module.parameters()}
        params = trainable = shared = 0
        for parameter in call.module.parameters():
            if id(parameter) in earlier:
                shared += parameter.numel()
            else:
                params += parameter.numel()
                trainable += parameter.numel() if parameter.requires_grad else 0
        result.append((params, trainable, shared))
    return result


def check(report: ShapeReport, truth: Truth, *, ops: bool = True) -> None:
    """Every field the room shows, against the truth."""
    assert report.error is None, report.error
    rows = [row for row in report.layers if row.kind is RowKind.MODULE]
    # One row per module call, in call order, with its shapes.
    assert [(r.name, r.type, r.depth) for r in rows] == [
        (c.name, c.type, c.depth) for c in truth.calls
    ]
    assert [r.input_shapes for r in rows] == [c.inputs for c in truth.calls]
    assert [r.output_shapes for r in rows] == [c.outputs for c in truth.calls]
    # Output memory: only new storage, at the real dtypes (a view, an in-place result and a
    # layer returning its input count 0), as a real forward allocates it.
    assert [r.activation_bytes for r in rows] == [c.new_bytes for c in truth.calls]
    # Parameters: once per level, by identity, after lazy modules materialised.
    assert [(r.params, r.trainable_params, r.shared_params) for r in rows] == expected_params(
        truth.calls
    )
    for index, row in enumerate(rows):
        if row.shared_params:  # names an earlier, non-enclosing row holding some of them
            holders = [
                c.name or type(truth.model).__name__
                for i, c in enumerate(truth.calls[:index])
                if i not in truth.calls[index].parents
                and {id(p) for p in c.module.parameters()}
                & {id(p) for p in truth.calls[index].module.parameters()}
            ]
            assert row.shared_with in holders
        else:
            assert row.shared_with is None
    for depth in {r.depth for r in rows}:  # no parameter counted twice at one depth
        assert sum(r.params for r in rows if r.depth == depth) <= report.total_params
    unique = {id(p): p for p in truth.model.parameters()}.values()
    assert report.total_params == sum(p.numel() for p in unique)
    assert report.trainable_params == sum(p.numel() for p in unique if p.requires_grad)
    assert report.param_bytes == sum(p.numel() * p.element_size() for p in unique)
    assert report.unmaterialised_params == 0
    # Outputs, and where forward put them.
    assert list(zip(report.output_names, report.outputs, strict=True)) == [
        (name, shape) for name, shape in truth.outputs
    ]
    if ops:
        function_rows = [r for r in report.layers if r.kind is RowKind.FUNCTION]
        assert [r.output_shapes for r in function_rows] == truth.ops
        assert [r.activation_bytes for r in function_rows] == truth.op_bytes
        assert all(r.params == 0 and r.shared_params == 0 for r in function_rows)


# ---------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Case:
    name: str
    body: str
    shapes: list[list[int]]
    dtypes: tuple[str, ...] = ()
    model: str | None = None
    # (text on the line, call, device, phase, tensors(model) → how many), one per call site
    moves: tuple[tuple[str, str, str, MovePhase, MoveKind, Callable[[nn.Module], int]], ...] = ()
    unpack: Callable[[Any], dict[str, torch.Tensor]] | None = None

    @property
    def source(self) -> str:
        return HEAD + self.body

    def twin(self) -> str:
        """The source plain torch runs here: the GPU it names becomes the CPU."""
        text = re.sub(r"\.cuda\((device=)?\d*\)", ".cpu()", self.source)
        return re.sub(r"""(["'])cuda(:\d+)?\1""", '"cpu"', text)


def count(path: str) -> Callable[[nn.Module], int]:
    """How many tensors ``model.<path>.to(...)`` moves: its parameters and buffers."""

    def tensors(model: nn.Module) -> int:
        module = model.get_submodule(path)
        return len(list(module.parameters())) + len(list(module.buffers()))

    return tensors


def one(model: nn.Module) -> int:
    return 1


B, F_ = MovePhase.BUILD, MovePhase.FORWARD
MOVE, CREATE = MoveKind.MOVE, MoveKind.CREATE

CASES = [
    Case(
        "tied_embedding",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.mix = nn.Linear(4, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x):
        return self.out(self.mix(self.emb(x)))
""",
        [[2, 5]],
        ("long",),
    ),
    Case(
        "layer_called_twice",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.shared(torch.relu(self.shared(x))))
""",
        [[3, 6]],
    ),
    Case(
        "one_layer_in_two_blocks",
        """
class Block(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.layer(x))


class M(nn.Module):
    def __init__(self):
        super().__init__()
        common = nn.Linear(8, 8)
        self.a = Block(common)
        self.b = Block(common)

    def forward(self, x):
        return self.b(self.a(x))
""",
        [[2, 8]],
    ),
    Case(
        "tied_conv_weights",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2.weight = self.conv1.weight

    def forward(self, x):
        return self.conv2(F.relu(self.conv1(x)))
""",
        [[1, 4, 8, 8]],
    ),
    Case(
        "parameter_on_the_parent_shared_with_a_child",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 5)
        self.w = self.fc.weight
        self.scale = nn.Parameter(torch.ones(5))

    def forward(self, x):
        return self.fc(x @ self.w) * self.scale
""",
        [[2, 5]],
    ),
    Case(
        "module_list",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x
""",
        [[2, 4]],
    ),
    Case(
        "module_list_holding_one_layer_twice",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.Linear(4, 4)
        self.layers = nn.ModuleList([layer, nn.ReLU(), layer])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
""",
        [[2, 4]],
    ),
    Case(
        "module_dict",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        return {name: head(x) for name, head in self.heads.items()}
""",
        [[2, 4]],
    ),
    Case(
        "lazy_linear",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.LazyLinear(5)
        self.b = nn.Linear(5, 2)

    def forward(self, x):
        return self.b(self.a(x))
""",
        [[4, 3]],
    ),
    Case(
        "lazy_conv_norm_linear",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.LazyConv2d(6, 3)
        self.norm = nn.LazyBatchNorm2d()
        self.fc = nn.LazyLinear(10)

    def forward(self, x):
        x = F.relu(self.norm(self.conv(x)))
        return self.fc(torch.flatten(x, 1))
""",
        [[2, 3, 10, 10]],
    ),
    Case(
        "lazy_in_sequential",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))

    def forward(self, x):
        return self.net(x)
""",
        [[3, 7]],
    ),
    Case(
        "dict_output",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        features = self.body(x)
        return {"logits": self.head(features), "features": features}
""",
        [[2, 4]],
    ),
    Case(
        "nested_tuple_output",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 2)

    def forward(self, x):
        y = self.a(x)
        return y, [x, {"double": y * 2}], 3
""",
        [[2, 4]],
    ),
    Case(
        "namedtuple_output",
        """
from collections import namedtuple

Out = namedtuple("Out", "logits hidden")


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x):
        return Out(self.l(x), x)
""",
        [[4, 3]],
    ),
    Case(
        "object_output",
        """
class Out:
    def __init__(self, logits, hidden):
        self.logits = logits
        self.hidden = hidden
        self.note = "plain"


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x):
        return Out(self.l(x), x)
""",
        [[4, 3]],
        unpack=lambda out: {".logits": out.logits, ".hidden": out.hidden},
    ),
    Case(
        "object_holding_a_dict",
        """
class Out:
    def __init__(self, parts):
        self.parts = parts


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x):
        return Out({"y": self.l(x), "x": x})
""",
        [[4, 3]],
        unpack=lambda out: {".parts['y']": out.parts["y"], ".parts['x']": out.parts["x"]},
    ),
    # The curriculum's GPU lesson, written as students write it.
    Case(
        "device_chosen_by_availability",
        """
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim).to(device)

    def forward(self, x):
        x = x.to(device)
        return self.linear(x)
""",
        [[4, 3]],
        moves=(
            (
                "nn.Linear(input_dim, output_dim).to(device)",
                "Module.to",
                "cpu",
                B,
                MOVE,
                count("linear"),
            ),
            ("x = x.to(device)", "Tensor.to", "cpu", F_, MOVE, one),
        ),
    ),
    Case(
        "cuda_in_init_and_forward",
        """
class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim).cuda()

    def forward(self, x):
        x = x.cuda(device=1)
        return self.linear(x).cpu()
""",
        [[4, 3]],
        moves=(
            (".cuda()", "Module.cuda", "cuda", B, MOVE, count("linear")),
            ("x.cuda(device=1)", "Tensor.cuda", "cuda:1", F_, MOVE, one),
            ("self.linear(x).cpu()", "Tensor.cpu", "cpu", F_, MOVE, one),
        ),
    ),
    Case(
        "to_cpu_in_forward",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        x = x.to("cpu")
        return self.fc(x).to("cpu", torch.float64)
""",
        [[4, 3]],
        moves=(
            ('x.to("cpu")', "Tensor.to", "cpu", F_, MOVE, one),
            ('.to("cpu", torch.float64)', "Tensor.to", "cpu", F_, MOVE, one),
        ),
    ),
    Case(
        "whole_model_moved_in_init",
        """
gpu = torch.device("cuda:0")


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.norm = nn.BatchNorm2d(2)
        self.to(gpu)

    def forward(self, x):
        return self.norm(self.conv(x.to(gpu)))
""",
        [[1, 1, 6, 6]],
        moves=(
            ("self.to(gpu)", "Module.to", "cuda:0", B, MOVE, count("")),
            ("x.to(gpu)", "Tensor.to", "cuda:0", F_, MOVE, one),
        ),
    ),
    Case(
        "tensor_created_for_a_device",
        """
device = "cuda"


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4, device=device)

    def forward(self, x):
        bias = torch.zeros(x.size(0), 4, device=device)
        return self.fc(x) + bias
""",
        [[2, 3]],
        moves=(
            ("nn.Linear(3, 4, device=device)", "torch.empty", "cuda", B, CREATE, count("fc")),
            ("torch.zeros(x.size(0), 4, device=device)", "torch.zeros", "cuda", F_, CREATE, one),
        ),
    ),
    Case(
        "curriculum_linear_from_legacy_tensors",
        """
class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        self.input_dim = input_dim
        self.outpu_dim = output_dim
        super().__init__()
        self.W = nn.Parameter(torch.FloatTensor(input_dim, output_dim))
        self.b = nn.Parameter(torch.FloatTensor(output_dim))

    def forward(self, x):
        y = torch.matmul(x, self.W) + self.b
        return y
""",
        [[4, 3]],
    ),
    Case(
        "curriculum_linear_unregistered_tensors",
        """
class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.W = torch.FloatTensor(input_dim, output_dim)
        self.b = torch.FloatTensor(output_dim)

    def forward(self, x):
        return torch.matmul(x, self.W) + self.b
""",
        [[4, 3]],
    ),
    Case(
        "views",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 6)

    def forward(self, x):
        y = x.view(x.size(0), -1)
        y = self.fc(y).unsqueeze(1).transpose(1, 2)
        a, b = y.chunk(2, dim=1)
        z = torch.cat([a, b], dim=2).permute(0, 2, 1).reshape(-1)
        return z[1:5], y.flatten(1).T
""",
        [[2, 3, 4]],
    ),
    Case(
        "in_place",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.act(self.fc(x))
        y.add_(1)
        y.mul_(2).relu_()
        return F.relu(y, inplace=True)
""",
        [[2, 4]],
    ),
    Case(
        "frozen_and_buffers",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)
        self.train_me = nn.Linear(4, 2)
        self.register_buffer("offset", torch.zeros(4), persistent=False)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        return self.train_me(self.frozen(x + self.offset))
""",
        [[3, 4]],
    ),
    Case(
        "unused_layer",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 2)
        self.spare = nn.Linear(100, 100)

    def forward(self, x):
        return self.used(x)
""",
        [[3, 4]],
    ),
    Case(
        "lstm_returns_nested_tuple",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x):
        return self.lstm(self.emb(x))
""",
        [[2, 7]],
        ("long",),
    ),
    Case(
        "transformer_layer",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)

    def forward(self, x):
        return self.layer(x)
""",
        [[2, 5, 16]],
    ),
    Case(
        "embedding_then_lazy_head",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.head = nn.LazyLinear(30)
        self.head2 = nn.Linear(8, 30, bias=False)
        self.head2.weight = self.emb.weight

    def forward(self, x):
        h = self.emb(x)
        return self.head(h) + self.head2(h)
""",
        [[2, 6]],
        ("long",),
    ),
    Case(
        "sequential_with_repeated_block",
        """
class M(nn.Module):
    def __init__(self):
        super().__init__()
        block = nn.Sequential(nn.Linear(5, 5), nn.GELU())
        self.net = nn.Sequential(block, block, nn.Linear(5, 1))

    def forward(self, x):
        return self.net(x)
""",
        [[2, 5]],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_tricky_models_match_plain_torch(case: Case) -> None:
    dtypes = list(case.dtypes) or ["float32"] * len(case.shapes)
    report = engine_report(case.source, case.shapes, dtypes, case.model)
    namespace = namespace_of(case.twin())
    classes = [value for value in namespace.values() if isinstance(value, type)
               and issubclass(value, nn.Module) and value.__module__ == "pasted_model"]  # fmt: skip
    build = classes[-1]
    truth = truth_of(build, real_inputs(case.shapes, dtypes), case.unpack)
    check(report, truth)
    # Device moves: one note per call site, with its line, device, phase and tensor count.
    lines = case.source.splitlines()

    def line_of(text: str) -> int:
        (number,) = [i + 1 for i, line in enumerate(lines) if text in line]
        return number

    expected = {  # every move here is asked for by the model's own __init__ or forward
        (kind, phase, call, device, line_of(text), "", tensors(truth.model))
        for text, call, device, phase, kind, tensors in case.moves
    }
    found = {
        (m.kind, m.phase, m.call, m.device, m.line, m.layer, m.tensors) for m in report.device_moves
    }
    assert found == expected


@dataclass
class Prediction:
    logits: torch.Tensor
    hidden: torch.Tensor
    step: int = 0


class ReturnsADataclass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> Prediction:
        return Prediction(self.fc(x), x)


def test_dataclass_outputs_match_plain_torch() -> None:
    report = analyze_module(ReturnsADataclass, [[4, 3]])
    truth = truth_of(
        ReturnsADataclass, [torch.randn(4, 3)],
        lambda out: {".logits": out.logits, ".hidden": out.hidden}, user_ops=False,
    )  # fmt: skip
    check(report, truth, ops=False)


# ---------------------------------------------------------------------------- presets
PRESET_SHAPES = {  # small real inputs: the shapes do not depend on the batch
    "net": [[2, 3, 32, 32]],
    "resnet_generator": [[1, 3, 64, 64]],
    "resnet18": [[1, 3, 64, 64]],
    "resnet50": [[1, 3, 64, 64]],
    "mobilenet_v3": [[1, 3, 64, 64]],
    "unet": [[1, 3, 64, 64]],
}


@pytest.mark.parametrize("key", [key for key in PRESETS if key != "net_broken"])
def test_every_preset_matches_plain_torch(key: str) -> None:
    preset = PRESETS[key]
    shapes = PRESET_SHAPES.get(key) or parse_shapes(preset.shapes)
    dtypes = [preset.dtypes] * len(shapes)
    report = engine_report(preset.source, shapes, dtypes, preset.model)
    namespace = namespace_of(preset.source)
    name = preset.model.split("(")[0]
    args = eval(preset.model, {name: lambda *a, **k: (a, k)})  # literal arguments only
    truth = truth_of(
        lambda: namespace[name](*args[0], **args[1]), real_inputs(shapes, dtypes),
        user_ops=False,
    )  # fmt: skip
    check(report, truth, ops=False)  # torchvision's own ops are not the pasted file's
    assert report.device_moves == []


def test_the_broken_preset_still_explains_its_mistake() -> None:
    preset = PRESETS["net_broken"]
    report = engine_report(preset.source, parse_shapes(preset.shapes), ["float32"], preset.model)
    assert report.error is not None and report.error.kind == "linear_in_features"


# ---------------------------------------------------------------------------- sentences
def test_device_notes_say_what_the_report_holds() -> None:
    """The note's sentences carry the report's own figures in both languages: the line, the
    call, the device, how many tensors; and the no-GPU sentence is what the facade answers."""
    from components.shapes.draw import device_notes_markdown
    from torchatlas.sandbox.facade import facade_modules

    cuda = facade_modules()["torch"].cuda
    assert cuda.is_available() is False and cuda.device_count() == 0
    move = DeviceMove(MoveKind.MOVE, MovePhase.FORWARD, "Tensor.cuda", "cuda:1", 12, "enc", 3)
    create = DeviceMove(MoveKind.CREATE, MovePhase.BUILD, "torch.zeros", "cpu", None, "", 1)
    for lang in LANGUAGES:
        text = device_notes_markdown([move, create], lang)
        move_line, create_line = text.splitlines()[-2:]
        for part in ("12", "`Tensor.cuda`", "`cuda:1`", "3", "`enc`"):
            assert part in move_line
        for part in ("`torch.zeros`", "`cpu`", "1"):
            assert part in create_line
        assert translate("shapes.devices.build", lang) in create_line
        assert "torch.cuda.is_available()" in text
    assert device_notes_markdown([], "en") == ""


def test_shared_column_names_the_row_that_counts() -> None:
    from components.shapes.draw import layer_frame

    case = next(case for case in CASES if case.name == "tied_embedding")
    report = engine_report(case.source, case.shapes, list(case.dtypes), None)
    for lang in LANGUAGES:
        frame = layer_frame(report, 3, False, lang)
        shared = frame[translate("shapes.table.shared", lang)].tolist()
        out = next(i for i, row in enumerate(report.layers) if row.name == "out")
        assert "40" in shared[out] and "emb" in shared[out]
        assert shared[0] == ""  # the model row counts everything it holds


# ---------------------------------------------------------------------------- hypothesis
LAYERS = ("linear", "relu", "tanh", "norm", "dropout", "lazy", "reuse", "tie", "identity")


def build_sequential(spec: list[tuple[str, int]], features: int) -> nn.Module:
    """A Sequential from ``spec``: each step's kind and, where it makes one, its width."""
    layers: list[nn.Module] = []
    linears: list[nn.Linear] = []
    width = features
    for kind, size in spec:
        if kind == "linear" or (kind in ("reuse", "tie") and not linears):
            layer = nn.Linear(width, size)
            linears.append(layer)
            width = size
        elif kind == "lazy":
            layer = nn.LazyLinear(size)
            width = size
        elif kind == "reuse":
            fits = [lin for lin in linears if lin.in_features == width]
            layer = fits[size % len(fits)] if fits else nn.Identity()
            width = layer.out_features if fits else width
        elif kind == "tie":
            layer = nn.Linear(width, width)
            square = [lin for lin in linears if lin.weight.shape == (width, width)]
            if square:
                layer.weight = square[size % len(square)].weight
            linears.append(layer)
        elif kind == "norm":
            layer = nn.LayerNorm(width)
        elif kind == "dropout":
            layer = nn.Dropout(0.5)
        else:
            layer = {"relu": nn.ReLU(), "tanh": nn.Tanh(), "identity": nn.Identity()}[kind]
        layers.append(layer)
    return nn.Sequential(*layers)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    features=st.integers(1, 6),
    batch=st.integers(1, 3),
    spec=st.lists(st.tuples(st.sampled_from(LAYERS), st.integers(1, 6)), min_size=1, max_size=8),
)
def test_random_sequentials_match_plain_torch(
    features: int, batch: int, spec: list[tuple[str, int]]
) -> None:
    report = analyze_module(lambda: build_sequential(spec, features), [[batch, features]])
    truth = truth_of(lambda: build_sequential(spec, features), [torch.randn(batch, features)],
                     user_ops=False)  # fmt: skip
    check(report, truth, ops=False)


# ---------------------------------------------------------------------------- real forwards
# Issue 34 item 10: meta checks shapes, not dtypes. What the room reports must be what a real
# forward (torch on the CPU) does: a dtype mix it refuses stops the table at that layer in
# torch's own words, one it accepts is measured at the dtypes it really produces; and a fix it
# offers changes only the wrong argument and runs.
FLOATS = ("float32", "float64", "float16", "bfloat16")


@st.composite
def random_layers(draw: st.DrawFn) -> tuple[Callable[[], nn.Module], list[int], str]:
    """A layer with random arguments, its parameters in a random floating dtype, and an
    input whose channels (or features) and dtype may be wrong."""
    kind = draw(st.sampled_from(["conv1d", "conv2d", "linear", "bn1d", "bn2d", "layernorm"]))
    dtype = getattr(torch, draw(st.sampled_from(FLOATS)))
    batch = draw(st.integers(1, 2))
    wrong = draw(st.booleans())
    if kind in ("conv1d", "conv2d"):
        groups = draw(st.sampled_from([1, 2, 3]))
        in_channels = groups * draw(st.integers(1, 3))
        out_channels = groups * draw(st.integers(1, 2))
        kwargs = {
            "kernel_size": draw(st.integers(1, 3)),
            "stride": draw(st.integers(1, 2)),
            "padding": draw(st.integers(0, 1)),
            "dilation": draw(st.integers(1, 2)),
            "groups": groups,
            "bias": draw(st.booleans()),
            "padding_mode": draw(st.sampled_from(["zeros", "reflect"])),
        }
        cls = nn.Conv1d if kind == "conv1d" else nn.Conv2d
        channels = draw(st.integers(1, 7)) if wrong else in_channels
        spatial = [draw(st.integers(5, 8)) for _ in range(1 if kind == "conv1d" else 2)]

        def build() -> nn.Module:
            return cls(in_channels, out_channels, dtype=dtype, **kwargs)

        return build, [batch, channels, *spatial], kind
    if kind == "linear":
        features, out, bias = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.booleans())
        got = draw(st.integers(1, 6)) if wrong else features
        return (lambda: nn.Linear(features, out, bias=bias, dtype=dtype)), [batch, got], kind
    if kind == "layernorm":
        features = draw(st.integers(1, 6))
        return (lambda: nn.LayerNorm(features, dtype=dtype)), [batch + 1, features], kind
    features = draw(st.integers(1, 5))
    affine, track, eps = (
        draw(st.booleans()),
        draw(st.booleans()),
        draw(st.sampled_from([1e-5, 1e-3])),
    )
    cls = nn.BatchNorm1d if kind == "bn1d" else nn.BatchNorm2d
    got = draw(st.integers(1, 5)) if wrong else features
    shape = [batch + 1, got] + ([] if kind == "bn1d" else [3, 3])

    def build_norm() -> nn.Module:
        return cls(features, eps=eps, affine=affine, track_running_stats=track, dtype=dtype)

    return build_norm, shape, kind


def _real_forward(build: Callable[[], nn.Module], shape: list[int], dtype: str) -> Any:
    """The same layer run for real on the CPU (eval mode, as the room traces it): its output,
    or the exception torch raised."""
    torch.manual_seed(0)
    layer = build().eval()
    try:
        with torch.no_grad():
            return layer(torch.randn(shape, dtype=getattr(torch, dtype)))
    except Exception as exc:
        return exc


def _constructor_of(layer: nn.Module) -> dict[str, Any]:
    """Every constructor argument as the built layer has it (sizes as tuples)."""
    names = [n for n in inspect.signature(type(layer).__init__).parameters if n not in
             ("self", "device", "dtype")]  # fmt: skip
    values = {n: (layer.bias is not None if n == "bias" else getattr(layer, n)) for n in names}
    weights = [p for p in layer.parameters(recurse=False)]
    values["dtype"] = weights[0].dtype if weights else None
    return values


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layer=random_layers(), input_dtype=st.sampled_from(FLOATS))
def test_a_real_forward_decides_what_is_reported(
    layer: tuple[Callable[[], nn.Module], list[int], str], input_dtype: str
) -> None:
    build, shape, _ = layer
    report = analyze_module(lambda: nn.Sequential(build()), [shape], [input_dtype])
    real = _real_forward(build, shape, input_dtype)
    event(report.error.kind.value if report.error else "runs")
    if not isinstance(real, Exception):  # it runs: no error, output memory at its real dtype
        assert report.error is None, report.error
        assert report.outputs == [list(real.shape)]
        row = next(r for r in report.layers if r.name == "0")
        assert row.activation_bytes == real.untyped_storage().nbytes()
        return
    # a real forward raises: the room stops at that layer
    error = report.error
    assert error is not None and error.layer == "model[0]", (real, error)
    if error.kind == "dtype_mismatch":  # meta let it through: the words are torch's real ones
        first_line = str(real).strip().splitlines()[0]
        assert first_line in error.params["detail"]
        # "the same operation runs when all its floating tensors are {works}"
        works = error.params["works"]
        assert not isinstance(_real_forward(lambda: build().to(getattr(torch, works)), shape,
                                            works), Exception)  # fmt: skip
    # a dtype mismatch is claimed only where torch's real kernel really refuses the dtypes
    same_dtype = _real_forward(lambda: build().to(getattr(torch, input_dtype)), shape, input_dtype)
    if error.kind == "dtype_mismatch":
        assert not isinstance(same_dtype, Exception)
    # an offered fix changes only the wrong argument, and runs
    fix = error.params.get("fix")
    if error.kind in ("linear_in_features", "conv_in_channels", "norm_features"):
        changed = {"linear_in_features": "in_features", "conv_in_channels": "in_channels",
                   "norm_features": "num_features"}[error.kind]  # fmt: skip
        original = build()
        event("fix offered" if fix else "no fix")
        if fix:
            target, call = fix.split(" = ", 1)
            assert target == "model[0]"
            fixed = eval(call, {"nn": nn, "torch": torch})  # the room's own fix, as offered
            before, after = _constructor_of(original), _constructor_of(fixed)
            assert after[changed] == error.params["got"]
            assert {k: v for k, v in before.items() if k != changed} == {
                k: v for k, v in after.items() if k != changed
            }
            assert not isinstance(_real_forward(lambda: fixed, shape, input_dtype), Exception)
        else:  # no fix offered: changing that argument alone does not give a layer that runs
            values = _constructor_of(original)
            values[changed] = error.params["got"]
            try:
                candidate = type(original)(**values)
            except Exception:
                return
            assert isinstance(_real_forward(lambda: candidate, shape, input_dtype), Exception)


def test_the_issue_convolution_keeps_groups_and_bias() -> None:
    """The grouped, bias-free, strided convolution fed the wrong channel count: the fix keeps
    every argument but in_channels, and torch runs it on the very input."""
    source = HEAD + (
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(4, 8, 3, stride=2, groups=2, bias=False)\n\n"
        "    def forward(self, x):\n        return self.conv(x)\n"
    )
    report = engine_report(source, [[1, 6, 9, 9]], ["float32"], None)
    assert report.error is not None and report.error.kind == "conv_in_channels"
    assert report.error.params["fix"] == (
        "conv = nn.Conv2d(6, 8, kernel_size=3, stride=2, groups=2, bias=False)"
    )
    odd = engine_report(source, [[1, 5, 9, 9]], ["float32"], None)  # 5 channels, 2 groups
    assert odd.error is not None and odd.error.params["fix"] == ""
    assert "`" not in odd.error.text("en", "hint") and "{" not in odd.error.text("ko", "hint")


def test_a_float16_input_into_float32_weights_stops_where_torch_does() -> None:
    """Meta runs this Linear (and says float32); the CPU refuses it: the room says so, at
    the layer, with torch's words, and counts no memory for what never ran."""
    source = HEAD + (
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 3)\n        self.out = nn.Linear(3, 2)\n\n"
        "    def forward(self, x):\n        return self.out(self.fc(x))\n"
    )
    report = engine_report(source, [[2, 4]], ["float16"], None)
    error = report.error
    assert error is not None and error.kind == "dtype_mismatch" and error.layer == "fc"
    real = _real_forward(lambda: nn.Linear(4, 3), [2, 4], "float16")
    assert isinstance(real, RuntimeError) and str(real) in error.params["detail"]
    assert error.params["dtypes"] == "float16, float32" and error.params["works"] == "float32"
    for lang in LANGUAGES:
        for part in ("title", "message", "hint"):
            text = error.text(lang, part)
            assert "{" not in text and not text.startswith("shapes.")
