"""The strides room's link round-trips through the kit (issue 23): a state the room can be in
becomes a link and back unchanged; opened in the room, the link fills the boxes (its ops one
per line of the chain box), the seed and the step asked for; junk keeps the declared defaults
and the page says which parts it did not use."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from tests.app.apptest import open_page
from tests.links import (
    PAGE,
    address_bar,
    assert_junk_handled,
    assert_no_broken_notice,
    junk_queries,
    valid_values,
)
from torchatlas.strides.link import LINK

SCRIPT = "views/strides.py"


def _room_values(at: Any) -> dict[str, Any]:
    """The room's state in its link's terms, read from the session (what
    ``components.strides.state.link_values`` gives the kit to write): the chain box's
    non-empty lines are the ops."""
    session = at.session_state
    ops = tuple(line for line in session["strides_ops"].split("\n") if line)
    return {
        "s_shape": session["strides_shape"],
        "s_dtype": session["strides_dtype"],
        "s_ops": ops,
        "s_seed": session["strides_seed"],
        "s_step": session["strides_link_step"],
    }


@PAGE
@given(values=valid_values(LINK))
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception
    assert _room_values(at) == values
    assert_no_broken_notice(at)
    assert at.text_area(key="strides_ops").value == "\n".join(values["s_ops"])
    written = {name: value for name, value in address_bar(at).items() if name in LINK.names}
    expected = LINK.to_query(values)
    assert written == {k: [v] if isinstance(v, str) else v for k, v in expected.items()}


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    at = open_page(SCRIPT, query=query)
    assert not at.exception
    values = _room_values(at)
    assert_junk_handled(at, LINK, query, values)


def test_a_link_asks_for_a_step_until_the_chain_changes() -> None:
    query = {"s_shape": "3,4", "s_ops": [".t()", ".contiguous()"], "s_step": "1"}
    at = open_page(SCRIPT, query=query)
    assert at.session_state["strides_step"] == 1  # y1 = x.t()
    assert address_bar(at)["s_step"] == ["1"]
    at = open_page(SCRIPT, query={**query, "s_step": "9"})  # past the end: the last step
    assert at.session_state["strides_step"] == 2 and address_bar(at)["s_step"] == ["9"]
    at.text_area(key="strides_ops").set_value(".t()").run()  # another chain: its last step
    assert at.session_state["strides_step"] == 1 and "s_step" not in address_bar(at)
    at = open_page(SCRIPT, query={"s_shape": "3,4", "s_ops": ""})  # "no ops", said explicitly
    assert at.session_state["strides_ops"] == "" and address_bar(at)["s_ops"] == [""]
