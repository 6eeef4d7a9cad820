"""The walk over a built model that runs inside a sandbox worker (trusted code; the model's
code is not), and for trusted models directly (tests, notebooks).

:func:`inspect_namespace` (job ``modules.inspect``) finds the model the pasted source defines
with the shape explorer's rules, builds it on the meta device and hands it to
:func:`describe_module`. Every fact in a row is asked of torch by object identity: "in
``parameters()``" means the very tensor object comes out of ``model.parameters()``, "in
``state_dict()``" that it comes out of ``state_dict(keep_vars=True)``, "seen by an optimiser"
that it sits in the param groups of ``torch.optim.SGD(model.parameters())``. One fact is
decided by rule, because a meta model cannot be converted and compared: ``.to()`` converts
what ``Module._apply`` visits, the parameters and buffers registered on modules reachable
through ``_modules``, and nothing else (tests/unit/test_modules.py checks the rule against a
real ``.to(dtype)`` on CPU).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from torchatlas.modules.report import (
    MAX_FINDINGS,
    MAX_LIST_ITEMS,
    MAX_MODULES,
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


def _detail(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _shape_args(shape: tuple[int, ...]) -> str:
    return ", ".join(str(size) for size in shape)


@dataclass
class _Walk:
    """The identity sets torch's own calls produce, and the rows found so far."""

    parameters: set[int]
    state: set[int]
    optimizer: set[int]
    converted: set[int]  # what .to() changes in place: the reachable modules' parameters
    rows: list[TensorRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    first_name: dict[int, str] = field(default_factory=dict)
    truncated: bool = False

    def add(
        self,
        tensor: torch.Tensor,
        name: str,
        owner: str,
        attribute: str,
        kind: TensorKind,
        *,
        reachable: bool,
        container: Container = Container.NONE,
    ) -> TensorRow | None:
        if len(self.rows) >= MAX_TENSORS:
            self.truncated = True
            return None
        key = id(tensor)
        shared_with = self.first_name.get(key, "")
        self.first_name.setdefault(key, name)
        row = TensorRow(
            name=name,
            owner=owner,
            attribute=attribute,
            kind=kind,
            shape=[int(size) for size in tensor.shape],
            dtype=dtype_name(tensor.dtype),
            requires_grad=bool(tensor.requires_grad),
            in_parameters=key in self.parameters,
            in_state_dict=key in self.state,
            # Module._apply converts each reachable module's _parameters in place (the same
            # Parameter object gets new data, wherever else it is referenced) and replaces each
            # reachable module's _buffers entries with new tensors.
            moved_by_to=key in self.converted or (reachable and kind is TensorKind.BUFFER),
            seen_by_optimizer=key in self.optimizer,
            container=container,
            shared_with=shared_with,
            numel=int(tensor.numel()),
        )
        self.rows.append(row)
        return row

    def find(self, finding: Finding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(finding)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _registered(
    walk: _Walk, module: nn.Module, path: str, *, reachable: bool, container: Container
) -> None:
    """Rows for the parameters and buffers registered on ``module`` itself."""
    for name, parameter in module._parameters.items():
        if parameter is not None:
            walk.add(
                parameter,
                _join(path, name),
                path,
                name,
                TensorKind.PARAMETER,
                reachable=reachable,
                container=container,
            )
    for name, buffer in module._buffers.items():
        if buffer is not None:
            walk.add(
                buffer,
                _join(path, name),
                path,
                name,
                TensorKind.BUFFER,
                reachable=reachable,
                container=container,
            )


def _items(value: Any) -> Iterator[tuple[str, Any]]:
    """The first items of a list, tuple or dict attribute, with their index text."""
    if isinstance(value, dict):
        for count, (key, item) in enumerate(value.items()):
            if count >= MAX_LIST_ITEMS:
                return
            yield f"[{key!r}]" if isinstance(key, str | int) else "[…]", item
    else:
        for index, item in enumerate(value[:MAX_LIST_ITEMS]):
            yield f"[{index}]", item


def _plain_attributes(walk: _Walk, module: nn.Module, path: str, *, again: bool = False) -> int:
    """Rows for tensors kept as ordinary attributes of ``module`` (alone or in a Python
    container), with a finding for each; returns how many plain tensors sit on it. A module
    met ``again`` under a second path gets its rows (they name the first) and no findings."""
    plain = 0
    # torch's own modules register what they own; their private lists (an LSTM's
    # _flat_weights) only point at those registered tensors and need no fix.
    torchs_own = type(module).__module__.startswith("torch.")
    for attribute, value in list(vars(module).items()):
        if attribute in MODULE_INTERNALS:
            continue
        # How the model's own code reaches it: self.W on the model, model.fc.W below it.
        where = f"self.{attribute}" if not path else f"model.{path}.{attribute}"
        if isinstance(value, torch.Tensor):
            row = walk.add(
                value, _join(path, attribute), path, attribute, TensorKind.PLAIN, reachable=True
            )
            plain += 1
            if row is None or row.shared_with or torchs_own:
                continue
            args = _shape_args(tuple(value.shape))
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
            continue
        container = _CONTAINERS.get(type(value))
        if container is None or again or torchs_own:
            continue
        tensors = modules = hidden = 0
        for index, item in _items(value):
            name = f"{_join(path, attribute)}{index}"
            if isinstance(item, torch.Tensor):
                tensors += 1
                walk.add(
                    item,
                    name,
                    path,
                    attribute,
                    TensorKind.PLAIN,
                    reachable=False,
                    container=container,
                )
            elif isinstance(item, nn.Module):
                modules += 1
                for sub_path, sub in item.named_modules(prefix=name):
                    hidden += sum(
                        p.numel()
                        for p in sub._parameters.values()
                        if p is not None and id(p) not in walk.parameters
                    )
                    _registered(walk, sub, sub_path, reachable=False, container=container)
        for kind, count in (("tensor", tensors), ("module", modules)):
            if count:
                wrapper = _WRAPPERS[(container, kind)]
                code = FindingCode.TENSOR_LIST if kind == "tensor" else FindingCode.MODULE_LIST
                items = "{…}" if container is Container.DICT else "[…]"
                fix = f"self.{attribute} = {wrapper}({items})"
                params = {"name": where, "count": count, "wrapper": wrapper, "hidden": hidden}
                walk.find(Finding(code, Severity.WARNING, params, fix))
    return plain


def _optimizer_ids(model: nn.Module) -> tuple[set[int], str]:
    """The tensors an optimiser built from ``parameters()`` holds, or torch's refusal."""
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    except Exception as exc:  # torch refuses an empty parameter list: that is the lesson
        return set(), _detail(exc)
    return {id(p) for group in optimizer.param_groups for p in group["params"]}, ""


def describe_module(model: nn.Module, label: str = "") -> ModuleReport:
    """The report for ``model`` (any device; meta inside the sandbox). Raises what torch or
    the model's own code raises; :func:`inspect_namespace` turns that into an error."""
    started = time.perf_counter()
    parameters = list(model.parameters())
    state = model.state_dict(keep_vars=True)
    optimizer, optimizer_error = _optimizer_ids(model)
    reachable = {id(p) for module in model.modules() for p in module._parameters.values()}
    walk = _Walk({id(p) for p in parameters}, {id(v) for v in state.values()}, optimizer, reachable)
    label = label or type(model).__name__
    modules: list[ModuleRow] = []
    first_path: dict[int, str] = {}
    # Every path, as state_dict() walks them: a module reached twice ("tied") is listed twice,
    # its second row naming the first, and its tensors counted once.
    for path, module in model.named_modules(remove_duplicate=False):
        if len(modules) >= MAX_MODULES:
            walk.truncated = True
            break
        shared_with = first_path.setdefault(id(module), path)
        again = shared_with != path
        _registered(walk, module, path, reachable=True, container=Container.NONE)
        plain = _plain_attributes(walk, module, path, again=again)
        modules.append(
            ModuleRow(
                path=path,
                shared_with=shared_with if again else "",
                class_name=type(module).__name__,
                depth=path.count(".") + 1 if path else 0,
                own_params=sum(p.numel() for p in module._parameters.values() if p is not None),
                total_params=sum(p.numel() for p in module.parameters()),
                buffers=sum(b.numel() for b in module.buffers()),
                plain_tensors=plain,
            )
        )
    _facts(walk, parameters, optimizer_error)
    plain_rows = [r for r in walk.rows if r.kind is TensorKind.PLAIN and not r.shared_with]
    return ModuleReport(
        model=label,
        modules=modules,
        tensors=walk.rows,
        findings=walk.findings,
        total_params=sum(p.numel() for p in parameters),
        trainable_params=sum(p.numel() for p in parameters if p.requires_grad),
        buffer_elements=sum(b.numel() for b in model.buffers()),
        plain_elements=sum(row.numel for row in plain_rows),
        parameter_count=len(parameters),
        state_dict_keys=list(state)[:MAX_STATE_KEYS],
        optimizer_tensors=len(optimizer),
        optimizer_error=optimizer_error,
        truncated=walk.truncated or len(state) > MAX_STATE_KEYS,
        elapsed_s=time.perf_counter() - started,
    )


def _facts(walk: _Walk, parameters: list[torch.Tensor], optimizer_error: str) -> None:
    """Findings that are facts of torch's counting rather than one attribute's mistake."""
    if not parameters:
        walk.find(
            Finding(FindingCode.NO_PARAMETERS, Severity.WARNING, {"detail": optimizer_error or "—"})
        )
    for row in list(walk.rows):
        if row.kind is TensorKind.PARAMETER and row.container is Container.NONE:
            if row.shared_with:
                walk.find(
                    Finding(
                        FindingCode.SHARED_PARAMETER,
                        Severity.INFO,
                        {"name": row.name, "first": row.shared_with, "numel": row.numel},
                    )
                )
            elif not row.requires_grad:
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
    # The shape explorer's rules for finding and building a pasted model (its limits too).
    from torchatlas.shapes.analysis import (
        AnalysisError,
        build_on_meta,
        find_model,
        user_files_of,
    )

    started = time.perf_counter()
    try:
        user_files = user_files_of(namespace)
        target, args, kwargs, label = find_model(namespace, model, user_files)
        built = build_on_meta(target, args, kwargs, label, user_files)
    except AnalysisError as exc:
        shape_error = exc.error
        kinds = {kind.value for kind in ErrorKind}
        kind = shape_error.kind.value
        error = ModuleError(
            ErrorKind(kind) if kind in kinds else ErrorKind.INTERNAL,
            params={
                key: value
                for key, value in shape_error.params.items()
                if isinstance(value, str | int | float | bool)
            },
            line=shape_error.line,
        )
        if kind not in kinds:
            error = ModuleError(ErrorKind.INTERNAL, params={"detail": kind})
        return ModuleReport(model=model or "", error=error).to_dict()
    except Exception as exc:
        return ModuleReport(
            error=ModuleError(ErrorKind.INTERNAL, params={"detail": _detail(exc)})
        ).to_dict()
    try:
        report = describe_module(built, label)
    except Exception as exc:  # the model's own code (a property, a hook) raised while walked
        error = ModuleError(
            ErrorKind.INSPECT_ERROR, params={"model": label, "detail": _detail(exc)}
        )
        return ModuleReport(model=label, error=error).to_dict()
    return {**report.to_dict(), "elapsed_s": time.perf_counter() - started}
