"""Golden outputs: text a test produces, stored under ``tests/golden/<name>.txt`` and compared
exactly, so a change in what the app shows (a DOT graph, a table, an error's wording) is a
reviewed diff rather than a surprise. A missing file fails (a renamed output must not pass);
``python -m pytest <tests> --update-golden`` rewrites the files from this run, to be looked at
and committed.

>>> def test_dot(golden):  # doctest: +SKIP
...     golden("autograd/dot_chain_rule", dot_text(...))
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
_NAME = re.compile(r"[a-z0-9_]+(/[a-z0-9_]+)*")


def golden_path(name: str) -> Path:
    if not _NAME.fullmatch(name):
        raise ValueError(f"golden names are lowercase words joined by / and _: {name!r}")
    return GOLDEN_DIR / f"{name}.txt"


def assert_golden(name: str, text: str, *, update: bool = False) -> None:
    """Fail unless ``text`` equals the stored output ``name`` (or store it when ``update``)."""
    path = golden_path(name)
    text = text if text.endswith("\n") else text + "\n"
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no stored output {path.relative_to(GOLDEN_DIR.parent.parent)}: "
                    "run the test with --update-golden, look at the file, commit it")  # fmt: skip
    stored = path.read_text(encoding="utf-8")
    if stored != text:
        diff = "".join(difflib.unified_diff(stored.splitlines(True), text.splitlines(True),
                                            "stored", "now", n=2))  # fmt: skip
        pytest.fail(f"{name} differs from its stored output (--update-golden if intended):\n"
                    f"{diff[:4000]}")  # fmt: skip
