"""The static allow-list (layer 1) and the capability namespace (layer 2), in-process."""

from __future__ import annotations

import pytest
import torch

from torchatlas.presets import PRESETS
from torchatlas.sandbox import check_source
from torchatlas.sandbox.facade import capability_namespace, facade_modules, safe_import
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS

HONEST = """
from __future__ import annotations
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import nn as torch_nn
from torch.nn import functional as functional
import torchvision.models as models
from torchvision.models import resnet50
from typing import Optional
from collections import OrderedDict


def make_block(channels: int) -> nn.Sequential:
    return nn.Sequential(OrderedDict([("conv", nn.Conv2d(channels, channels, 3, padding=1))]))


class Net(nn.Module):
    def __init__(self, depth: int = 2, hidden: Optional[int] = None):
        super().__init__()
        self._depth = depth
        self.blocks = nn.ModuleList([make_block(8) for _ in range(depth)])
        self.head = nn.Linear(8, hidden or 10)
        assert depth > 0, "depth must be positive"

    @property
    def depth(self):
        return self._depth

    def forward(self, x):
        for index, block in enumerate(self.blocks):
            x = x + block(x) if index % 2 else F.relu(block(x))
        print(f"shape {tuple(x.shape)}")
        scale = {k: v for k, v in zip("ab", (1, 2))}
        x = torch.cat([x, x], dim=1)[:, :8] * math.sqrt(scale["a"])
        return self.head(x.mean(dim=(2, 3)))
"""


def codes(source: str) -> list[tuple[int, str]]:
    return [(refusal.line, refusal.code) for refusal in check_source(source)]


def test_honest_model_code_is_accepted() -> None:
    assert check_source(HONEST) == []


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_preset_is_accepted(key: str) -> None:
    assert check_source(PRESETS[key].source) == []


@pytest.mark.parametrize(
    ("source", "line", "code"),
    [
        ("import os", 1, "import"),
        ("x = 1\nimport subprocess as sp", 2, "import"),
        ("from torch import *", 1, "import"),
        ("from collections import ChainMap", 1, "import"),
        ("from . import secrets", 1, "import"),
        ("x = ().__class__.__base__.__subclasses__()", 1, "dunder"),
        ("y = 1\nf = lambda: 0\ng = f.__globals__", 3, "dunder"),
        ("x = getattr(object, '__subcl' + 'asses__')", 1, "forbidden_name"),
        ("eval('1')", 1, "forbidden_name"),
        ("exec('x = 1')", 1, "forbidden_name"),
        ("f = open('/etc/passwd')", 1, "forbidden_name"),
        ("v = vars()", 1, "forbidden_name"),
        ("__import__('os')", 1, "forbidden_name"),
        ("s = '{0.__class__}'.format(1)", 1, "format"),
        ("s = '{x}'.format_map({})", 1, "format"),
        ("g = (i for i in [1])\nf = g.gi_frame.f_back.f_globals", 2, "internals"),
        ("def f(): pass\nc = f.co_consts", 2, "internals"),
        ("import torch\nx = torch.os.system", 2, "forbidden_attribute"),
        ("import torch\nx = torch.load('m.pt')", 2, "forbidden_attribute"),
        ("import torch\nx = torch.hub.load('a', 'b')", 2, "forbidden_attribute"),
        ("import torch\nx = torch.ops.load_library", 2, "forbidden_attribute"),
        ("import torch\nx = torch.utils.cpp_extension", 2, "forbidden_attribute"),
        ("class A:\n    def __del__(self):\n        pass", 2, "dunder"),
        ("async def f():\n    pass", 1, "construct"),
        ('def f(x: "().__class__"):\n    pass', 1, "string_dunder"),
        ("t = 'open(\"/etc/passwd\").read()'", 1, "string_code"),
        ("from typing import get_type_hints", 1, "import"),
        ("import typing\nh = typing.get_type_hints", 2, "evaluates_text"),
    ],
)
def test_refusals_name_the_line_and_the_reason(source: str, line: int, code: str) -> None:
    found = check_source(source)
    assert (line, code) in [(refusal.line, refusal.code) for refusal in found], found
    assert all(refusal.message.endswith(".") and len(refusal.message) > 20 for refusal in found)


def test_only_super_init_may_touch_a_dunder_attribute() -> None:
    assert codes("class A(object):\n    def __init__(self):\n        super().__init__()") == []
    assert codes("class A(object):\n    def __init__(self):\n        object.__init__(self)") == [
        (3, "dunder")
    ]


def test_syntax_error_reports_line_and_column() -> None:
    (refusal,) = check_source("import torch\nx = (1,\ny = 2\n")
    assert refusal.code == "syntax"
    assert refusal.line in (2, 3)
    assert refusal.col >= 1


def test_caps_on_size_and_nesting() -> None:
    assert codes("x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1)) == [(1, "too_large")]
    assert codes("x = " + "[" * 80 + "1" + "]" * 80) == [(1, "too_complex")]
    assert codes("x = " + "-" * 200 + "1") == [(1, "too_complex")]


def test_every_refusal_is_reported_in_line_order() -> None:
    source = "import os\nx = 1\neval('x')\ny = x.__class__"
    assert [line for line, _ in codes(source)] == [1, 3, 4]


# ------------------------------------------------------------------ capability namespace
def run_in_namespace(source: str) -> dict:
    namespace = capability_namespace()
    exec(compile(source, "<pasted model>", "exec"), namespace)
    return namespace


def test_facade_imports_resolve_and_models_are_real_modules() -> None:
    namespace = run_in_namespace(HONEST)
    assert issubclass(namespace["Net"], torch.nn.Module)
    assert namespace["Net"].__module__ == "pasted_model"
    with torch.device("meta"):
        output = namespace["Net"]()(torch.empty(2, 8, 5, 5))
    assert output.shape == (2, 10)
    assert namespace["nn"].Module is torch.nn.Module
    assert namespace["resnet50"] is not None


@pytest.mark.parametrize(
    "name",
    ["os", "sys", "hub", "load", "save", "ops", "_C", "utils", "jit", "library", "classes",
     "from_file", "compile", "PyTorchFileReader", "UntypedStorage", "importlib", "multiprocessing"],
)  # fmt: skip
def test_torch_facade_hides_the_dangerous_parts(name: str) -> None:
    torch_facade = facade_modules()["torch"]
    with pytest.raises(AttributeError, match="not available in this sandbox"):
        getattr(torch_facade, name)


def test_nn_and_functional_facades_hold_no_modules() -> None:
    modules = facade_modules()
    for facade_name in ("torch.nn", "torch.nn.functional", "torchvision.models", "typing"):
        facade = modules[facade_name]
        for name in dir(facade):
            assert type(getattr(facade, name)).__name__ != "module", (facade_name, name)
    with pytest.raises(AttributeError):
        modules["torch.nn.functional"].torch  # noqa: B018 - the real F re-exports torch


def test_facades_are_read_only() -> None:
    with pytest.raises(AttributeError):
        facade_modules()["torch"].zeros = print


@pytest.mark.parametrize("name", ["os", "sys", "ctypes", "pickle", "torch.hub", "socket", "io"])
def test_safe_import_refuses_everything_else(name: str) -> None:
    with pytest.raises(ImportError, match="cannot be imported here"):
        safe_import(name)
    with pytest.raises(ImportError):
        safe_import("torch", level=1)


@pytest.mark.parametrize(
    "source",
    ["open('/etc/passwd')", "eval('1')", "getattr(1, 'real')", "globals()", "breakpoint()",
     "import os", "exit()"],
)  # fmt: skip
def test_namespace_builtins_are_minimal(source: str) -> None:
    with pytest.raises((NameError, ImportError)):
        run_in_namespace(source)


@pytest.mark.parametrize(
    "source",
    [
        "from torch import optim",
        "from torch import serialization",
        "from torch import utils",
        "from torch.nn import modules",
        "from torch.nn import parallel",
    ],
)
def test_from_import_never_falls_back_to_the_real_submodule(source: str) -> None:
    """``from torch import optim``: a name the facade lacks makes Python look for the module
    ``<facade.__name__>.optim`` in sys.modules; the facade's name must find nothing there."""
    import torch.optim  # noqa: F401  (loaded in the server: the fallback would find it)

    namespace = capability_namespace()
    with pytest.raises(ImportError):
        exec(compile(source, "<pasted model>", "exec"), namespace)
