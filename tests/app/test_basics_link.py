"""The basics room's link round-trips through the kit (issue 23): a state the room can be in
becomes a link and back unchanged; opened in the room, the link sets every section's inputs
and the URL keeps them; junk keeps the declared defaults and the page says which parts it did
not use. (tests/app/test_basics_links.py feeds hostile values to the same fields.)"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.app.apptest import open_page
from tests.links import assert_junk_handled, assert_link_written, junk_queries, valid_values
from torchatlas.basics import DTYPES, SCALAR_TYPES, OperandKind
from torchatlas.basics.link import LINK
from torchatlas.rooms import link_of

SCRIPT = "views/basics.py"
PAGE = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _consistent(values: dict[str, Any]) -> bool:
    """A state the room can be in: a Python scalar operand names a Python type, a tensor
    operand a dtype (the room keeps the pair valid, so a link with another pair is fitted)."""
    scalar = values["b_rk"] == OperandKind.SCALAR
    return values["b_r"] in (SCALAR_TYPES if scalar else DTYPES)


STATES = valid_values(LINK).filter(_consistent)


def _session_values(at: Any) -> dict[str, Any]:
    return {name: at.session_state[LINK.session_key(name)] for name in LINK.names}


def test_the_room_declares_its_link_where_other_rooms_find_it() -> None:
    assert link_of("basics") is LINK


@PAGE
@given(values=STATES)
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception, [e.value for e in at.exception]
    assert _session_values(at) == values
    assert_link_written(at, LINK, values)


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    at = open_page(SCRIPT, query=query)
    assert not at.exception, [e.value for e in at.exception]
    values = _session_values(at)
    assert_junk_handled(at, LINK, query, values, fitted=("b_rk", "b_r"))
