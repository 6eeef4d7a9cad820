"""Every AppTest run of a page must draw without needing the app's last wall (the card that
replaces an unexpected exception): a test that reaches it fails, unless it is marked
``expects_unexpected`` (the tests of that wall itself)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def no_unexpected_errors(request: pytest.FixtureRequest):
    from components.contained import RECENT_UNEXPECTED

    RECENT_UNEXPECTED.clear()
    yield
    if request.node.get_closest_marker("expects_unexpected") is None:
        assert list(RECENT_UNEXPECTED) == [], "a page reached the unexpected-error card"
