"""Community Cloud's entry (deploy/cloud/): its dependency file pins exactly the root's
versions (torch and torchvision as their CPU wheels), ``streamlit run`` finds its ``st.App``,
and that App is app.py's own server part serving the root's app.py."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
CLOUD = ROOT / "deploy" / "cloud"
ENTRY = CLOUD / "streamlit_app.py"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CPU_WHEELS = {"torch", "torchvision"}


def requirement_lines(path: Path) -> tuple[list[str], list[Requirement]]:
    """(option lines, requirements) of a requirements file, comments and blanks left out."""
    options: list[str] = []
    requirements: list[Requirement] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            options.append(line)
        else:
            requirements.append(Requirement(line))
    return options, requirements


def by_name(requirements: list[Requirement]) -> dict[str, Requirement]:
    named = {r.name.lower(): r for r in requirements}
    assert len(named) == len(requirements), "a package is pinned twice"
    return named


def test_cloud_requirements_pin_exactly_the_roots_versions() -> None:
    root_options, root = requirement_lines(ROOT / "requirements.txt")
    cloud_options, cloud = requirement_lines(CLOUD / "requirements.txt")
    root_pins, cloud_pins = by_name(root), by_name(cloud)
    assert root_options == [], "the root file is README command 1's: no index lines there"
    # Only the CPU wheels' index, as an extra one: everything else still comes from PyPI.
    assert cloud_options == [f"--extra-index-url {CPU_INDEX}"]
    assert sorted(cloud_pins) == sorted(root_pins)
    for name, pin in root_pins.items():
        twin = cloud_pins[name]
        (spec,) = pin.specifier  # the root pins every package to one version
        assert spec.operator == "==", pin
        wanted = f"{spec.version}+cpu" if name in CPU_WHEELS else spec.version
        assert [(s.operator, s.version) for s in twin.specifier] == [("==", wanted)], twin
        assert twin.extras == pin.extras, twin
        assert str(twin.marker) == str(pin.marker), twin
    assert set(root_pins) >= CPU_WHEELS


def test_streamlit_run_finds_the_entrys_app() -> None:
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ENTRY)
    assert found.is_asgi_app and found.import_string == "streamlit_app:app"
    # The root's own entry, for comparison: `streamlit run app.py` serves it the same way.
    assert discover_asgi_app(ROOT / "app.py").import_string == "app:app"


def server_part(path: Path) -> list[str]:
    """The statements of a file's ``if __name__ != "__main__":`` branch, as source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ != '__main__'":
            return [ast.unparse(statement) for statement in node.body]
    raise AssertionError(f"{path.name} has no server part")


def test_the_entrys_server_part_is_app_pys() -> None:
    """Both files start the server the same way; only the script path is spelt differently
    (app.py names itself, the entry names app.py)."""
    root, cloud = server_part(ROOT / "app.py"), server_part(ENTRY)
    assert root[-1] == "app = st.App(__file__, lifespan=server_lifespan)"
    assert cloud[-1] == "app = st.App(APP_SCRIPT, lifespan=server_lifespan)"
    assert cloud[:-1] == root[:-1]


def test_the_server_import_builds_an_app_serving_the_roots_app_py() -> None:
    """Imported as uvicorn imports it (its folder on sys.path, the repository root as the
    working directory, as on Cloud): an st.App whose script is the root's app.py, with the
    lifespan that warms the server. In a child process: the import installs process-wide
    settings (malloc arenas, uvicorn's peer handling)."""
    probe = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(CLOUD)!r}]\n"
        "import streamlit_app\n"
        "from components.warm import server_lifespan\n"
        "app = streamlit_app.app\n"
        "print(json.dumps({'script': str(app._resolve_script_path()),"
        " 'lifespan': app._user_lifespan is server_lifespan,"
        " 'type': type(app).__name__, 'root_first': sys.path[0]}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "script": str(ROOT / "app.py"),
        "lifespan": True,
        "type": "App",
        "root_first": str(ROOT),
    }


def test_views_beside_the_entry_are_the_roots_views() -> None:
    """Run as a script, the entry registers app.py's pages from its own folder: the link
    ``deploy/cloud/views`` makes every ``views/...`` path the root's file."""
    link = CLOUD / "views"
    if not link.is_symlink() and sys.platform == "win32":  # pragma: no cover
        pytest.skip("a checkout without symlinks (Windows); Cloud checks out on Linux")
    assert link.is_symlink() and os.readlink(link) == "../../views"
    assert link.resolve() == ROOT / "views"
