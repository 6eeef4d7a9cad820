"""Live demonstrations of what ``.to()``, ``.cpu()``, ``.numpy()`` and friends really do.

Each demonstration is a short snippet that is *executed as shown*: the text a page prints is
the text this module runs (fixed snippets written here, never user input). After each step the
watched variables are photographed: Python object, device, dtype, memory address and values,
and any exception is kept with its exact message. Findings (``y is x``, shared memory, did the
original change) are computed from the live objects, never written in advance.

Without an accelerator, ``meta`` stands in for the "other device" and every result says so:
it raises the same class of errors (two devices in one op, no host copy) and holds no data.
Snippets carry no comments: the page explains them in the reader's language.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import torch
from torch import nn

from torchatlas.devices.errors import DevicesValueError, ErrorCode, choices
from torchatlas.devices.inventory import available_accelerator
from torchatlas.errors import TorchRefusal

PRELUDE = "import numpy as np\nimport torch\nfrom torch import nn\n"
PREVIEW_VALUES = 6


@dataclass(frozen=True)
class ParameterSnapshot:
    name: str
    device: str
    dtype: str
    object_id: int
    address: int


class SnapshotKind(StrEnum):
    TENSOR = "tensor"
    NDARRAY = "ndarray"
    MODULE = "module"
    VALUE = "value"  # anything else, shown by its repr


@dataclass(frozen=True)
class Snapshot:
    """One watched variable right after a step ran."""

    name: str
    kind: SnapshotKind
    object_id: int  # id(): equal ids mean the very same Python object
    type_name: str
    device: str | None = None
    dtype: str | None = None
    address: int | None = None  # start of the memory block; 0 means no memory (meta)
    values: str | None = None  # first values; None when there is no data to read
    parameters: tuple[ParameterSnapshot, ...] = ()


@dataclass(frozen=True)
class StepResult:
    code: str
    snapshots: tuple[Snapshot, ...]
    error: TorchRefusal | None = None  # its words: str(exception), exactly as raised


@dataclass(frozen=True)
class Finding:
    """A conclusion computed from the live objects; ``code`` names it for translation."""

    code: str
    holds: bool
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Demonstration:
    key: str
    variant: str
    target: str  # the "other" device or dtype this run used
    stand_in: bool  # meta played the accelerator's part because there is none
    code: str  # everything that ran, imports included
    steps: tuple[StepResult, ...]
    findings: tuple[Finding, ...]

    def finding(self, code: str) -> Finding:
        for item in self.findings:
            if item.code == code:
                return item
        raise KeyError(code)

    @property
    def errors(self) -> list[TorchRefusal]:
        return [step.error for step in self.steps if step.error is not None]


def _address_of(value: object) -> int | None:
    if isinstance(value, torch.Tensor):
        return value.untyped_storage().data_ptr()
    if isinstance(value, np.ndarray):
        return int(value.__array_interface__["data"][0])
    return None


def _format_values(flat: list) -> str:
    shown = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in flat[:PREVIEW_VALUES])
    return f"[{shown}{', …' if len(flat) > PREVIEW_VALUES else ''}]"


def _short_dtype(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


def snapshot(name: str, value: object) -> Snapshot:
    """Describe one variable without changing it (reading values of a GPU tensor copies them
    to the host for display; the tensor itself stays where it is)."""
    common = {"name": name, "object_id": id(value), "type_name": type(value).__name__}
    if isinstance(value, torch.Tensor):
        values = None
        if value.device.type != "meta":
            values = _format_values(value.detach().reshape(-1)[: PREVIEW_VALUES + 1].tolist())
        return Snapshot(
            kind=SnapshotKind.TENSOR,
            device=str(value.device),
            dtype=_short_dtype(value.dtype),
            address=_address_of(value),
            values=values,
            **common,
        )
    if isinstance(value, np.ndarray):
        return Snapshot(
            kind=SnapshotKind.NDARRAY,
            device="cpu",
            dtype=str(value.dtype),
            address=_address_of(value),
            values=_format_values(value.reshape(-1)[: PREVIEW_VALUES + 1].tolist()),
            **common,
        )
    if isinstance(value, nn.Module):
        parameters = tuple(
            ParameterSnapshot(
                name=pname,
                device=str(param.device),
                dtype=_short_dtype(param.dtype),
                object_id=id(param),
                address=param.untyped_storage().data_ptr(),
            )
            for pname, param in value.named_parameters()
        )
        return Snapshot(kind=SnapshotKind.MODULE, parameters=parameters, **common)
    text = repr(value)
    return Snapshot(
        kind=SnapshotKind.VALUE, values=text if len(text) <= 200 else text[:199] + "…", **common
    )


def _execute(code: str, namespace: dict[str, object]) -> None:
    """The one place this module runs code (tests record every call).

    It runs only the snippets written in this module, so the code shown on the page is exactly
    the code that ran. Their only variable part is a device name, which ``_device_literal``
    has checked against ``DEVICE_NAME`` (and torch parsed) before it is pasted in; variants are
    checked against fixed tuples before any code is built. Nothing a visitor types reaches it:
    pasted code belongs to ``torchatlas.sandbox``.
    """
    exec(compile(code, "<devices demo>", "exec"), namespace)


class _Runner:
    """Runs snippet steps in one namespace and photographs the watched names after each
    (through :func:`_execute`, which explains why that is safe)."""

    def __init__(self, watch: tuple[str, ...]) -> None:
        self.namespace: dict[str, object] = {}
        self.watch = watch
        self.steps: list[StepResult] = []
        self._keep_alive: list[object] = []  # so id() values stay unique within one run
        _execute(PRELUDE, self.namespace)

    def step(self, code: str) -> StepResult:
        error = None
        try:
            _execute(code, self.namespace)
        except Exception as exc:  # the exception *is* the lesson: keep its exact text
            error = TorchRefusal.of(exc, str(exc), call=code)
        shots = []
        for name in self.watch:
            if name in self.namespace:
                value = self.namespace[name]
                self._keep_alive.append(value)
                shots.append(snapshot(name, value))
        result = StepResult(code=code, snapshots=tuple(shots), error=error)
        self.steps.append(result)
        return result

    def __getitem__(self, name: str) -> object:
        return self.namespace[name]

    @property
    def code(self) -> str:
        return PRELUDE + "\n" + "\n".join(step.code for step in self.steps)


# A device as torch prints one ("cuda:0", "mps:0", "meta"): the only text from outside this
# module's snippets that ever enters them.
DEVICE_NAME = re.compile(r"[a-z][a-z0-9_]*(:[0-9]+)?")


def _device_literal(name: str) -> str:
    """``name`` as a quoted Python literal, refused unless it is a plain device name."""
    if not DEVICE_NAME.fullmatch(name):
        raise DevicesValueError(ErrorCode.NOT_A_DEVICE_NAME, name=repr(name))
    return f'"{name}"'


def _other_device(accelerator: torch.device | None) -> tuple[str, bool]:
    """The device to move to: the real accelerator, or meta standing in for it."""
    other, stand_in = (str(accelerator), False) if accelerator is not None else ("meta", True)
    _device_literal(other)  # fail before any snippet is built, not halfway through a run
    return other, stand_in


_DETECT = object()


def _resolve(accelerator: object) -> torch.device | None:
    if accelerator is _DETECT:
        return available_accelerator()
    if accelerator is None or isinstance(accelerator, torch.device):
        return accelerator
    return torch.device(str(accelerator))


def _check_variant(key: str, variant: str, variants: tuple[str, ...]) -> None:
    if variant not in variants:
        raise DevicesValueError(
            ErrorCode.UNKNOWN_VARIANT, key=key, variant=repr(variant), choices=choices(variants)
        )


def _same_memory(a: object, b: object) -> bool:
    address_a, address_b = _address_of(a), _address_of(b)
    return address_a is not None and address_a != 0 and address_a == address_b


def _first_value(value: object) -> float | None:
    if isinstance(value, torch.Tensor) and value.device.type == "meta":
        return None
    return float(value.reshape(-1)[0])


# ---------------------------------------------------------------- tensor .to()

TENSOR_TO_VARIANTS = (
    "same_device",
    "same_dtype",
    "cpu_method",
    "other_dtype",
    "copy",
    "device",
    "cuda_method",
)
_LEAVES_THE_CPU = ("device", "cuda_method")


def tensor_to(variant: str, accelerator: object = _DETECT) -> Demonstration:
    """``x.to(...)`` returns ``x`` itself when nothing changes and a new tensor otherwise.

    The result is then written to (``y[0] = 100``) to show whether the original followed.
    ``cuda_method`` runs ``x.cuda()`` as it is: a copy in GPU memory where CUDA works, and
    torch's own error everywhere else (a CPU-only machine, a CUDA-less wheel, a Mac).
    """
    _check_variant("tensor_to", variant, TENSOR_TO_VARIANTS)
    other, stand_in = _other_device(_resolve(accelerator))
    line = {
        "same_device": 'y = x.to("cpu")',
        "same_dtype": "y = x.to(torch.float32)",
        "cpu_method": "y = x.cpu()",
        "other_dtype": "y = x.to(torch.float64)",
        "copy": 'y = x.to("cpu", copy=True)',
        "device": f"y = x.to({_device_literal(other)})",
        "cuda_method": "y = x.cuda()",
    }[variant]
    run = _Runner(("x", "y", "back"))
    run.step("x = torch.arange(4.0)")
    moved = run.step(line)
    if moved.error is not None and variant == "cuda_method":
        # No usable CUDA device here: torch's exact message is the result.
        return Demonstration(
            key="tensor_to",
            variant=variant,
            target="cuda",
            stand_in=False,
            code=run.code,
            steps=tuple(run.steps),
            findings=(Finding("cuda_unavailable", True),),
        )
    run.step("y[0] = 100.0")
    if variant in _LEAVES_THE_CPU:
        run.step("back = y.cpu()")
    x, y = run["x"], run["y"]
    findings = [
        Finding("same_object", y is x),
        Finding("shares_memory", _same_memory(x, y)),
        Finding("original_changed", _first_value(x) == 100.0),
    ]
    if variant in _LEAVES_THE_CPU:
        back = run.namespace.get("back")
        findings.append(Finding("back_is_original", back is x))
    target = {
        "other_dtype": "float64",
        "same_dtype": "float32",
        "device": other,
        "cuda_method": str(getattr(y, "device", "cuda")),
    }.get(variant, "cpu")
    return Demonstration(
        key="tensor_to",
        variant=variant,
        target=target,
        stand_in=stand_in and variant == "device",
        code=run.code,
        steps=tuple(run.steps),
        findings=tuple(findings),
    )


# ---------------------------------------------------------------- module .to()

MODULE_TO_VARIANTS = ("dtype", "device", "same", "split")


def module_to(variant: str, accelerator: object = _DETECT) -> Demonstration:
    """``model.to(...)`` changes the module in place and returns the same module; a module has
    no ``.device``; its parameters may even sit on two devices at once."""
    _check_variant("module_to", variant, MODULE_TO_VARIANTS)
    other, stand_in = _other_device(_resolve(accelerator))
    if variant == "split":
        return _module_split(other, stand_in)
    target = {"dtype": "torch.float64", "device": _device_literal(other), "same": '"cpu"'}[variant]
    run = _Runner(("model", "weight", "moved", "where"))
    run.step("model = nn.Linear(3, 2)")
    run.step("weight = model.weight")
    before = run["weight"]
    before_address = _address_of(before)
    run.step(f"moved = model.to({target})")
    run.step("model.device")
    run.step("where = next(model.parameters()).device")
    model, moved = run["model"], run["moved"]
    after = model.weight
    findings = (
        Finding("module_same_object", moved is model),
        Finding("parameter_same_object", after is before),
        Finding("memory_moved", _address_of(after) != before_address),
        Finding("no_device_attribute", run.steps[3].error is not None),
        Finding("first_parameter_device", True, {"device": str(run["where"])}),
    )
    return Demonstration(
        key="module_to",
        variant=variant,
        target=other if variant == "device" else {"dtype": "float64", "same": "cpu"}[variant],
        stand_in=stand_in and variant == "device",
        code=run.code,
        steps=tuple(run.steps),
        findings=findings,
    )


def _module_split(other: str, stand_in: bool) -> Demonstration:
    run = _Runner(("model", "devices", "where", "out"))
    run.step("model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))")
    run.step(f"model[1].to({_device_literal(other)})")
    run.step("devices = {p.device for p in model.parameters()}")
    run.step("where = next(model.parameters()).device")
    forward = run.step("out = model(torch.randn(5, 3))")
    devices = run["devices"]
    listed = ", ".join(sorted(map(str, devices)))
    findings = (
        Finding("two_devices", len(devices) == 2, {"devices": listed}),
        Finding("first_parameter_device", True, {"device": str(run["where"])}),
        Finding("forward_failed", forward.error is not None),
    )
    return Demonstration(
        key="module_to",
        variant="split",
        target=other,
        stand_in=stand_in,
        code=run.code,
        steps=tuple(run.steps),
        findings=findings,
    )


# ---------------------------------------------------------------- mixing devices


def mix_devices(accelerator: object = _DETECT) -> Demonstration:
    """Operands of one op must live on one device, with torch's own exception run beside it.

    ``a + b`` across two devices raises; moving one operand fixes it. Then the exception: a
    0-dim CPU tensor (``torch.tensor(2.0)``) combines with a tensor on any device, as a Python
    number would, while a 1-element 1-dim CPU tensor (``torch.tensor([2.0])``) does not. Every
    sentence the page prints about the rule comes from what these steps did (the findings).
    """
    other, stand_in = _other_device(_resolve(accelerator))
    run = _Runner(("a", "b", "c", "s", "d", "v", "e"))
    run.step("a = torch.ones(2, 3)")
    run.step(f"b = torch.ones(2, 3, device={_device_literal(other)})")
    failed = run.step("c = a + b")
    fixed = run.step("c = a.to(b.device) + b")
    run.step("s = torch.tensor(2.0)")
    zero_dim = run.step("d = s * b")
    run.step("v = torch.tensor([2.0])")
    one_element = run.step("e = v * b")
    scalar, vector = run["s"], run["v"]
    result = run.namespace.get("d")
    scalar_shape = str(tuple(scalar.shape)) if isinstance(scalar, torch.Tensor) else "?"
    vector_shape = str(tuple(vector.shape)) if isinstance(vector, torch.Tensor) else "?"
    scalar_combined = zero_dim.error is None and isinstance(result, torch.Tensor)
    findings = (
        Finding("mixing_raised", failed.error is not None),
        Finding("fix_worked", fixed.error is None, {"device": other}),
        Finding(
            "zero_dim_combined",
            scalar_combined,
            {
                "shape": scalar_shape,
                "device": other,
                "result_device": str(result.device) if scalar_combined else "",
            },
        ),
        Finding("one_element_raised", one_element.error is not None, {"shape": vector_shape}),
        Finding(
            "zero_dim_exception",
            failed.error is not None and scalar_combined and one_element.error is not None,
            {"device": other},
        ),
    )
    return Demonstration(
        key="mix_devices",
        variant="add",
        target=other,
        stand_in=stand_in,
        code=run.code,
        steps=tuple(run.steps),
        findings=findings,
    )


# ---------------------------------------------------------------- NumPy bridge

NUMPY_VARIANTS = ("from_numpy", "numpy", "as_tensor", "tensor", "requires_grad", "device")


def _numpy_scripts(other: str) -> dict[str, tuple[tuple[str, ...], list[str], tuple[str, str]]]:
    """Each variant's script: the names watched, the lines run, and which side the last line
    changes and which side may follow (``other``: the device the ``device`` variant tries)."""
    return {
        # watched names, steps, (changed side, other side)
        "from_numpy": (
            ("a", "t"),
            ["a = np.arange(4.0)", "t = torch.from_numpy(a)", "a[0] = 100.0"],
            ("a", "t"),
        ),
        "numpy": (
            ("t", "a"),
            ["t = torch.arange(4.0)", "a = t.numpy()", "t[0] = 100.0"],
            ("t", "a"),
        ),
        "as_tensor": (
            ("a", "t", "u"),
            [
                "a = np.arange(4.0)",
                "t = torch.as_tensor(a)",
                "u = torch.as_tensor(a, dtype=torch.float32)",
                "a[0] = 100.0",
            ],
            ("a", "t"),
        ),
        "tensor": (
            ("a", "t"),
            ["a = np.arange(4.0)", "t = torch.tensor(a)", "a[0] = 100.0"],
            ("a", "t"),
        ),
        "requires_grad": (
            ("t", "a"),
            [
                "t = torch.arange(4.0, requires_grad=True)",
                "a = t.numpy()",
                "a = t.detach().numpy()",
                "t.data[0] = 100.0",
            ],
            ("t", "a"),
        ),
        "device": (
            ("t", "a"),
            [
                f"t = torch.arange(4.0, device={_device_literal(other)})",
                "a = t.numpy()",
                "a = t.cpu().numpy()",
            ],
            ("t", "a"),
        ),
    }


def _numpy_findings(variant: str, run: _Runner, changed: str, follower: str) -> list[Finding]:
    """What the run shows: whether the two sides share memory (and the other one followed the
    change), or for ``device`` that ``.numpy()`` needs the host."""
    findings: list[Finding] = []
    if variant == "device":
        findings.append(Finding("numpy_needs_host", run.steps[1].error is not None))
        findings.append(Finding("host_copy_worked", run.steps[2].error is None))
    else:
        first, second = run[changed], run.namespace.get(follower)
        findings.append(Finding("shares_memory", _same_memory(first, second)))
        findings.append(
            Finding(
                "other_side_changed",
                second is not None and _first_value(second) == 100.0,
                {"changed": changed, "other": follower},
            )
        )
        if variant == "as_tensor":
            findings.append(Finding("dtype_change_copies", not _same_memory(run["a"], run["u"])))
        if variant == "requires_grad":
            findings.append(Finding("numpy_refused_grad", run.steps[1].error is not None))
    return findings


def numpy_bridge(variant: str, accelerator: object = _DETECT) -> Demonstration:
    """``from_numpy``, ``.numpy()`` and ``as_tensor`` share memory with the array; ``tensor``
    copies. Mutating one side shows whether the other follows."""
    _check_variant("numpy_bridge", variant, NUMPY_VARIANTS)
    other, stand_in = _other_device(_resolve(accelerator))
    watch, lines, (changed, follower) = _numpy_scripts(other)[variant]
    run = _Runner(watch)
    for line in lines:
        run.step(line)
    findings = _numpy_findings(variant, run, changed, follower)
    return Demonstration(
        key="numpy_bridge",
        variant=variant,
        target=other if variant == "device" else "cpu",
        stand_in=stand_in and variant == "device",
        code=run.code,
        steps=tuple(run.steps),
        findings=tuple(findings),
    )


# ---------------------------------------------------------------- device-agnostic code

AGNOSTIC_SNIPPET = textwrap.dedent(
    """\
    built_for = torch.accelerator.current_accelerator()
    usable = torch.accelerator.current_accelerator(check_available=True)
    device = usable if usable is not None else torch.device("cpu")
    model = nn.Linear(3, 2).to(device)
    x = torch.randn(4, 3, device=device)
    y = model(x)"""
)


def device_agnostic() -> Demonstration:
    """The idiom current PyTorch recommends: ask ``torch.accelerator`` (CUDA, MPS, XPU, ...)
    and fall back to the CPU, then create tensors directly on that device."""
    run = _Runner(("built_for", "usable", "device", "model", "x", "y"))
    for line in AGNOSTIC_SNIPPET.splitlines():
        run.step(line)
    device = run["device"]
    built_for = run["built_for"]
    findings = (
        Finding("accelerator_found", run["usable"] is not None, {"device": str(device)}),
        Finding(
            "built_for_but_absent",
            built_for is not None and run["usable"] is None,
            {"built_for": str(built_for)},
        ),
        Finding(
            "all_on_one_device",
            all(p.device.type == device.type for p in run["model"].parameters())
            and run["y"].device.type == device.type,
            {"device": str(device)},
        ),
    )
    return Demonstration(
        key="device_agnostic",
        variant="default",
        target=str(device),
        stand_in=False,
        code=run.code,
        steps=tuple(run.steps),
        findings=findings,
    )


DEMONSTRATIONS: dict[str, tuple[Callable[..., Demonstration], tuple[str, ...]]] = {
    "tensor_to": (tensor_to, TENSOR_TO_VARIANTS),
    "module_to": (module_to, MODULE_TO_VARIANTS),
    "mix_devices": (lambda variant="add", **kw: mix_devices(**kw), ("add",)),
    "numpy_bridge": (numpy_bridge, NUMPY_VARIANTS),
    "device_agnostic": (lambda variant="default", **kw: device_agnostic(), ("default",)),
}


def run_demonstration(key: str, variant: str, accelerator: object = _DETECT) -> Demonstration:
    """Run one demonstration by name (what a page's "run" button calls)."""
    if key not in DEMONSTRATIONS:
        raise DevicesValueError(
            ErrorCode.UNKNOWN_DEMONSTRATION, key=repr(key), choices=choices(DEMONSTRATIONS)
        )
    function, variants = DEMONSTRATIONS[key]
    _check_variant(key, variant, variants)
    if key == "device_agnostic":
        return function(variant)
    return function(variant, accelerator=accelerator)


def demonstration_code(key: str, variant: str, accelerator: object = _DETECT) -> str:
    """The snippet a demonstration runs, for showing before the "run" button is pressed.

    The snippet depends on the device this machine has, so it comes from the demonstration
    itself (a run is a handful of tiny tensor operations) rather than from a second copy that
    could drift.
    """
    return run_demonstration(key, variant, accelerator).code
