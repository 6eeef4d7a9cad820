"""The devices room's link round-trips through the kit (issue 23): a state the room can be in
becomes a link and back unchanged; opened in the room, the link sets the widgets; junk keeps
the declared defaults and the page says which parts it did not use."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import given

from components.format import format_bytes
from tests.app.apptest import open_page
from tests.links import (
    PAGE,
    address_bar,
    assert_junk_handled,
    assert_no_broken_notice,
    junk_queries,
    valid_values,
)
from torchatlas.devices.link import LINK
from torchatlas.devices.transfer import (
    BUFFERS_AT_ONCE,
    MAX_BYTES,
    MEMORY_BUDGET_BYTES,
    SIZES,
)

SCRIPT = "views/devices.py"


def _session_values(at: Any) -> dict[str, Any]:
    return {name: at.session_state[LINK.session_key(name)] for name in LINK.names}


@PAGE
@given(values=valid_values(LINK))
def test_a_link_opens_the_room_in_its_state(values: dict[str, Any]) -> None:
    # Every size the link can name is offered (a smaller machine keeps its largest instead).
    with mock.patch("components.devices.state.machine_size_cap", return_value=SIZES[-1]):
        at = open_page(SCRIPT, query=LINK.to_query(values))
    assert _session_values(at) == values
    assert_no_broken_notice(at)
    opened = values["d_demo"]
    if opened:  # the demonstration the link names is run, its result on the page
        assert at.session_state[f"devices_result_{opened}"] is not None
    written = {name: value for name, value in address_bar(at).items() if name in LINK.names}
    expected = LINK.to_query(values)
    assert written == {k: [v] if isinstance(v, str) else v for k, v in expected.items()}


@PAGE
@given(query=junk_queries(LINK))
def test_junk_keeps_the_defaults_and_says_so(query: dict[str, list[str]]) -> None:
    at = open_page(SCRIPT, query=query)
    values = _session_values(at)
    assert_junk_handled(at, LINK, query, values)


def test_the_largest_copy_is_kept_within_what_this_machine_offers() -> None:
    with mock.patch("components.devices.state.machine_size_cap", return_value=SIZES[3]):
        from components.devices import state

        state.ROOM_CACHE.clear()
        at = open_page(SCRIPT, query={"d_max": str(SIZES[-1])})
        state.ROOM_CACHE.clear()
    assert at.select_slider(key="devices_bench_max").value == str(SIZES[3])
    assert not at.exception


def test_a_press_on_run_makes_the_link_open_that_demonstration() -> None:
    at = open_page(SCRIPT)
    at.button_group(key="devices_variant_numpy_bridge").set_value("tensor").run()
    at.button(key="devices_run_numpy_bridge").click().run()
    query = address_bar(at)
    assert query["d_demo"] == ["numpy_bridge"] and query["d_numpy_bridge"] == ["tensor"]


def test_a_link_asking_for_more_than_the_memory_budget_is_clamped_and_said() -> None:
    """A link from before the budget (or typed by hand) names a size no run may hold: the
    room keeps its largest, says which part of the link it did not use, and never raises."""
    from components.devices import state

    with mock.patch("components.devices.state.machine_size_cap", return_value=MAX_BYTES):
        state.ROOM_CACHE.clear()
        for asked in (4 * MAX_BYTES, 1 << 30, 1 << 40):
            at = open_page(SCRIPT, query={"d_max": str(asked)})
            assert not at.exception
            slider = at.select_slider(key="devices_bench_max")
            assert slider.value == str(MAX_BYTES)
            assert any("d_max" in box.value for box in at.info), [b.value for b in at.info]
            # Every size the page offers fits the budget with both of a run's buffers.
            assert all(size * BUFFERS_AT_ONCE <= MEMORY_BUDGET_BYTES for size in SIZES)
            assert list(slider.options) == [format_bytes(size) for size in SIZES]
        state.ROOM_CACHE.clear()
