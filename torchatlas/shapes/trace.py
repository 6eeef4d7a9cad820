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

import dataclasses
import functools
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch._prims_common import get_computation_dtype
from torch.nn.parameter import UninitializedParameter
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry, shape_wrapper

from torchatlas.modelcode import MOVE_CALLS, DeviceLog, op_label
from torchatlas.shapes.report import (
    DeviceMove,
    LayerRow,
    MoveKind,
    MovePhase,
    RowKind,
    Shape,
    SymbolicShape,
)

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
    """Every tensor in ``value``, in pytree order (the tracer asks for every call it records).

    Beyond what pytree opens (tuples, lists, dicts, namedtuples), plain objects that hold
    tensors are opened too: dataclass fields, and the attributes of an object of a class of
    the model's own (``Out(logits=..., hidden=...)``), so a model returning its tensors in one
    shows them."""
    found: list[torch.Tensor] = []
    _collect_tensors(value, found, None, 0)
    return found


def named_tensors_in(value: Any) -> list[tuple[str, torch.Tensor]]:
    """:func:`tensors_in` with where each tensor sits: ``""`` for ``value`` itself,
    ``[0]``, ``["logits"]``, ``.hidden``, ``[1].attention``…"""
    found: list[tuple[str, torch.Tensor]] = []
    _collect_tensors(value, found, "", 0)
    return found


MAX_WALK_DEPTH = 32  # nesting opened when looking for tensors (a cycle stops here too)
MAX_KEY_TEXT = 40


def _key_text(key: Any) -> str:
    if type(key) in (str, int, bool, float):
        text = repr(key)
        return text if len(text) <= MAX_KEY_TEXT else text[: MAX_KEY_TEXT - 1] + "…"
    return "…"


def _collect_tensors(value: Any, found: list, path: str | None, depth: int) -> None:
    # Plain tuples, lists and dicts are walked directly: pytree's generic walk is much slower
    # for them, and they are nearly every argument a layer receives. ``path`` is None when
    # only the tensors are wanted (the hot path), else the text of where ``value`` sits.
    if isinstance(value, torch.Tensor):
        found.append(value if path is None else (path, value))
        return
    kind = type(value)
    if value is None or kind in _SCALARS or depth > MAX_WALK_DEPTH:
        return
    depth += 1
    if kind is tuple or kind is list:
        for index, item in enumerate(value):
            _collect_tensors(item, found, None if path is None else f"{path}[{index}]", depth)
    elif kind is dict:
        for key, item in value.items():
            _collect_tensors(item, found, None if path is None else f"{path}[{_key_text(key)}]",
                             depth)  # fmt: skip
    else:
        for name, item in _children(value):
            _collect_tensors(item, found, None if path is None else path + name, depth)


def _children(value: Any) -> list[tuple[str, Any]]:
    """The parts of a container or plain object that may hold tensors, with their path text;
    ``[]`` for anything else (modules, classes, functions, numbers…)."""
    fields = getattr(type(value), "_fields", None)
    if isinstance(value, tuple) and isinstance(fields, tuple):  # a namedtuple
        return [(f".{name}", item) for name, item in zip(fields, value, strict=False)]
    if isinstance(value, tuple | list):
        return [(f"[{index}]", item) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return [(f"[{_key_text(key)}]", item) for key, item in value.items()]
    if isinstance(value, _OPAQUE) or not hasattr(type(value), "__module__"):
        return []
    if dataclasses.is_dataclass(value):
        return [(f".{item.name}", getattr(value, item.name, None))
                for item in dataclasses.fields(value)]  # fmt: skip
    leaves = tree_leaves(value)  # containers registered with pytree (torch's own among them)
    if not (len(leaves) == 1 and leaves[0] is value):
        return [(f"[{index}]", leaf) for index, leaf in enumerate(leaves)]
    if type(value).__module__ in _LIBRARY_MODULES or type(value).__module__.startswith(
        _LIBRARY_PREFIXES
    ):
        return []
    attributes = getattr(value, "__dict__", None)
    if type(attributes) is dict:  # a plain object of the model's own classes
        return [(f".{name}", item) for name, item in attributes.items() if type(name) is str]
    return []


_SCALARS = frozenset({int, float, bool, str, complex, torch.dtype, torch.device, torch.Size})
# Objects never opened: modules (their parameters are not outputs), classes, functions.
_OPAQUE = (nn.Module, type, types.FunctionType, types.MethodType, types.ModuleType,
           types.BuiltinFunctionType, functools.partial)  # fmt: skip
_LIBRARY_MODULES = frozenset({"builtins"})
_LIBRARY_PREFIXES = ("torch.", "torchvision.", "typing", "collections", "functools", "numpy")


# ---------------------------------------------------------------------------- memory
def storage_key(tensor: torch.Tensor) -> int | None:
    """Which storage ``tensor`` views (the same number for a view, an in-place result and the
    tensor itself; meta tensors have storages too, without data), or None when it has none
    to ask."""
    try:
        return int(tensor.untyped_storage()._cdata)
    except Exception:  # a tensor subclass or a sparse layout: no plain storage
        return None


def storages_of(value: Any) -> frozenset[int]:
    keys = (storage_key(tensor) for tensor in tensors_in(value))
    return frozenset(key for key in keys if key is not None)


def _tensor_bytes(tensor: torch.Tensor) -> int:
    numel = 1
    for size in tensor.shape:
        numel *= int(size)
    return numel * tensor.element_size()


def _storage_bytes(tensor: torch.Tensor) -> int:
    """The bytes of the storage ``tensor`` views (what a real run would allocate for it)."""
    try:
        return int(tensor.untyped_storage().nbytes())
    except Exception:
        return _tensor_bytes(tensor)


# ---------------------------------------------------------------------------- real kernels
# Elements (inputs and outputs together) up to which an op is re-run on real tensors of its
# own shapes; a larger op is re-run on tensors of its own ranks with every size 1.
MAX_REAL_CHECK_ELEMENTS = 1 << 20


class RealForwardError(RuntimeError):
    """A real forward would stop here although meta did not: torch's real kernel refused
    the op's mix of floating dtypes, and accepted the same op with one dtype throughout.
    The message is torch's own; ``dtypes`` what the op mixed, ``works`` a dtype it ran with,
    ``op`` the aten op."""

    def __init__(self, message: str, *, dtypes: list[str], works: str, op: str) -> None:
        super().__init__(message)
        self.dtypes, self.works, self.op = dtypes, works, op


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _floating_dtypes(args: tuple, kwargs: dict) -> dict[torch.dtype, int]:
    """The floating (and complex) dtypes of the op's tensors, with how many hold each."""
    dtypes: dict[torch.dtype, int] = {}
    for value in (*args, *kwargs.values()):
        items = value if type(value) in (list, tuple) else (value,)
        for item in items:
            if isinstance(item, torch.Tensor) and (item.is_floating_point() or item.is_complex()):
                dtypes[item.dtype] = dtypes.get(item.dtype, 0) + 1
    return dtypes


def _real_twin(tensor: torch.Tensor, full: bool, dtype: torch.dtype | None) -> torch.Tensor:
    """A CPU tensor of zeros standing for the meta ``tensor``: the same sizes and strides
    (``full``), else the same rank with every size 1; in ``dtype`` when given (a floating
    tensor of the control run)."""
    dtype = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
    if not full:
        return torch.zeros([1] * tensor.dim(), dtype=dtype)
    if any(size == 0 for size in tensor.shape):
        return torch.zeros(tensor.shape, dtype=dtype)
    pairs = zip(tensor.shape, tensor.stride(), strict=True)
    span = 1 + sum((size - 1) * stride for size, stride in pairs)
    return torch.zeros(span, dtype=dtype).as_strided(tuple(tensor.shape), tensor.stride())


def _real_args(value: Any, full: bool, dtype: torch.dtype | None) -> Any:
    if isinstance(value, torch.Tensor):
        return _real_twin(value, full, dtype) if value.device.type == "meta" else value
    if type(value) in (list, tuple):
        return type(value)(_real_args(item, full, dtype) for item in value)
    if type(value) is dict:
        return {key: _real_args(item, full, dtype) for key, item in value.items()}
    if isinstance(value, torch.device) and value.type == "meta":
        return torch.device("cpu")
    return value


def _elements(value: Any) -> int:
    return sum(_tensor_bytes(t) // max(t.element_size(), 1) for t in tensors_in(value))


class RealKernelCheck(TorchDispatchMode):
    """What a real forward checks and meta does not: dtypes.

    Meta kernels compute shapes and an output dtype but skip most of the checks real kernels
    make: an ``addmm`` of a float16 input by float32 weights runs on meta (and says float32)
    where the CPU kernel raises. Each op whose tensors mix floating dtypes is therefore run
    again by torch on real CPU tensors of zeros with those very dtypes (its own shapes when
    small, else every size 1). If the real kernel raises, and accepts the same op with one of
    those dtypes throughout, the forward stops there with :class:`RealForwardError` carrying
    torch's own words. If it runs, its outputs' dtypes replace meta's (so memory is counted
    at the element size a real run has). Anything else (the real op refuses for another
    reason too) leaves meta's answer as it is.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        dtypes = _floating_dtypes(args, kwargs)
        if len(dtypes) < 2 or not _on_meta(args, kwargs):
            return out
        full = _elements((args, kwargs)) + _elements(out) <= MAX_REAL_CHECK_ELEMENTS
        try:
            real = _run_real(func, args, kwargs, full, None)
        except Exception as exc:
            # the dtype most of its tensors have first (the default one on a tie)
            default = torch.get_default_dtype()
            for dtype in sorted(dtypes, key=lambda d: (-dtypes[d], d != default, str(d))):
                try:
                    _run_real(func, args, kwargs, full, dtype)
                except Exception:
                    continue
                names = sorted(_dtype_name(d) for d in dtypes)
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise RealForwardError(
                    f"{type(exc).__name__}: {text}"[:1000],
                    dtypes=names,
                    works=_dtype_name(dtype),
                    op=str(func.name()),
                ) from None
            return out
        return _with_real_dtypes(out, real, args, kwargs)


def _on_meta(args: tuple, kwargs: dict) -> bool:
    return any(t.device.type == "meta" for t in tensors_in((args, kwargs)))


def _run_real(func: Any, args: tuple, kwargs: dict, full: bool, dtype: torch.dtype | None) -> Any:
    """``func`` on real CPU stand-ins of its meta tensors, with every mode and the function
    mode's meta default out of the way."""
    with _disable_current_modes(), torch._C.DisableTorchFunction():
        return func(*_real_args(args, full, dtype), **_real_args(kwargs, full, dtype))


def _with_real_dtypes(out: Any, real: Any, args: tuple, kwargs: dict) -> Any:
    """``out`` with each new output tensor in the dtype the real kernel gave it (an output
    that is one of the inputs, an in-place result, keeps its own)."""
    metas, reals = tensors_in(out), tensors_in(real)
    if len(metas) != len(reals) or all(
        m.dtype == r.dtype for m, r in zip(metas, reals, strict=True)
    ):
        return out
    inputs = {id(t) for t in tensors_in((args, kwargs))}
    swap = {
        id(m): torch.empty_strided(m.shape, m.stride(), dtype=r.dtype, device="meta")
        for m, r in zip(metas, reals, strict=True)
        if m.dtype != r.dtype and id(m) not in inputs
    }
    if not swap:
        return out
    if isinstance(out, torch.Tensor):
        return swap.get(id(out), out)
    if type(out) in (list, tuple):
        return type(out)(swap.get(id(t), t) if isinstance(t, torch.Tensor) else t for t in out)
    return out


def is_builtin_layer(module: nn.Module) -> bool:
    """Layers that ship with torch.nn: their internal calls are the layer, not separate rows."""
    return type(module).__module__.startswith("torch.nn.")


def _unique_parameters(module: nn.Module) -> list[nn.Parameter]:
    """``module.parameters()`` (each parameter once, by identity, as torch yields them), less
    those a lazy module has not materialised yet (they have no size)."""
    return [p for p in module.parameters() if not isinstance(p, UninitializedParameter)]


# ---------------------------------------------------------------------------- devices
def device_moves(log: DeviceLog) -> list[DeviceMove]:
    """The moves ``log`` noted (:class:`torchatlas.modelcode.DeviceLog`), as the report's rows."""
    return [
        DeviceMove(MoveKind(kind), MovePhase(phase), call, device, line, layer, count)
        for (kind, phase, call, device, line, layer), count in log.counts.items()
    ]


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
    shared_params: int = 0
    shared_with: str | None = None

    def freeze(self) -> LayerRow:
        return LayerRow(
            self.name, self.type, self.kind, self.depth, self.input_shapes, self.output_shapes,
            self.params, self.trainable_params, self.flops, self.activation_bytes, self.leaf,
            self.line, self.failed, self.symbolic_output_shapes, self.constraints,
            self.shared_params, self.shared_with,
        )  # fmt: skip


@dataclass
class _Frame:
    row: int
    flops_at_start: int
    # What the call received: its arguments (for a re-trace of a failed layer) and the
    # storages they hold (an output sharing one is a view or an in-place result, not new).
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    storages: frozenset[int] = frozenset()
    module: nn.Module | None = None


@dataclass
class TraceState:
    """What a failed forward left behind: the rows so far and where it stopped."""

    rows: list[TraceRow] = field(default_factory=list)
    failed_row: int | None = None
    failed_module: nn.Module | None = None
    failed_op: str | None = None
    # The failed module's arguments (meta tensors), so a suggested fix can be re-traced.
    failed_args: tuple = ()
    failed_kwargs: dict = field(default_factory=dict)


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
        moves: DeviceLog | None = None,
    ) -> None:
        self.model = model
        # Ask the real (CPU) kernel about ops mixing floating dtypes (:class:`RealKernelCheck`):
        # on for the concrete pass, off for the symbolic one (fake tensors, shapes only).
        self.check_real = size_of is int
        # Device moves in forward stay on meta and are noted here (a log of its own if none).
        self.moves = moves if moves is not None else DeviceLog(user_files)
        self.size_of = size_of
        self.count_flops = count_flops
        self.user_files = user_files
        # Called with a row index whenever work inside that row ends (symbolic pass: guards).
        self.on_boundary = on_boundary
        self.state = TraceState()
        self._names = {id(module): name for name, module in model.named_modules()}
        # Class names as built: a lazy module becomes its eager class (LazyLinear → Linear)
        # when its first call materialises it, but the code says LazyLinear.
        self._types = {id(module): type(module).__name__ for module in model.modules()}
        self._row_modules: dict[int, nn.Module] = {}  # row index → the module it calls
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

    def _new_bytes(
        self, value: Any, storages: frozenset[int], module: nn.Module | None = None
    ) -> int:
        """Bytes of the new memory the tensors in ``value`` hold: each storage once, and none
        that the call received (``storages``: a view or an in-place result shares its
        input's memory) or that ``module`` already holds (its parameters and buffers)."""
        if self.size_of is not int:  # symbolic sizes: bytes come from the concrete pass
            return 0
        seen = set(storages)
        held: set[int] | None = None
        total = 0
        for tensor in tensors_in(value):
            key = storage_key(tensor)
            if key is None:  # no storage to ask (a tensor subclass): its own elements
                total += _tensor_bytes(tensor)
                continue
            if key in seen:
                continue
            if module is not None:
                if held is None:
                    held = {storage_key(t) for t in (*module.parameters(), *module.buffers())
                            if not isinstance(t, UninitializedParameter)}  # fmt: skip
                if key in held:
                    continue
            seen.add(key)
            total += _storage_bytes(tensor)
        return total

    def count_parameters(self) -> None:
        """Each module row's parameters, counted once the forward pass is over.

        Counted afterwards because a lazy module (``nn.LazyLinear``) has parameters of no
        size until its first call materialises them. A row counts its module's parameters,
        sub-layers included, by identity; a parameter that an earlier row outside this row's
        own parents already counted (a tied weight, a layer called twice) is not counted
        again: it is ``shared_params``, with ``shared_with`` naming the row that has it. So
        the rows of one level add up to the model's total, however weights are shared.
        Parameters still unmaterialised (a forward pass that stopped first) have no size
        and are left out.
        """
        counted_by: dict[int, int] = {}  # parameter id → the deepest row that counted it
        open_rows: list[int] = []  # the module rows enclosing the current one
        for index, row in enumerate(self.rows):
            module = self._row_modules.get(index)
            if module is None:
                continue
            while open_rows and self.rows[open_rows[-1]].depth >= row.depth:
                open_rows.pop()
            parents = set(open_rows)
            for parameter in _unique_parameters(module):
                size = parameter.numel()
                owner = counted_by.get(id(parameter))
                if owner is None or owner in parents:
                    counted_by[id(parameter)] = index
                    row.params += size
                    row.trainable_params += size if parameter.requires_grad else 0
                else:
                    row.shared_params += size
                    if row.shared_with is None:
                        row.shared_with = self.rows[owner].name or type(self.model).__name__
            open_rows.append(index)

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

    def _open_row(self, row: TraceRow, args: tuple, kwargs: dict, module: nn.Module) -> None:
        self._claim(self._current_row())
        index = self._append_row(row)
        storages = storages_of((args, kwargs)) if self.size_of is int else frozenset()
        self._stack.append(_Frame(index, self._flops_now(), args, kwargs, storages, module))

    def _close_row(self, output: Any) -> None:
        frame = self._stack.pop()
        row = self.rows[frame.row]
        row.output_shapes = self._shapes(output)
        row.activation_bytes = self._new_bytes(output, frame.storages, frame.module)
        row.flops = self._flops_now() - frame.flops_at_start
        self._claim(frame.row)

    # ------------------------------------------------------------------ hooks
    def _pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        # Hooks run inside the function mode: without this, each .shape the tracer reads
        # would be intercepted as if the model had called it, and cost a recorded call.
        with torch._C.DisableTorchFunction():
            self._modules_on_stack.append(module)
            self._open_row(
                TraceRow(
                    name=self._names.get(id(module), type(module).__name__),
                    type=self._types.get(id(module), type(module).__name__),
                    kind=RowKind.MODULE,
                    depth=len(self._modules_on_stack) - 1,
                    input_shapes=self._shapes((args, kwargs)),
                    line=self._user_line(),
                ),
                args,
                kwargs,
                module,
            )
            self._row_modules[len(self.rows) - 1] = module

    def _post_hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        with torch._C.DisableTorchFunction():
            self._close_row(output)
            self._modules_on_stack.pop()

    def record_function(
        self,
        func: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        call: tuple[Callable[..., Any], tuple, dict] | None = None,
    ) -> Any:
        """Called by the function mode for every torch function; records the interesting ones.
        ``call`` is what runs in ``func``'s place (a device move kept on meta)."""
        owner = self._modules_on_stack[-1] if self._modules_on_stack else None
        name = getattr(func, "__name__", "")
        target, args, kwargs = call if call is not None else (func, args, kwargs)
        if owner is None or is_builtin_layer(owner) or name in _METADATA_OPS:
            return target(*args, **kwargs)
        if name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") in {
            "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "data", "grad",
            "layout", "names", "is_meta", "_base", "real", "imag", "grad_fn", "is_leaf",
        }:  # fmt: skip
            return target(*args, **kwargs)
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
            output = target(*args, **kwargs)
        except BaseException:
            row.failed = True
            self.state.failed_row = self._append_row(row)
            self.state.failed_op = label
            raise
        if not tensors_in(output):  # e.g. arithmetic on sizes: not a layer of the model
            return output
        row.output_shapes = self._shapes(output)
        if self.size_of is int:
            row.activation_bytes = self._new_bytes(output, storages_of((args, kwargs)))
        row.flops = self._flops_now() - flops_at_start
        self._claim(self._append_row(row))
        return output

    # ------------------------------------------------------------------ run
    @contextmanager
    def attached(self) -> Iterator[ShapeTracer]:
        handles = []
        try:
            for module in self.model.modules():
                # First of the module's pre-hooks: a lazy module's own pre-hook materialises its
                # parameters, and that work belongs inside its row, not its parent's.
                handles.append(
                    module.register_forward_pre_hook(self._pre_hook, with_kwargs=True, prepend=True)
                )
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
            if self.check_real:  # innermost: sees each op as the model's code issued it
                stack.enter_context(RealKernelCheck())
            # The function mode also plays torch.device("meta") (factories without a device
            # land on meta): one Python mode per torch call instead of two.
            stack.enter_context(_RecordFunctions(self))
            self.moves.phase = MovePhase.FORWARD.value
            try:
                return self.model(*inputs)
            except BaseException:
                self._mark_failure()
                raise
            finally:
                self.moves.phase = MovePhase.BUILD.value
                if self.size_of is int:  # the symbolic pass only adds formulas
                    self.count_parameters()

    def _mark_failure(self) -> None:
        if self._stack and self.state.failed_row is None:
            frame = self._stack[-1]
            index = frame.row
            self.state.failed_row = index
            self.rows[index].failed = True
            self.state.failed_args, self.state.failed_kwargs = frame.args, frame.kwargs
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
        if func in MOVE_CALLS or kwargs.get("device") is not None:
            tracer = self.tracer
            layer = tracer._names.get(id(tracer._modules_on_stack[-1]), "") if (
                tracer._modules_on_stack
            ) else ""  # fmt: skip
            call = tracer.moves.redirect(func, args, kwargs, layer)
            return tracer.record_function(func, args, kwargs, call)
        if func in _FACTORIES:
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
