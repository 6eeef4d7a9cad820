"""The module room's link round-trips through the kit (issue 23): a state the room can be in
becomes a link and back unchanged; opened in the room, the link fills the section, the
editor, the model box and every control (where it leaves the code or the model box out, the
preset's own); junk keeps the declared defaults and the page says which parts it did not use."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.app.apptest import open_page
from tests.links import PAGE, assert_junk_handled, assert_no_broken_notice, junk_queries
from tests.links import valid_values as link_values
from torchatlas.modules.link import LINK
from torchatlas.modules.presets import PRESETS

SCRIPT = "views/modules.py"
BOXES = {"nn_src": "source", "nn_model": "model"}  # a link field at None: the preset's own


def valid_values() -> st.SearchStrategy[dict[str, Any]]:
    return link_values(LINK)


def _normal(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as the room writes them: a box holding the preset's own value is None."""
    preset = PRESETS[values["nn_preset"]]
    return {
        name: None if name in BOXES and value == getattr(preset, BOXES[name]) else value
        for name, value in values.items()
    }


def _room_values(at: Any) -> dict[str, Any]:
    """The room's state in its link's terms, read from the session keys the link names."""
    session = at.session_state
    return _normal({name: session[LINK.session_key(name)] for name in LINK.names})


@PAGE
@given(values=valid_values())
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception
    assert _room_values(at) == _normal(values)
    assert_no_broken_notice(at)


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    read = LINK.read(query)
    at = open_page(SCRIPT, query=query)
    assert not at.exception
    values = _room_values(at)
    assert values == _normal(read.values)
    assert_junk_handled(at, LINK, query, values)


def test_only_the_numbers_a_control_offers_are_read() -> None:
    read = LINK.read({"nn_lr": ["0.3"], "nn_steps": ["40"]})
    assert (read.values["nn_lr"], read.values["nn_steps"], read.broken) == (0.3, 40, ())
    for lr, steps in (("0.30", "15"), ("3e-1", "４０"), ("nan", "1e9")):
        read = LINK.read({"nn_lr": [lr], "nn_steps": [steps]})
        assert read.broken == ("nn_lr", "nn_steps")
