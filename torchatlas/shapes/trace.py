"""Trace a model's forward pass on the meta device: one row per module call and functional op.

The PyTorch recipe "Reasoning about Shapes", made thorough: the model is built under
``torch.device("meta")``, inputs are created directly on meta, forward hooks record every
module call, a ``TorchFunctionMode`` records functional ops (``torch.cat``, ``view``,
``F.interpolate``, attention…) called from the model's own ``forward`` code, and
``FlopCounterMode`` counts FLOPs. No tensor data is ever allocated, so the input size does not
change the cost.

The same tracer runs the symbolic pass (shapes as SymInts under a FakeTensorMode); it only needs
``size_of`` to turn a size into something printable.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch._prims_common import get_computation_dtype
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry, shape_wrapper

from torchatlas.shapes.report import LayerRow, RowKind, Shape, SymbolicShape

# Calls that only read metadata: never rows, even when they return a tensor-free value.
_METADATA_OPS = frozenset(
    {
        "size", "dim", "numel", "stride", "element_size", "is_contiguous", "data_ptr",
        "__len__", "__repr__", "__format__", "__bool__", "__index__", "__int__", "__float__",
        "item", "tolist", "get_device", "is_floating_point", "is_complex", "type",
        "__setstate__", "__reduce_ex__", "requires_grad_",
    }
)  # fmt: skip


def tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor in ``value``, in pytree order (the tracer asks for every call it records)."""
    found: list[torch.Tensor] = []
    _collect_tensors(value, found)
    return found


def _collect_tensors(value: Any, found: list[torch.Tensor]) -> None:
    # Plain tuples, lists and dicts are walked directly: pytree's generic walk is much slower
    # for them, and they are nearly every argument a layer receives.
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif type(value) is tuple or type(value) is list:
        for item in value:
            _collect_tensors(item, found)
    elif type(value) is dict:
        for item in value.values():
            _collect_tensors(item, found)
    elif value is None or type(value) in _SCALARS:
        return
    else:  # namedtuples, dataclasses and whatever else pytree knows how to open
        found.extend(leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor))


_SCALARS = frozenset({int, float, bool, str, complex, torch.dtype, torch.device, torch.Size})


def op_label(func: Callable[..., Any]) -> str:
    """A readable name for a torch function: torch.cat, F.interpolate, Tensor.view, Tensor.T."""
    name = getattr(func, "__name__", None) or repr(func)
    qualname = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", None) or ""
    if name == "__get__":  # a property such as Tensor.T or Tensor.mT
        owner = getattr(func, "__self__", None)
        return f"Tensor.{getattr(owner, '__name__', 'attribute')}"
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    if module.startswith("torch.nn.functional") or module == "torch._C._nn":
        return f"F.{name}"
    if module.startswith("torch"):
        return f"torch.{name}"
    return name


def is_builtin_layer(module: nn.Module) -> bool:
    """Layers that ship with torch.nn: their internal calls are the layer, not separate rows."""
    return type(module).__module__.startswith("torch.nn.")


@dataclass(slots=True)
class TraceRow:
    """A row while the trace fills it in (outputs, FLOPs and leafness arrive after its call
    starts); :meth:`freeze` gives the report's :class:`LayerRow`. Fields as in LayerRow."""

    name: str
    type: str
    kind: RowKind
    depth: int
    input_shapes: list[Shape] = field(default_factory=list)
    output_shapes: list[Shape] = field(default_factory=list)
    params: int = 0
    trainable_params: int = 0
    flops: int = 0
    activation_bytes: int = 0
    leaf: bool = True
    line: int | None = None
    failed: bool = False
    symbolic_output_shapes: list[SymbolicShape] | None = None
    constraints: list[str] = field(default_factory=list)

    def freeze(self) -> LayerRow:
        return LayerRow(
            self.name, self.type, self.kind, self.depth, self.input_shapes, self.output_shapes,
            self.params, self.trainable_params, self.flops, self.activation_bytes, self.leaf,
            self.line, self.failed, self.symbolic_output_shapes, self.constraints,
        )  # fmt: skip


@dataclass
class _Frame:
    row: int
    flops_at_start: int


@dataclass
class TraceState:
    """What a failed forward left behind: the rows so far and where it stopped."""

    rows: list[TraceRow] = field(default_factory=list)
    failed_row: int | None = None
    failed_module: nn.Module | None = None
    failed_op: str | None = None


class ShapeTracer:
    """Hooks on every module + a function mode; collects :class:`TraceRow` in call order."""

    def __init__(
        self,
        model: nn.Module,
        *,
        size_of: Callable[[Any], int] = int,
        count_flops: bool = True,
        user_files: frozenset[str] = frozenset(),
        on_boundary: Callable[[int], None] | None = None,
    ) -> None:
        self.model = model
        self.size_of = size_of
        self.count_flops = count_flops
        self.user_files = user_files
        # Called with a row index whenever work inside that row ends (symbolic pass: guards).
        self.on_boundary = on_boundary
        self.state = TraceState()
        self._names = {id(module): name for name, module in model.named_modules()}
        self._param_counts: dict[int, tuple[int, int]] = {}
        self._stack: list[_Frame] = []
        self._modules_on_stack: list[nn.Module] = []
        self._flop_counter: FlopCounter | None = None

    # ------------------------------------------------------------------ helpers
    @property
    def rows(self) -> list[TraceRow]:
        return self.state.rows

    def _flops_now(self) -> int:
        if self._flop_counter is None:
            return 0
        return self._flop_counter.total

    def _shape(self, tensor: torch.Tensor) -> list[Any]:
        return [self.size_of(size) for size in tensor.shape]

    def _shapes(self, value: Any) -> list[list[Any]]:
        return [self._shape(tensor) for tensor in tensors_in(value)]

    def _bytes(self, value: Any) -> int:
        if self.size_of is not int:  # symbolic sizes: bytes come from the concrete pass
            return 0
        total = 0
        for tensor in tensors_in(value):
            numel = 1
            for size in tensor.shape:
                numel *= int(size)
            total += numel * tensor.element_size()
        return total

    def _params(self, module: nn.Module) -> tuple[int, int]:
        if not self._param_counts:
            self._count_params(self.model)
        return self._param_counts.get(id(module), (0, 0))

    def _count_params(self, module: nn.Module) -> tuple[int, int]:
        """(total, trainable) of every sub-module, bottom-up in one pass over the tree."""
        total = trainable = 0
        for parameter in module.parameters(recurse=False):
            total += parameter.numel()
            trainable += parameter.numel() if parameter.requires_grad else 0
        for child in module.children():
            if id(child) not in self._param_counts:
                self._count_params(child)
            child_total, child_trainable = self._param_counts[id(child)]
            total += child_total
            trainable += child_trainable
        self._param_counts[id(module)] = (total, trainable)
        return total, trainable

    def _user_line(self) -> int | None:
        """The line of the pasted source being executed right now (innermost user frame)."""
        if not self.user_files:
            return None
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename in self.user_files:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def _claim(self, index: int | None) -> None:
        if self.on_boundary is not None and index is not None:
            self.on_boundary(index)

    def _current_row(self) -> int | None:
        return self._stack[-1].row if self._stack else None

    def _append_row(self, row: TraceRow) -> int:
        if self._stack:
            self.rows[self._stack[-1].row].leaf = False
        self.rows.append(row)
        return len(self.rows) - 1

    def _open_row(self, row: TraceRow) -> None:
        self._claim(self._current_row())
        index = self._append_row(row)
        self._stack.append(_Frame(index, self._flops_now()))

    def _close_row(self, output: Any) -> None:
        frame = self._stack.pop()
        row = self.rows[frame.row]
        row.output_shapes = self._shapes(output)
        row.activation_bytes = self._bytes(output)
        row.flops = self._flops_now() - frame.flops_at_start
        self._claim(frame.row)

    # ------------------------------------------------------------------ hooks
    def _pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        # Hooks run inside the function mode: without this, each .shape the tracer reads
        # would be intercepted as if the model had called it, and cost a recorded call.
        with torch._C.DisableTorchFunction():
            params, trainable = self._params(module)
            self._modules_on_stack.append(module)
            self._open_row(
                TraceRow(
                    name=self._names.get(id(module), type(module).__name__),
                    type=type(module).__name__,
                    kind=RowKind.MODULE,
                    depth=len(self._modules_on_stack) - 1,
                    input_shapes=self._shapes((args, kwargs)),
                    params=params,
                    trainable_params=trainable,
                    line=self._user_line(),
                )
            )

    def _post_hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        with torch._C.DisableTorchFunction():
            self._close_row(output)
            self._modules_on_stack.pop()

    def record_function(self, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Called by the function mode for every torch function; records the interesting ones."""
        owner = self._modules_on_stack[-1] if self._modules_on_stack else None
        name = getattr(func, "__name__", "")
        if owner is None or is_builtin_layer(owner) or name in _METADATA_OPS:
            return func(*args, **kwargs)
        if name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") in {
            "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "data", "grad",
            "layout", "names", "is_meta", "_base", "real", "imag", "grad_fn", "is_leaf",
        }:  # fmt: skip
            return func(*args, **kwargs)
        inputs = self._shapes((args, kwargs))
        label = op_label(func)
        line = self._user_line()
        self._claim(self._current_row())
        flops_at_start = self._flops_now()
        row = TraceRow(
            name=self._names.get(id(owner), ""),
            type=label,
            kind=RowKind.FUNCTION,
            depth=len(self._modules_on_stack),
            input_shapes=inputs,
            line=line,
        )
        try:
            output = func(*args, **kwargs)
        except BaseException:
            row.failed = True
            self.state.failed_row = self._append_row(row)
            self.state.failed_op = label
            raise
        if not tensors_in(output):  # e.g. arithmetic on sizes: not a layer of the model
            return output
        row.output_shapes = self._shapes(output)
        row.activation_bytes = self._bytes(output)
        row.flops = self._flops_now() - flops_at_start
        self._claim(self._append_row(row))
        return output

    # ------------------------------------------------------------------ run
    @contextmanager
    def attached(self) -> Iterator[ShapeTracer]:
        handles = []
        try:
            for module in self.model.modules():
                handles.append(module.register_forward_pre_hook(self._pre_hook, with_kwargs=True))
                handles.append(
                    module.register_forward_hook(
                        self._post_hook, with_kwargs=True, always_call=False
                    )
                )
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run(self, inputs: list[torch.Tensor], *, extra_modes: list[Any] | None = None) -> Any:
        """Forward ``inputs`` through the model; on failure keep the rows and the failing one."""
        with ExitStack() as stack:
            stack.enter_context(self.attached())
            for mode in extra_modes or []:
                stack.enter_context(mode)
            if self.count_flops:
                self._flop_counter = stack.enter_context(FlopCounter())
            # The function mode also plays torch.device("meta") (factories without a device
            # land on meta): one Python mode per torch call instead of two.
            stack.enter_context(_RecordFunctions(self))
            try:
                return self.model(*inputs)
            except BaseException:
                self._mark_failure()
                raise

    def _mark_failure(self) -> None:
        if self._stack and self.state.failed_row is None:
            index = self._stack[-1].row
            self.state.failed_row = index
            self.rows[index].failed = True
        if self._modules_on_stack:
            self.state.failed_module = self._modules_on_stack[-1]
        self._stack.clear()
        self._modules_on_stack.clear()

    @property
    def total_flops(self) -> int:
        return self._flops_now()


class _RecordFunctions(TorchFunctionMode):
    def __init__(self, tracer: ShapeTracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if func in _FACTORIES and kwargs.get("device") is None:
            kwargs["device"] = "meta"
        return self.tracer.record_function(func, args, kwargs)


_FACTORIES = frozenset(_device_constructors())
_NATIVE_BATCH_NORM = torch.ops.aten.native_batch_norm.default


class FlopCounter(TorchDispatchMode):
    """FLOPs with the formulas of ``torch.utils.flop_counter`` (the ones FlopCounterMode uses).

    FlopCounterMode itself also tracks modules and tries to decompose every op it has no
    formula for (batch norm into a dozen prims…), which costs more than the trace itself;
    the tracer attributes FLOPs to rows itself, so only the running total is needed. Tests
    check the totals against FlopCounterMode on every preset.
    """

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = None
        if func is _NATIVE_BATCH_NORM:
            out = eval_batch_norm_on_meta(*args, **kwargs)
        if out is None:
            out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += int(_flops(formula, args, kwargs, out))
        return out


_SHAPE_WRAPPER_CODE = shape_wrapper(lambda: None).__code__


def _flops(formula: Callable[..., Any], args: tuple, kwargs: dict, out: Any) -> Any:
    """``formula(*args, **kwargs, out_val=out)``, with the tensors' shapes mapped directly.

    Most formulas are wrapped by ``shape_wrapper``, which maps tensors to shapes with a
    pytree ``tree_map`` over everything (slow for the many small calls of a trace); plain
    tuples, lists and dicts are mapped here instead, and anything else takes the wrapper's
    own path.
    """
    if getattr(formula, "__code__", None) is not _SHAPE_WRAPPER_CODE:
        return formula(*args, **kwargs, out_val=out)
    try:
        shape_args = _shapes_of(args)
        shape_kwargs = _shapes_of(kwargs)
        out_shape = _shapes_of(out)
    except _NotPlain:
        return formula(*args, **kwargs, out_val=out)
    return formula.__wrapped__(*shape_args, out_shape=out_shape, **shape_kwargs)


class _NotPlain(Exception):
    pass


def _shapes_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.shape
    if type(value) is tuple or type(value) is list:
        return type(value)(_shapes_of(item) for item in value)
    if type(value) is dict:
        return {key: _shapes_of(item) for key, item in value.items()}
    if value is None or type(value) in _SCALARS:
        return value
    raise _NotPlain


def eval_batch_norm_on_meta(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """What ``aten.native_batch_norm`` returns in eval mode on meta, without running it.

    Its meta kernel is PyTorch's Python decomposition (a dozen elementwise prims per call):
    most of the time of a trace of a model with batch norm, for an output that is always
    shaped and laid out like the input. The result is built directly (same shapes, strides
    and dtypes as the decomposition, checked per preset by the tests) only when every
    statistic has exactly one value per channel; anything else goes to the real kernel, so a
    wrong ``num_features`` still raises PyTorch's own error.
    """
    if training or input.device.type != "meta" or input.dim() < 2:
        return None
    if running_mean is None or running_var is None:
        return None
    channels = input.shape[1]
    for tensor in (weight, bias, running_mean, running_var):
        if tensor is not None and (
            tensor.device.type != "meta" or tensor.dim() != 1 or tensor.shape[0] != channels
        ):
            return None
    computation = get_computation_dtype(input.dtype)
    return (
        torch.empty_like(input),
        running_mean.new_empty((channels,), dtype=computation),
        running_var.new_empty((channels,), dtype=computation),
    )


def user_line_of(exc: BaseException, user_files: frozenset[str]) -> int | None:
    """The deepest line of the pasted source in the traceback of ``exc``."""
    line = None
    for frame_summary in traceback.extract_tb(exc.__traceback__):
        if frame_summary.filename in user_files:
            line = frame_summary.lineno
    return line
