"""The shape explorer's link round-trips through the kit (issue 23): a state the room can be
in becomes a link and back unchanged; opened in the room, the link fills the editor and the
boxes (where it leaves the code or a box out, the preset's own); junk keeps the declared
defaults and the page says which parts it did not use."""

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
from torchatlas.presets import PRESETS
from torchatlas.shapes.link import LINK

SCRIPT = "views/shapes.py"
# The code and boxes a preset fills: a link field at None is "the preset's own".
BOXES = {"m_src": "source", "m_model": "model", "m_shapes": "shapes", "m_dtypes": "dtypes"}


def _normal(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as the room writes them: a box holding the preset's own value is None."""
    preset = PRESETS[values["m_preset"]]
    return {
        name: None if name in BOXES and value == getattr(preset, BOXES[name]) else value
        for name, value in values.items()
    }


def _room_values(at: Any) -> dict[str, Any]:
    """The room's state in its link's terms, read from the session keys the link names."""
    session = at.session_state
    return _normal({name: session[LINK.session_key(name)] for name in LINK.names})


@PAGE
@given(values=valid_values(LINK))
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    at = open_page(SCRIPT, query=LINK.to_query(values))
    assert not at.exception
    assert _room_values(at) == _normal(values)
    assert_no_broken_notice(at)
    assert at.text_area(key="shapes_source").value == values["m_src"]
    # The analysis on arrival writes the link back: the same one (the preset's own left out).
    written = {name: value for name, value in address_bar(at).items() if name in LINK.names}
    expected = LINK.to_query(_normal(values))
    assert written == {k: [v] if isinstance(v, str) else v for k, v in expected.items()}


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    read = LINK.read(query)
    at = open_page(SCRIPT, query=query)
    assert not at.exception
    values = _room_values(at)
    assert values == _normal(read.values)
    assert_junk_handled(at, LINK, query, values)


def test_a_link_without_code_opens_its_presets_own() -> None:
    at = open_page(SCRIPT, query={"m_preset": "resnet18"})
    preset = PRESETS["resnet18"]
    assert at.text_area(key="shapes_source").value == preset.source
    assert at.text_input(key="shapes_model").value == preset.model
    assert at.text_input(key="shapes_inputs").value == preset.shapes
    at = open_page(SCRIPT, query={"m_preset": "resnet18", "m_model": ""})  # an empty box
    assert at.text_input(key="shapes_model").value == ""
    assert address_bar(at)["m_model"] == [""]
