from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-screenshots",
        action="store_true",
        default=False,
        help="e2e: also copy the screenshots over the README's images in docs/screenshots/",
    )


@pytest.fixture(autouse=True)
def fresh_shared_reports() -> None:
    """The shape explorer shares reports between callers in a process; a test that swaps the
    sandbox for a fake must not be answered from another test's report."""
    shapes = sys.modules.get("torchatlas.shapes")
    if shapes is not None:
        shapes.REPORTS.clear()
