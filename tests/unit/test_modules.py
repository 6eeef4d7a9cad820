"""The module inspector's walk, compared with what torch itself reports, on CPU in this process.

The same module sources run through the real sandbox in test_modules_sandbox.py; here the
trusted walk (:func:`describe_module`) is checked against torch's own calls (named_parameters,
named_buffers, state_dict, an optimiser, and a real ``.to(dtype)``), and the report's trip
across the sandbox boundary (schema, errors, cache) is checked with a fake sandbox.
"""

from __future__ import annotations

import ast
import copy
import re
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

import torchatlas.modules as modules
from torchatlas.i18n import LANGUAGES, has_key, placeholders, table
from torchatlas.modules import (
    PRESETS,
    Container,
    ErrorKind,
    FindingCode,
    ModuleReport,
    TensorKind,
    inspect_module,
)
from torchatlas.modules.inspector import describe_module
from torchatlas.sandbox.schema import SchemaError

# ---------------------------------------------------------------- the modules under test
HEADER = "import torch\nimport torch.nn as nn\n\n"
# name → (source, constructor): parameters, buffers, plain tensors, ModuleList/ParameterList,
# ParameterDict, shared parameters, nested modules, frozen and non-persistent tensors.
SOURCES: dict[str, tuple[str, str]] = {
    **{key: (preset.source, preset.model) for key, preset in PRESETS.items()},
    "linear": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
""",
        "Net()",
    ),
    "nested": (
        HEADER
        + """
class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.norm = nn.BatchNorm2d(width)
        self.scale = torch.ones(width)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
        self.body = nn.Sequential(Block(8), Block(8))
        self.head = nn.Linear(8, 10)
""",
        "Net()",
    ),
    "module_list": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(5, 5) for _ in range(4)])
""",
        "Net()",
    ),
    "parameter_list": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gains = nn.ParameterList([nn.Parameter(torch.ones(3)) for _ in range(3)])
        self.table = nn.ParameterDict({"a": nn.Parameter(torch.zeros(2, 2))})
""",
        "Net()",
    ),
    "python_lists": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = [torch.randn(3, 3), torch.randn(3)]
        self.blocks = (nn.Linear(3, 3), nn.Linear(3, 1))
        self.by_name = {"w": nn.Parameter(torch.ones(2))}
        self.real = nn.Linear(3, 3)
""",
        "Net()",
    ),
    "shared": (
        HEADER
        + """
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight
        self.again = self.out
""",
        "Tied()",
    ),
    "shared_parameter": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.b.weight = self.a.weight
        self.c = nn.Module()
        self.c.w = self.w
""",
        "Net()",
    ),
    "buffers": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("scratch", torch.zeros(4, 4), persistent=False)
        self.register_buffer("empty", None)
        self.norm = nn.LayerNorm(4)
        self.bn = nn.BatchNorm1d(4)
""",
        "Net()",
    ),
    "frozen": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)
        self.backbone.weight.requires_grad_(False)
        self.pos = nn.Parameter(torch.zeros(1, 6), requires_grad=False)
""",
        "Net()",
    ),
    "plain_mix": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.W = torch.FloatTensor(4, 2)
        self.mask = torch.ones(4, dtype=torch.bool)
        self.index = torch.arange(4)
        self.b = nn.Parameter(torch.zeros(2))
""",
        "Net()",
    ),
    "rnn": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True)
        self.attention = nn.MultiheadAttention(8, 2)
""",
        "Net()",
    ),
    "sequential_only": (
        HEADER
        + """
def build():
    return nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
""",
        "build()",
    ),
    "no_tensors": (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()
        self.size = 3
""",
        "Net()",
    ),
}


def build_on_cpu(source: str, constructor: str) -> nn.Module:
    """The same module, built for real in this process (the sources are the tests' own)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "<test module>", "exec"), namespace)
    call = ast.parse(constructor, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    args = [ast.literal_eval(arg) for arg in call.args]
    return namespace[call.func.id](*args)


_SEGMENT = re.compile(r"([^.\[\]]+)((?:\[[^\]]+\])*)")


def resolve(model: nn.Module, name: str) -> Any:
    """The object a row's name reaches: "body.0.scale", "weights[1]", "by_name['w']"."""
    target: Any = model
    for part, indices in _SEGMENT.findall(name):
        target = getattr(target, part)
        for index in re.findall(r"\[([^\]]+)\]", indices):
            target = target[ast.literal_eval(index)]
    return target


@dataclass
class Truth:
    """What torch says about a module built on CPU."""

    parameters: list[str]  # named_parameters(): each tensor once
    all_parameter_names: list[str]  # named_parameters(remove_duplicate=False)
    buffers: list[str]
    state_dict: list[str]
    plain: set[str]  # tensors in a module's __dict__ that torch does not register
    total: int
    trainable: int
    optimizer: int
    module_paths: list[str]
    module_params: dict[str, int] = field(default_factory=dict)


def truth_of(model: nn.Module) -> Truth:
    parameters = list(model.parameters())
    try:
        optimizer = len(torch.optim.SGD(model.parameters(), lr=0.1).param_groups[0]["params"])
    except ValueError:
        optimizer = 0
    registries = set(vars(nn.Module()))
    plain = {
        f"{path}.{name}" if path else name
        for path, module in model.named_modules()
        for name, value in vars(module).items()
        if name not in registries and isinstance(value, torch.Tensor)
    }
    return Truth(
        parameters=[name for name, _ in model.named_parameters()],
        all_parameter_names=[name for name, _ in model.named_parameters(remove_duplicate=False)],
        buffers=[name for name, _ in model.named_buffers()],
        state_dict=list(model.state_dict()),
        plain=plain,
        total=sum(p.numel() for p in parameters),
        trainable=sum(p.numel() for p in parameters if p.requires_grad),
        optimizer=optimizer,
        module_paths=[path for path, _ in model.named_modules(remove_duplicate=False)],
        module_params={
            path: sum(p.numel() for p in module.parameters())
            for path, module in model.named_modules(remove_duplicate=False)
        },
    )


def assert_matches_torch(report: ModuleReport, model: nn.Module) -> None:
    """Every fact of ``report`` (from any device) against torch's answers on CPU ``model``."""
    assert report.error is None, report.error
    truth = truth_of(model)
    on_module = [row for row in report.tensors if row.container is Container.NONE]
    params = [row for row in on_module if row.kind is TensorKind.PARAMETER]
    assert sorted(row.name for row in params) == sorted(truth.all_parameter_names)
    assert sorted(row.name for row in params if not row.shared_with) == sorted(truth.parameters)
    buffers = [r.name for r in on_module if r.kind is TensorKind.BUFFER and not r.shared_with]
    assert sorted(buffers) == sorted(truth.buffers)
    assert {r.name for r in on_module if r.kind is TensorKind.PLAIN and not r.shared_with} == (
        truth.plain
    )
    assert report.state_dict_keys == truth.state_dict
    assert report.total_params == truth.total
    assert report.trainable_params == truth.trainable
    assert report.parameter_count == len(truth.parameters)
    assert report.optimizer_tensors == truth.optimizer
    assert [m.path for m in report.modules] == truth.module_paths
    assert {m.path: m.total_params for m in report.modules} == truth.module_params
    parameter_ids = {id(p) for p in model.parameters()}
    state_ids = {id(v) for v in model.state_dict(keep_vars=True).values()}
    for row in report.tensors:
        tensor = resolve(model, row.name)
        assert isinstance(tensor, torch.Tensor), row.name
        assert list(tensor.shape) == row.shape, row.name
        assert str(tensor.dtype) == f"torch.{row.dtype}", row.name
        assert tensor.requires_grad == row.requires_grad, row.name
        assert (id(tensor) in parameter_ids) == row.in_parameters, row.name
        assert (id(tensor) in state_ids) == row.in_state_dict, row.name
        assert row.seen_by_optimizer == row.in_parameters, row.name  # SGD(model.parameters())
    _assert_to_facts(report, model)


def _assert_to_facts(report: ModuleReport, model: nn.Module) -> None:
    """Both ``.to()`` columns against torch doing it for real on copies of the CPU model: a
    device move (CPU → meta, a real move torch performs) and ``.to(torch.float64)``."""
    moved, converted = copy.deepcopy(model), copy.deepcopy(model)
    moved.to("meta")
    converted.to(torch.float64)
    for row in report.tensors:
        before = resolve(model, row.name)
        assert row.to_device == resolve(moved, row.name).is_meta, (row.name, row.kind)
        changed = resolve(converted, row.name).dtype == torch.float64 != before.dtype
        assert row.to_dtype == changed, (row.name, row.kind, before.dtype)


@pytest.mark.parametrize("key", list(SOURCES))
def test_the_walk_agrees_with_torch(key: str) -> None:
    source, constructor = SOURCES[key]
    model = build_on_cpu(source, constructor)
    report = describe_module(model, constructor)
    assert_matches_torch(report, build_on_cpu(source, constructor))


def test_there_are_presets_and_ten_more_modules() -> None:
    assert len(SOURCES) >= len(PRESETS) + 10


def test_the_two_mylinear_versions_differ_where_the_lesson_says() -> None:
    plain = describe_module(build_on_cpu(*SOURCES["mylinear_plain"]))
    param = describe_module(build_on_cpu(*SOURCES["mylinear_parameter"]))
    assert [(r.name, r.kind) for r in plain.tensors] == [("W", "plain"), ("b", "plain")]
    assert [(r.name, r.kind) for r in param.tensors] == [("W", "parameter"), ("b", "parameter")]
    assert not any(r.in_parameters or r.in_state_dict or r.to_device for r in plain.tensors)
    assert all(r.in_parameters and r.in_state_dict and r.to_device for r in param.tensors)
    assert plain.total_params == 0 and param.total_params == 3 * 2 + 2
    assert "empty parameter list" in plain.optimizer_error and not param.optimizer_error
    codes = [finding.code for finding in plain.findings]
    assert codes == [FindingCode.PLAIN_TENSOR, FindingCode.PLAIN_TENSOR, FindingCode.NO_PARAMETERS]
    assert plain.findings[0].params["name"] == "self.W"
    assert "self.W = nn.Parameter(torch.empty(3, 2))" in plain.findings[0].fix
    assert 'self.register_buffer("W", torch.empty(3, 2))' in plain.findings[0].fix
    assert param.findings == []


def test_fixes_are_code_that_works() -> None:
    """Each plain-tensor fix, applied, registers the tensor as torch then reports."""
    report = describe_module(build_on_cpu(*SOURCES["plain_mix"]))
    fixes = {f.params["name"]: f.fix for f in report.findings if f.code is FindingCode.PLAIN_TENSOR}
    assert set(fixes) == {"self.W", "self.mask", "self.index"}
    assert "nn.Parameter" not in fixes["self.mask"]  # an integer tensor cannot be a Parameter
    for name, fix in fixes.items():
        for line in fix.splitlines():
            if line.startswith("#"):
                continue
            fixed = nn.Module()
            exec(line, {"self": fixed, "nn": nn, "torch": torch})
            attribute = name.removeprefix("self.")
            assert attribute in dict(fixed.named_parameters()) | dict(fixed.named_buffers())


def test_python_lists_are_found_with_their_fix() -> None:
    report = describe_module(build_on_cpu(*SOURCES["list_bug"]))
    findings = {f.code: f for f in report.findings}
    hidden = findings[FindingCode.MODULE_LIST]
    assert hidden.params["wrapper"] == "nn.ModuleList" and hidden.params["count"] == 3
    assert hidden.params["hidden"] == 3 * (8 * 8 + 8)  # what parameters() does not see
    assert findings[FindingCode.TENSOR_LIST].params["wrapper"] == "nn.ParameterList"
    listed = [row for row in report.tensors if row.container is Container.LIST]
    assert {row.name for row in listed} >= {"layers[0].weight", "scales[2]"}
    assert not any(row.in_parameters or row.in_state_dict or row.to_device for row in listed)
    assert report.total_params == 3 * (8 * 8 + 8)  # the ModuleList half only


def test_shared_parameters_count_once() -> None:
    model = build_on_cpu(*SOURCES["shared"])
    report = describe_module(model)
    assert report.total_params == 10 * 4  # embed.weight is out.weight
    shared = [row for row in report.tensors if row.shared_with]
    assert [(row.name, row.shared_with) for row in shared] == [
        ("out.weight", "embed.weight"),
        ("again.weight", "embed.weight"),
    ]
    assert [f.code for f in report.findings] == [FindingCode.SHARED_PARAMETER] * 2
    again = next(m for m in report.modules if m.path == "again")
    assert again.shared_with == "out"  # state_dict() has again.weight; parameters() once


def test_reports_survive_the_trip_as_json() -> None:
    for source, constructor in SOURCES.values():
        report = describe_module(build_on_cpu(source, constructor), constructor)
        again = ModuleReport.from_dict(report.to_dict())
        assert again == report


# ---------------------------------------------------------------- hostile replies
def _honest() -> dict[str, Any]:
    return describe_module(build_on_cpu(*SOURCES["nested"]), "Net()").to_dict()


@pytest.mark.parametrize(
    "forge",
    [
        lambda d: d["tensors"][0].update(kind="module"),
        lambda d: d["tensors"][0].update(shape=[2**62, 2**62]),
        lambda d: d["tensors"][0].update(shape=[1] * 1000),
        lambda d: d["tensors"][0].update(requires_grad="yes"),
        lambda d: d.update(tensors=d["tensors"] * 2000),
        lambda d: d.update(total_params=3e8),
        lambda d: d["findings"].append({"code": "../app.title", "severity": "warning"}),
        lambda d: d.update(error={"kind": "shapes.errors.timeout"}),
        lambda d: d["modules"][0].update(depth=10**6),
        lambda d: d.update(elapsed_s=float("inf")),
    ],
    ids=[
        "kind",
        "numel",
        "rank",
        "bool",
        "rows",
        "float-count",
        "finding-code",
        "error-kind",
        "depth",
        "inf",
    ],
)
def test_forged_reports_are_refused(forge: Any) -> None:
    data = _honest()
    data["findings"] = [{"code": "plain_tensor", "severity": "warning", "params": {}}]
    forge(data)
    with pytest.raises(SchemaError):
        ModuleReport.from_dict(data)


def test_long_strings_are_clipped_not_trusted() -> None:
    data = _honest()
    data["tensors"][0]["name"] = "x" * 10**6
    report = ModuleReport.from_dict(data)
    assert len(report.tensors[0].name) == 2000 and report.tensors[0].name.endswith("…")


# ---------------------------------------------------------------- the sandbox boundary (fake)
@dataclass
class FakeError:
    kind: str
    message: str
    line: int | None = None
    col: int | None = None
    refusals: list = field(default_factory=list)


@dataclass
class FakeResult:
    ok: bool
    value: dict | None
    error: FakeError | None


@pytest.fixture
def fake_sandbox(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    import torchatlas.sandboxed

    module = types.ModuleType("torchatlas.sandbox")
    module.calls = []  # type: ignore[attr-defined]
    module.answer = None  # type: ignore[attr-defined]
    module.gate = None  # type: ignore[attr-defined]

    def run_job(source, job, params, *, timeout_s=10.0, visitor=None, on_queued=None):
        module.calls.append((source, job, params))  # type: ignore[attr-defined]
        if module.gate is not None:  # type: ignore[attr-defined]
            module.gate.wait(5)  # type: ignore[attr-defined]
        if on_queued is not None:
            on_queued(0)
        return module.answer  # type: ignore[attr-defined]

    class FakePool:
        registered: ClassVar[list] = []

        def register(self, jobs, warm_up_requests=(), spare_warm_up=None):
            FakePool.registered.append(sorted(jobs))
            return self

        def run_job(self, *args, **kwargs):  # the pool torchatlas.sandboxed runs jobs on
            return module.run_job(*args, **kwargs)  # type: ignore[attr-defined]

    module.run_job = run_job  # type: ignore[attr-defined]
    module.get_pool = FakePool  # type: ignore[attr-defined]
    module.pool_class = FakePool  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchatlas.sandbox", module)
    import torchatlas

    monkeypatch.setattr(torchatlas, "sandbox", module, raising=False)
    return module


def test_an_honest_reply_becomes_a_report(fake_sandbox: types.ModuleType) -> None:
    fake_sandbox.answer = FakeResult(True, _honest(), None)
    report = inspect_module("src", model="Net()")
    assert report.error is None and report.total_params > 0
    assert fake_sandbox.calls == [("src", "modules.inspect", {"model": "Net()"})]
    # every room's jobs are registered at once on the shared pool, ours among them
    assert any("modules.inspect" in jobs for jobs in fake_sandbox.pool_class.registered)


def test_a_forged_reply_is_untrusted(fake_sandbox: types.ModuleType) -> None:
    data = _honest()
    data["tensors"][0]["kind"] = "evil"
    fake_sandbox.answer = FakeResult(True, data, None)
    report = inspect_module("src")
    assert report.error is not None and report.error.kind is ErrorKind.UNTRUSTED


@pytest.mark.parametrize("kind", ["refused", "timeout", "memory", "crashed", "busy", "weird"])
def test_sandbox_errors_become_the_rooms(fake_sandbox: types.ModuleType, kind: str) -> None:
    fake_sandbox.answer = FakeResult(False, None, FakeError(kind, f"{kind} happened", line=2))
    error = inspect_module("src", timeout_s=4).error
    assert error is not None
    assert error.kind == (kind if kind != "weird" else "job_error")
    assert error.params["timeout"] == "4" and error.params["detail"] == f"{kind} happened"
    for lang in LANGUAGES:
        for part in ("title", "message", "hint"):
            text = error.text(lang, part)
            assert "{" not in text and not text.startswith("modules."), (kind, part, text)


def test_over_long_boxes_never_reach_the_sandbox(fake_sandbox: types.ModuleType) -> None:
    assert inspect_module("x" * 50_001).error.kind is ErrorKind.SOURCE_TOO_LONG
    assert inspect_module("src", model="M(" + "1," * 300 + ")").error.kind == "model_too_long"
    assert fake_sandbox.calls == []


def test_a_class_pressing_at_once_runs_one_job(fake_sandbox: types.ModuleType) -> None:
    """The page's shared reports (components/modules/state.py): one job for a class."""
    from components.modules.state import shared_report

    fake_sandbox.answer = FakeResult(True, _honest(), None)
    fake_sandbox.gate = threading.Event()
    reports: list[ModuleReport] = []
    threads = [
        threading.Thread(target=lambda: reports.append(shared_report("same", "Net()")))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    fake_sandbox.gate.set()
    for thread in threads:
        thread.join(10)
    assert len(reports) == 5 and len(fake_sandbox.calls) == 1
    assert shared_report("same", " Net() ") is reports[0]  # kept: answered at once
    assert len(fake_sandbox.calls) == 1
    inspect_module("same", model="Net()")  # the engine itself keeps nothing
    assert len(fake_sandbox.calls) == 2


@pytest.mark.parametrize("kind", ["timeout", "busy", "crashed"])
def test_a_failure_of_the_moment_is_not_kept(fake_sandbox: types.ModuleType, kind: str) -> None:
    from components.modules.state import shared_report

    fake_sandbox.answer = FakeResult(False, None, FakeError(kind, "slow"))
    shared_report("src", "")
    shared_report("src", "")
    assert len(fake_sandbox.calls) == 2


def test_without_a_sandbox_nothing_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = types.ModuleType("torchatlas.sandbox")
    monkeypatch.setitem(sys.modules, "torchatlas.sandbox", empty)
    import torchatlas

    monkeypatch.setattr(torchatlas, "sandbox", empty, raising=False)
    report = inspect_module("raise SystemExit('ran in-process!')")
    assert report.error is not None and report.error.kind is ErrorKind.UNAVAILABLE


# ---------------------------------------------------------------- jobs and texts
def test_the_job_is_registered_with_every_rooms_jobs() -> None:
    from torchatlas.sandbox.jobs import target_of
    from torchatlas.sandboxed import register_room_jobs

    class Recorder:
        def __init__(self) -> None:
            self.jobs: dict[str, Any] = {}

        def register(self, jobs, warm_up_requests=(), spare_warm_up=None):
            self.jobs.update(jobs)
            return self

    pool = register_room_jobs(Recorder())  # type: ignore[arg-type]
    assert "modules.inspect" in pool.jobs and "shapes.analyze" in pool.jobs
    assert "modules.memory" in pool.jobs
    for function in modules.JOBS.values():
        assert target_of(function).startswith("torchatlas.modules.")


def test_every_code_has_its_text_in_both_languages() -> None:
    keys = [
        f"modules.errors.{kind.value}.{part}"
        for kind in ErrorKind
        for part in ("title", "message", "hint")
    ]
    keys += [
        f"modules.findings.{code.value}.{part}"
        for code in FindingCode
        for part in ("title", "message")
    ]
    keys += [f"modules.kinds.{kind.value}" for kind in TensorKind]
    for lang in LANGUAGES:
        missing = [key for key in keys if not has_key(key, lang)]
        assert not missing, (lang, missing)
    for key in keys:
        assert placeholders(table("en")[key]) == placeholders(table("ko")[key]), key
