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


def _container_truth(model: nn.Module) -> dict[str, dict[str, Any]]:
    """Each Python list/tuple/dict attribute of a user module (first path only): the items
    torch registered elsewhere (by identity) and the ones only the container reaches."""
    registered_tensors = {id(t) for t in (*model.parameters(), *model.buffers())}
    registered_modules = {id(m) for m in model.modules()}
    out: dict[str, dict[str, Any]] = {}
    for path, module in model.named_modules():
        if type(module).__module__.startswith("torch."):
            continue
        for attribute, value in vars(module).items():
            if type(value) not in (list, tuple, dict) or attribute in INTERNALS:
                continue
            items = list(value.values()) if isinstance(value, dict) else list(value)
            tensors = [i for i in items if isinstance(i, torch.Tensor)]
            mods = [i for i in items if isinstance(i, nn.Module)]
            hidden_modules = [m for m in mods if id(m) not in registered_modules]
            hidden_params = {
                id(p): _numel(p)
                for m in hidden_modules
                for p in m.parameters()
                if id(p) not in registered_tensors
            }
            out[_where(path, attribute)] = {
                "hidden_tensors": sum(id(t) not in registered_tensors for t in tensors),
                "hidden_modules": len(hidden_modules),
                "hidden_elements": sum(hidden_params.values()),
                "aliases": sum(id(t) in registered_tensors for t in tensors)
                + sum(id(m) in registered_modules for m in mods),
            }
    return out


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
    registered = parameter_ids | {id(b) for b in buffers.values()}
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
    # every tensor reachable from a module's attributes has a row
    names = {row.name for row in report.tensors}
    internals = set(vars(nn.Module()))
    for path, module in model.named_modules():
        for attribute, value in vars(module).items():
            if isinstance(value, torch.Tensor) and attribute not in internals:
                assert (f"{path}.{attribute}" if path else attribute) in names

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
        if facts["hidden_tensors"]:
            expected.add((where, "tensor"))
            assert warned[(where, "tensor")]["count"] == facts["hidden_tensors"]
        if facts["hidden_modules"]:
            expected.add((where, "module"))
            finding = warned[(where, "module")]
            assert finding["count"] == facts["hidden_modules"]
            assert finding["hidden"] == facts["hidden_elements"]
    assert set(warned) == expected, (set(warned), expected)
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
KINDS += ("lazy", "frozen")


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


@pytest.mark.parametrize("key", list(ALL))
def test_converting_the_model_itself_reports_the_same(key: str) -> None:
    """The sandbox's job converts the model it built (no copy); the report is the copy's."""
    source, constructor = ALL[key]
    copied = describe_module(build_on_cpu(source, constructor), constructor)
    consumed = describe_module(build_on_cpu(source, constructor), constructor, consume=True)
    assert copied.tensors == consumed.tensors and copied.findings == consumed.findings
    assert copied.modules == consumed.modules
