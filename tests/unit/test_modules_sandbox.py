"""inspect_module through the real sandbox: every preset and the test modules compared with
torch on CPU in this process, and the sandbox's attacks run as model code, through the public
call (refused by the allow-list) and through the room's job with the static layer switched off
(contained by the process layers: nothing escapes, the pool keeps serving).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import torchatlas.modules as modules
from tests.unit.test_modules import SOURCES, assert_matches_torch, build_on_cpu
from tests.unit.test_sandbox_attacks import SUBCLASS_WALK
from torchatlas.modules import ErrorKind, ModuleReport, inspect_module
from torchatlas.modules.jobs import INSPECT
from torchatlas.sandbox import SandboxPool

SECRET = "s3cr3t-token-for-the-module-room-tests"
STATIC_OFF = ("static",)


def _sandbox_ready() -> bool:
    try:
        from torchatlas.sandboxed import shared_pool  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _sandbox_ready(), reason="torchatlas.sandbox not installed")


@pytest.fixture(scope="module")
def shared() -> SandboxPool:
    """The process-wide pool, warmed once for this file (the page's own path to it)."""
    from torchatlas.sandboxed import shared_pool

    pool = shared_pool()
    pool.warm_up()
    return pool


@pytest.fixture(scope="module")
def test_pool() -> Iterator[SandboxPool]:
    """A pool of this file's own with the test hooks on (layers can be switched off), the
    room's job registered: the attacks' second run."""
    os.environ["SECRET_TOKEN"] = SECRET
    pool = modules.register_jobs(SandboxPool(test_hooks=True, rate_limit=0, memory_mb=512))
    pool.warm_up()
    yield pool
    pool.shutdown()
    os.environ.pop("SECRET_TOKEN", None)


@pytest.mark.parametrize("key", list(SOURCES))
def test_the_sandboxs_report_agrees_with_torch(shared: SandboxPool, key: str) -> None:
    source, constructor = SOURCES[key]
    report = inspect_module(source, model=constructor)
    assert_matches_torch(report, build_on_cpu(source, constructor))
    assert report.model == constructor


def test_the_two_mylinear_presets_through_the_sandbox(shared: SandboxPool) -> None:
    plain = inspect_module(modules.PRESETS["mylinear_plain"].source, model="MyLinear(3, 2)")
    param = inspect_module(modules.PRESETS["mylinear_parameter"].source, model="MyLinear(3, 2)")
    assert [row.in_parameters for row in plain.tensors] == [False, False]
    assert [row.in_parameters for row in param.tensors] == [True, True]
    assert "empty parameter list" in plain.optimizer_error
    assert param.optimizer_tensors == 2


def test_building_errors_teach(shared: SandboxPool) -> None:
    source = "import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self, n):\n" + (
        "        super().__init__()\n        self.fc = nn.Linear(n, n)\n"
    )
    error = inspect_module(source).error
    assert error is not None and error.kind is ErrorKind.CONSTRUCTOR_ARGS
    assert "M(n=…)" in error.params["example"] and error.line == 4
    error = inspect_module(source, model="Missing()").error
    assert error is not None and error.kind is ErrorKind.MODEL_NOT_FOUND
    error = inspect_module(source, model="M(-1)").error
    assert error is not None and error.kind is ErrorKind.CONSTRUCTOR_ERROR
    assert "RuntimeError" in error.params["detail"] or "ValueError" in error.params["detail"]
    error = inspect_module("import os\n").error
    assert error is not None and error.kind is ErrorKind.REFUSED and error.line == 1


def test_uninitialised_memory_comes_from_a_sandbox_child(shared: SandboxPool) -> None:
    report = modules.uninitialised_memory()
    assert report.failure is None, report.failure
    assert len(report.empty) == 4 and all(len(row) == 3 for row in report.float_tensor)


# ---------------------------------------------------------------- attacks as model code
def _as_module(body: str) -> str:
    """``attack()`` defined by ``body``, called while the model is built (in __init__)."""
    return f"""import torch
import torch.nn as nn
{body}

class Victim(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.loot = attack()
"""


def _attacks(tmp: Path) -> dict[str, str]:
    marker = tmp / "pwned"
    return {
        "subclass-walk": SUBCLASS_WALK.format(marker=marker),
        "built-getattr": "def attack():\n    return getattr(getattr, '__sel' + 'f__')\n",
        "format-lookup": "def attack():\n    return '{0.__init__.__globals__}'.format(nn.Module)\n",
        "generator-frames": (
            "def attack():\n    gen = (x for x in [1])\n    frame = gen.gi_frame.f_back\n"
            "    return str(frame.f_globals)\n"
        ),
        "torch-os": f"def attack():\n    return torch.os.system('touch {marker}')\n",
        "torch-load": f"def attack():\n    return torch.load('{marker}', weights_only=False)\n",
        "environment": (
            "import os\ndef attack():\n"
            "    return str(dict(os.environ)) + open('/proc/self/environ').read()\n"
        ),
        "socket": (
            "import socket\ndef attack():\n    return socket.create_connection(('127.0.0.1', 80))\n"
        ),
        "fork": "import os\ndef attack():\n    return os.fork()\n",
        "subprocess": (
            "import subprocess\ndef attack():\n"
            f"    return subprocess.run(['touch', '{marker}']).returncode\n"
        ),
        "write-file": f"def attack():\n    open('{marker}', 'w').write('x')\n    return 1\n",
        "exit": "import os\ndef attack():\n    os._exit(3)\n",
    }


def _escaped(report: ModuleReport) -> bool:
    """Whether anything of the attack came back: a secret, an environment, a built model."""
    text = repr(report.to_dict())
    return SECRET in text or "SECRET_TOKEN" in text or "loot" in text


def test_attacks_through_inspect_module_are_refused(shared: SandboxPool, tmp_path: Path) -> None:
    for name, body in _attacks(tmp_path).items():
        report = inspect_module(_as_module(body), model="Victim()")
        assert report.error is not None, name
        assert report.error.kind is ErrorKind.REFUSED, (name, report.error)
        assert not _escaped(report), name
    assert not (tmp_path / "pwned").exists()
    assert inspect_module(*SOURCES["linear"][:1], model="Net()").error is None  # still serving


def test_attacks_past_the_allow_list_are_contained(test_pool: SandboxPool, tmp_path: Path) -> None:
    """The room's own job with layer 1 off: the model's __init__ runs the attack for real."""
    tmp_path.chmod(0o777)
    for name, body in _attacks(tmp_path).items():
        result = test_pool.run_job(
            _as_module(body), INSPECT, {"model": "Victim()"}, layers_off=STATIC_OFF, timeout_s=10
        )
        if result.ok:  # the attack raised while the model was built, or achieved nothing
            report = ModuleReport.from_dict(result.value)
            assert report.error is None or report.error.kind is ErrorKind.CONSTRUCTOR_ERROR, (
                name,
                report.error,
            )
            assert not _escaped(report), name
        else:
            assert result.error.kind in {"crashed", "code_error", "job_error"}, (name, result)
            assert SECRET not in result.error.message, name
    assert not (tmp_path / "pwned").exists()
    result = test_pool.run_job(SOURCES["linear"][0], INSPECT, {"model": "Net()"})
    assert result.ok and ModuleReport.from_dict(result.value).total_params == 4 * 3 + 3
