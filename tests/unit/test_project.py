"""The project's promises about itself: README's two commands, CI running the same test
command, exact pins, and the engine staying free of Streamlit."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)
    return blocks[:2]


def test_readme_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    run_app, run_tests = _readme_commands()
    assert text.index(run_app) < 120, "the run command must come first"
    assert run_app.endswith("streamlit run app.py")
    assert "requirements.txt" in run_app
    assert "requirements-dev.txt" in run_tests and "pytest" in run_tests


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    _, run_tests = _readme_commands()
    assert run_tests in ci.splitlines()


def test_dependencies_are_pinned_exactly() -> None:
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if not line or line.startswith("-r"):
                continue
            # An exact pin, with at most one platform marker (uvloop has no Windows build).
            pin = r"[A-Za-z0-9_.\-\[\]]+==[0-9][A-Za-z0-9.+]*"
            assert re.fullmatch(pin + r'(; [a-z_]+ (==|!=) "[A-Za-z0-9_.]+")?', line), line
    pins = (ROOT / "requirements.txt").read_text()
    assert "torch==2.14.1\n" in pins and "torchvision==0.29.1\n" in pins


def test_engine_never_imports_streamlit() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "torchatlas").rglob("*.py")
        if re.search(r"^\s*(import|from)\s+streamlit", path.read_text(), flags=re.M)
    ]
    assert offenders == []


def test_pages_hold_no_torch_logic() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "views").glob("*.py")
        if re.search(r"^\s*(import|from)\s+torch\b", path.read_text(), flags=re.M)
    ]
    assert offenders == []


def _import_graph():
    import grimp

    return grimp.build_graph(
        "torchatlas", "components", "views", "bench", exclude_type_checking_imports=True
    )


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph.modules:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def _without_package_inits(groups: list[list[str]], graph) -> list[list[str]]:
    """A package's ``__init__`` re-exporting its own modules is not a cycle worth reporting;
    a cycle between two sibling modules (or across packages) is."""
    real = []
    for group in groups:
        members = set(group)
        packages = {m for m in members if graph.find_children(m)}
        rest = members - packages
        if len(rest) > 1 and any(
            set(graph.find_modules_directly_imported_by(m)) & (rest - {m}) for m in rest
        ):
            real.append(group)
    return real


def test_no_import_cycles() -> None:
    graph = _import_graph()
    assert _without_package_inits(_cycles(graph), graph) == []


def test_import_contracts_hold() -> None:
    """.importlinter: views → components → torchatlas, the engine without Streamlit, the
    sandbox without any room, rooms independent of each other and of the tours built on them,
    drawing builders without Streamlit. Without the graph cache: a cached graph can predate
    the files it describes."""
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / ".importlinter"), no_cache=True) == 0


def test_the_sandbox_names_no_room_and_no_test_job() -> None:
    """The import contract cannot see a job named by string ("torchatlas.shapes:…",
    "shapes.analyze"): no file of the sandbox may name a room, and the tests' jobs live in
    tests/, so the page's pool cannot run them."""
    from tests.sandbox_jobs import JOBS as TEST_JOBS

    rooms = sorted(
        path.name
        for path in (ROOT / "torchatlas").iterdir()
        if (path / "__init__.py").exists() and path.name != "sandbox"
    )
    assert "shapes" in rooms
    forbidden = re.compile(
        "|".join(
            [rf"\btorchatlas\.{room}\b|\b{room}\.\w" for room in rooms]
            + [re.escape(name) for name in TEST_JOBS]
            + ["testing_jobs", "sandbox_jobs"]
        )
    )
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "torchatlas" / "sandbox").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if forbidden.search(line)
    ]
    assert found == []


# Functions allowed over the limit for now, each named "path:qualified name" with why. An
# entry that no longer needs its place fails the test too, so the list only shrinks. Empty
# since issue 37: every function of the app is 80 lines or shorter.
LONG_FUNCTION_EXCEPTIONS: dict[str, str] = {}
MAX_FUNCTION_LINES = 80


def _long_functions(root: Path) -> dict[str, int]:
    """Every function and method of the app (engine, components, views, app.py) longer than
    :data:`MAX_FUNCTION_LINES`, as "path:Class.name" → its length (decorators not counted)."""
    import ast

    files = [root / "app.py"] + [
        path for top in ("torchatlas", "components", "views") for path in (root / top).rglob("*.py")
    ]
    found: dict[str, int] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                length = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                if not isinstance(child, ast.ClassDef) and length > MAX_FUNCTION_LINES:
                    found[f"{path}:{name}"] = length
                visit(child, path, f"{name}.")
            else:
                visit(child, path, prefix)

    for path in sorted(files):
        visit(ast.parse(path.read_text()), path.relative_to(root).as_posix(), "")
    return found


def test_no_function_over_80_lines() -> None:
    """A function longer than a screen does more than one thing: split it by what it does
    (issue 37). bench/ is left out (a benchmark's script reads top to bottom)."""
    found = _long_functions(ROOT)
    assert sorted(set(found) - set(LONG_FUNCTION_EXCEPTIONS)) == []
    assert sorted(set(LONG_FUNCTION_EXCEPTIONS) - set(found)) == [], "remove split ones"


def test_the_long_function_check_sees_a_long_function(tmp_path: Path) -> None:
    """The check itself finds a nested function one line over the limit, and no shorter one."""
    for top in ("torchatlas", "components", "views"):
        (tmp_path / top).mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "torchatlas" / "room.py").write_text(
        f"class Room:\n    def long(self):\n{body}\n        return x0\n"
        f"    def short(self):\n        return 1\n"
    )
    (tmp_path / "app.py").write_text("def main():\n    return 1\n")
    assert _long_functions(tmp_path) == {"torchatlas/room.py:Room.long": MAX_FUNCTION_LINES + 1}
