"""Every room's link round-trips through the kit (issues 23 and 37): one test over the room
registry. A state the room can be in becomes a link; opened in the room, the link sets the
room to that state (its widgets too) and is written back as it came; junk keeps the declared
defaults and the page names the parts it did not use. What differs between rooms (which
states it can be in, how its state reads in its link's terms, what it fits, what it shows) is
one :class:`LinkCase` each; a room in the registry without one fails. Below them, the tests
of one room's link alone. (tests/app/test_basics_links.py feeds hostile values to basics.)"""

from __future__ import annotations

import contextlib
import os
import tempfile
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.format import format_bytes
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
from torchatlas.basics import DTYPES, SCALAR_TYPES, OperandKind
from torchatlas.classify import models
from torchatlas.devices.transfer import BUFFERS_AT_ONCE, MAX_BYTES, MEMORY_BUDGET_BYTES, SIZES
from torchatlas.links import LinkRead, LinkSpec
from torchatlas.modules.presets import PRESETS as MODULE_PRESETS
from torchatlas.presets import PRESETS as SHAPE_PRESETS
from torchatlas.rooms import link_of, room_keys, room_of

Values = dict[str, Any]


def session_values(at: Any, spec: LinkSpec) -> Values:
    """The room's state as the session keys its link names hold it."""
    return {name: at.session_state[spec.session_key(name)] for name in spec.names}


@dataclass(frozen=True)
class LinkCase:
    """What one room's link test needs beyond its registry entry and link declaration.

    ``states``: the states the room can be in (default: any value of every field);
    ``read``: the room's state in its link's terms, after a run (default: its session keys);
    ``normal``: a state as the room writes it (a box holding its preset's own value is None);
    ``shown``: checks of the widgets a link fills; ``writes_back``: the room writes the link
    it was opened with into the address bar; ``junk_reads``: junk leaves the room in exactly
    the state the link reads as; ``fitted``: fields the room fits to another instead of
    keeping their default; ``opening``: around each run (no network, a machine's size)."""

    examples: int = 12
    states: Callable[[LinkSpec], st.SearchStrategy[Values]] = valid_values
    read: Callable[[Any, LinkSpec], Values] = session_values
    normal: Callable[[Values], Values] = dict
    shown: Callable[[Any, Values], None] = lambda at, values: None
    writes_back: bool = True
    junk_reads: bool = False
    fitted: Callable[[LinkRead], tuple[str, ...]] = lambda read: ()
    opening: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext


# ------------------------------------------------------------------------------ autograd
def _autograd_values(at: Any, spec: LinkSpec) -> Values:
    """What ``components.autograd.state.link_values`` gives the kit to write: an example by
    its key when the box holds its program, else the box's text."""
    session = at.session_state
    program, key = session["autograd_program"], session["autograd_example"]
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


def _autograd_states(spec: LinkSpec) -> st.SearchStrategy[Values]:
    """A program or an example, never both (a program wins): built so, rather than
    filtered, since most drawn links hold both; a program that is an example's is its key."""
    programs = {example.program for example in EXAMPLES.values()}
    return (
        valid_values(spec)
        .map(lambda values: {**values, "a_ex": DEFAULT_EXAMPLE} if values["a_prog"] else values)
        .filter(lambda values: values["a_prog"] not in programs)
    )


def _autograd_shown(at: Any, values: Values) -> None:
    shown = values["a_prog"] or EXAMPLES[values["a_ex"]].program
    assert at.text_area(key="autograd_program").value == shown


# -------------------------------------------------------------------------------- basics
def _basics_consistent(values: Values) -> bool:
    """A Python scalar operand names a Python type, a tensor operand a dtype (the room keeps
    the pair valid, so a link with another pair is fitted)."""
    scalar = values["b_rk"] == OperandKind.SCALAR
    return values["b_r"] in (SCALAR_TYPES if scalar else DTYPES)


# ------------------------------------------------------------------------------ classify
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


def _classify_shown(at: Any, values: Values) -> None:
    assert at.selectbox(key="classify_model").value == values["c_model"]
    assert at.slider(key="classify_topk").value == values["c_topk"]


# ------------------------------------------------------------------------------- devices
def _every_size_offered() -> contextlib.AbstractContextManager[Any]:
    # Every size the link can name is offered (a smaller machine keeps its largest instead).
    return mock.patch("components.devices.state.machine_size_cap", return_value=SIZES[-1])


def _devices_shown(at: Any, values: Values) -> None:
    opened = values["d_demo"]
    if opened:  # the demonstration the link names is run, its result on the page
        assert at.session_state[f"devices_result_{opened}"] is not None


# ------------------------------------------------------------------- modules and shapes
def _preset_normal(presets: dict[str, Any], preset_field: str, boxes: dict[str, str]):
    """``values`` as the room writes them: a box holding the preset's own value is None."""

    def normal(values: Values) -> Values:
        preset = presets[values[preset_field]]
        return {
            name: None if name in boxes and value == getattr(preset, boxes[name]) else value
            for name, value in values.items()
        }

    return normal


_modules_normal = _preset_normal(
    MODULE_PRESETS, "nn_preset", {"nn_src": "source", "nn_model": "model"}
)
_shapes_normal = _preset_normal(
    SHAPE_PRESETS,
    "m_preset",
    {"m_src": "source", "m_model": "model", "m_shapes": "shapes", "m_dtypes": "dtypes"},
)


def _shapes_shown(at: Any, values: Values) -> None:
    assert at.text_area(key="shapes_source").value == values["m_src"]


# ------------------------------------------------------------------------------- strides
def _strides_values(at: Any, spec: LinkSpec) -> Values:
    """What ``components.strides.state.link_values`` gives the kit to write: the chain
    box's non-empty lines are the ops."""
    session = at.session_state
    return {
        "s_shape": session["strides_shape"],
        "s_dtype": session["strides_dtype"],
        "s_ops": tuple(line for line in session["strides_ops"].split("\n") if line),
        "s_seed": session["strides_seed"],
        "s_step": session["strides_link_step"],
    }


def _strides_shown(at: Any, values: Values) -> None:
    assert at.text_area(key="strides_ops").value == "\n".join(values["s_ops"])


CASES: dict[str, LinkCase] = {
    "basics": LinkCase(
        examples=10,
        states=lambda spec: valid_values(spec).filter(_basics_consistent),
        fitted=lambda read: ("b_rk", "b_r"),
    ),
    "strides": LinkCase(read=_strides_values, shown=_strides_shown),
    "autograd": LinkCase(
        states=_autograd_states,
        read=_autograd_values,
        shown=_autograd_shown,
        # The example the link names is shown: its program, not a custom one.
        fitted=lambda read: ("a_prog",) if read.values["a_ex"] != DEFAULT_EXAMPLE else (),
    ),
    "modules": LinkCase(
        read=lambda at, spec: _modules_normal(session_values(at, spec)),
        normal=_modules_normal,
        writes_back=False,
        junk_reads=True,
    ),
    "shapes": LinkCase(
        read=lambda at, spec: _shapes_normal(session_values(at, spec)),
        normal=_shapes_normal,
        shown=_shapes_shown,
        junk_reads=True,
    ),
    "classify": LinkCase(examples=10, shown=_classify_shown, opening=_offline),
    "devices": LinkCase(shown=_devices_shown, opening=_every_size_offered),
}


def test_every_room_of_the_registry_has_its_link_case() -> None:
    assert set(CASES) == set(room_keys())


@pytest.mark.parametrize("room", room_keys())
def test_a_link_opens_the_room_in_its_state(room: str) -> None:
    case, spec, script = CASES[room], link_of(room), room_of(room).script

    @settings(PAGE, max_examples=case.examples)
    @given(values=case.states(spec))
    def opens(values: Values) -> None:
        with case.opening():
            at = open_page(script, query=spec.to_query(values))
        assert not at.exception, [e.value for e in at.exception]
        assert case.read(at, spec) == case.normal(values)
        assert_no_broken_notice(at)
        case.shown(at, values)
        if case.writes_back:  # the same link (the preset's own left out)
            assert_link_written(at, spec, case.normal(values))

    opens()


@pytest.mark.parametrize("room", room_keys())
def test_junk_keeps_the_defaults_and_says_so(room: str) -> None:
    case, spec, script = CASES[room], link_of(room), room_of(room).script

    @settings(PAGE, max_examples=case.examples)
    @given(query=junk_queries(spec))
    def keeps(query: dict[str, list[str]]) -> None:
        read = spec.read(query)
        with case.opening():
            at = open_page(script, query=query)
        assert not at.exception, [e.value for e in at.exception]
        values = case.read(at, spec)
        if case.junk_reads:
            assert values == case.normal(read.values)
        assert_junk_handled(at, spec, query, values, fitted=case.fitted(read))

    keeps()


# ---------------------------------------------------------------- one room's link alone
def test_basics_declares_its_link_where_other_rooms_find_it() -> None:
    from torchatlas.basics.link import LINK

    assert link_of("basics") is LINK


def test_classify_keeps_the_models_old_link_name() -> None:
    spec = link_of("classify")
    assert spec.names[0] == "c_model" and spec.session_prefix == "classify_"


def test_autograd_link_names_a_program_or_an_example_and_the_room_writes_the_same() -> None:
    script = room_of("autograd").script
    program = "w = ones(2, requires_grad=True)\nloss = (w * 3).sum()\n"
    at = open_page(script, query={"a_prog": program, "a_step": "2"})
    assert at.selectbox(key="autograd_example").value == "custom"
    assert address_bar(at) == {"a_prog": [program], "a_step": ["2"]}
    at = open_page(script, query={"a_ex": "mlp", "a_root": "nowhere"})
    assert at.text_area(key="autograd_program").value == EXAMPLES["mlp"].program
    assert address_bar(at) == {"a_ex": ["mlp"], "a_root": ["nowhere"]}  # asked for, and told
    assert any("`nowhere`" in w.value for w in at.warning)


def test_devices_largest_copy_is_kept_within_what_this_machine_offers() -> None:
    with mock.patch("components.devices.state.machine_size_cap", return_value=SIZES[3]):
        from components.devices import state

        state.ROOM_CACHE.clear()
        at = open_page(room_of("devices").script, query={"d_max": str(SIZES[-1])})
        state.ROOM_CACHE.clear()
    assert at.select_slider(key="devices_bench_max").value == str(SIZES[3])
    assert not at.exception


def test_devices_press_on_run_makes_the_link_open_that_demonstration() -> None:
    at = open_page(room_of("devices").script)
    at.button_group(key="devices_variant_numpy_bridge").set_value("tensor").run()
    at.button(key="devices_run_numpy_bridge").click().run()
    query = address_bar(at)
    assert query["d_demo"] == ["numpy_bridge"] and query["d_numpy_bridge"] == ["tensor"]


def test_devices_link_asking_for_more_than_the_memory_budget_is_clamped_and_said() -> None:
    """A link from before the budget (or typed by hand) names a size no run may hold: the
    room keeps its largest, says which part of the link it did not use, and never raises."""
    from components.devices import state

    with mock.patch("components.devices.state.machine_size_cap", return_value=MAX_BYTES):
        state.ROOM_CACHE.clear()
        for asked in (4 * MAX_BYTES, 1 << 30, 1 << 40):
            at = open_page(room_of("devices").script, query={"d_max": str(asked)})
            assert not at.exception
            slider = at.select_slider(key="devices_bench_max")
            assert slider.value == str(MAX_BYTES)
            assert any("d_max" in box.value for box in at.info), [b.value for b in at.info]
            # Every size the page offers fits the budget with both of a run's buffers.
            assert all(size * BUFFERS_AT_ONCE <= MEMORY_BUDGET_BYTES for size in SIZES)
            assert list(slider.options) == [format_bytes(size) for size in SIZES]
        state.ROOM_CACHE.clear()


def test_modules_link_reads_only_the_numbers_a_control_offers() -> None:
    spec = link_of("modules")
    read = spec.read({"nn_lr": ["0.3"], "nn_steps": ["40"]})
    assert (read.values["nn_lr"], read.values["nn_steps"], read.broken) == (0.3, 40, ())
    for lr, steps in (("0.30", "15"), ("3e-1", "４０"), ("nan", "1e9")):
        read = spec.read({"nn_lr": [lr], "nn_steps": [steps]})
        assert read.broken == ("nn_lr", "nn_steps")


def test_shapes_link_without_code_opens_its_presets_own() -> None:
    script = room_of("shapes").script
    at = open_page(script, query={"m_preset": "resnet18"})
    preset = SHAPE_PRESETS["resnet18"]
    assert at.text_area(key="shapes_source").value == preset.source
    assert at.text_input(key="shapes_model").value == preset.model
    assert at.text_input(key="shapes_inputs").value == preset.shapes
    at = open_page(script, query={"m_preset": "resnet18", "m_model": ""})  # an empty box
    assert at.text_input(key="shapes_model").value == ""
    assert address_bar(at)["m_model"] == [""]


def test_strides_link_asks_for_a_step_until_the_chain_changes() -> None:
    script = room_of("strides").script
    query = {"s_shape": "3,4", "s_ops": [".t()", ".contiguous()"], "s_step": "1"}
    at = open_page(script, query=query)
    assert at.session_state["strides_step"] == 1  # y1 = x.t()
    assert address_bar(at)["s_step"] == ["1"]
    at = open_page(script, query={**query, "s_step": "9"})  # past the end: the last step
    assert at.session_state["strides_step"] == 2 and address_bar(at)["s_step"] == ["9"]
    at.text_area(key="strides_ops").set_value(".t()").run()  # another chain: its last step
    assert at.session_state["strides_step"] == 1 and "s_step" not in address_bar(at)
    at = open_page(script, query={"s_shape": "3,4", "s_ops": ""})  # "no ops", said explicitly
    assert at.session_state["strides_ops"] == "" and address_bar(at)["s_ops"] == [""]
