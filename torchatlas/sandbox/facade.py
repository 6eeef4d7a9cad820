"""Layer 2, the capability namespace: the only names pasted code can reach.

``torch``, ``nn``, ``F`` and ``torchvision.models`` are facades holding an allow-list of the real
objects (layers, tensor functions, dtypes). The real modules are never handed out, because they
re-export ``os``, ``sys``, ``importlib``, ``hub``, ``load``/``save`` and native-code loaders.
Classes and tensors are real (user classes must subclass the real ``nn.Module`` so forward hooks
work), so attribute walks from them stay possible; the static layer and the worker process are
what stops those.

Nothing handed out turns text into code or into attribute look-ups: ``typing`` offers only inert
names (no ``get_type_hints``, ``ForwardRef``, ``get_args``, ``NamedTuple``), ``namedtuple`` is
rebuilt without ``eval``, ``hasattr`` refuses internal names, and :func:`text_guard` holds while
pasted code and its job run: every text that becomes code then (whichever library compiles it)
must pass the allow-list, and code objects, functions, unpickled names and marshalled code
cannot be made at all.
"""

from __future__ import annotations

import ast
import builtins
import collections
import contextlib
import functools
import keyword
import math
import operator
import re
import sys
import types
import typing
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.nn
import torch.nn.functional
import torch.nn.init
import torch.nn.utils
import torch.nn.utils.parametrizations
import torch.nn.utils.rnn
import torchvision.models

from torchatlas.sandbox.policy import (
    FORBIDDEN_ATTRIBUTE_PREFIXES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_CALLS,
    FRAME_ATTRIBUTES,
    TEXT_EVALUATING_ATTRIBUTES,
    TEXT_FORBIDDEN_NAMES,
    TYPING_NAMES,
    check_text,
    parse_text,
)

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

    def __getattribute__(self, attribute: str) -> Any:
        # Every look-up, dunders and the facade's own fields included, sees only the members:
        # `from torch import _members` or `torch.__dict__` find nothing to change or walk.
        members = object.__getattribute__(self, "_members")
        if attribute in members:
            return members[attribute]
        name = object.__getattribute__(self, "_facade_name")
        if attribute == "__name__":
            # For import errors ("cannot import name x from 'torch (sandbox)'"). Never the real
            # module's name: `from torch import optim` falls back to sys.modules["<__name__>.
            # optim"] when the attribute is missing, which would hand over the real module.
            return f"{name} (sandbox)"
        raise AttributeError(
            f"`{name}.{attribute}` is not available in this sandbox; only model-building parts "
            f"of {name} are."
        )

    def __setattr__(self, attribute: str, value: Any) -> None:
        raise AttributeError("The sandbox's modules are read-only.")

    def __delattr__(self, attribute: str) -> None:
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


def _internal_name(name: str) -> bool:
    return (
        "__" in name
        or name.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES)
        or name in FRAME_ATTRIBUTES
        or name in FORBIDDEN_ATTRIBUTES
        or name in TEXT_EVALUATING_ATTRIBUTES
        or name in ("format", "format_map")
    )


def safe_hasattr(obj: Any, name: str, /) -> bool:
    """``hasattr`` for pasted code: the look-up runs only for names code could write itself."""
    if not isinstance(name, str):
        raise TypeError("hasattr(): attribute name must be string")
    if _internal_name(name):
        raise AttributeError(
            f"hasattr(…, {name[:40]!r}) is not available here: that name leads into Python's "
            "internals. Test only the model's own attributes."
        )
    return hasattr(obj, name)


def _field_names(field_names: str | Iterable[str], rename: bool) -> tuple[str, ...]:
    if isinstance(field_names, str):
        field_names = field_names.replace(",", " ").split()
    names = [str(name) for name in field_names]
    seen: set[str] = set()
    for index, name in enumerate(names):
        bad = not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_")
        if rename and (bad or name in seen):
            names[index] = name = f"_{index}"
        elif bad:
            raise ValueError(
                f"namedtuple field names must be identifiers that do not start with an "
                f"underscore: {name[:40]!r}"
            )
        elif name in seen:
            raise ValueError(f"Encountered duplicate field name: {name!r}")
        seen.add(name)
    return tuple(names)


def namedtuple(
    typename: str,
    field_names: str | Iterable[str],
    *,
    rename: bool = False,
    defaults: Iterable[Any] | None = None,
    module: str | None = None,
) -> type:
    """``collections.namedtuple`` without ``eval``: the same class interface (fields, defaults,
    ``_make``, ``_replace``, ``_asdict``), built from plain functions instead of generated text."""
    typename = str(typename)
    if not typename.isidentifier() or keyword.iskeyword(typename) or "__" in typename:
        raise ValueError(f"Type names must be valid identifiers: {typename[:40]!r}")
    fields = _field_names(field_names, rename)
    default_values = tuple(defaults) if defaults is not None else ()
    if len(default_values) > len(fields):
        raise TypeError("Got more default values than field names")
    count = len(fields)
    field_defaults = dict(zip(fields[count - len(default_values) :], default_values, strict=True))

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        if len(args) > count:
            raise TypeError(f"{typename}() takes {count} arguments but {len(args)} were given")
        values = list(args)
        for name in fields[len(args) :]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif name in field_defaults:
                values.append(field_defaults[name])
            else:
                raise TypeError(f"{typename}() missing required argument: {name!r}")
        if kwargs:
            raise TypeError(f"{typename}() got unexpected arguments: {sorted(kwargs)}")
        return tuple.__new__(cls, values)

    def make(cls: type, iterable: Iterable[Any]) -> Any:
        result = tuple.__new__(cls, iterable)
        if len(result) != count:
            raise TypeError(f"Expected {count} arguments, got {len(result)}")
        return result

    def replace(self: tuple, /, **changes: Any) -> Any:
        pairs = zip(fields, self, strict=True)
        result = type(self)._make(changes.pop(name, value) for name, value in pairs)
        if changes:
            raise ValueError(f"Got unexpected field names: {sorted(changes)!r}")
        return result

    def show(self: tuple) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in zip(fields, self, strict=True))
        return f"{type(self).__name__}({inner})"

    namespace: dict[str, Any] = {
        "__doc__": f"{typename}({', '.join(fields)})",
        "__slots__": (),
        "_fields": fields,
        "_field_defaults": field_defaults,
        "__new__": new,
        "_make": classmethod(make),
        "_replace": replace,
        "__repr__": show,
        "_asdict": lambda self: dict(zip(fields, self, strict=True)),
        "__getnewargs__": lambda self: tuple(self),
        "__match_args__": fields,
    }
    for index, name in enumerate(fields):
        namespace[name] = property(operator.itemgetter(index), doc=f"Field {index}")
    result = type(typename, (tuple,), namespace)
    result.__module__ = module if isinstance(module, str) else USER_MODULE_NAME
    return result


def _no_accelerator() -> dict[str, Any]:
    """``torch.cuda`` and ``torch.backends.mps`` as the sandbox sees them: no GPU, ever.

    Model code chooses its device with ``"cuda" if torch.cuda.is_available() else "cpu"``; the
    answers are constants, because the real functions ask the driver, and no pasted code may
    reach a real device. Each is ``functools.partial`` of a builtin (``bool(False)``,
    ``int(0)``): nothing of this module (no function, no globals) is handed out.
    """
    false = functools.partial(bool, False)
    cuda = Facade(
        "torch.cuda",
        {"is_available": false, "device_count": functools.partial(int, 0), "is_initialized": false},
    )
    mps = Facade("torch.backends.mps", {"is_available": false, "is_built": false})
    return {"cuda": cuda, "backends": Facade("torch.backends", {"mps": mps})}


def _build_modules() -> dict[str, Any]:
    functional = Facade("torch.nn.functional", _public_callables(torch.nn.functional))
    nn = _nn_facade(functional)
    torch_members = _torch_members()
    for name in ("linalg", "fft", "special"):
        torch_members[name] = Facade(f"torch.{name}", _public_callables(getattr(torch, name)))
    torch_members["nn"] = nn
    torch_members.update(_no_accelerator())
    torch_facade = Facade("torch", torch_members)
    models = _torchvision_models_facade()
    typing_members = {name: getattr(typing, name) for name in TYPING_NAMES}
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
                "OrderedDict": collections.OrderedDict,
                "defaultdict": collections.defaultdict,
                "namedtuple": namedtuple,
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
    table["hasattr"] = safe_hasattr
    table["__build_class__"] = builtins.__build_class__
    table["__import__"] = safe_import
    return table


def capability_namespace() -> dict[str, Any]:
    """Fresh globals for pasted code: minimal builtins, imports resolved to facades."""
    facade_modules()
    return {"__builtins__": safe_builtins(), "__name__": USER_MODULE_NAME}


# ---------------------------------------------------------------------------- the text guard
class TextEvaluationRefused(PermissionError):
    """Raised (through whichever library asked) when a job would turn text into code."""


# Audit events that make code out of something other than the pasted source: compiling text
# (eval, exec, compile, ForwardRef, namedtuple…), building code objects or functions by hand,
# unmarshalling code, and pickle's name-to-object look-up.
GUARDED_EVENTS = frozenset(
    {"compile", "code.__new__", "function.__new__", "marshal.loads", "pickle.find_class"}
)
# A module's own code from its own file, while it is imported (lazy imports in torch build
# dataclasses at import). Code that could call importlib's helpers with text of its own would
# already have full Python, which is the process layer's case.
_IMPORT_FRAMES = "<frozen importlib._bootstrap"
_AST_PARSE = ast.parse.__code__
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFUSED_WORDS = FORBIDDEN_CALLS | TEXT_FORBIDDEN_NAMES | TEXT_EVALUATING_ATTRIBUTES


class _GuardState:
    __slots__ = ("armed", "checking", "installed")

    def __init__(self) -> None:
        self.armed = False
        self.checking = False
        self.installed = False


_GUARD = _GuardState()


def _refusal_for_text(text: str) -> str | None:
    """Why ``text`` may not become code now, or None."""
    refusals = check_text(text)
    if refusals:
        return refusals[0].message
    if parse_text(text) is None:
        # Not Python the checker can read (a compiler flag may still accept it): fall back to
        # its words, the way the allow-list reads names.
        for word in _IDENTIFIER.findall(unicodedata.normalize("NFKC", text)):
            if "__" in word or word in _REFUSED_WORDS or word in FORBIDDEN_ATTRIBUTES:
                return f"`{word[:40]}` is not allowed here."
    return None


def _audit(event: str, args: tuple[Any, ...], guard: _GuardState = _GUARD) -> None:
    if not guard.armed or guard.checking or event not in GUARDED_EVENTS:
        return
    frame = sys._getframe(1)
    if event == "compile" and frame.f_code is _AST_PARSE:
        # ast.parse makes a syntax tree, not code: a tree becomes code only through another
        # compile, which is its own event and refused below (the rooms' own parsers read
        # visitors' text this way, and checking it again here doubled their cost).
        return
    while frame is not None:  # a module being imported runs its own code (dataclasses too)
        if frame.f_code.co_filename.startswith(_IMPORT_FRAMES):
            return
        frame = frame.f_back
    if event == "compile" and isinstance(args[0], str | bytes | bytearray):
        source = args[0]
        text = source if isinstance(source, str) else bytes(source).decode("utf-8", "replace")
        guard.checking = True
        try:
            reason = _refusal_for_text(text)
        finally:
            guard.checking = False
        if reason is None:
            return
        detail = f"the text {text.strip()[:60]!r} would run code the sandbox refuses: {reason}"
    elif event == "compile":
        detail = "a syntax tree would be compiled"
    else:
        detail = f"`{event}` would make code or look a name up"
    raise TextEvaluationRefused(
        f"Turning text into code is not allowed in this sandbox ({detail}). Write the code "
        "itself: no string annotations evaluated by typing helpers, no eval-like helpers."
    )


@contextlib.contextmanager
def text_guard() -> Iterator[None]:
    """While pasted code (or a job handling its objects) runs, text becomes code only if the
    allow-list accepts it, whatever library compiles it; see :data:`GUARDED_EVENTS`.

    The audit hook, once added, stays for the life of the process (Python cannot remove one);
    outside this block it returns at once.
    """
    if not _GUARD.installed:
        sys.addaudithook(_audit)
        _GUARD.installed = True
    previous, _GUARD.armed = _GUARD.armed, True
    try:
        yield
    finally:
        _GUARD.armed = previous
