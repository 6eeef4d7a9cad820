"""How a pasted model is found, built and kept on meta: the rules the shape explorer and the
module room share (both run them inside a sandbox worker, on the namespace the pasted source
defined; trusted code, the model's code is not).

- :func:`parse_constructor`: the model box ("ResNetGenerator(3, n_blocks=6)") read without
  ``eval``: a name and literal arguments.
- :func:`find_model`: the callable that builds the model (the named one, or the last
  ``nn.Module`` class the source defines), its arguments checked against its signature.
- :func:`build_on_meta`: the model built under ``torch.device("meta")``, initialisers skipped
  on meta, device moves (``.cuda()``, ``.to(device)``, ``device="cuda"``) kept on meta and
  noted in a :class:`DeviceLog`, real tensors made despite the default device moved to meta.

A failure is a :class:`ModelCodeError`: a :class:`ModelCode` and parameters, never a
sentence. Both rooms have a text for each code under ``<room>.errors.<code>``, and each
re-raises it as its own coded error (the code's value is the same in both rooms).

>>> name, args, kwargs = parse_constructor("Net(3, width=8)")
>>> (name, args, kwargs)
('Net', [3], {'width': 8})
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch
from torch import nn
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter
from torch.overrides import TorchFunctionMode

MAX_MODEL_CHARS = 500  # the model box; honest constructors are a few dozen characters
MAX_MOVES = 64  # distinct device-move notes a log keeps (one per call site)
_BUILDERS_WITH_WEIGHTS = ("weights", "pretrained", "weights_backbone")


class ModelCode(StrEnum):
    """Why a pasted model could not be found or built (both rooms' ``errors.<value>``)."""

    MODEL_TOO_LONG = "model_too_long"
    BAD_CONSTRUCTOR = "bad_constructor"
    MODEL_NOT_FOUND = "model_not_found"
    NO_MODULE = "no_module"
    WEIGHTS_NOT_NEEDED = "weights_not_needed"
    CONSTRUCTOR_ARGS = "constructor_args"
    CONSTRUCTOR_ERROR = "constructor_error"
    NOT_A_MODULE = "not_a_module"


class ModelCodeError(Exception):
    """A pasted model that could not be found or built: ``code``, the parameters its texts
    need, and the line of the pasted source it points at (None: no line of the source)."""

    def __init__(self, code: ModelCode, line: int | None = None, **params: Any) -> None:
        super().__init__(code.value)
        self.code = ModelCode(code)
        self.line = line
        self.params = params


def _fail(code: ModelCode, line: int | None = None, **params: Any) -> ModelCodeError:
    return ModelCodeError(code, line, **params)


def detail(exc: BaseException) -> str:
    """An exception as PyTorch or Python wrote it: a detail the page shows beside our text."""
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------- the model box
def parse_constructor(
    text: str, *, max_chars: int | None = MAX_MODEL_CHARS
) -> tuple[str, list[Any], dict[str, Any]]:
    """``"ResNetGenerator(3, 3, n_blocks=6)"`` → name, literal args, literal kwargs (no eval).

    Text longer than ``max_chars`` is refused (``model_too_long``) before it is parsed."""
    if max_chars is not None and len(text) > max_chars:
        raise _fail(ModelCode.MODEL_TOO_LONG, length=f"{len(text):,}", limit=f"{max_chars:,}")
    # Deep nesting makes Python's parser give up with RecursionError or MemoryError (its own
    # stack, not the process's memory): that is a malformed call like any other.
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _fail(ModelCode.BAD_CONSTRUCTOR, text=text) from None
    if isinstance(node, ast.Name):
        return node.id, [], {}
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise _fail(ModelCode.BAD_CONSTRUCTOR, text=text)
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise _fail(ModelCode.BAD_CONSTRUCTOR, text=text) from None
    if any(kw.arg is None for kw in node.keywords):  # **kwargs
        raise _fail(ModelCode.BAD_CONSTRUCTOR, text=text)
    return node.func.id, args, kwargs


# ---------------------------------------------------------------------------- finding and building
def is_user_module_class(value: Any) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, nn.Module)
        and not (value.__module__ or "").startswith(("torch", "torchvision"))
    )


def user_files_of(namespace: dict[str, Any]) -> frozenset[str]:
    """Filenames of code compiled from the pasted source (not files on disk)."""
    files: set[str] = set()

    def add(function: Any) -> None:
        code = getattr(function, "__code__", None)
        if code is not None and not os.path.exists(code.co_filename):
            files.add(code.co_filename)

    for value in namespace.values():
        if inspect.isfunction(value):
            add(value)
        elif is_user_module_class(value):
            for attribute in vars(value).values():
                add(attribute)
                add(getattr(attribute, "fget", None))
    return frozenset(files)


def user_def_line(function: Any, user_files: frozenset[str]) -> int | None:
    """The ``def`` line of ``function`` when the pasted source defines it (None otherwise)."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is not None and code.co_filename in user_files:
        return code.co_firstlineno
    return None


def method_line(owner: type, name: str, user_files: frozenset[str]) -> int | None:
    """The line of the first ``name`` method in ``owner``'s MRO, if the pasted source has it."""
    for klass in getattr(owner, "__mro__", ()):
        if name in vars(klass):
            return user_def_line(vars(klass)[name], user_files)
    return None


def _signature_text(name: str, target: Any) -> str:
    try:
        return f"{name}{inspect.signature(target)}"
    except (TypeError, ValueError):
        return f"{name}(…)"


def find_model(
    namespace: dict[str, Any], model: str | None, user_files: frozenset[str] = frozenset()
) -> tuple[Callable[..., Any], list[Any], dict[str, Any], str]:
    """The callable that builds the model, its arguments, and a label for it."""
    if model and model.strip():
        name, args, kwargs = parse_constructor(model)
        target = namespace.get(name)
        if target is None or not callable(target) or name.startswith("_"):
            available = [key for key, value in namespace.items() if is_user_module_class(value)]
            raise _fail(ModelCode.MODEL_NOT_FOUND, name=name, available=", ".join(available) or "—")
        label = model.strip()
    else:
        classes = [(key, value) for key, value in namespace.items() if is_user_module_class(value)]
        if not classes:
            raise _fail(ModelCode.NO_MODULE)
        name, target = classes[-1]
        args, kwargs = [], {}
        label = f"{name}()"
    for key in _BUILDERS_WITH_WEIGHTS:
        if kwargs.get(key) not in (None, False):
            raise _fail(ModelCode.WEIGHTS_NOT_NEEDED, argument=key)
    try:
        inspect.signature(target).bind(*args, **kwargs)
    except TypeError as exc:
        raise _fail(
            ModelCode.CONSTRUCTOR_ARGS,
            # Point at the ``def __init__`` (or builder ``def``) whose arguments are missing.
            line=(
                method_line(target, "__init__", user_files)
                if isinstance(target, type)
                else user_def_line(target, user_files)
            ),
            signature=_signature_text(name, target),
            example=_example_call(name, target),
            detail=str(exc),
        ) from None
    except ValueError:  # builtins without a signature: let the call itself decide
        pass
    return target, args, kwargs, label


def _example_call(name: str, target: Any) -> str:
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return f"{name}(…)"
    required = [
        f"{parameter.name}=…"
        for parameter in parameters
        if parameter.default is inspect.Parameter.empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    return f"{name}({', '.join(required)})"


# The in-place initialisers of torch.nn.init (kaiming_normal_, uniform_, zeros_, ...).
META_INIT_FUNCTIONS = tuple(
    name
    for name in dir(nn.init)
    if name.endswith("_") and not name.startswith("_") and callable(getattr(nn.init, name))
)


@contextlib.contextmanager
def meta_initialisers_skipped() -> Iterator[None]:
    """Initialisers return meta tensors untouched while a model is built.

    A meta tensor has no values, so initialising one computes nothing a shape summary can
    use, yet it costs most of a model's construction (each init op goes through the
    dispatcher, for every parameter). Real tensors are still initialised, so a notebook
    thread building a real model meanwhile is unaffected.
    """

    def skip_on_meta(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def initialise(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
            return original(tensor, *args, **kwargs)

        return initialise

    saved = {name: getattr(nn.init, name) for name in META_INIT_FUNCTIONS}
    try:
        for name, original in saved.items():
            setattr(nn.init, name, skip_on_meta(original))
        yield
    finally:
        for name, original in saved.items():
            setattr(nn.init, name, original)


def build_on_meta(
    target: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], label: str,
    user_files: frozenset[str] = frozenset(), moves: DeviceLog | None = None,
) -> nn.Module:  # fmt: skip
    """The model built on meta; device moves and placements in its ``__init__``
    (``.to(device)``, ``.cuda()``, ``device="cuda"``) stay on meta, noted in ``moves``."""
    moves = moves if moves is not None else DeviceLog(user_files)
    try:
        with meta_initialisers_skipped(), torch.device("meta"), KeepOnHome(moves):
            built = target(*args, **kwargs)
    except Exception as exc:
        raise _fail(
            ModelCode.CONSTRUCTOR_ERROR,
            line=user_line_of(exc, user_files),
            model=label,
            detail=detail(exc),
        ) from None
    if not isinstance(built, nn.Module):
        raise _fail(ModelCode.NOT_A_MODULE, model=label, got=type(built).__name__)
    _real_tensors_to_meta(built)
    return built


def _real_tensors_to_meta(model: nn.Module) -> None:
    """Tensors the model holds that were made with data despite ``torch.device("meta")``, now
    on meta, ties kept (one meta tensor per real one).

    The legacy constructors (``torch.FloatTensor(3, 2)``, as in the classic from-scratch
    linear layer) ignore the default device, and so does a tensor made outside the class: on
    the CPU beside meta parameters, the forward pass would stop at the first op mixing them.
    Only where data lives changes; shapes, dtypes, requires_grad and sharing stay.
    """
    converted: dict[int, torch.Tensor] = {}

    def on_meta(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in converted:
            moved = tensor.detach().to("meta")
            if isinstance(tensor, nn.Parameter):
                moved = nn.Parameter(moved, requires_grad=tensor.requires_grad)
            converted[id(tensor)] = moved
        return converted[id(tensor)]

    def real(value: Any) -> bool:
        return (
            isinstance(value, torch.Tensor)
            and not isinstance(value, UninitializedParameter | UninitializedBuffer)
            and not value.is_meta
        )

    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if real(tensor):
                    table[name] = on_meta(tensor)
        for name, value in list(vars(module).items()):
            if real(value):
                object.__setattr__(module, name, on_meta(value))


def user_line_of(exc: BaseException, user_files: frozenset[str]) -> int | None:
    """The deepest line of the pasted source in the traceback of ``exc``."""
    line = None
    for frame_summary in traceback.extract_tb(exc.__traceback__):
        if frame_summary.filename in user_files:
            line = frame_summary.lineno
    return line


# ---------------------------------------------------------------------------- device moves
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


MOVE_CALLS = {
    torch.Tensor.to: "Tensor.to",
    torch.Tensor.cuda: "Tensor.cuda",
    torch.Tensor.cpu: "Tensor.cpu",
}
_MODULE_FILE = nn.Module._apply.__code__.co_filename  # torch/nn/modules/module.py
_MODULE_MOVES = frozenset({"to", "cuda", "cpu", "to_empty", "xpu", "mps", "ipu"})
_META = torch.device("meta")


def _device_of(value: Any) -> torch.device | None:
    """``value`` as a device: "cuda:1", 0 (a CUDA index, as torch reads it), a device."""
    if value is None:
        return None
    try:
        return value if isinstance(value, torch.device) else torch.device(value)
    except (RuntimeError, TypeError, ValueError):
        return None  # torch's own call will say what is wrong with it


@dataclass
class DeviceLog:
    """Where the model's code sends tensors, while the analysis keeps them all on meta.

    A device move (``.to(device)``, ``.cuda()``, ``.cpu()``, ``model.to(device)``) or a tensor
    created for a device (``torch.zeros(…, device="cuda")``) changes where data would live,
    never a shape. On meta there is no data to move, and a real device must never be
    reached from the sandbox, so each such call is rewritten to stay on meta (any dtype
    conversion it asks for still happens) and noted: the report says where the tensors
    would have gone.
    """

    user_files: frozenset[str] = frozenset()
    phase: str = "build"  # "build" while __init__ runs, "forward" during the forward pass
    # Where tensors stay: meta for the analysis; the CPU where "why meta?" runs a real model.
    home: torch.device = _META
    # (kind: "move" or "create", phase, call, device, line, layer) → how many tensors
    counts: dict[tuple[str, str, str, str, int | None, str], int] = field(default_factory=dict)

    def _note(self, kind: str, label: str, device: torch.device, layer: str) -> None:
        line, call = None, label
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename == _MODULE_FILE and code.co_name in _MODULE_MOVES:
                call = f"Module.{code.co_name}"  # model.to(device): one call, many tensors
            if code.co_filename in self.user_files:
                line = frame.f_lineno
                break
            frame = frame.f_back
        key = (kind, self.phase, call, str(device), line, layer)
        if key in self.counts or len(self.counts) < MAX_MOVES:
            self.counts[key] = self.counts.get(key, 0) + 1

    def redirect(
        self, func: Callable[..., Any], args: tuple, kwargs: dict, layer: str = ""
    ) -> tuple[Callable[..., Any], tuple, dict]:
        """The call to make instead of ``func(*args, **kwargs)`` so that it stays on meta."""
        label = MOVE_CALLS.get(func)
        if label is not None:
            return self._redirect_move(func, label, args, kwargs, layer)
        device = _device_of(kwargs.get("device"))
        if device is None or device.type in ("meta", self.home.type):
            return func, args, kwargs
        self._note("create", op_label(func), device, layer)
        return func, args, {**kwargs, "device": self.home}

    def _redirect_move(
        self, func: Callable[..., Any], label: str, args: tuple, kwargs: dict, layer: str
    ) -> tuple[Callable[..., Any], tuple, dict]:
        tensor = args[0] if args else None
        if not isinstance(tensor, torch.Tensor):
            return func, args, kwargs
        options = dict(kwargs)
        copy = bool(options.pop("copy", False))
        if func is torch.Tensor.to:
            try:
                device, dtype, _, memory_format = torch._C._nn._parse_to(*args[1:], **options)
            except (TypeError, RuntimeError, ValueError):
                return func, args, kwargs  # torch's own call raises its own error
        elif func is torch.Tensor.cuda:
            index = options.get("device", args[1] if len(args) > 1 else None)
            device = torch.device("cuda", index) if isinstance(index, int) else (
                _device_of(index) or torch.device("cuda")
            )  # fmt: skip
            dtype, memory_format = None, options.get("memory_format")
        else:
            device, dtype, memory_format = torch.device("cpu"), None, options.get("memory_format")
        if device is None or device.type == "meta" or device.type == tensor.device.type:
            return func, args, kwargs  # nothing leaves the analysis's own devices
        if device.type == "cpu" and self.home.type == "meta" and tensor.device.type != "meta":
            return func, args, kwargs  # a real CPU tensor staying on the CPU
        self._note("move", label, device, layer)
        rewritten: dict[str, Any] = {"device": self.home, "dtype": dtype, "copy": copy}
        if memory_format is not None:
            rewritten["memory_format"] = memory_format
        return torch.Tensor.to, (tensor,), rewritten


class KeepOnHome(TorchFunctionMode):
    """While it is active, every device move or placement stays on ``log.home`` (meta for the
    analysis), noted in the :class:`DeviceLog`."""

    def __init__(self, log: DeviceLog) -> None:
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if func in MOVE_CALLS or kwargs.get("device") is not None:
            func, args, kwargs = self.log.redirect(func, args, kwargs)
        return func(*args, **kwargs)
