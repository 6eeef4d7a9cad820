"""Code hidden in text: strings that the standard library or torch turns into code or into
attribute look-ups (annotations and typing's evaluators, namedtuple, format strings, dotted
names), against each defence on its own.

- layer 1 reads every string constant (:func:`check_text`): refused with a line number;
- the worker compiles without annotations (:func:`strip_annotations`), static layer or not;
- the facade hands out nothing that evaluates text (checked member by member below);
- the text guard (:func:`text_guard`) refuses text that becomes code while a job runs, whichever
  library compiles it, even with the static layer and the facade switched off.
"""

from __future__ import annotations

import ast
import json
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from tests.sandbox_jobs import GOOD_MODEL, make_pool
from torchatlas.presets import PRESETS
from torchatlas.sandbox import SandboxPool, SandboxResult, check_source
from torchatlas.sandbox.facade import (
    Facade,
    TextEvaluationRefused,
    capability_namespace,
    facade_modules,
    namedtuple,
    safe_builtins,
    text_guard,
)
from torchatlas.sandbox.policy import TYPING_NAMES, check_text, compile_model

STATIC_OFF = ("static",)
BARE_PYTHON = ("static", "facade")  # real builtins and modules: only the worker's own defences
SECRET = "s3cr3t-token-for-the-string-tests"


def codes(source: str) -> list[tuple[int, str]]:
    return [(refusal.line, refusal.code) for refusal in check_source(source)]


# ------------------------------------------------------------------ layer 1 reads text
HONEST_TEXT = '''
from __future__ import annotations
import math
from collections import namedtuple
from typing import Optional, Tuple, cast
import torch
import torch.nn as nn
import torch.nn.functional as F

Output = namedtuple("Output", ["logits", "features"])
Shape = Tuple[int, ...]


class Block(nn.Module):
    """A residual block; its __init__ builds two convolutions ("same" padding)."""

    scale: float = 1.0
    channels: int

    def __init__(self, channels: int, mode: str = "nearest", act: Optional[str] = "relu"):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding="same")
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_in", nonlinearity="relu")
        self.mode = mode
        self.reduce = "mean"
        if act not in ("relu", "gelu", None):
            raise ValueError(f"unknown activation {act!r}; use 'relu' or 'gelu'")

    def forward(self, x: torch.Tensor) -> Output:
        y = torch.einsum("bchw->bc", x) / math.prod(x.shape[2:])
        x = F.interpolate(self.conv(x), scale_factor=1.0, mode=self.mode)
        assert x.dim() == 4, f"expected a 4-D input, got shape {tuple(x.shape)}"
        return Output(cast(torch.Tensor, x), y)
'''


def test_honest_text_is_accepted() -> None:
    assert check_source(HONEST_TEXT) == []


@pytest.mark.parametrize(
    ("source", "line", "code"),
    [
        # annotations: functions, classes, nested text, `from __future__ import annotations`
        ('def f(x: "().__class__.__base__"):\n    pass', 1, "string_dunder"),
        ('def f(x) -> "open(\'/etc/passwd\').read()":\n    pass', 1, "string_code"),
        ('class C:\n    depth: "open(1)"', 2, "string_code"),
        ("from typing import List\ndef f(x: \"List['open(1)']\"):\n    pass", 2, "string_code"),
        ("from __future__ import annotations\ndef f(x: ().__class__):\n    pass", 2, "dunder"),
        # typing's evaluators
        ("from typing import get_type_hints", 1, "import"),
        ("from typing import ForwardRef", 1, "import"),
        ("from typing import NamedTuple", 1, "import"),
        ("from typing import TypedDict", 1, "import"),
        ("from typing import get_args", 1, "import"),
        ("import typing\nh = typing.get_type_hints", 2, "evaluates_text"),
        ("import typing\nh = typing._eval_type", 2, "evaluates_text"),
        ("import typing\nr = typing.Optional['x']\nr._evaluate(None, None, frozenset())", 3,
         "evaluates_text"),
        # text that something else evaluates or walks
        ("s = '{0.__init__.__globals__}'", 1, "string_dunder"),
        ("s = b'__globals__'", 1, "string_dunder"),
        ("s = f'{1}__globals__'", 1, "string_dunder"),
        ("a = '__glo'\nb = 'bals__'", 1, "string_dunder"),
        ("t = '().\uff3f\uff3fclass\uff3f\uff3f'", 1, "string_dunder"),  # read as `__class__`
        ("t = 'eval'", 1, "string_code"),
        ("t = 'help(\"os\")'", 1, "string_code"),
        ("import torch\nt = torch.zeros(1).untyped_storage().type('os.system')", 2, "string_code"),
        ("t = 'builtins.exec'", 1, "string_code"),
        ("t = 'torch.hub.load'", 1, "string_code"),
        ("t = \"'''__import__'''\"", 1, "string_dunder"),
        ("def f():\n    \"\"\"__import__('os').system('id')\"\"\"", 2, "string_code"),
        ("import operator", 1, "import"),
        ("from collections import namedtuple\nP = namedtuple('P', '__class__')", 2,
         "string_dunder"),
        # names that would define hooks without a `def`
        ("E = type('E', (), dict(__getattr__=print))", 1, "dunder"),
        ("def f(__x__):\n    pass", 1, "dunder"),
        ("import torch as __builtins__", 1, "dunder"),
        ("class __init_subclass__:\n    pass", 1, "dunder"),
        # helpers that compile or import text
        ("import torch.nn as nn\nnn.Module().compile()", 2, "evaluates_text"),
    ],
)  # fmt: skip
def test_text_that_becomes_code_is_refused(source: str, line: int, code: str) -> None:
    found = check_source(source)
    assert (line, code) in [(refusal.line, refusal.code) for refusal in found], found
    assert all(refusal.message.endswith(".") and len(refusal.message) > 20 for refusal in found)


@pytest.mark.parametrize(
    "text",
    ["relu", "mean", "bchw->bc", "b c h w -> b (h w) c", "fan_in", "same", "nearest",
     "depth must be positive", "torch.FloatTensor", "Optional[int]", "layer1.conv", "1×3×32×32",
     "input", "{0}", "x + y"],
)  # fmt: skip
def test_ordinary_text_reads_as_harmless(text: str) -> None:
    assert check_text(text) == []


def test_text_nested_in_text_is_read_to_a_bound() -> None:
    assert check_text("'open(1)'")[0].code == "string_code"
    deep = "1"
    for _ in range(8):
        deep = repr(deep)
    assert check_text(deep)[0].code in {"string_code", "too_complex"}


# ------------------------------------------------------------------ annotations are gone
ANNOTATED = """
from __future__ import annotations

class Config:
    depth: "open('/etc/hostname').read()"
    width: "().__class__" = 3

def build(x: "().__class__.__base__", *rest: "int", key: "str" = "k") -> "open(1)":
    total: "int" = 1
    return total
"""


def test_annotations_are_stripped_before_compiling() -> None:
    code = compile_model(ANNOTATED, "<pasted model>")
    assert not code.co_flags & __import__("__future__").annotations.compiler_flag
    namespace = capability_namespace()
    exec(code, namespace)
    build, config = namespace["build"], namespace["Config"]
    assert build.__annotations__ == {}
    assert "__annotations__" not in vars(config)
    assert config.width == 3 and build(1) == 1  # values stay, only annotations go
    import typing

    assert typing.get_type_hints(build) == {} and typing.get_type_hints(config) == {}


# ------------------------------------------------------------------ the facade
def test_typing_offers_only_inert_names() -> None:
    typing_facade = facade_modules()["typing"]
    assert set(dir(typing_facade)) == set(TYPING_NAMES)
    for name in ("get_type_hints", "ForwardRef", "get_args", "NamedTuple", "TypedDict",
                 "_eval_type", "Protocol", "no_type_check"):  # fmt: skip
        with pytest.raises(AttributeError, match="not available in this sandbox"):
            getattr(typing_facade, name)


def test_facades_show_nothing_but_their_members() -> None:
    torch_facade = facade_modules()["torch"]
    for name in ("_members", "_facade_name", "__dict__", "__class__", "__init__"):
        with pytest.raises(AttributeError):
            getattr(torch_facade, name)
    with pytest.raises(AttributeError):
        del torch_facade.zeros
    namespace = capability_namespace()
    with pytest.raises(ImportError, match=r"from 'torch \(sandbox\)'"):
        exec("from torch import _members", namespace)


def test_namedtuple_is_rebuilt_without_eval() -> None:
    assert facade_modules()["collections"].namedtuple is namedtuple
    pair = namedtuple("Pair", "left, right", defaults=[0])
    assert repr(pair(1)) == "Pair(left=1, right=0)"
    assert pair(1, 2)._replace(left=5)._asdict() == {"left": 5, "right": 2}
    assert pair._make([3, 4]) == (3, 4) and pair(right=2, left=1).left == 1
    assert pair._fields == ("left", "right") and pair._field_defaults == {"right": 0}
    assert pair.__module__ == "pasted_model"
    leaves, spec = torch.utils._pytree.tree_flatten(pair(torch.ones(1), torch.zeros(2)))
    assert len(leaves) == 2 and type(torch.utils._pytree.tree_unflatten(leaves, spec)) is pair
    for bad in (["__class__"], ["a b"], ["_x"], ["def"], ["a", "a"]):
        with pytest.raises(ValueError):
            namedtuple("Bad", bad)
    assert namedtuple("Ok", ["a", "def", "a"], rename=True)._fields == ("a", "_1", "_2")
    with pytest.raises(TypeError):
        pair()


def test_hasattr_refuses_internal_names() -> None:
    hasattr_ = safe_builtins()["hasattr"]
    assert hasattr_(torch.nn.Linear(1, 1), "weight") is True
    for name in ("__globals__", "_" * 2 + "class" + "_" * 2, "gi_frame", "f_back", "format"):
        with pytest.raises(AttributeError, match="not available here"):
            hasattr_(len, name)


# Names in a function's code that mean it turns text into code or attribute look-ups.
EVALUATORS = frozenset(
    {
        "eval", "exec", "compile", "get_type_hints", "_eval_type", "ForwardRef", "__import__",
        "import_module", "attrgetter", "methodcaller", "literal_eval", "_import_dotted_name",
        "find_class", "sympify", "_getframe", "currentframe",
    }
)  # fmt: skip
# Judged one by one; a new entry needs the same care.
JUDGED = {
    # import_module("torch._decomp.decompositions"), a fixed name, on CUDA paths only
    ("torch.nn.functional", "interpolate"),
    ("torch.nn.functional", "pad"),
    ("torch.nn.functional", "_max_pool3d"),
    ("torch.nn.functional", "max_pool3d_with_indices"),
    # nn.Module.compile calls torch.compile: the static layer refuses `.compile`, and in the
    # job dynamo's lazy imports cannot open their files and its code objects meet text_guard
    ("torch.nn.modules.module", "Module.compile"),
}


def _functions_of(value: Any, *, instance: bool = True) -> Iterator[types.FunctionType]:
    """The Python functions a member brings: itself (unwrapped), or a class's methods along
    its MRO, or, for an instance of a Python class (typing's special forms), its class's."""
    for _ in range(8):
        if isinstance(value, staticmethod | classmethod | types.MethodType):
            value = value.__func__
        elif hasattr(value, "func") and type(value).__name__ == "partial":
            value = value.func
        elif not isinstance(value, type) and hasattr(value, "__wrapped__"):
            value = value.__wrapped__
        else:
            break
    if isinstance(value, types.FunctionType):
        yield value
    elif isinstance(value, property):
        for accessor in (value.fget, value.fset, value.fdel):
            yield from _functions_of(accessor, instance=False)
    elif isinstance(value, type):
        for klass in value.__mro__:
            for attribute in vars(klass).values():
                if not isinstance(attribute, type):
                    yield from _functions_of(attribute, instance=False)
    elif instance and type(value).__module__ != "builtins":
        yield from _functions_of(type(value), instance=False)


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return names


def _members(prefix: str, facade: Facade) -> Iterator[tuple[str, Any]]:
    for name in dir(facade):
        value = getattr(facade, name)
        if isinstance(value, Facade):
            yield from _members(f"{prefix}.{name}", value)
        else:
            yield f"{prefix}.{name}", value


def test_no_facade_member_evaluates_text() -> None:
    """Every member of every facade, and every safe builtin, inspected: no Python function it
    brings names an evaluator, unless judged above (new members are caught here)."""
    members = [item for name, facade in facade_modules().items() for item in _members(name, facade)]
    members += [(f"builtins.{name}", value) for name, value in safe_builtins().items()]
    found: dict[str, set[str]] = {}
    for path, value in members:
        for function in _functions_of(value):
            hits = _code_names(function.__code__) & EVALUATORS
            key = (function.__module__, function.__qualname__)
            if hits and key not in JUDGED:
                found.setdefault(f"{path}: {key[0]}.{key[1]}", set()).update(hits)
    assert not found, found
    assert not {"eval", "exec", "compile", "getattr", "vars", "globals"} & set(safe_builtins())


# ------------------------------------------------------------------ the text guard
def in_child(function: Callable[[], Any]) -> Any:
    """``function()`` in a forked child: the audit hook it installs dies with the child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            try:
                answer = function()
            except BaseException as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write_end, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        data = reader.read()
    os.waitpid(pid, 0)
    return json.loads(data or b"null")


def _outcome(action: Callable[[], Any]) -> str:
    try:
        action()
    except TextEvaluationRefused:
        return "refused"
    except Exception as exc:
        return type(exc).__name__
    return "ran"


def _guard_outcomes() -> dict[str, str]:
    import collections
    import importlib
    import marshal
    import pickle
    import sys
    import typing

    dunder = "_" * 2 + "class" + "_" * 2  # built at run time: no parser sees it
    barry = __import__("__future__").barry_as_FLUFL.compiler_flag
    sys.modules.pop("pstats", None)  # its body builds a dataclass, as lazy torch imports do

    def annotated(x: Any) -> None:
        pass

    annotated.__annotations__ = {"x": "()." + dunder}
    actions: dict[str, Callable[[], Any]] = {
        "plain text": lambda: eval("1 + 1"),
        "dunder walk": lambda: eval("()." + dunder),
        "import statement": lambda: exec("import os"),
        "get_type_hints": lambda: typing.get_type_hints(annotated),
        "forward ref": lambda: typing.ForwardRef("open('/etc/hostname')"),
        "flag-only syntax": lambda: compile("()." + dunder + " <> 1", "<t>", "eval", barry),
        "look-alike underscores": lambda: compile(
            "().\uff3f\uff3fclass\uff3f\uff3f <> 1", "<t>", "eval", barry
        ),
        "syntax tree": lambda: compile(ast.parse("1"), "<t>", "eval"),
        "a dunder's syntax tree": lambda: compile(ast.parse("()." + dunder), "<t>", "eval"),
        "parse only": lambda: ast.parse("()." + dunder + "\nimport os"),
        "code object": lambda: (lambda: 0).__code__.replace(co_name="x"),
        "function": lambda: types.FunctionType((lambda: 0).__code__, {}),
        "marshal": lambda: marshal.loads(marshal.dumps((lambda: 0).__code__)),
        "unpickling": lambda: pickle.loads(pickle.dumps(len)),
        "stdlib namedtuple": lambda: collections.namedtuple("P", "a b"),
        "module import": lambda: importlib.import_module("pstats"),
    }
    with text_guard():
        outcomes = {name: _outcome(action) for name, action in actions.items()}
    outcomes["after the job"] = _outcome(lambda: eval("()." + dunder))
    return outcomes


def test_text_guard_refuses_text_that_becomes_code() -> None:
    outcomes = in_child(_guard_outcomes)
    assert outcomes == {
        "plain text": "ran",  # text the allow-list accepts may still become code
        "dunder walk": "refused",
        "import statement": "refused",
        "get_type_hints": "refused",
        "forward ref": "refused",
        "flag-only syntax": "refused",
        "look-alike underscores": "refused",
        "syntax tree": "refused",
        "a dunder's syntax tree": "refused",  # parsing is free; compiling the tree is not
        "parse only": "ran",  # a syntax tree is not code (a room's parser reads text this way)
        "code object": "refused",
        "function": "refused",
        "marshal": "refused",
        "unpickling": "refused",
        "stdlib namedtuple": "ran",  # its generated text is identifiers only
        "module import": "ran",  # a module's own code from its own file
        "after the job": "ran",  # the guard holds only while pasted code and its job run
    }


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_presets_compile_and_define_under_the_guard(key: str) -> None:
    def define() -> list[str]:
        namespace = capability_namespace()
        code = compile_model(PRESETS[key].source, "<pasted model>")
        with text_guard():
            exec(code, namespace)
        return sorted(name for name in namespace if not name.startswith("__"))

    defined = in_child(define)
    assert isinstance(defined, list) and defined, defined


# ------------------------------------------------------------------ through the pool
@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    os.environ["SECRET_TOKEN"] = SECRET
    sandbox = make_pool(test_hooks=True, rate_limit=0, memory_mb=512)
    try:
        sandbox.warm_up()
        yield sandbox
    finally:
        sandbox.shutdown()
        os.environ.pop("SECRET_TOKEN", None)


def call(pool: SandboxPool, body: str, layers_off: tuple[str, ...] = ()) -> SandboxResult:
    """Run ``attack()`` defined by ``body`` at job time (after the namespace is built)."""
    return pool.run_job(body, "sandbox.call", {"name": "attack"}, layers_off=layers_off)


def refused_by_guard(result: SandboxResult) -> bool:
    return not result.ok and "TextEvaluationRefused" in result.error.message


def not_in_facade(result: SandboxResult) -> bool:
    return not result.ok and "not available in this sandbox" in result.error.message


def returned(value: Any) -> Callable[[SandboxResult], bool]:
    return lambda result: result.ok and result.value == {"result": value}


def failed_with(name: str) -> Callable[[SandboxResult], bool]:
    return lambda result: not result.ok and name in result.error.message


# body, then what must happen with the static layer off, then with the facade off too
ATTACKS: dict[str, tuple[str, Callable, Callable | None]] = {
    "function-annotation": (
        'import typing\ndef f(x: "().__class__.__base__.__subclasses__()"):\n    return x\n'
        'def attack():\n    return len(typing.get_type_hints(f)["x"])\n',
        not_in_facade, failed_with("KeyError"),  # no annotation left to evaluate
    ),
    "class-annotation": (
        "import typing\nclass Config:\n    depth: \"open('/etc/hostname').read()\"\n"
        "def attack():\n    return typing.get_type_hints(Config)\n",
        not_in_facade, returned({}),
    ),
    "future-annotations": (
        "from __future__ import annotations\nimport typing\n"
        "def f(x: ().__class__.__base__) -> ().__class__:\n    return x\n"
        "def attack():\n    return sorted(typing.get_type_hints(f))\n",
        not_in_facade, returned([]),
    ),
    "nested-string-annotation": (
        "import typing\nfrom typing import List\n"
        "def f(x: \"List['().__class__.__base__']\"):\n    return x\n"
        "def attack():\n    return str(typing.get_type_hints(f))\n",
        not_in_facade, returned("{}"),
    ),
    "forward-ref": (
        "import typing\ndef attack():\n"
        "    ref = typing.get_args(typing.Optional[\"open('/etc/hostname').read()\"])[0]\n"
        "    return ref._evaluate(None, None, frozenset())\n",
        not_in_facade, refused_by_guard,
    ),
    "typing-namedtuple": (
        "import typing\ndef attack():\n"
        "    return str(typing.NamedTuple('Row', [('x', \"open('/etc/hostname').read()\")]))\n",
        not_in_facade, refused_by_guard,
    ),
    "text-built-at-run-time": (
        "def attack():\n    return str(eval('().' + '_' * 2 + 'class' + '_' * 2))\n",
        failed_with("NameError"), refused_by_guard,
    ),
    "forward-ref-reached-around-the-facade": (
        "import typing\ndef attack():\n"
        "    ref = typing.Optional['x'].__args__[0].__class__(\"open('/etc/hostname').read()\")\n"
        "    return ref._evaluate(None, None, frozenset())\n",
        refused_by_guard, refused_by_guard,
    ),
    "namedtuple-field-names": (
        "from collections import namedtuple\n"
        "def attack():\n    return namedtuple('P', ['__class__'])._fields\n",
        failed_with("ValueError"), None,
    ),
    "hasattr-by-name": (
        "def attack():\n    return hasattr(attack, '__globals__')\n",
        failed_with("not available here"), None,
    ),
    # torch's storage.type() imports and walks a dotted name (not closable from the facade:
    # tensors are real); layer 1 refuses the text, and torch itself fails on the result
    "dotted-name-walk": (
        "import torch\ndef attack():\n"
        "    return str(torch.zeros(1).untyped_storage().type('os.system'))\n",
        failed_with("is_sparse"), None,
    ),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_text_attacks_are_refused_and_contained(pool: SandboxPool, name: str) -> None:
    body, static_off, bare = ATTACKS[name]
    result = call(pool, body)
    assert not result.ok and result.error.kind == "refused", result.error
    assert result.error.refusals and result.error.line
    result = call(pool, body, STATIC_OFF)
    assert static_off(result), result.to_dict()
    assert SECRET not in json.dumps(result.to_dict())
    if bare is not None:
        result = call(pool, body, BARE_PYTHON)
        assert bare(result), result.to_dict()


@pytest.mark.slow
def test_honest_text_runs_and_the_pool_keeps_serving(pool: SandboxPool) -> None:
    body = HONEST_TEXT + (
        "\ndef attack():\n    out = Block(2)(torch.zeros(1, 2, 4, 4))\n"
        "    return [list(out.logits.shape), repr(Output(1, 2))]\n"
    )
    result = call(pool, body)
    assert result.ok, result.error
    assert result.value == {"result": [[1, 2, 4, 4], "Output(logits=1, features=2)"]}
    result = pool.run_job(GOOD_MODEL, "sandbox.meta_forward", {"model": "Net", "shape": [3, 4]})
    assert result.ok and result.value == {"shape": [3, 2]}
