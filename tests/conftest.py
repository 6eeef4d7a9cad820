from __future__ import annotations

import sys
from collections.abc import Callable
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
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the stored outputs in tests/golden/ from this run (look at the diff, commit)",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)``: the text must equal ``tests/golden/<name>.txt`` (tests/golden.py)."""
    from tests.golden import assert_golden

    update = bool(request.config.getoption("--update-golden"))
    return lambda name, text: assert_golden(name, text, update=update)


@pytest.fixture(autouse=True)
def fresh_shared_reports() -> None:
    """The shape explorer and the module room share reports between visitors in a process
    (``components.<room>.state.REPORTS``); a test that swaps the sandbox for a fake must not
    be answered from another test's report."""
    for room in ("shapes", "modules"):
        state = sys.modules.get(f"components.{room}.state")
        if state is not None:
            state.REPORTS.clear()
