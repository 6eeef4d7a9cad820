"""The walk over a built model that runs inside a sandbox worker (trusted code; the model's
code is not), and for trusted models directly (tests, notebooks).

:func:`inspect_namespace` (job ``modules.inspect``) finds the model the pasted source defines
with the shape explorer's rules, builds it on the meta device and hands it to
:func:`describe_module`. Every fact in a row is asked of torch by object identity: "in
``parameters()``" means the very tensor object comes out of ``model.parameters()``, "in
``state_dict()``" that it comes out of ``state_dict(keep_vars=True)``, "seen by an optimiser"
that it sits in the param groups of ``torch.optim.SGD(model.parameters())``. Whether a tensor
is registered at all is decided the same way: a tensor or module held in a Python list (or
kept as a plain attribute) that torch also registered elsewhere on the model is an alias, not
a hidden weight; only what is reachable through the list alone is invisible to torch.

The two ``.to()`` facts are asked of torch too: a copy of the model is converted with its own
``Module.to`` and each row's tensor is read back from the copy. ``.to(torch.float64)`` runs
for real (meta tensors convert). A device move cannot leave the meta device, so during
``.to("cpu")`` each per-tensor ``Tensor.to`` call that carries a device is answered with a
tensor of a marker dtype instead of a moved one: which tensors torch's ``Module._apply`` hands
to it, and whether the result is installed where the row reads it, stay torch's decision.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from torchatlas.modelcode import ModelCodeError, build_on_meta, find_model, user_files_of
from torchatlas.modules.report import (
    MAX_CONTAINER_ITEMS,
    MAX_FINDINGS,
    MAX_LIST_ITEMS,
    MAX_MODULES,
    MAX_NEST_DEPTH,
    MAX_STATE_KEYS,
    MAX_TENSORS,
    Container,
    ErrorKind,
    Finding,
    FindingCode,
    ModuleError,
    ModuleReport,
    ModuleRow,
    Severity,
    TensorKind,
    TensorRow,
)

# What nn.Module.__init__ puts in every instance's __dict__: torch's own bookkeeping (the
# registries of parameters, buffers, sub-modules and hooks), never a user's attribute.
MODULE_INTERNALS = frozenset(vars(nn.Module()))
_CONTAINERS = {list: Container.LIST, tuple: Container.TUPLE, dict: Container.DICT}
_WRAPPERS = {
    (Container.LIST, "tensor"): "nn.ParameterList",
    (Container.TUPLE, "tensor"): "nn.ParameterList",
    (Container.DICT, "tensor"): "nn.ParameterDict",
    (Container.LIST, "module"): "nn.ModuleList",
    (Container.TUPLE, "module"): "nn.ModuleList",
    (Container.DICT, "module"): "nn.ModuleDict",
}
# The dtype a tensor converted by ``.to(dtype=...)`` gets in the conversion check.
CONVERT_DTYPE = torch.float64
# Candidate marker dtypes for the device-move check: the first one no row holds is used.
_MARKERS = (torch.complex64, torch.complex128, torch.uint16, torch.float8_e5m2)
# The device ``.to()`` is asked to move to (it never arrives: see the module's docstring).
MOVE_DEVICE = "cpu"


def _detail(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _shape_args(shape: tuple[int, ...]) -> str:
    return ", ".join(str(size) for size in shape)


def is_lazy(tensor: torch.Tensor) -> bool:
    """An uninitialised parameter or buffer of a lazy module: no shape until the first
    forward (torch refuses to read its shape or count its elements)."""
    return isinstance(tensor, nn.parameter.UninitializedTensorMixin)


def numel(tensor: torch.Tensor) -> int:
    """Elements of ``tensor``; 0 for a lazy one (torch cannot count it yet)."""
    return 0 if is_lazy(tensor) else int(tensor.numel())


@dataclass
class _Registered:
    """What torch registered on the model, by object identity, with torch's first names."""

    parameters: dict[int, str]  # named_parameters(): id → first name
    buffers: dict[int, str]  # named_buffers() (non-persistent ones too)
    modules: dict[int, str]  # named_modules(): id → first path

    @classmethod
    def of(cls, model: nn.Module) -> _Registered:
        return cls(
            {id(p): name for name, p in model.named_parameters()},
            {id(b): name for name, b in model.named_buffers()},
            {id(m): path for path, m in model.named_modules()},
        )

    def tensor_name(self, tensor: torch.Tensor) -> str:
        key = id(tensor)
        return self.parameters.get(key) or self.buffers.get(key, "")

    def kind(self, tensor: torch.Tensor) -> TensorKind:
        key = id(tensor)
        if key in self.parameters:
            return TensorKind.PARAMETER
        return TensorKind.BUFFER if key in self.buffers else TensorKind.PLAIN


@dataclass
class _Walk:
    """The identity sets torch's own calls produce, and the rows found so far."""

    registered: _Registered
    state: set[int]
    optimizer: set[int]
    rows: list[TensorRow] = field(default_factory=list)
    objects: list[torch.Tensor] = field(default_factory=list)  # each row's tensor, in order
    findings: list[Finding] = field(default_factory=list)
    first_name: dict[int, str] = field(default_factory=dict)
    truncated: bool = False
    quiet: bool = False  # a walk of a converted copy: names and objects only, no findings
    names: list[str] = field(default_factory=list)  # each row's name, in order
    muted: int = 0  # > 0 while walking inside a hidden module: rows, no findings
    budget: int = MAX_CONTAINER_ITEMS  # container items the walk may still open

    def add(
        self,
        tensor: torch.Tensor,
        name: str,
        owner: str,
        attribute: str,
        kind: TensorKind,
        *,
        container: Container = Container.NONE,
    ) -> TensorRow | None:
        if len(self.objects) >= MAX_TENSORS:
            self.truncated = True
            return None
        self.names.append(name)
        self.objects.append(tensor)
        if self.quiet:
            return None
        key = id(tensor)
        # torch's first name for a registered tensor, else the first name the walk met
        first = self.registered.tensor_name(tensor) or self.first_name.get(key, "")
        self.first_name.setdefault(key, name)
        lazy = is_lazy(tensor)
        row = TensorRow(
            name=name,
            owner=owner,
            attribute=attribute,
            kind=kind,
            shape=[] if lazy else [int(size) for size in tensor.shape],
            dtype=dtype_name(tensor.dtype),
            requires_grad=bool(tensor.requires_grad),
            in_parameters=key in self.registered.parameters,
            in_buffers=key in self.registered.buffers,
            in_state_dict=key in self.state,
            to_device=None,
            to_dtype=None,
            seen_by_optimizer=key in self.optimizer,
            container=container,
            shared_with=first if first != name else "",
            numel=numel(tensor),
            lazy=lazy,
        )
        self.rows.append(row)
        return row

    def find(self, finding: Finding) -> None:
        if not self.quiet and not self.muted and len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _registered(walk: _Walk, module: nn.Module, path: str, *, container: Container) -> None:
    """Rows for the parameters and buffers registered on ``module`` itself."""
    for name, parameter in module._parameters.items():
        if parameter is not None:
            walk.add(
                parameter, _join(path, name), path, name, TensorKind.PARAMETER, container=container
            )
    for name, buffer in module._buffers.items():
        if buffer is not None:
            walk.add(buffer, _join(path, name), path, name, TensorKind.BUFFER, container=container)


def _items(walk: _Walk, value: Any) -> Iterator[tuple[str, Any]]:
    """The first items of a list, tuple or dict, with their index text; a container with more
    items than a report looks at marks the report truncated (its table is then not every
    tensor the model holds, and says so)."""
    if len(value) > MAX_LIST_ITEMS:
        walk.truncated = True
    if isinstance(value, dict):
        for count, (key, item) in enumerate(value.items()):
            if count >= MAX_LIST_ITEMS:
                return
            yield f"[{key!r}]" if isinstance(key, str | int) else "[…]", item
    else:
        for index, item in enumerate(value[:MAX_LIST_ITEMS]):
            yield f"[{index}]", item


def _contents(
    walk: _Walk, value: Any, name: str, depth: int, opened: set[int]
) -> Iterator[tuple[str, Any, Container, int]]:
    """``(name, item, the container holding it, depth)`` for every tensor and module inside a
    Python list, tuple or dict, and inside the lists, tuples and dicts it holds, to
    :data:`MAX_NEST_DEPTH` levels (1: the attribute's own items). Each container is opened
    once (``opened``: a cycle, or one list shared many times over, costs one visit; what it
    holds has its row under the first name); the walk opens at most
    :data:`MAX_CONTAINER_ITEMS` items in all. Whatever a bound leaves unopened marks the
    report truncated."""
    container = _CONTAINERS[type(value)]
    opened.add(id(value))
    for index, item in _items(walk, value):
        walk.budget -= 1
        if walk.budget < 0:
            walk.truncated = True
            return
        item_name = f"{name}{index}"
        if isinstance(item, torch.Tensor | nn.Module):
            yield item_name, item, container, depth
        elif type(item) in _CONTAINERS and id(item) not in opened:
            if depth >= MAX_NEST_DEPTH:
                walk.truncated = walk.truncated or bool(item)
                continue
            yield from _contents(walk, item, item_name, depth + 1, opened)


def _plain_tensor(
    walk: _Walk,
    value: torch.Tensor,
    path: str,
    attribute: str,
    torchs: bool,
    container: Container = Container.NONE,
) -> int:
    """A tensor kept as an ordinary attribute: a row, and a finding unless torch registered
    the same object elsewhere (an alias) or it is torch's own module's private reference.
    ``container``: the Python container a hidden module that holds it sits in."""
    where = f"self.{attribute}" if not path else f"model.{path}.{attribute}"
    kind = walk.registered.kind(value)
    row = walk.add(value, _join(path, attribute), path, attribute, kind, container=container)
    if kind is not TensorKind.PLAIN:
        return 0
    if row is None or row.shared_with or torchs:
        return 1
    args = _shape_args(tuple(value.shape)) if not row.lazy else "…"
    as_buffer = f'self.register_buffer("{attribute}", torch.empty({args}))'
    fix = (
        f"self.{attribute} = nn.Parameter(torch.empty({args}))\n"
        f"# or, if it must not train:\n{as_buffer}"
        if value.is_floating_point() or value.is_complex()
        else as_buffer
    )
    walk.find(
        Finding(
            FindingCode.PLAIN_TENSOR,
            Severity.WARNING,
            {"name": where, "shape": row.shape_text},
            fix,
        )
    )
    return 1


def _hidden_module(
    walk: _Walk,
    module: nn.Module,
    name: str,
    container: Container,
    hidden: dict[int, int],
    stack: set[int],
) -> None:
    """Rows for a module only a Python container reaches, and for everything it holds: what
    it registered on itself (torch's parameters() of the model never reach them), its plain
    tensor attributes and its own containers. Its parameters torch registered nowhere on the
    model are counted in ``hidden`` (id → elements). No findings: the container's own
    finding names the module."""
    stack.add(id(module))
    walk.muted += 1
    try:
        for sub_path, sub in module.named_modules(prefix=name):
            _registered(walk, sub, sub_path, container=container)
            for tensor in (*sub._parameters.values(), *sub._buffers.values()):
                hidden_parameter = isinstance(tensor, nn.Parameter)
                if hidden_parameter and walk.registered.kind(tensor) is TensorKind.PLAIN:
                    hidden[id(tensor)] = numel(tensor)
            _plain_attributes(walk, sub, sub_path, stack=stack, container=container)
    finally:
        walk.muted -= 1
        stack.discard(id(module))


def _container(
    walk: _Walk,
    value: Any,
    container: Container,
    path: str,
    attribute: str,
    stack: set[int] | None = None,
) -> None:
    """Rows for what a Python list, tuple or dict attribute holds, at any depth of nested
    containers (:func:`_contents`). A tensor or module torch registered elsewhere on the model
    is an alias (its row names the registered name; no warning); only what is reachable
    through the container alone is hidden from torch. The attribute's own items that are
    hidden get a wrapper's finding (nn.ParameterList, nn.ModuleDict…); hidden ones inside
    nested containers get one finding of their own (no wrapper of one kind holds them)."""
    where = f"self.{attribute}" if not path else f"model.{path}.{attribute}"
    registered = walk.registered
    stack = stack if stack is not None else set()
    counts = {(depth, kind): 0 for depth in ("direct", "nested") for kind in ("tensor", "module")}
    hidden: dict[str, dict[int, int]] = {"direct": {}, "nested": {}}  # id → elements
    deepest = 1
    aliases: list[str] = []
    opened: set[int] = set(stack)  # the containers opened for this attribute
    for name, item, holder, depth in _contents(walk, value, _join(path, attribute), 1, opened):
        level = "direct" if depth == 1 else "nested"
        if isinstance(item, torch.Tensor):
            kind = registered.kind(item)
            walk.add(item, name, path, attribute, kind, container=holder)
            if kind is TensorKind.PLAIN:
                counts[(level, "tensor")] += 1
                if level == "nested":
                    hidden[level][id(item)] = numel(item)
                    deepest = max(deepest, depth)
            else:
                aliases.append(registered.tensor_name(item))
        elif id(item) in registered.modules:
            aliases.append(registered.modules[id(item)] or "self")
        elif id(item) not in stack:  # a hidden module (one that holds itself is opened once)
            counts[(level, "module")] += 1
            deepest = max(deepest, depth if level == "nested" else 1)
            _hidden_module(walk, item, name, holder, hidden[level], stack)
    for kind in ("tensor", "module"):
        count = counts[("direct", kind)]
        if count:
            wrapper = _WRAPPERS[(container, kind)]
            code = FindingCode.TENSOR_LIST if kind == "tensor" else FindingCode.MODULE_LIST
            items = "{…}" if container is Container.DICT else "[…]"
            fix = f"self.{attribute} = {wrapper}({items})"
            elements = sum(hidden["direct"].values())
            params = {"name": where, "count": count, "wrapper": wrapper, "hidden": elements}
            walk.find(Finding(code, Severity.WARNING, params, fix))
    nested_tensors, nested_modules = counts[("nested", "tensor")], counts[("nested", "module")]
    if nested_tensors or nested_modules:
        params = {
            "name": where,
            "tensors": nested_tensors,
            "modules": nested_modules,
            "hidden": sum(hidden["nested"].values()),
            "depth": deepest,
        }
        walk.find(Finding(FindingCode.NESTED_CONTAINER, Severity.WARNING, params))
    if aliases:
        shown = ", ".join(dict.fromkeys(aliases))
        walk.find(
            Finding(
                FindingCode.LIST_ALIASES,
                Severity.INFO,
                {"name": where, "count": len(aliases), "names": shown[:300]},
            )
        )


def _plain_attributes(
    walk: _Walk,
    module: nn.Module,
    path: str,
    *,
    again: bool = False,
    stack: set[int] | None = None,
    container: Container = Container.NONE,
) -> int:
    """Rows for tensors kept as ordinary attributes of ``module`` (alone or in Python
    containers, nested to any depth within the bounds), with a finding for each; returns how
    many plain (unregistered) tensors sit on it. A module met ``again`` under a second path
    gets its rows (they name the first) and no container findings. ``stack``: the containers
    and modules being opened (a cycle back to one of them is not followed); ``container``:
    the Python container that holds ``module`` (a hidden module), else none."""
    plain = 0
    # torch's own modules register what they own; their private lists (an LSTM's
    # _flat_weights) only point at those registered tensors and need no fix.
    torchs_own = type(module).__module__.startswith("torch.")
    for attribute, value in list(vars(module).items()):
        if attribute in MODULE_INTERNALS:
            continue
        if isinstance(value, torch.Tensor):
            plain += _plain_tensor(walk, value, path, attribute, torchs_own, container)
            continue
        kind = _CONTAINERS.get(type(value))
        if kind is not None and not again and not torchs_own:
            _container(walk, value, kind, path, attribute, stack)
    return plain


def _optimizer_ids(model: nn.Module) -> tuple[set[int], str]:
    """The tensors an optimiser built from ``parameters()`` holds, or torch's refusal."""
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    except Exception as exc:  # torch refuses an empty parameter list: that is the lesson
        return set(), _detail(exc)
    return {id(p) for group in optimizer.param_groups for p in group["params"]}, ""


class DeviceMove(TorchFunctionMode):
    """During a twin's ``.to(device)``: each ``Tensor.to`` that carries a device returns the
    tensor in ``marker`` dtype (a meta tensor cannot move; the marker shows where the moved
    tensor would have gone). Every other call runs as it is."""

    def __init__(self, marker: torch.dtype) -> None:
        super().__init__()
        self.marker = marker

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.Tensor.to and args:
            device = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
            if device is not None:
                return args[0].to(self.marker)
        return func(*args, **kwargs)


def _walk_rows(model: nn.Module, walk: _Walk, limit: int) -> list[ModuleRow]:
    """Every path, as state_dict() walks them: a module reached twice ("tied") is listed
    twice, its second row naming the first, and its tensors counted once."""
    modules: list[ModuleRow] = []
    first_path: dict[int, str] = {}
    for count, (path, module) in enumerate(model.named_modules(remove_duplicate=False)):
        if count >= limit:
            walk.truncated = True
            break
        shared_with = first_path.setdefault(id(module), path)
        again = shared_with != path
        _registered(walk, module, path, container=Container.NONE)
        plain = _plain_attributes(walk, module, path, again=again)
        if walk.quiet:  # a converted copy: only its tensors are read
            continue
        modules.append(
            ModuleRow(
                path=path,
                shared_with=shared_with if again else "",
                class_name=type(module).__name__,
                depth=path.count(".") + 1 if path else 0,
                own_params=sum(numel(p) for p in module._parameters.values() if p is not None),
                total_params=sum(numel(p) for p in module.parameters()),
                buffers=sum(numel(b) for b in module.buffers()),
                plain_tensors=plain,
            )
        )
    return modules


def _twin(
    model: nn.Module,
    own: Callable[[], nn.Module] | None,
    rebuild: Callable[[], nn.Module] | None,
) -> nn.Module | None:
    """The model to convert: the caller's own (``own``), else a deep copy, else a fresh
    build; None when none can be had."""
    if own is not None:
        return own()
    try:
        return copy.deepcopy(model)
    except Exception:  # a model holding something that cannot be copied (a generator)
        pass
    if rebuild is None:
        return None
    try:
        return rebuild()
    except Exception:
        return None


def _rows_after(twin: nn.Module, rows: list[TensorRow]) -> list[torch.Tensor] | None:
    """The tensor each row's name reaches in ``twin`` (the same walk, in the same order), or
    None when the twin's walk does not name the same rows (a model built differently)."""
    walk = _Walk(_Registered.of(twin), set(), set(), quiet=True)
    _walk_rows(twin, walk, MAX_MODULES)
    if walk.names != [row.name for row in rows]:
        return None
    return walk.objects


def _to_facts(
    model: nn.Module,
    rows: list[TensorRow],
    own: Callable[[], nn.Module] | None,
    rebuild: Callable[[], nn.Module] | None,
) -> list[TensorRow]:
    """The rows with ``to_device`` and ``to_dtype`` asked of torch on a converted copy: first
    ``twin.to(torch.float64)`` (for real), then ``twin.to(device)`` (each tensor torch hands
    over is marked). One copy serves both: a dtype conversion changes no structure, and which
    tensors a device move visits and where it installs them does not depend on their dtype."""
    unknown: list[bool | None] = [None] * len(rows)
    converted, moved = unknown, unknown
    held = {row.dtype for row in rows} | {dtype_name(CONVERT_DTYPE)}
    marker = next((m for m in _MARKERS if dtype_name(m) not in held), None)
    twin = _twin(model, own, rebuild)
    try:
        if twin is not None:
            twin.to(CONVERT_DTYPE)
            after = _rows_after(twin, rows)
            if after is not None:
                target = dtype_name(CONVERT_DTYPE)
                converted = [
                    dtype_name(t.dtype) == target and row.dtype != target
                    for t, row in zip(after, rows, strict=True)
                ]
            if marker is not None:
                with DeviceMove(marker):
                    twin.to(MOVE_DEVICE)
                after = _rows_after(twin, rows)
                if after is not None:
                    moved = [t.dtype == marker for t in after]
    except Exception:  # the model's own _apply or a hook refused: torch's answer is unknown
        pass
    return [
        TensorRow(**{**vars(row), "to_device": device, "to_dtype": dtype})
        for row, device, dtype in zip(rows, moved, converted, strict=True)
    ]


def describe_module(
    model: nn.Module,
    label: str = "",
    rebuild: Callable[[], nn.Module] | None = None,
    *,
    consume: bool = False,
) -> ModuleReport:
    """The report for ``model`` (any device; meta inside the sandbox). Raises what torch or
    the model's own code raises; :func:`inspect_namespace` turns that into an error.

    The ``.to()`` columns convert a copy (``rebuild`` builds the same model again when a deep
    copy fails). ``consume=True`` converts ``model`` itself instead, once every other fact is
    read: for a caller that built the model only to describe it (the sandbox's job)."""
    started = time.perf_counter()
    parameters = list(model.parameters())
    buffer_elements = sum(numel(b) for b in model.buffers())
    state = model.state_dict(keep_vars=True)
    optimizer, optimizer_error = _optimizer_ids(model)
    walk = _Walk(_Registered.of(model), {id(v) for v in state.values()}, optimizer)
    label = label or type(model).__name__
    modules = _walk_rows(model, walk, MAX_MODULES)
    walk.rows = _to_facts(model, walk.rows, (lambda: model) if consume else None, rebuild)
    _facts(walk, parameters, optimizer_error, set(state))
    plain_rows = [r for r in walk.rows if r.kind is TensorKind.PLAIN and not r.shared_with]
    lazy = [p for p in parameters if is_lazy(p)]
    return ModuleReport(
        model=label,
        modules=modules,
        tensors=walk.rows,
        findings=walk.findings,
        total_params=sum(numel(p) for p in parameters),
        trainable_params=sum(numel(p) for p in parameters if p.requires_grad),
        buffer_elements=buffer_elements,
        plain_elements=sum(row.numel for row in plain_rows),
        parameter_count=len(parameters),
        lazy_parameters=len(lazy),
        state_dict_keys=list(state)[:MAX_STATE_KEYS],
        optimizer_tensors=len(optimizer),
        optimizer_error=optimizer_error,
        truncated=walk.truncated or len(state) > MAX_STATE_KEYS,
        elapsed_s=time.perf_counter() - started,
    )


def _facts(
    walk: _Walk, parameters: list[torch.Tensor], optimizer_error: str, state_keys: set[str]
) -> None:
    """Findings that are facts of torch's counting rather than one attribute's mistake."""
    if not parameters:
        walk.find(
            Finding(FindingCode.NO_PARAMETERS, Severity.WARNING, {"detail": optimizer_error or "—"})
        )
    lazy = [row.name for row in walk.rows if row.lazy and not row.shared_with]
    if lazy:
        walk.find(
            Finding(
                FindingCode.LAZY_PARAMETER,
                Severity.INFO,
                {"count": len(lazy), "names": ", ".join(lazy)[:300]},
            )
        )
    for row in list(walk.rows):
        if row.kind is TensorKind.PARAMETER and row.container is Container.NONE:
            # "stored under both names": only when state_dict() really has both keys
            if row.shared_with and row.name in state_keys and row.shared_with in state_keys:
                walk.find(
                    Finding(
                        FindingCode.SHARED_PARAMETER,
                        Severity.INFO,
                        {"name": row.name, "first": row.shared_with, "numel": row.numel},
                    )
                )
            elif not row.shared_with and not row.requires_grad:
                walk.find(Finding(FindingCode.FROZEN_PARAMETER, Severity.INFO, {"name": row.name}))
        elif (
            row.kind is TensorKind.BUFFER
            and not row.in_state_dict
            and not row.shared_with
            and row.container is Container.NONE
        ):
            walk.find(Finding(FindingCode.NON_PERSISTENT_BUFFER, Severity.INFO, {"name": row.name}))


def inspect_namespace(namespace: dict[str, Any], *, model: str | None = None) -> dict[str, Any]:
    """Job ``modules.inspect``: the report for the model the pasted source defines, as a dict.
    Never raises: every failure is an error code and parameters in the report."""
    # The rules for finding and building a pasted model, shared with the shape explorer.
    started = time.perf_counter()
    try:
        user_files = user_files_of(namespace)
        target, args, kwargs, label = find_model(namespace, model, user_files)
        built = build_on_meta(target, args, kwargs, label, user_files)
    except ModelCodeError as exc:  # every ModelCode is one of this room's codes too
        params = {
            key: value
            for key, value in exc.params.items()
            if isinstance(value, str | int | float | bool)
        }
        error = ModuleError(ErrorKind(exc.code.value), params=params, line=exc.line)
        return ModuleReport(model=model or "", error=error).to_dict()
    except Exception as exc:
        return ModuleReport(
            error=ModuleError(ErrorKind.INTERNAL, params={"detail": _detail(exc)})
        ).to_dict()
    try:
        report = describe_module(
            built,
            label,
            rebuild=lambda: build_on_meta(target, args, kwargs, label, user_files),
            consume=True,  # built here only to be described: converted in place, no copy
        )
    except Exception as exc:  # the model's own code (a property, a hook) raised while walked
        error = ModuleError(
            ErrorKind.INSPECT_ERROR, params={"model": label, "detail": _detail(exc)}
        )
        return ModuleReport(model=label, error=error).to_dict()
    return {**report.to_dict(), "elapsed_s": time.perf_counter() - started}
