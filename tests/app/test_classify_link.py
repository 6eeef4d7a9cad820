"""The classification room's link round-trips through the kit (issue 23): a state the room can
be in becomes a link and back unchanged; opened in the room, the link sets the widgets; junk
keeps the declared defaults and the page says which parts it did not use. ``c_model`` keeps
the name the room's links have always used."""

from __future__ import annotations

import contextlib
import os
import tempfile
import urllib.error
from collections.abc import Iterator
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings

from tests.app.apptest import open_page
from tests.links import assert_junk_handled, assert_link_written, junk_queries, valid_values
from torchatlas.classify import models
from torchatlas.classify.link import LINK

SCRIPT = "views/classify.py"
PAGE = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """No download and no weights on disk: a torchvision model is explained, never loaded."""

    def no_network(url: str, timeout: float) -> object:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    with (
        tempfile.TemporaryDirectory() as hub,
        mock.patch.dict(os.environ, TORCH_HOME=hub),
        mock.patch.object(models, "_open_url", no_network),
    ):
        yield


def _session_values(at: Any) -> dict[str, Any]:
    return {name: at.session_state[LINK.session_key(name)] for name in LINK.names}


def test_the_model_keeps_its_old_link_name() -> None:
    assert LINK.names[0] == "c_model" and LINK.session_prefix == "classify_"


@PAGE
@given(values=valid_values(LINK))
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    with _offline():
        at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception, [e.value for e in at.exception]
    assert _session_values(at) == values
    assert at.selectbox(key="classify_model").value == values["c_model"]
    assert at.slider(key="classify_topk").value == values["c_topk"]
    assert_link_written(at, LINK, values)


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    with _offline():
        at = open_page(SCRIPT, query=query)
    assert not at.exception, [e.value for e in at.exception]
    values = _session_values(at)
    assert_junk_handled(at, LINK, query, values)
