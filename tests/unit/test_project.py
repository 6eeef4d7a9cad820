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
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][A-Za-z0-9.+]*", line), line
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
