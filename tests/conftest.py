from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# Hypothesis's per-example deadline (200 ms) measures this machine's load, not the code: under
# the full suite a pure function's first example took 2.8 s once (a stall of the whole worker).
# Each property still runs all its examples; a test that must be fast says so with a benchmark.
settings.register_profile("atlas", deadline=None)
settings.load_profile("atlas")


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


def _is_browser_test(item: pytest.Item) -> bool:
    return "tests/e2e/" in Path(str(item.fspath)).as_posix()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests first (see :func:`pytest_xdist_make_scheduler`); each half keeps its
    order (a stable sort)."""
    items.sort(key=lambda item: not _is_browser_test(item))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Two workers (pyproject's ``-n 2 --dist loadscope``): the browser tests are one unit of
    work, run in order by one worker from the start, while the other takes the engine and
    AppTest files, a whole file at a time (a file's module fixtures, a sandbox pool for one,
    are set up once). The browser tests are the longer half, and most of their time is spent
    waiting on a server and Chromium, which leaves the second core to the other half.
    (pytest-xdist's own ``loadgroup`` marks do not take under pytest 9.2, whose test ids it
    can no longer rename.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class BrowserTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/e2e" if path.startswith("tests/e2e/") else path

    return BrowserTestsTogether(config, log)
