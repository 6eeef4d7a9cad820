"""The devices engine: inventory and demonstrations, on CPU and meta (every machine), and on a
real accelerator where there is one (``-m accelerator``)."""

from __future__ import annotations

import ast
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from torchatlas.devices import demos, inventory
from torchatlas.devices.demos import SnapshotKind, run_demonstration, snapshot
from torchatlas.devices.errors import ErrorCode

ACCELERATOR = inventory.available_accelerator()
CUDA = torch.cuda.is_available()
ROOT = Path(__file__).resolve().parents[2]


def holds(demo: demos.Demonstration, code: str) -> bool:
    return demo.finding(code).holds


# ---------------------------------------------------------------- inventory


def test_inventory_reports_this_torch_and_cpu() -> None:
    found = inventory.take_inventory()
    assert found.build.torch_version == torch.__version__
    assert found.build.cuda_version == torch.version.cuda
    assert found.cpu.torch_threads == torch.get_num_threads()
    assert 1 <= found.cpu.usable_cores <= found.cpu.logical_cores
    assert found.cpu.memory_total_bytes is None or found.cpu.memory_total_bytes > 0
    assert found.has_accelerator == (ACCELERATOR is not None)
    assert asdict(found)["cpu"]["model"]


def test_meta_tensor_is_full_size_with_no_memory() -> None:
    meta = inventory.meta_info((1024, 1024, 1024))
    assert meta.nbytes == 4 * 1024**3
    assert meta.storage_address == 0
    assert meta.created_in_s < 1.0


@pytest.mark.parametrize(
    ("version", "text"), [(92400, "9.24.0"), (90100, "9.1.0"), (8902, "8.9.2"), (None, None)]
)
def test_cudnn_version_text(version: int | None, text: str | None) -> None:
    assert inventory._cudnn_text(version) == text


@pytest.mark.parametrize(
    ("speed", "width", "generation", "gbps"),
    [
        ("16.0 GT/s PCIe", "16", 4, 31.5),
        ("32.0 GT/s PCIe", "16", 5, 63.0),
        ("8.0 GT/s", "8", 3, 7.9),
    ],
)
def test_pcie_link_from_sysfs(tmp_path, speed: str, width: str, generation: int, gbps: float):
    folder = tmp_path / "0000:17:00.0"
    folder.mkdir()
    (folder / "max_link_speed").write_text(speed + "\n")
    (folder / "current_link_width").write_text(width + "\n")
    link = inventory.pcie_link("0000:17:00.0", sysfs=tmp_path)
    assert link == inventory.PcieLink(generation, int(width), gbps)


def test_pcie_link_unknown_is_none(tmp_path) -> None:
    assert inventory.pcie_link("0000:00:00.0", sysfs=tmp_path) is None
    folder = tmp_path / "0000:01:00.0"
    folder.mkdir()
    (folder / "max_link_speed").write_text("Unknown\n")
    (folder / "max_link_width").write_text("16\n")
    assert inventory.pcie_link("0000:01:00.0", sysfs=tmp_path) is None


def test_host_memory_honours_a_smaller_cgroup_limit(monkeypatch) -> None:
    monkeypatch.setattr(inventory, "_cgroup_room", lambda: 1234)
    _total, available = inventory.host_memory()
    assert available == 1234


# ---------------------------------------------------------------- snapshots


def test_snapshot_of_tensor_array_module_and_value() -> None:
    x = torch.arange(10.0)
    shot = snapshot("x", x)
    assert (shot.kind, shot.device, shot.dtype) == (SnapshotKind.TENSOR, "cpu", "float32")
    assert shot.address == x.untyped_storage().data_ptr()
    assert shot.values == "[0, 1, 2, 3, 4, 5, …]"
    assert snapshot("m", torch.empty(3, device="meta")).values is None
    a = np.arange(3.0)
    assert snapshot("a", a).address == a.ctypes.data
    module = snapshot("model", torch.nn.Linear(2, 2))
    assert [p.name for p in module.parameters] == ["weight", "bias"]
    assert snapshot("d", torch.device("cpu")).values == "device(type='cpu')"


# ---------------------------------------------------------------- tensor .to()


@pytest.mark.parametrize("variant", ["same_device", "same_dtype", "cpu_method"])
def test_to_without_change_returns_the_tensor_itself(variant: str) -> None:
    demo = demos.tensor_to(variant, accelerator=None)
    assert holds(demo, "same_object") and holds(demo, "shares_memory")
    assert holds(demo, "original_changed")
    x_after, y_after = demo.steps[-1].snapshots
    assert x_after.values == y_after.values == "[100, 1, 2, 3]"
    assert demo.errors == []


@pytest.mark.parametrize("variant", ["other_dtype", "copy"])
def test_to_with_a_change_or_copy_true_returns_a_copy(variant: str) -> None:
    demo = demos.tensor_to(variant, accelerator=None)
    assert not holds(demo, "same_object") and not holds(demo, "shares_memory")
    assert not holds(demo, "original_changed")
    x_after, y_after = demo.steps[-1].snapshots
    assert x_after.values == "[0, 1, 2, 3]" and y_after.values == "[100, 1, 2, 3]"
    assert x_after.address != y_after.address
    assert y_after.dtype == ("float64" if variant == "other_dtype" else "float32")


def test_to_meta_stands_in_for_an_accelerator() -> None:
    demo = demos.tensor_to("device", accelerator=None)
    assert demo.stand_in and demo.target == "meta"
    assert 'y = x.to("meta")' in demo.code
    assert not holds(demo, "same_object") and not holds(demo, "original_changed")
    y = demo.steps[1].snapshots[1]
    assert (y.device, y.address, y.values) == ("meta", 0, None)
    # Meta has no data to copy back: the exact torch message is kept.
    error = demo.steps[-1].error
    assert (error.raised, error.words, error.call) == (
        "NotImplementedError",
        "Cannot copy out of meta tensor; no data!",
        demo.steps[-1].code,
    )


@pytest.mark.skipif(CUDA, reason="x.cuda() works here; see the accelerator test")
def test_cuda_method_without_cuda_shows_torchs_own_error() -> None:
    demo = demos.tensor_to("cuda_method", accelerator=None)
    with pytest.raises(Exception) as raised:  # RuntimeError (no driver) or AssertionError
        torch.arange(4.0).cuda()
    assert demo.steps[-1].code == "y = x.cuda()"
    assert [(e.raised, e.words) for e in demo.errors] == [
        (type(raised.value).__name__, str(raised.value))
    ]
    assert [f.code for f in demo.findings] == ["cuda_unavailable"] and holds(
        demo, "cuda_unavailable"
    )
    assert not demo.stand_in and demo.target == "cuda"
    assert demo.steps[-1].snapshots[0].device == "cpu"  # x stayed where it was


def test_the_code_shown_is_the_code_that_ran() -> None:
    demo = demos.tensor_to("other_dtype", accelerator=None)
    assert demo.code.startswith(demos.PRELUDE)
    for step in demo.steps:
        assert step.code in demo.code
    namespace: dict[str, object] = {}
    exec(demo.code, namespace)  # the displayed snippet runs on its own, to the same state
    assert namespace["y"].dtype == torch.float64 and namespace["x"][0].item() == 0.0


def test_unknown_variant_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="choose one of") as raised:
        demos.tensor_to("teleport")
    assert raised.value.code == ErrorCode.UNKNOWN_VARIANT
    assert raised.value.params["variant"] == "'teleport'"
    with pytest.raises(ValueError, match=r"(?i)unknown demonstration") as raised:
        run_demonstration("nope", "x")
    assert raised.value.code == ErrorCode.UNKNOWN_DEMONSTRATION


# ---------------------------------------------------------------- module .to()


def test_module_to_dtype_is_in_place() -> None:
    demo = demos.module_to("dtype", accelerator=None)
    assert holds(demo, "module_same_object")
    assert holds(demo, "parameter_same_object")  # same Parameter object, new memory behind it
    assert holds(demo, "memory_moved")
    model = next(s for s in demo.steps[-1].snapshots if s.name == "model")
    assert {p.dtype for p in model.parameters} == {"float64"}
    assert holds(demo, "no_device_attribute")
    assert demo.steps[3].error.words == "'Linear' object has no attribute 'device'"
    assert demo.finding("first_parameter_device").params == {"device": "cpu"}


def test_module_to_same_device_changes_nothing() -> None:
    demo = demos.module_to("same", accelerator=None)
    assert holds(demo, "module_same_object") and not holds(demo, "memory_moved")


def test_module_to_meta() -> None:
    demo = demos.module_to("device", accelerator=None)
    assert demo.stand_in and holds(demo, "module_same_object")
    model = next(s for s in demo.steps[-1].snapshots if s.name == "model")
    assert {p.device for p in model.parameters} == {"meta"}
    assert demo.finding("first_parameter_device").params == {"device": "meta"}


def test_module_split_over_two_devices() -> None:
    demo = demos.module_to("split", accelerator=None)
    assert holds(demo, "two_devices")
    assert demo.finding("two_devices").params == {"devices": "cpu, meta"}
    assert demo.finding("first_parameter_device").params == {"device": "cpu"}
    assert holds(demo, "forward_failed")
    assert "device" in demo.steps[-1].error.words


# ---------------------------------------------------------------- mixing devices


def test_mixing_cpu_and_meta_raises_the_real_error_and_the_fix_works() -> None:
    demo = demos.mix_devices(accelerator=None)
    assert demo.stand_in
    assert holds(demo, "mixing_raised") and holds(demo, "fix_worked")
    with pytest.raises(RuntimeError) as raised:
        torch.ones(2, 3) + torch.ones(2, 3, device="meta")
    error = demo.steps[2].error
    assert (error.raised, error.words) == ("RuntimeError", str(raised.value))


def _torch_combines(cpu_operand: torch.Tensor, other: str) -> bool:
    """Torch itself, not the demonstration: does ``cpu_operand * tensor_on_other`` run?"""
    try:
        cpu_operand * torch.ones(2, 3, device=other)
    except RuntimeError:
        return False
    return True


def _mixing_exception_matches_torch(demo: demos.Demonstration, other: str) -> None:
    zero_dim = _torch_combines(torch.tensor(2.0), other)
    one_element = _torch_combines(torch.tensor([2.0]), other)
    assert holds(demo, "zero_dim_combined") == zero_dim
    assert holds(demo, "one_element_raised") == (not one_element)
    assert holds(demo, "zero_dim_exception") == (zero_dim and not one_element)
    assert demo.finding("zero_dim_combined").params["shape"] == "()"
    assert demo.finding("one_element_raised").params["shape"] == "(1,)"
    steps = {step.code: step for step in demo.steps}
    assert (steps["d = s * b"].error is None) == zero_dim
    assert (steps["e = v * b"].error is None) == one_element


def test_mixing_shows_torchs_zero_dim_exception_on_meta() -> None:
    """The rule's exception, as torch 2.14 applies it to meta: a 0-dim CPU tensor combines
    with a meta tensor (result on meta), a 1-element 1-dim CPU tensor raises."""
    demo = demos.mix_devices(accelerator=None)
    _mixing_exception_matches_torch(demo, "meta")
    assert holds(demo, "zero_dim_exception")
    assert demo.finding("zero_dim_combined").params["result_device"] == "meta"
    scalar = next(s for s in demo.steps[-1].snapshots if s.name == "d")
    assert scalar.device == "meta"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_mixing_card_states_the_rule_only_through_its_findings(lang: str) -> None:
    """The card's fixed text states no rule torch could contradict; the rule with its
    exception is a finding, worded by what the run showed."""
    from components.devices.draw import findings_markdown
    from torchatlas.i18n import translate

    demo = demos.mix_devices(accelerator=None)
    shown = findings_markdown(demo, lang)
    assert translate("devices.findings.zero_dim_exception.yes", lang, device="meta") in shown
    fixed = " ".join(
        translate(f"devices.demos.mix_devices.{part}", lang)
        for part in ("lesson", "predict", "stand_in")
    )
    for unconditional in ("must be on the same device", "never moves", "같은 장치에 있어야"):
        assert unconditional not in fixed
    assert "Expected all tensors" not in fixed  # no error text quoted that did not run here


# ---------------------------------------------------------------- NumPy bridge


@pytest.mark.parametrize(
    ("variant", "shares"),
    [("from_numpy", True), ("numpy", True), ("as_tensor", True), ("tensor", False)],
)
def test_numpy_bridge_sharing(variant: str, shares: bool) -> None:
    demo = demos.numpy_bridge(variant, accelerator=None)
    assert holds(demo, "shares_memory") is shares
    assert holds(demo, "other_side_changed") is shares
    assert demo.errors == []


def test_as_tensor_with_a_dtype_change_copies() -> None:
    demo = demos.numpy_bridge("as_tensor", accelerator=None)
    assert holds(demo, "dtype_change_copies")
    u = next(s for s in demo.steps[-1].snapshots if s.name == "u")
    assert u.values == "[0, 1, 2, 3]"


def test_numpy_refuses_a_tensor_that_requires_grad() -> None:
    demo = demos.numpy_bridge("requires_grad", accelerator=None)
    assert holds(demo, "numpy_refused_grad")
    assert "detach().numpy()" in demo.steps[1].error.words
    assert holds(demo, "shares_memory") and holds(demo, "other_side_changed")


def test_numpy_of_a_meta_tensor() -> None:
    demo = demos.numpy_bridge("device", accelerator=None)
    assert demo.stand_in
    assert demo.steps[1].error.raised == "TypeError"
    assert "meta" in demo.steps[1].error.words
    assert holds(demo, "numpy_needs_host") and not holds(demo, "host_copy_worked")


# ---------------------------------------------------------------- device-agnostic code


def test_device_agnostic_idiom_picks_what_is_there() -> None:
    demo = demos.device_agnostic()
    assert holds(demo, "accelerator_found") is (ACCELERATOR is not None)
    assert holds(demo, "all_on_one_device")
    expected = ACCELERATOR.type if ACCELERATOR is not None else "cpu"
    assert demo.target.startswith(expected)
    built = torch.accelerator.current_accelerator()
    assert holds(demo, "built_for_but_absent") is (built is not None and ACCELERATOR is None)


@pytest.mark.parametrize("key", list(demos.DEMONSTRATIONS))
def test_every_demonstration_runs_and_serialises(key: str) -> None:
    _, variants = demos.DEMONSTRATIONS[key]
    for variant in variants:
        demo = run_demonstration(key, variant, accelerator=None)
        data = json.loads(json.dumps(asdict(demo)))  # plain data all the way down
        assert data["key"] == key and data["steps"] and data["findings"]


# ---------------------------------------------------------------- what reaches exec


@pytest.fixture
def executed(monkeypatch) -> list[str]:
    """Every string the demonstrations hand to exec, in order."""
    calls: list[str] = []
    real = demos._execute

    def record(code: str, namespace: dict[str, object]) -> None:
        calls.append(code)
        real(code, namespace)

    monkeypatch.setattr(demos, "_execute", record)
    return calls


def _every_snippet(accelerator: object) -> list[str]:
    return [
        step.code
        for key, (_, variants) in demos.DEMONSTRATIONS.items()
        for variant in variants
        for step in run_demonstration(key, variant, accelerator=accelerator).steps
    ]


def test_only_the_device_name_varies_in_what_is_executed(executed: list[str]) -> None:
    """Run every demonstration for two device names: the executed code differs only where the
    device name is, so nothing else from outside the module's snippets can reach exec."""
    as_meta = _every_snippet(None)
    seen_as_meta = list(executed)
    executed.clear()
    as_meta_0 = _every_snippet(torch.device("meta", 0))
    assert seen_as_meta and set(seen_as_meta) <= {demos.PRELUDE, *as_meta}
    assert set(executed) <= {demos.PRELUDE, *as_meta_0}
    assert [code.replace('"meta:0"', '"meta"') for code in executed] == seen_as_meta
    assert any('"meta:0"' in code for code in executed)


@pytest.mark.parametrize(
    ("variant", "accelerator"),
    [
        ('device"); import os; ("', None),  # a variant is never pasted in, only looked up
        ("device", 'meta"); __import__("os").system("id"); ("'),  # torch refuses the device
        ("device", "meta\nimport os"),
    ],
)
def test_hostile_input_never_reaches_exec(executed: list[str], variant, accelerator) -> None:
    with pytest.raises((ValueError, RuntimeError)):
        run_demonstration("tensor_to", variant, accelerator=accelerator)
    assert executed == []


def test_a_device_name_is_checked_before_it_is_pasted_into_code(executed: list[str]) -> None:
    class Odd:  # an object whose text is not a device name, even if torch were bypassed
        def __str__(self) -> str:
            return 'meta")\nimport os\n("'

    for name in ('meta")\nimport os\n("', "cuda:0 ", "META", ""):
        with pytest.raises(ValueError, match="not a device name") as raised:
            demos._device_literal(name)
        assert raised.value.code == ErrorCode.NOT_A_DEVICE_NAME
    with pytest.raises(ValueError, match="not a device name"):
        demos._other_device(Odd())
    assert demos._device_literal("cuda:1") == '"cuda:1"'
    assert executed == []


def _calls(path: Path, names: set[str]) -> list[tuple[str, str]]:
    """(innermost enclosing function, called name) for each call of one of ``names``."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            function = getattr(node, "name", "<lambda>")
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Name) and called.id in names:
            found.append((function, called.id))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_exec_lives_in_one_engine_function_and_nowhere_in_the_page() -> None:
    dangerous = {"exec", "eval", "compile", "__import__"}
    engine = ROOT / "torchatlas" / "devices"
    in_engine = {call for file in engine.glob("*.py") for call in _calls(file, dangerous)}
    assert in_engine == {("_execute", "exec"), ("_execute", "compile")}
    page_files = [ROOT / "views" / "devices.py", *(ROOT / "components" / "devices").glob("*.py")]
    assert len(page_files) == 5  # the view, and the package's __init__, state, panels, draw
    for page_file in page_files:
        assert _calls(page_file, dangerous) == [], page_file


# ---------------------------------------------------------------- a real accelerator


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_tensor_to_accelerator_copies_and_back() -> None:
    demo = demos.tensor_to("device")
    assert not demo.stand_in and demo.target == str(ACCELERATOR)
    assert not holds(demo, "same_object") and not holds(demo, "original_changed")
    assert not holds(demo, "back_is_original")
    y = demo.steps[1].snapshots[1]
    assert y.device == str(ACCELERATOR) and y.address not in (0, None)
    assert demo.errors == []


@pytest.mark.accelerator
@pytest.mark.skipif(not CUDA, reason="no CUDA device on this machine")
def test_cuda_method_copies_to_the_gpu() -> None:
    demo = demos.tensor_to("cuda_method")
    assert demo.errors == [] and not demo.stand_in
    assert demo.target == f"cuda:{torch.cuda.current_device()}"
    assert not holds(demo, "same_object") and not holds(demo, "shares_memory")
    assert not holds(demo, "original_changed") and not holds(demo, "back_is_original")
    x, y = demo.steps[1].snapshots
    assert (x.device, y.device) == ("cpu", demo.target) and y.address not in (0, None)


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_module_to_accelerator_moves_in_place() -> None:
    demo = demos.module_to("device")
    assert holds(demo, "module_same_object") and holds(demo, "memory_moved")
    model = next(s for s in demo.steps[-1].snapshots if s.name == "model")
    assert {p.device for p in model.parameters} == {str(ACCELERATOR)}
    split = demos.module_to("split")
    assert holds(split, "two_devices") and holds(split, "forward_failed")


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_mixing_with_an_accelerator_raises_the_real_error() -> None:
    demo = demos.mix_devices()
    assert not demo.stand_in
    assert demo.steps[2].error.raised == "RuntimeError"
    assert "device" in demo.steps[2].error.words
    assert holds(demo, "fix_worked")
    _mixing_exception_matches_torch(demo, str(ACCELERATOR))
    assert demo.finding("zero_dim_combined").params["result_device"] == str(ACCELERATOR)


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_numpy_of_an_accelerator_tensor_needs_cpu_first() -> None:
    demo = demos.numpy_bridge("device")
    assert demo.steps[1].error.raised == "TypeError"
    assert holds(demo, "numpy_needs_host") and holds(demo, "host_copy_worked")


@pytest.mark.accelerator
@pytest.mark.skipif(ACCELERATOR is None, reason="no CUDA/MPS/XPU device on this machine")
def test_inventory_lists_the_accelerator() -> None:
    found = inventory.take_inventory()
    assert found.accelerators and found.accelerators[0].device == str(ACCELERATOR)
    first = found.accelerators[0]
    assert first.total_memory_bytes is None or first.total_memory_bytes > 0


# ---------------------------------------------------------------- errors: a code, text in tables


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_error_code_has_its_text_in_every_language(code: ErrorCode) -> None:
    from torchatlas.i18n import LANGUAGES, has_key

    for lang in LANGUAGES:
        assert has_key(f"devices.errors.{code}", lang), (code, lang)


def test_an_engine_error_speaks_english_from_the_tables() -> None:
    from torchatlas.i18n import translate

    with pytest.raises(ValueError) as raised:
        run_demonstration("tensor_to", "teleport", accelerator=None)
    error = raised.value
    assert str(error) == translate("devices.errors.unknown_variant", "en", **error.params)
    korean = translate("devices.errors.unknown_variant", "ko", **error.params)
    assert korean != str(error) and "'teleport'" in korean


def test_the_engine_writes_no_user_facing_sentence() -> None:
    """Raised errors carry a code: no ``raise X("...")`` with text anywhere in the engine."""
    engine = ROOT / "torchatlas" / "devices"
    worded = []
    for file in engine.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            call = node.exc if isinstance(node, ast.Raise) else None
            if isinstance(call, ast.Call) and any(
                isinstance(arg, ast.Constant | ast.JoinedStr) for arg in call.args
            ):
                worded.append(f"{file.name}:{node.lineno}")
    assert worded == []
