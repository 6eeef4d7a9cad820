"""Run one page of the real app (through app.py's navigation) under AppTest."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

# One runner for tests and benchmarks: a page of the real app through app.py's navigation.
from bench.harness import APP, open_page
from bench.harness import APPTEST_TIMEOUT_S as TIMEOUT_S

__all__ = ["APP", "TIMEOUT_S", "open_page", "rendered_text"]


def rendered_text(at: AppTest) -> str:
    """Every markdown/caption/title/header string the page rendered, joined."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning"):
        parts.extend(str(element.value) for element in getattr(at, kind))
    return "\n".join(parts)
