"""Layer 2, the capability namespace: the only names pasted code can reach.

``torch``, ``nn``, ``F`` and ``torchvision.models`` are facades holding an allow-list of the real
objects (layers, tensor functions, dtypes). The real modules are never handed out, because they
re-export ``os``, ``sys``, ``importlib``, ``hub``, ``load``/``save`` and native-code loaders.
Classes and tensors are real (user classes must subclass the real ``nn.Module`` so forward hooks
work), so attribute walks from them stay possible; the static layer and the worker process are
what stops those.
"""

from __future__ import annotations

import builtins
import collections
import functools
import math
import types
import typing
from typing import Any

import torch
import torch.nn
import torch.nn.functional
import torch.nn.init
import torch.nn.utils
import torch.nn.utils.parametrizations
import torch.nn.utils.rnn
import torchvision.models

# Public torch callables that touch files, native code, other processes or the compiler.
TORCH_DENIED = frozenset(
    {
        "load", "save", "from_file", "compile", "cond", "while_loop", "fork", "wait",
        "get_file_path", "import_ir_module", "import_ir_module_from_buffer", "parse_ir",
        "parse_schema", "parse_type_comment", "merge_type_from_type_comment",
        "unify_type_list", "prepare_multiprocessing_environment", "get_device_module",
        "set_default_tensor_type", "set_num_threads", "set_num_interop_threads",
        "init_num_threads", "set_flush_denormal", "set_anomaly_enabled", "set_warn_always",
        "set_deterministic_debug_mode", "profiler_allow_cudagraph_cupti_lazy_reinit_cuda12",
        "set_float32_matmul_precision", "thread_safe_generator", "set_printoptions",
    }
)  # fmt: skip
# torch exports ~150 classes, many of them TorchScript/serialisation internals
# (PyTorchFileReader reads files); only these are part of the model-writing vocabulary.
TORCH_CLASSES = frozenset(
    {
        "Tensor", "Size", "device", "dtype", "layout", "memory_format", "Generator",
        "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "autocast", "finfo",
        "iinfo", "SymInt", "SymFloat", "SymBool", "FloatTensor", "DoubleTensor", "HalfTensor",
        "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor",
        "BoolTensor", "OutOfMemoryError",
    }
)  # fmt: skip
TORCH_CONSTANTS = frozenset({"pi", "e", "inf", "nan", "newaxis"})

SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "bool", "callable", "chr", "complex", "dict", "divmod", "enumerate",
    "filter", "float", "format", "frozenset", "hasattr", "hash", "id", "int", "isinstance",
    "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "ord", "pow",
    "print", "property", "range", "repr", "reversed", "round", "set", "slice", "sorted",
    "staticmethod", "classmethod", "str", "sum", "super", "tuple", "type", "zip", "bytes",
    "Exception", "ArithmeticError", "AssertionError", "AttributeError", "IndexError",
    "KeyError", "LookupError", "NotImplementedError", "RuntimeError", "StopIteration",
    "TypeError", "ValueError", "ZeroDivisionError", "NotImplemented", "Ellipsis", "None",
    "True", "False",
)  # fmt: skip

USER_MODULE_NAME = "pasted_model"


class Facade:
    """A read-only bag of allowed attributes standing in for a module."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        object.__setattr__(self, "_facade_name", name)
        object.__setattr__(self, "_members", dict(members))

    def __getattr__(self, attribute: str) -> Any:
        members = object.__getattribute__(self, "_members")
        if attribute in members:
            return members[attribute]
        name = object.__getattribute__(self, "_facade_name")
        raise AttributeError(
            f"`{name}.{attribute}` is not available in this sandbox; only model-building parts "
            f"of {name} are."
        )

    def __setattr__(self, attribute: str, value: Any) -> None:
        raise AttributeError("The sandbox's modules are read-only.")

    def __dir__(self) -> list[str]:
        return sorted(object.__getattribute__(self, "_members"))

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_facade_name')} (sandbox)>"


def _public_callables(module: types.ModuleType, denied: frozenset[str] = frozenset()) -> dict:
    """Public callables and dtypes of ``module``, never a module object or a private name."""
    members: dict[str, Any] = {}
    for name in dir(module):
        if name.startswith("_") or name in denied:
            continue
        value = getattr(module, name, None)
        if isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type) and value.__module__.startswith(("typing", "collections")):
            continue  # typing/collections re-exports, not part of the module's vocabulary
        if callable(value) or isinstance(value, torch.dtype):
            members[name] = value
    return members


def _torch_members() -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name in dir(torch):
        if name.startswith("_") or name in TORCH_DENIED:
            continue
        value = getattr(torch, name, None)
        if isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type):
            if name in TORCH_CLASSES:
                members[name] = value
        elif (
            isinstance(value, torch.dtype | torch.memory_format | torch.layout)
            or name in TORCH_CONSTANTS
            or callable(value)
        ):
            members[name] = value
    return members


def _nn_facade(functional: Facade) -> Facade:
    members = _public_callables(torch.nn)
    members["Module"] = torch.nn.Module  # the real class, so user models are real modules
    members["functional"] = functional
    members["init"] = Facade("torch.nn.init", _public_callables(torch.nn.init))
    members["utils"] = Facade(
        "torch.nn.utils",
        {
            "rnn": Facade("torch.nn.utils.rnn", _public_callables(torch.nn.utils.rnn)),
            "parametrizations": Facade(
                "torch.nn.utils.parametrizations",
                _public_callables(torch.nn.utils.parametrizations),
            ),
            **{
                name: getattr(torch.nn.utils, name)
                for name in (
                    "spectral_norm",
                    "weight_norm",
                    "parameters_to_vector",
                    "vector_to_parameters",
                    "clip_grad_norm_",
                )
            },
        },
    )
    return Facade("torch.nn", members)


def _torchvision_models_facade() -> Facade:
    members: dict[str, Any] = {}
    for name in torchvision.models.list_models():
        members[name] = torchvision.models.get_model_builder(name)
    for name in dir(torchvision.models):
        value = getattr(torchvision.models, name)
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            members[name] = value  # architecture classes (ResNet, VisionTransformer, …)
    for name in ("list_models", "get_model"):
        members[name] = getattr(torchvision.models, name)
    return Facade("torchvision.models", members)


def _build_modules() -> dict[str, Any]:
    functional = Facade("torch.nn.functional", _public_callables(torch.nn.functional))
    nn = _nn_facade(functional)
    torch_members = _torch_members()
    for name in ("linalg", "fft", "special"):
        torch_members[name] = Facade(f"torch.{name}", _public_callables(getattr(torch, name)))
    torch_members["nn"] = nn
    torch_facade = Facade("torch", torch_members)
    models = _torchvision_models_facade()
    typing_members = {
        name: getattr(typing, name)
        for name in typing.__all__
        if not isinstance(getattr(typing, name, None), types.ModuleType)
    }
    return {
        "torch": torch_facade,
        "torch.nn": nn,
        "torch.nn.functional": functional,
        "torch.nn.init": nn.init,
        "torchvision": Facade("torchvision", {"models": models}),
        "torchvision.models": models,
        "math": Facade(
            "math",
            _public_callables(math)
            | {name: getattr(math, name) for name in ("pi", "e", "tau", "inf", "nan")},
        ),
        "typing": Facade("typing", typing_members),
        "collections": Facade(
            "collections",
            {
                name: getattr(collections, name)
                for name in ("OrderedDict", "namedtuple", "defaultdict")
            },
        ),
        "functools": Facade(
            "functools", {"partial": functools.partial, "reduce": functools.reduce}
        ),
        "__future__": Facade("__future__", {"annotations": __import__("__future__").annotations}),
    }


_MODULES: dict[str, Any] | None = None


def facade_modules() -> dict[str, Any]:
    """Module name → facade (built once per process; the worker builds it before forking)."""
    global _MODULES
    if _MODULES is None:
        _MODULES = _build_modules()
    return _MODULES


def safe_import(
    name: str,
    globals: dict | None = None,
    locals: dict | None = None,
    fromlist: tuple[str, ...] | None = (),
    level: int = 0,
) -> Any:
    """``__import__`` for pasted code: allowed module names resolve to facades, nothing loads."""
    modules = facade_modules()
    if level != 0 or name not in modules:
        raise ImportError(
            f"`{name}` cannot be imported here; only torch, torch.nn, torch.nn.functional, math, "
            "torchvision.models, typing and collections are available."
        )
    if fromlist:
        return modules[name]
    return modules[name.partition(".")[0]]  # `import torch.nn` binds the top-level name


def safe_builtins() -> dict[str, Any]:
    table = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES}
    table["__build_class__"] = builtins.__build_class__
    table["__import__"] = safe_import
    return table


def capability_namespace() -> dict[str, Any]:
    """Fresh globals for pasted code: minimal builtins, imports resolved to facades."""
    facade_modules()
    return {"__builtins__": safe_builtins(), "__name__": USER_MODULE_NAME}
