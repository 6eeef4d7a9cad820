"""Attacks on the sandbox: each must be refused or contained, and the pool must keep serving.

Every attack runs twice where the static allow-list would refuse it: once as pasted (refused by
layer 1), and once with the static check — and where it matters the facade — switched off
through the pool's test-only hook, so the process layers are shown to hold on their own.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox_jobs import GOOD_MODEL, make_pool
from torchatlas.sandbox import SandboxPool, SandboxResult

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-token-for-the-sandbox-tests"
STATIC_OFF = ("static",)
BARE_PYTHON = ("static", "facade")  # full Python: builtins, real imports; only process layers


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    os.environ["SECRET_TOKEN"] = SECRET  # as Streamlit Cloud maps secrets to variables
    sandbox = make_pool(test_hooks=True, rate_limit=0, memory_mb=512)
    sandbox.warm_up()
    yield sandbox
    sandbox.shutdown()
    os.environ.pop("SECRET_TOKEN", None)


@pytest.fixture(scope="module")
def secrets_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("app") / ".streamlit" / "secrets.toml"
    path.parent.mkdir()
    path.write_text(f'api_key = "{SECRET}"\n')
    path.chmod(0o600)
    return path


def call(pool: SandboxPool, body: str, layers_off: tuple[str, ...] = (), **kw) -> SandboxResult:
    """Run ``attack()`` defined by ``body`` at job time (after the namespace is built)."""
    return pool.run_job(body, "sandbox.call", {"name": "attack"}, layers_off=layers_off, **kw)


def assert_still_serving(pool: SandboxPool) -> None:
    result = pool.run_job(GOOD_MODEL, "sandbox.meta_forward", {"model": "Net", "shape": [3, 4]})
    assert result.ok, result.error
    assert result.value == {"shape": [3, 2]}


def leaked(result: SandboxResult) -> bool:
    return SECRET in json.dumps(result.to_dict())


def assert_refused(result: SandboxResult, line: int | None = None) -> None:
    assert not result.ok
    assert result.error.kind == "refused", result.error
    assert result.error.refusals
    if line is not None:
        assert result.error.line == line


# ------------------------------------------------------------------ escapes through Python
SUBCLASS_WALK = """
def attack():
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__["system"]("touch {marker}")
    return "no os"
"""


def test_dunder_walk_to_os_system(pool: SandboxPool, tmp_path: Path) -> None:
    marker = tmp_path / "pwned-by-subclasses"
    source = SUBCLASS_WALK.format(marker=marker)
    assert_refused(call(pool, source), line=3)
    # Without the static layer the walk itself works (objects are real): the process layers
    # must stop os.system (no fork, no exec).
    result = call(pool, source, STATIC_OFF)
    assert not marker.exists()
    assert not result.ok or result.value["result"] != 0
    assert_still_serving(pool)


def test_getattr_with_built_strings(pool: SandboxPool) -> None:
    source = "def attack():\n    return getattr(getattr, '__sel' + 'f__')\n"
    assert_refused(call(pool, source), line=2)
    result = call(pool, source, STATIC_OFF)  # the facade's builtins have no getattr
    assert not result.ok and "NameError" in result.error.message
    assert_still_serving(pool)


def test_format_string_attribute_lookup(pool: SandboxPool) -> None:
    source = (
        "import torch.nn as nn\n"
        "def attack():\n"
        "    return '{0.__init__.__globals__}'.format(nn.Module)\n"
    )
    assert_refused(call(pool, source), line=3)
    result = call(pool, source, STATIC_OFF)  # works in Python; what it reaches holds no secret
    assert not leaked(result)
    assert_still_serving(pool)


def test_generator_frames_to_job_globals(pool: SandboxPool, secrets_file: Path) -> None:
    source = f"""
def attack():
    gen = (x for x in [1])
    frame = gen.gi_frame.f_back
    while frame.f_back is not None and "os" not in frame.f_globals:
        frame = frame.f_back
    os_module = frame.f_globals["os"]
    found = [dict(os_module.environ)]
    found.append(os_module.read(os_module.open("{secrets_file}", 0), 4096).decode())
    return found
"""
    assert_refused(call(pool, source))
    result = call(pool, source, STATIC_OFF)
    assert not leaked(result)
    assert not result.ok  # the open is denied
    assert_still_serving(pool)


def test_torch_os_and_friends(pool: SandboxPool, tmp_path: Path) -> None:
    marker = tmp_path / "pwned-by-torch-os"
    source = f"import torch\ndef attack():\n    return torch.os.system('touch {marker}')\n"
    assert_refused(call(pool, source), line=3)
    result = call(pool, source, STATIC_OFF)
    assert not result.ok and "not available in this sandbox" in result.error.message
    result = call(pool, source, BARE_PYTHON)  # the real torch module: os.system must still fail
    assert not marker.exists()
    assert not result.ok or result.value["result"] != 0
    assert_still_serving(pool)


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickles_and_torch_load(pool: SandboxPool, tmp_path: Path) -> None:
    marker = tmp_path / "pwned-by-pickle"
    payload = pickle.dumps(_Payload(marker))
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(payload)
    checkpoint.chmod(0o644)
    tmp_path.chmod(0o755)
    source = (
        f"import torch\ndef attack():\n    return torch.load('{checkpoint}', weights_only=False)\n"
    )
    assert_refused(call(pool, source), line=3)
    result = call(pool, source, BARE_PYTHON)  # reading the file is denied
    assert not result.ok
    source = f"import pickle\ndef attack():\n    return pickle.loads({payload!r})\n"
    assert_refused(call(pool, source), line=1)
    result = call(pool, source, BARE_PYTHON)  # unpickling runs os.system: no fork, no exec
    assert not marker.exists()
    assert_still_serving(pool)


# ------------------------------------------------------------------ the operating system
def test_secrets_in_environment_and_files(pool: SandboxPool, secrets_file: Path) -> None:
    source = f"""
import os
def attack():
    found = [dict(os.environ)]
    for path in ("/proc/self/environ", "/proc/{os.getpid()}/environ",
                 "/proc/{os.getppid()}/environ", "{secrets_file}"):
        try:
            with open(path, "rb") as handle:
                found.append(handle.read().decode(errors="replace"))
        except OSError as exc:
            found.append(repr(exc))
    return found
"""
    assert_refused(call(pool, source), line=2)
    result = call(pool, source, BARE_PYTHON)
    assert result.ok, result.error
    environment, *reads = result.value["result"]
    assert "SECRET_TOKEN" not in environment
    assert all("PermissionError" in text for text in reads), reads
    assert not leaked(result)
    # Each process layer on its own: without seccomp, the other user still cannot read them.
    if os.geteuid() == 0:
        result = call(pool, source, (*BARE_PYTHON, "seccomp"))
        assert not leaked(result)
    assert_still_serving(pool)


def test_sockets(pool: SandboxPool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    source = f"""
import socket
def attack():
    connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    connection.connect(("127.0.0.1", {port}))
    connection.sendall(b"hello")
    return "connected"
"""
    assert_refused(call(pool, source), line=2)
    result = call(pool, source, BARE_PYTHON)
    assert not result.ok and "PermissionError" in result.error.message
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert_still_serving(pool)


@pytest.mark.parametrize(
    "body",
    [
        "import os\ndef attack():\n    return os.fork()\n",
        "import os\ndef attack():\n    while True:\n        os.fork()\n",
        "import subprocess\ndef attack():\n    return subprocess.run(['/bin/true']).returncode\n",
        "import os\ndef attack():\n    os.execv('/bin/true', ['true'])\n",
    ],
    ids=["fork", "fork-bomb", "subprocess", "exec"],
)
def test_no_new_processes(pool: SandboxPool, body: str) -> None:
    assert_refused(call(pool, body), line=1)
    result = call(pool, body, BARE_PYTHON)
    assert not result.ok
    assert result.error.kind in {"job_error", "code_error"}, result.error
    assert "PermissionError" in result.error.message or "Errno 1" in result.error.message
    assert_still_serving(pool)


def test_cannot_signal_other_processes(pool: SandboxPool) -> None:
    victim = subprocess.Popen(["sleep", "30"])
    try:
        body = f"import os\ndef attack():\n    os.kill({victim.pid}, 9)\n    return 'killed'\n"
        result = call(pool, body, BARE_PYTHON)
        assert not result.ok
        time.sleep(0.2)
        assert victim.poll() is None
        body = f"import os\ndef attack():\n    os.kill({os.getpid()}, 9)\n"
        assert not call(pool, body, BARE_PYTHON).ok  # the server itself survives too
    finally:
        victim.kill()
        victim.wait()
    assert_still_serving(pool)


def test_writing_files(pool: SandboxPool, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)  # even where the directory would let anyone write
    target = tmp_path / "written.txt"
    body = (
        f"def attack():\n    with open('{target}', 'w') as handle:\n"
        "        handle.write('x')\n    return 'written'\n"
    )
    assert_refused(call(pool, body), line=2)
    result = call(pool, body, BARE_PYTHON)
    assert not result.ok and not target.exists()
    body = "def attack():\n    open('here.txt', 'w').write('x')\n    return 'written'\n"
    assert not call(pool, body, BARE_PYTHON).ok  # nor into its working directory
    assert_still_serving(pool)


# ------------------------------------------------------------------ resources
def test_memory_bomb_on_cpu(pool: SandboxPool) -> None:
    body = "import torch\ndef attack():\n    return torch.ones(50 * 2**30).sum().item()\n"
    result = call(pool, body)
    assert not result.ok and result.error.kind == "memory", result.error
    body = "def attack():\n    hoard = [str(i) * 2**20 for i in range(50 * 2**10)]\n"
    result = call(pool, body)
    assert not result.ok and result.error.kind == "memory", result.error
    result = pool.run_job(GOOD_MODEL, "sandbox.allocate", {"megabytes": 4096})
    assert not result.ok and result.error.kind == "memory"
    assert_still_serving(pool)


def test_cpu_bomb_is_stopped_at_the_timeout(pool: SandboxPool) -> None:
    started = time.perf_counter()
    result = call(pool, "def attack():\n    while True:\n        pass\n", timeout_s=1.5)
    elapsed = time.perf_counter() - started
    assert not result.ok and result.error.kind == "timeout"
    assert elapsed < 5
    result = pool.run_job(GOOD_MODEL, "sandbox.sleep", {"seconds": 30}, timeout_s=1)
    assert not result.ok and result.error.kind == "timeout"  # wall clock, not only CPU time
    assert_still_serving(pool)


def test_defining_code_that_never_ends(pool: SandboxPool) -> None:
    result = pool.run_job("while True:\n    pass\n", "sandbox.echo", {}, timeout_s=1)
    assert not result.ok and result.error.kind == "timeout"
    assert_still_serving(pool)


def test_huge_output(pool: SandboxPool) -> None:
    result = pool.run_job(GOOD_MODEL, "sandbox.huge_output", {"megabytes": 100}, timeout_s=20)
    assert not result.ok and result.error.kind == "output_too_large"
    body = "def attack():\n    return 'x' * (100 * 2**20)\n"
    result = call(pool, body, timeout_s=20)
    assert not result.ok and result.error.kind == "output_too_large"
    assert_still_serving(pool)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ("import sys\ndef attack():\n    sys.exit(3)\n", "job_error"),
        ("import os\ndef attack():\n    os._exit(3)\n", "crashed"),
        ("import ctypes\ndef attack():\n    return ctypes.string_at(0)\n", "crashed"),
        ("import faulthandler\ndef attack():\n    faulthandler._sigsegv()\n", "crashed"),
    ],
    ids=["sys.exit", "os._exit", "ctypes-segfault", "sigsegv"],
)
def test_exits_and_crashes_are_contained(pool: SandboxPool, body: str, kind: str) -> None:
    assert_refused(call(pool, body), line=1)
    result = call(pool, body, BARE_PYTHON)
    assert not result.ok and result.error.kind == kind, result.error
    assert_still_serving(pool)


def test_every_child_is_fresh(pool: SandboxPool) -> None:
    """State set by one user's code is gone for the next: one process per job, never reused."""
    body = "import torch.nn as nn\ndef attack():\n    nn.Linear.leak = 1\n    return 'planted'\n"
    assert call(pool, body).ok  # classes are real, so this does change torch in that child
    body = "import torch.nn as nn\ndef attack():\n    return hasattr(nn.Linear, 'leak')\n"
    result = call(pool, body)
    assert result.ok and result.value == {"result": False}
    pids = {pool.run_job(GOOD_MODEL, "sandbox.echo", {}).value["pid"] for _ in range(3)}
    assert len(pids) == 3


@pytest.mark.parametrize(
    "reply",
    [
        "b'[' * 100_000",  # a JSON bomb: too deep for the server's parser
        repr(json.dumps({"ok": False, "error": {"kind": "refused", "refusals": [{"line": 1}]}})),
        repr(json.dumps({"ok": True, "value": [1, 2]})),
        repr("not json at all"),
    ],
    ids=["deep-json", "malformed-refusal", "value-not-dict", "garbage"],
)
def test_forged_replies_do_not_reach_the_server(pool: SandboxPool, reply: str) -> None:
    """Code that reaches the job socket may write anything; the server must only say no."""
    body = (
        "import os, struct\ndef attack():\n"
        f"    data = {reply}\n"
        "    data = data if isinstance(data, bytes) else data.encode()\n"
        "    os.write(3, struct.pack('!Q', len(data)) + data)\n"
        "    os._exit(0)\n"
    )
    result = call(pool, body, BARE_PYTHON)
    assert not result.ok
    assert result.error.kind == "untrusted", result.error  # see test_sandbox_replies.py
    assert_still_serving(pool)
