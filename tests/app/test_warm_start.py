"""The server's warm-up leaves the shape explorer's first analysis answered in advance."""

from __future__ import annotations

from components import warm
from components.shapes.state import REPORTS
from tests.app.apptest import open_page


def test_the_default_analysis_is_ready_before_the_first_visitor() -> None:
    warm.warm_slow_parts()  # what the server's lifespan runs before it takes visitors
    assert len(REPORTS) == 1
    at = open_page("views/shapes.py")
    assert not at.exception
    assert at.metric[0].value == "62 k"
    assert len(REPORTS) == 1, "the page's first analysis was not the one the warm-up made"
