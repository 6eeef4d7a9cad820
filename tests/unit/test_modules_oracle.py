"""The nn.Module room against plain torch: every preset, the unit tests' modules and a table of
tricky ones, each field the room shows checked against torch's own answer on a CPU copy.

The truth is computed here with plain torch (never with the engine): ``named_parameters``,
``named_buffers``, ``state_dict``, an optimiser, object identity, a real device move (CPU →
meta) and a real ``.to(torch.float64)`` on copies. Where the room prints a sentence (a
finding), the test checks its claim: the names it gives, the counts, what is hidden and what
is not, never its wording. Each model is checked twice: the trusted walk in this process on
the CPU model, and the page's own path through the sandbox (built there on meta).

A hypothesis test builds random modules (layers, parameters, buffers of any dtype and
persistence, plain tensors, Python lists and dicts of new and of already registered things,
tied modules, aliases, lazy layers) and holds the walk to the same truth.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import torchatlas.modules as modules
from components.modules.draw import kind_counts, tensor_frame, tree_frame
from tests.unit.test_modules import HEADER, SOURCES, build_on_cpu, resolve
from torchatlas.i18n import translate
from torchatlas.modules import Container, FindingCode, ModuleReport, TensorKind
from torchatlas.modules.inspector import describe_module
from torchatlas.modules.report import MAX_LIST_ITEMS, MAX_NEST_DEPTH

LAZY = nn.parameter.UninitializedTensorMixin
INTERNALS = frozenset(vars(nn.Module()))  # torch's own registries in every module's __dict__


def _module(body: str, name: str = "Net") -> str:
    return (
        HEADER
        + f"\nclass {name}(nn.Module):\n    def __init__(self):\n"
        + ("        super().__init__()\n" + body)
    )


# name → (source, constructor): the cases the issue names and their neighbours.
TRICKY: dict[str, tuple[str, str]] = {
    "order_list": (
        _module(
            "        self.blocks = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])\n"
            "        self.order = [self.blocks[1], self.blocks[0]]\n"
        ),
        "Net()",
    ),
    "keep_list": (
        _module(
            "        self.w = nn.Parameter(torch.ones(3))\n"
            "        self.fc = nn.Linear(3, 2)\n"
            "        self.keep = [self.w, self.fc.weight]\n"
        ),
        "Net()",
    ),
    "mixed_list": (
        _module(
            "        self.fc = nn.Linear(2, 2)\n"
            "        self.items = [self.fc, nn.Linear(2, 3), self.fc.weight, torch.ones(3)]\n"
        ),
        "Net()",
    ),
    "dict_of_modules": (
        _module('        self.heads = {"a": nn.Linear(2, 2), "b": nn.Linear(2, 3)}\n'),
        "Net()",
    ),
    "module_dict_and_alias": (
        _module(
            '        self.heads = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 3)})\n'
            '        self.lookup = {"first": self.heads["a"], "w": self.heads["b"].weight}\n'
        ),
        "Net()",
    ),
    "tuple_of_parameters": (
        _module(
            "        self.pair = (nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(2)))\n"
            "        self.ws = [nn.Parameter(torch.randn(2, 2)) for _ in range(3)]\n"
        ),
        "Net()",
    ),
    "parameter_list_alias": (
        _module(
            "        self.gains = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter("
            "torch.ones(2))])\n"
            "        self.first = [self.gains[0]]\n"
            '        self.cache = {"last": torch.zeros(2)}\n'
        ),
        "Net()",
    ),
    "buffers_every_kind": (
        _module(
            '        self.register_buffer("count", torch.zeros((), dtype=torch.long))\n'
            '        self.register_buffer("mask", torch.ones(3, dtype=torch.bool))\n'
            '        self.register_buffer("scratch", torch.zeros(3), persistent=False)\n'
            '        self.register_buffer("ids", torch.arange(3), persistent=False)\n'
            '        self.register_buffer("h16", torch.zeros(2, dtype=torch.float16))\n'
            "        self.bn = nn.BatchNorm1d(3)\n"
        ),
        "Net()",
    ),
    "plain_alias_of_buffer": (
        _module(
            "        self.bn = nn.BatchNorm1d(3)\n"
            "        self.stat = self.bn.running_mean\n"
            "        self.stats = [self.bn.running_var, self.bn.num_batches_tracked]\n"
        ),
        "Net()",
    ),
    "raw_alias_of_parameter": (
        _module(
            "        self.fc = nn.Linear(2, 2)\n"
            "        self.alias = self.fc.weight\n"
            '        object.__setattr__(self, "raw", self.fc.bias)\n'
        ),
        "Net()",
    ),
    "lazy": (
        _module(
            "        self.lazy = nn.LazyLinear(4)\n"
            "        self.conv = nn.LazyConv2d(3, 3)\n"
            "        self.keep = [self.lazy.weight]\n"
            "        self.fc = nn.Linear(4, 2)\n"
        ),
        "Net()",
    ),
    "device_idioms": (
        HEADER
        + 'device = "cuda" if torch.cuda.is_available() else "cpu"\n\n\n'
        + "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(3, 2).to(device)\n"
        '        self.register_buffer("steps", torch.zeros((), dtype=torch.long, device=device))\n'
        "        self.plain = torch.ones(2).to(device)\n"
        "        if torch.cuda.is_available():\n"
        "            self.fc = self.fc.cuda()\n"
        "        self.to(device)\n\n\n"
        "def build():\n    model = Net()\n    return model.to(device)\n",
        "build()",
    ),
    "same_module_twice": (
        _module(
            "        block = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))\n"
            "        self.a = block\n"
            "        self.b = block\n"
            "        self.seq = nn.Sequential(self.a[0], nn.ReLU(), self.a[0])\n"
            "        self.again = [block]\n"
        ),
        "Net()",
    ),
    "tied_and_frozen": (
        _module(
            "        self.embed = nn.Embedding(5, 3)\n"
            "        self.out = nn.Linear(3, 5, bias=False)\n"
            "        self.out.weight = self.embed.weight\n"
            "        self.embed.weight.requires_grad_(False)\n"
            "        self.pos = nn.Parameter(torch.zeros(3), requires_grad=False)\n"
        ),
        "Net()",
    ),
    "none_registrations": (
        _module(
            '        self.register_parameter("skip", None)\n'
            '        self.register_buffer("nothing", None)\n'
            "        self.fc = nn.Linear(2, 2, bias=False)\n"
        ),
        "Net()",
    ),
    "dtypes": (
        _module(
            "        self.c = nn.Parameter(torch.zeros(2, dtype=torch.complex64))\n"
            "        self.d = nn.Parameter(torch.zeros(2, dtype=torch.float64))\n"
            "        self.small = torch.zeros(2, dtype=torch.int8)\n"
            '        self.register_buffer("b16", torch.zeros(2, dtype=torch.bfloat16))\n'
        ),
        "Net()",
    ),
    "torch_layers": (
        _module(
            "        self.enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)\n"
            "        self.gru = nn.GRU(4, 4)\n"
            "        self.bag = nn.EmbeddingBag(10, 4)\n"
        ),
        "Net()",
    ),
    "nested_user_modules": (
        HEADER + "class Leaf(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.W = torch.FloatTensor(2, 2)\n"
        "        self.p = nn.Parameter(torch.ones(2))\n"
        "        self.hidden = [nn.Linear(2, 2)]\n\n\n"
        + _module(
            "        self.leaves = nn.ModuleList([Leaf(), Leaf()])\n"
            "        self.shortcut = [self.leaves[0].p, self.leaves[1]]\n"
        ),
        "Net()",
    ),
    "only_hidden": (
        _module("        self.layers = [nn.Linear(2, 2), nn.Linear(2, 2)]\n"),
        "Net()",
    ),
    # Issue 34 item 8: modules and tensors in containers inside containers.
    "dict_of_lists": (
        _module(
            "        self.fc = nn.Linear(2, 2)\n"
            '        self.heads = {"a": [nn.Linear(2, 3), torch.ones(2)], "b": [self.fc]}\n'
        ),
        "Net()",
    ),
    "list_of_tuples": (
        _module(
            "        self.pairs = [(nn.Parameter(torch.ones(2)), torch.zeros(3)),\n"
            "                      (nn.Linear(1, 1),)]\n"
            '        self.register_buffer("scale", torch.ones(1))\n'
            "        self.keep = [(self.scale, [torch.ones(4, 1)])]\n"
        ),
        "Net()",
    ),
    "deeply_nested": (
        _module("        self.deep = [[[{'w': [torch.ones(2, 2)]}]], ((nn.BatchNorm1d(2),),)]\n"),
        "Net()",
    ),
    "nested_cycle": (
        _module(
            "        self.loop = [torch.ones(2), [nn.Linear(2, 2)]]\n"
            "        self.loop.append(self.loop)\n"
            "        self.loop[1].append(self.loop)\n"
        ),
        "Net()",
    ),
    "hidden_module_holding_more": (
        HEADER + "class Leaf(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(2, 2)\n"
        "        self.W = torch.ones(3)\n"
        "        self.extra = {'x': [torch.zeros(2)]}\n\n\n"
        + _module("        self.groups = {'g': [Leaf(), Leaf()]}\n"),
        "Net()",
    ),
    "empty_tensors": (
        _module(
            "        self.e = nn.Parameter(torch.zeros(0, 3))\n"
            '        self.register_buffer("z", torch.zeros(3, 0))\n'
            "        self.plain = torch.zeros(0)\n"
        ),
        "Net()",
    ),
}
ALL = {**SOURCES, **TRICKY}


# ---------------------------------------------------------------- the truth, from torch
def _numel(tensor: torch.Tensor) -> int:
    """torch refuses to count a lazy tensor's elements; the room counts it as 0."""
    return 0 if isinstance(tensor, LAZY) else tensor.numel()


def _where(path: str, attribute: str) -> str:
    return f"self.{attribute}" if not path else f"model.{path}.{attribute}"


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _open(value: Any, name: str, depth: int, opened: set[int], out: list) -> None:
    """(name, item, depth) of every tensor and module in the Python container ``value`` and
    in the containers it holds (depth 1: its own items), as plain Python reaches them, each
    container opened once (a cycle or a shared list is not opened again; ``opened`` is
    shared by one attribute's walk). The room's bounds on nesting and items are the only
    thing taken from the engine."""
    opened.add(id(value))
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    assert len(items) <= MAX_LIST_ITEMS  # the tests' models stay inside the bounds
    for key, item in items:
        index = f"[{key!r}]" if isinstance(key, str | int) else "[…]"
        if isinstance(item, torch.Tensor | nn.Module):
            out.append((name + index, item, depth))
        elif type(item) in (list, tuple, dict) and id(item) not in opened:
            assert depth < MAX_NEST_DEPTH
            _open(item, name + index, depth + 1, opened, out)


def _container_truth(model: nn.Module) -> dict[str, dict[str, Any]]:
    """Each Python list/tuple/dict attribute of a user module (first path only), opened to
    every depth: the items torch registered elsewhere (by identity) and the ones only the
    containers reach, its own items apart from those in nested containers."""
    registered_tensors = {id(t) for t in (*model.parameters(), *model.buffers())}
    registered_modules = {id(m) for m in model.modules()}
    out: dict[str, dict[str, Any]] = {}
    for path, module in model.named_modules():
        if type(module).__module__.startswith("torch."):
            continue
        for attribute, value in vars(module).items():
            if type(value) not in (list, tuple, dict) or attribute in INTERNALS:
                continue
            found: list = []
            _open(value, _join(path, attribute), 1, set(), found)
            facts: dict[str, Any] = {"aliases": 0, "depth": 1}
            for level in ("direct", "nested"):
                items = [(i, d) for _, i, d in found if (d == 1) == (level == "direct")]
                tensors = [i for i, _ in items if isinstance(i, torch.Tensor)]
                hidden_tensors = [t for t in tensors if id(t) not in registered_tensors]
                mods = [(i, d) for i, d in items if isinstance(i, nn.Module)]
                hidden_modules = [(m, d) for m, d in mods if id(m) not in registered_modules]
                elements = {
                    id(p): _numel(p)
                    for m, _ in hidden_modules
                    for p in m.parameters()
                    if id(p) not in registered_tensors
                }
                if level == "nested":  # the nested finding counts the tensors' elements too
                    elements |= {id(t): _numel(t) for t in hidden_tensors}
                    hidden_ids = {id(t) for t in hidden_tensors} | {
                        id(m) for m, _ in hidden_modules
                    }
                    depths = [d for i, d in items if id(i) in hidden_ids]
                    facts["depth"] = max(depths, default=1)
                facts[level] = {
                    "tensors": len(hidden_tensors),
                    "modules": len(hidden_modules),
                    "elements": sum(elements.values()),
                }
                facts["aliases"] += len(tensors) - len(hidden_tensors)
                facts["aliases"] += len(mods) - len(hidden_modules)
            out[_where(path, attribute)] = facts
    return out


def _python_reach(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor plain Python reaches from the model's modules: their attributes, the
    lists, tuples and dicts they hold (to every depth), and everything a module that only a
    container reaches holds in turn. Name → tensor, named as the room names its rows."""
    registered_modules = {id(m) for m in model.modules()}
    reach: dict[str, torch.Tensor] = {}

    def attributes(module: nn.Module, path: str, stack: set[int]) -> None:
        torchs = type(module).__module__.startswith("torch.")
        for attribute, value in vars(module).items():
            if attribute in INTERNALS:
                continue
            if isinstance(value, torch.Tensor):
                reach.setdefault(_join(path, attribute), value)
            elif type(value) in (list, tuple, dict) and not torchs:
                found: list = []
                _open(value, _join(path, attribute), 1, set(stack), found)
                for name, item, _ in found:
                    if isinstance(item, torch.Tensor):
                        reach.setdefault(name, item)
                    elif id(item) not in registered_modules and id(item) not in stack:
                        hidden(item, name, stack | {id(item)})

    def hidden(module: nn.Module, name: str, stack: set[int]) -> None:
        for sub_path, sub in module.named_modules(prefix=name):
            for key, tensor in (*sub._parameters.items(), *sub._buffers.items()):
                if tensor is not None:
                    reach.setdefault(_join(sub_path, key), tensor)
            attributes(sub, sub_path, stack)

    for path, module in model.named_modules():
        attributes(module, path, set())
    return reach


def moved_to_meta(model: nn.Module) -> nn.Module:
    """A copy of ``model`` after a real device move, CPU → meta. A move between dense devices
    (CPU ↔ CUDA) installs each moved parameter in place (``Module._apply``: compatible
    shallow-copy types use ``param.data = …``), so a list holding the Parameter object sees it
    moved; CPU → meta is not such a pair, so torch is asked to keep the Parameter objects
    (swap their contents), as a CUDA move would. Buffers are replaced either way."""
    moved = copy.deepcopy(model)
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        moved.to("meta")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)
    return moved


def assert_room_tells_the_truth(report: ModuleReport, model: nn.Module) -> None:
    """Every table cell, metric and finding of ``report`` against torch on CPU ``model``."""
    assert report.error is None, report.error
    params = dict(model.named_parameters())
    all_param_names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    buffers = dict(model.named_buffers())
    state = model.state_dict(keep_vars=True)
    parameter_ids = {id(p) for p in params.values()}
    buffer_ids = {id(b) for b in buffers.values()}
    registered = parameter_ids | buffer_ids
    state_ids = {id(v) for v in state.values()}
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        optimizer_ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        optimizer_error = None
    except ValueError as exc:
        optimizer_ids, optimizer_error = set(), str(exc)

    # the summary metrics (kind_counts is what the page shows)
    counts = kind_counts(report)
    assert counts[TensorKind.PARAMETER] == len(params) == report.parameter_count
    assert counts[TensorKind.BUFFER] == len(buffers)
    assert report.total_params == sum(_numel(p) for p in params.values())
    assert report.trainable_params == sum(_numel(p) for p in params.values() if p.requires_grad)
    assert report.state_dict_keys == list(state)
    assert report.optimizer_tensors == len(optimizer_ids)
    assert bool(report.optimizer_error) == (optimizer_error is not None)
    assert report.lazy_parameters == sum(isinstance(p, LAZY) for p in params.values())

    # the tensor table, row by row
    moved, converted = moved_to_meta(model), copy.deepcopy(model)
    converted.to(torch.float64)
    on_module = {r.name for r in report.tensors if r.container is Container.NONE}
    assert set(all_param_names) <= on_module
    for row in report.tensors:
        tensor = resolve(model, row.name)
        assert isinstance(tensor, torch.Tensor), row.name
        lazy = isinstance(tensor, LAZY)
        assert row.lazy == lazy, row.name
        if not lazy:
            assert list(tensor.shape) == row.shape and row.numel == tensor.numel(), row.name
        assert str(tensor.dtype) == f"torch.{row.dtype}", row.name
        assert tensor.requires_grad == row.requires_grad, row.name
        assert row.in_parameters == (id(tensor) in parameter_ids), row.name
        assert row.in_buffers == (id(tensor) in buffer_ids), row.name
        assert row.in_state_dict == (id(tensor) in state_ids), row.name
        assert row.seen_by_optimizer == (id(tensor) in optimizer_ids), row.name
        expected_kind = (
            TensorKind.PARAMETER
            if id(tensor) in parameter_ids
            else TensorKind.BUFFER
            if id(tensor) in {id(b) for b in buffers.values()}
            else None
        )
        if expected_kind is not None:  # registered: the row says so, by identity
            assert row.kind is expected_kind, row.name
        else:  # a plain attribute, or a hidden module's own registry inside a container
            assert row.kind is TensorKind.PLAIN or row.container is not Container.NONE, row.name
        if row.shared_with:  # "same tensor as …": the very same object
            assert resolve(model, row.shared_with) is tensor, (row.name, row.shared_with)
        assert row.to_device == resolve(moved, row.name).is_meta, row.name
        after = resolve(converted, row.name).dtype
        assert row.to_dtype == (after == torch.float64 != tensor.dtype), row.name
    # "every tensor the model holds": each tensor plain Python reaches from the model's
    # modules (attributes, nested containers, modules only a container holds) has a row
    names = {row.name for row in report.tensors}
    if not report.truncated:
        missing = set(_python_reach(model)) - names
        assert not missing, missing

    # the tree
    rows = {m.path: m for m in report.modules}
    for path, module in model.named_modules(remove_duplicate=False):
        row = rows[path]
        assert row.class_name == type(module).__name__
        assert row.total_params == sum(_numel(p) for p in module.parameters())
        assert row.own_params == sum(_numel(p) for p in module.parameters(recurse=False))
        assert row.buffers == sum(_numel(b) for b in module.buffers())
        plain = [
            v
            for k, v in vars(module).items()
            if isinstance(v, torch.Tensor) and id(v) not in registered
        ]
        assert row.plain_tensors == len(plain), path

    _assert_findings(report, model, params, buffers, state, optimizer_error)
    for lang in ("en", "ko"):  # the page's tables build from every report
        assert len(tensor_frame(report, lang)) == len(report.tensors)
        assert len(tree_frame(report, lang)) == len(report.modules)


def _assert_findings(
    report: ModuleReport,
    model: nn.Module,
    params: dict[str, torch.Tensor],
    buffers: dict[str, torch.Tensor],
    state: dict[str, torch.Tensor],
    optimizer_error: str | None,
) -> None:
    """Each finding's claim, and each claim that should be made."""
    registered = {id(t) for t in (*params.values(), *buffers.values())}
    by_code: dict[FindingCode, list[dict[str, Any]]] = {}
    for finding in report.findings:
        by_code.setdefault(finding.code, []).append(finding.params)
        for lang in ("en", "ko"):  # every finding has its text, placeholders filled
            for part in ("title", "message"):
                text = finding.text(part, lang)
                assert "{" not in text and not text.startswith("modules."), text

    # "X is a plain tensor": not registered, not saved, .to() leaves it; and each such
    # attribute on a user module is named
    expected_plain = {
        _where(path, attribute)
        for path, module in model.named_modules()
        if not type(module).__module__.startswith("torch.")
        for attribute, value in vars(module).items()
        if isinstance(value, torch.Tensor) and id(value) not in registered
    }
    assert {p["name"] for p in by_code.get(FindingCode.PLAIN_TENSOR, [])} == expected_plain
    # containers: a warning exactly when something is reachable only through them
    truth = _container_truth(model)
    warned = {(p["name"], "tensor"): p for p in by_code.get(FindingCode.TENSOR_LIST, [])} | {
        (p["name"], "module"): p for p in by_code.get(FindingCode.MODULE_LIST, [])
    }
    expected = set()
    for where, facts in truth.items():
        if facts["direct"]["tensors"]:
            expected.add((where, "tensor"))
            assert warned[(where, "tensor")]["count"] == facts["direct"]["tensors"]
        if facts["direct"]["modules"]:
            expected.add((where, "module"))
            finding = warned[(where, "module")]
            assert finding["count"] == facts["direct"]["modules"]
            assert finding["hidden"] == facts["direct"]["elements"]
    assert set(warned) == expected, (set(warned), expected)
    # nested containers: a finding exactly when something hides in a container's containers,
    # with torch's counts, and its claim "not trained, saved or moved" for each such row
    nested = {p["name"]: p for p in by_code.get(FindingCode.NESTED_CONTAINER, [])}
    expected_nested = {
        where: facts["nested"]
        for where, facts in truth.items()
        if facts["nested"]["tensors"] or facts["nested"]["modules"]
    }
    assert set(nested) == set(expected_nested)
    for where, facts in expected_nested.items():
        finding = nested[where]
        assert (finding["tensors"], finding["modules"]) == (facts["tensors"], facts["modules"])
        assert finding["hidden"] == facts["elements"]
        assert finding["depth"] == truth[where]["depth"]
    if nested:
        moved = moved_to_meta(model)
        unregistered = [row for row in report.tensors if id(resolve(model, row.name)) not in
                        registered]  # fmt: skip
        for row in unregistered:
            assert not (row.in_parameters or row.in_buffers or row.in_state_dict), row.name
            assert not row.seen_by_optimizer and row.to_device is False, row.name
            assert not resolve(moved, row.name).is_meta, row.name
    aliases = {p["name"]: p["count"] for p in by_code.get(FindingCode.LIST_ALIASES, [])}
    assert aliases == {w: f["aliases"] for w, f in truth.items() if f["aliases"]}
    # "one tensor under two names … state_dict() stores it under both names"
    for p in by_code.get(FindingCode.SHARED_PARAMETER, []):
        assert resolve(model, p["name"]) is resolve(model, p["first"])
        assert p["name"] in state and p["first"] in state
    expected_shared = {
        name for name, _ in model.named_parameters(remove_duplicate=False) if name not in params
    }
    assert {p["name"] for p in by_code.get(FindingCode.SHARED_PARAMETER, [])} == expected_shared
    rows = {row.name: row for row in report.tensors}
    # "X is a plain tensor … .to() leaves it behind": a real move leaves it where it was
    moved = moved_to_meta(model)
    for finding in by_code.get(FindingCode.PLAIN_TENSOR, []):
        name = finding["name"].removeprefix("self.").removeprefix("model.")
        assert not resolve(moved, name).is_meta and rows[name].to_device is False
    # frozen: "backward() gives it no gradient, so optimizer.step() leaves it unchanged"
    frozen = {p["name"] for p in by_code.get(FindingCode.FROZEN_PARAMETER, [])}
    assert frozen == {name for name, p in params.items() if not p.requires_grad}
    if frozen:
        _assert_frozen_stay(model, frozen)
    # non-persistent: "a buffer state_dict() leaves out; .to() moves it"
    non_persistent = {p["name"] for p in by_code.get(FindingCode.NON_PERSISTENT_BUFFER, [])}
    assert non_persistent == {name for name in buffers if name not in state}
    for name in non_persistent:
        assert resolve(moved, name).is_meta and rows[name].to_device is True
    # no parameters: torch refuses the optimiser
    assert (FindingCode.NO_PARAMETERS in by_code) == (not params) == (optimizer_error is not None)
    # lazy: the names torch has not materialised, all in parameters()
    lazy = by_code.get(FindingCode.LAZY_PARAMETER, [])
    lazy_names = [name for name, p in params.items() if isinstance(p, LAZY)]
    assert (lazy[0]["names"].split(", ") if lazy else []) == lazy_names


def _assert_frozen_stay(model: nn.Module, frozen: set[str]) -> None:
    """A loss that uses every parameter, backward and an SGD step on a copy: the frozen ones
    get no .grad and keep their values."""
    twin = copy.deepcopy(model)
    params = dict(twin.named_parameters())
    used = [p for p in params.values() if not isinstance(p, LAZY) and p.is_floating_point()]
    before = {name: params[name].detach().clone() for name in frozen}
    loss = sum((p.float().sum() for p in used), torch.zeros(()))
    optimizer = torch.optim.SGD(twin.parameters(), lr=0.1)
    if loss.requires_grad:
        loss.backward()
        optimizer.step()
    for name in frozen:
        assert params[name].grad is None and torch.equal(params[name], before[name]), name


# ---------------------------------------------------------------- the tests
@pytest.mark.parametrize("key", list(ALL))
def test_the_walk_tells_the_truth(key: str) -> None:
    source, constructor = ALL[key]
    report = describe_module(build_on_cpu(source, constructor), constructor)
    assert_room_tells_the_truth(report, build_on_cpu(source, constructor))


def test_there_are_a_few_dozen_cases() -> None:
    assert len(ALL) >= len(modules.PRESETS) + 30


def test_the_issue_cases_are_not_warned_as_invisible() -> None:
    """Issue 22 item 6: lists of registered things are aliases, not hidden, not 'shared'."""
    for key in ("order_list", "keep_list"):
        report = describe_module(build_on_cpu(*TRICKY[key]))
        codes = {f.code for f in report.findings}
        assert codes == {FindingCode.LIST_ALIASES}, (key, report.findings)


def test_to_float64_leaves_num_batches_tracked() -> None:
    """Issue 22 item 7: a dtype conversion converts float tensors only; a device move all."""
    report = describe_module(build_on_cpu(*TRICKY["buffers_every_kind"]))
    rows = {row.name: row for row in report.tensors}
    assert rows["bn.num_batches_tracked"].to_device is True
    assert rows["bn.num_batches_tracked"].to_dtype is False
    assert rows["bn.running_mean"].to_dtype is True and rows["count"].to_dtype is False
    assert rows["scratch"].to_device is True and not rows["scratch"].in_state_dict
    frame = tensor_frame(report, "en")
    assert translate("modules.table.to_device") in frame.columns
    assert translate("modules.table.to_dtype") in frame.columns


def test_a_stale_alias_of_a_buffer_is_not_moved() -> None:
    """.to() replaces buffers with new tensors: a list that held the old one keeps it."""
    model = build_on_cpu(*TRICKY["plain_alias_of_buffer"])
    report = describe_module(model)
    rows = {row.name: row for row in report.tensors}
    assert rows["stat"].shared_with == "bn.running_mean" and rows["stat"].in_state_dict
    assert rows["stat"].to_device is False and rows["bn.running_mean"].to_device is True
    model.to(torch.float64)
    assert model.stat.dtype == torch.float32 and model.bn.running_mean.dtype == torch.float64


# ---------------------------------------------------------------- through the sandbox
@pytest.fixture(scope="module")
def shared_pool():
    from torchatlas.sandboxed import shared_pool

    pool = shared_pool()
    pool.warm_up()
    return pool


# object.__setattr__ is a double-underscore name: pasted code cannot use it (the allow-list)
SANDBOX_REFUSES = frozenset({"raw_alias_of_parameter"})


@pytest.mark.parametrize("key", list(TRICKY))
def test_the_sandboxs_report_tells_the_truth(shared_pool, key: str) -> None:
    source, constructor = TRICKY[key]
    report = modules.inspect_module(source, model=constructor)
    if key in SANDBOX_REFUSES:
        assert report.error is not None and report.error.kind == "refused"
        return
    assert_room_tells_the_truth(report, build_on_cpu(source, constructor))


# ---------------------------------------------------------------- random modules
KINDS = ("linear", "bn", "param", "buffer", "plain", "list", "dict", "tie", "alias", "child")
KINDS += ("lazy", "frozen", "nested", "nested")


@st.composite
def nested_containers(draw: st.DrawFn, registered: list[Any], depth: int = 1) -> Any:
    """A list, tuple or dict of new tensors, parameters, modules (layers, and modules that
    hold plain tensors and containers of their own), things already registered, and further
    containers, to a bounded depth; sometimes holding itself (a cycle)."""
    items: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        choice = draw(st.sampled_from(["tensor", "param", "linear", "bn", "holder", "old",
                                       "container", "container"]))  # fmt: skip
        if choice == "tensor":
            items.append(torch.zeros(draw(st.integers(0, 3)), dtype=draw(
                st.sampled_from([torch.float32, torch.int64, torch.float16]))))  # fmt: skip
        elif choice == "param":
            items.append(nn.Parameter(torch.ones(draw(st.integers(1, 3)))))
        elif choice == "linear":
            items.append(nn.Linear(draw(st.integers(1, 3)), 2, bias=draw(st.booleans())))
        elif choice == "bn":
            items.append(nn.BatchNorm1d(2))
        elif choice == "holder":
            holder = Random()
            holder.fc = nn.Linear(2, 1)
            holder.W = torch.ones(2)
            holder.more = [torch.zeros(1), {"p": nn.Parameter(torch.ones(1))}]
            items.append(holder)
        elif choice == "old" and registered:
            items.append(draw(st.sampled_from(registered)))
        elif choice == "container" and depth < 4:
            items.append(draw(nested_containers(registered, depth + 1)))
    shape = draw(st.sampled_from(["list", "tuple", "dict"]))
    if shape == "dict":
        return {f"k{i}": item for i, item in enumerate(items)}
    if shape == "tuple":
        return tuple(items)
    if draw(st.booleans()):
        items.append(items)  # a list that holds itself
    return items


class Random(nn.Module):
    """A user's module class (torch's own classes get no findings: they register what they
    own)."""


@st.composite
def random_modules(draw: st.DrawFn, depth: int = 0) -> nn.Module:
    """A module with a random mix of every attachment the room distinguishes."""
    module = Random()
    registered_modules: list[nn.Module] = []
    registered_tensors: list[torch.Tensor] = []
    for index in range(draw(st.integers(0, 6))):
        name = f"a{index}"
        kind = draw(st.sampled_from(KINDS))
        if kind == "linear":
            layer = nn.Linear(draw(st.integers(1, 3)), draw(st.integers(1, 3)))
            setattr(module, name, layer)
            registered_modules.append(layer)
            registered_tensors.extend(layer.parameters())
        elif kind == "bn":
            layer = nn.BatchNorm1d(2)
            setattr(module, name, layer)
            registered_modules.append(layer)
            registered_tensors.extend((*layer.parameters(), *layer.buffers()))
        elif kind in ("param", "frozen"):
            parameter = nn.Parameter(torch.zeros(draw(st.integers(0, 3))))
            parameter.requires_grad_(kind == "param")
            setattr(module, name, parameter)
            registered_tensors.append(parameter)
        elif kind == "buffer":
            dtype = draw(st.sampled_from([torch.float32, torch.int64, torch.bool, torch.float16]))
            buffer = torch.zeros(2, dtype=dtype)
            module.register_buffer(name, buffer, persistent=draw(st.booleans()))
            registered_tensors.append(buffer)
        elif kind == "plain":
            setattr(module, name, torch.zeros(draw(st.integers(0, 3))))
        elif kind in ("list", "dict"):
            items: list[Any] = []
            for _ in range(draw(st.integers(1, 4))):
                choice = draw(st.sampled_from(["new_module", "new_tensor", "old", "new_param"]))
                if choice == "new_module":
                    items.append(nn.Linear(2, 2))
                elif choice == "new_tensor":
                    items.append(torch.ones(2))
                elif choice == "new_param":
                    items.append(nn.Parameter(torch.ones(2)))
                elif registered_modules or registered_tensors:
                    items.append(draw(st.sampled_from(registered_modules + registered_tensors)))
            value = {f"k{i}": item for i, item in enumerate(items)} if kind == "dict" else items
            setattr(module, name, value)
        elif kind == "tie" and registered_modules:
            setattr(module, name, draw(st.sampled_from(registered_modules)))
        elif kind == "alias" and registered_tensors:
            target = draw(st.sampled_from(registered_tensors))
            object.__setattr__(module, name, target)  # a plain attribute, never registered
        elif kind == "child" and depth < 2:
            child = draw(random_modules(depth + 1))
            setattr(module, name, child)
            registered_modules.append(child)
            registered_tensors.extend((*child.parameters(), *child.buffers()))
        elif kind == "nested":
            setattr(module, name, draw(nested_containers(registered_modules + registered_tensors)))
        elif kind == "lazy":
            layer = nn.LazyLinear(2)
            setattr(module, name, layer)
            registered_modules.append(layer)
            registered_tensors.extend(layer.parameters())
    return module


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_modules())
def test_random_modules_agree_with_torch(model: nn.Module) -> None:
    report = describe_module(model, "Random()")
    assert_room_tells_the_truth(report, model)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_nested_containers_are_all_found(data: st.DataObject) -> None:
    """Issue 34 item 8: whatever a user module keeps in nested lists, tuples and dicts, every
    tensor has a row, and each row's registered-ness is torch's own (asserted inside)."""
    model = Random()
    model.fc = nn.Linear(2, 2)
    model.bn = nn.BatchNorm1d(2)
    registered = [model.fc, model.bn, model.fc.weight, model.bn.running_mean]
    for index in range(data.draw(st.integers(1, 3))):
        setattr(model, f"c{index}", data.draw(nested_containers(registered)))
    report = describe_module(model, "Random()")
    assert not report.truncated
    assert_room_tells_the_truth(report, model)


@pytest.mark.parametrize("key", list(ALL))
def test_converting_the_model_itself_reports_the_same(key: str) -> None:
    """The sandbox's job converts the model it built (no copy); the report is the copy's."""
    source, constructor = ALL[key]
    copied = describe_module(build_on_cpu(source, constructor), constructor)
    consumed = describe_module(build_on_cpu(source, constructor), constructor, consume=True)
    assert copied.tensors == consumed.tensors and copied.findings == consumed.findings
    assert copied.modules == consumed.modules
