"""The autograd room's link round-trips through the kit (issue 23): a state the room can be
in becomes a link and back unchanged; opened in the room, the link sets the program box, the
seed, the root asked for and the step; junk keeps the declared defaults and the page says
which parts it did not use."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given

from tests.app.apptest import open_page
from tests.links import (
    PAGE,
    address_bar,
    assert_junk_handled,
    assert_link_written,
    assert_no_broken_notice,
    junk_queries,
    valid_values,
)
from torchatlas.autograd.examples import DEFAULT_EXAMPLE, EXAMPLES
from torchatlas.autograd.link import LINK

SCRIPT = "views/autograd.py"


def _room_values(at: Any) -> dict[str, Any]:
    """The room's state in its link's terms, read from the session (what
    ``components.autograd.state.link_values`` gives the kit to write): an example by its key
    when the box holds its program, else the box's text."""
    session = at.session_state
    program = session["autograd_program"]
    key = session["autograd_example"]
    example = EXAMPLES.get(key)
    if example is not None and example.program.strip() == program.strip():
        ex, prog = key, ""
    else:
        ex, prog = DEFAULT_EXAMPLE, program
    return {
        "a_ex": ex,
        "a_prog": prog,
        "a_seed": session["autograd_seed"],
        "a_root": session["autograd_link_root"] if "autograd_link_root" in session else "",  # noqa: SIM401
        "a_step": session["autograd_step"] if "autograd_step" in session else 0,  # noqa: SIM401
    }


def _program_or_example(values: dict[str, Any]) -> dict[str, Any]:
    """The room's links carry an example or a program, never both (a program wins): built
    so, rather than filtered, since most drawn links hold both."""
    return {**values, "a_ex": DEFAULT_EXAMPLE} if values["a_prog"] else values


@PAGE
@given(values=valid_values(LINK).map(_program_or_example))
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    assume(values["a_prog"] not in {e.program for e in EXAMPLES.values()})
    at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception
    assert _room_values(at) == values
    assert_no_broken_notice(at)
    shown = values["a_prog"] or EXAMPLES[values["a_ex"]].program
    assert at.text_area(key="autograd_program").value == shown
    assert_link_written(at, LINK, values)


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    read = LINK.read(query)
    at = open_page(SCRIPT, query=query)
    assert not at.exception
    values = _room_values(at)
    # The example the link names is shown: its program, not a custom one.
    fitted = ("a_prog",) if read.values["a_ex"] != DEFAULT_EXAMPLE else ()
    assert_junk_handled(at, LINK, query, values, fitted=fitted)


def test_a_link_names_a_program_or_an_example_and_the_room_writes_the_same() -> None:
    program = "w = ones(2, requires_grad=True)\nloss = (w * 3).sum()\n"
    at = open_page(SCRIPT, query={"a_prog": program, "a_step": "2"})
    assert at.selectbox(key="autograd_example").value == "custom"
    assert address_bar(at) == {"a_prog": [program], "a_step": ["2"]}
    at = open_page(SCRIPT, query={"a_ex": "mlp", "a_root": "nowhere"})
    assert at.text_area(key="autograd_program").value == EXAMPLES["mlp"].program
    assert address_bar(at) == {"a_ex": ["mlp"], "a_root": ["nowhere"]}  # asked for, and told
    assert any("`nowhere`" in w.value for w in at.warning)
