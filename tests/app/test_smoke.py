"""One AppTest smoke run per page and language: no exception may be rendered."""

from __future__ import annotations

import pytest

from components.rooms import built_rooms
from tests.app.apptest import open_page

PAGES = ["views/home.py", *(room.script for room in built_rooms())]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("script", PAGES)
def test_page_renders_without_exception(script: str, lang: str) -> None:
    at = open_page(script, lang)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
