"""The link declaration every room uses (torchatlas.links): round trips and hostile values."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings

from tests.links import junk_queries, valid_values
from torchatlas.links import (
    Choice,
    Flag,
    Float,
    Int,
    LinkSpec,
    Source,
    Text,
    Texts,
    encode_source,
    strict_int,
)
from torchatlas.rooms import room_links

SPEC = LinkSpec(
    "demo",
    "demo_",
    (
        Int("d_n", 3, low=1, high=99),
        Float("d_lr", 0.1, low=1e-6, high=10.0),
        Choice("d_kind", "a", options=("a", "b", "c")),
        Flag("d_on"),
        Text("d_name", "x", max_len=12, pattern=r"[a-z_]+"),
        Texts("d_ops", (".t()",), max_items=5, max_len=20),
        Source("d_src", "pass", max_chars=500, max_token_chars=800),
    ),
)


@settings(max_examples=200, deadline=None)
@given(values=valid_values(SPEC))
def test_every_state_round_trips_through_its_link(values) -> None:
    read = SPEC.read(SPEC.to_query(values))
    assert read.broken == ()
    assert read.values == values


@settings(max_examples=200, deadline=None)
@given(query=junk_queries(SPEC))
def test_junk_keeps_the_defaults_and_names_what_was_not_used(query) -> None:
    read = SPEC.read(query)
    for name, value in read.values.items():
        item = SPEC.field(name)
        if name in read.broken:
            assert value == item.default
        else:  # junk that happens to be a valid value is used, and is one
            assert item.valid(value)
    assert set(read.broken) <= set(query)


@pytest.mark.parametrize("text", ["²", "①", "１２", "١٢", "1e3", "0x10", "", " ", "9" * 19, "--1"])
def test_numbers_are_ascii_digits_only(text) -> None:
    assert strict_int(text, low=-(10**20), high=10**20) is None


def test_floats_refuse_what_is_not_a_plain_finite_decimal() -> None:
    item = SPEC.field("d_lr")
    for text in ("nan", "inf", "1e309", "0x1p-3", "1_0", "１", "1" * 60):
        assert SPEC.read({"d_lr": text}).broken == ("d_lr",), text
    assert math.isclose(SPEC.read({"d_lr": "1e-3"}).values["d_lr"], 1e-3)
    assert item.valid(0.5) and not item.valid(11.0)


def test_a_source_that_inflates_past_its_bound_is_refused_without_inflating_it() -> None:
    bomb = encode_source("x" * 50_000_000)  # ~50 KB of token... bounded by max_token_chars first
    assert SPEC.read({"d_src": bomb}).broken == ("d_src",)
    small_bomb = encode_source("y" * 5_000)  # a short token whose source is 10× the bound
    assert len(small_bomb) < 800
    started = time.perf_counter()
    assert SPEC.read({"d_src": small_bomb}).broken == ("d_src",)
    assert time.perf_counter() - started < 0.5


def test_defaults_are_left_out_of_the_link_and_the_last_single_value_counts() -> None:
    assert SPEC.to_query(SPEC.defaults()) == {}
    assert SPEC.read({"d_n": ["4", "5"]}).values["d_n"] == 5
    assert SPEC.read({"d_ops": [".t()", ".flip(0)"]}).values["d_ops"] == (".t()", ".flip(0)")
    assert SPEC.read({"d_ops": ["x"] * 6}).broken == ("d_ops",)


def test_a_declaration_refuses_duplicates_and_foreign_session_keys() -> None:
    with pytest.raises(ValueError):
        LinkSpec("r", "r_", (Int("a", 1), Int("a", 2)))
    with pytest.raises(ValueError):
        LinkSpec("r", "r_", (Int("a", 1, key="other_a"),))
    assert SPEC.session_key("d_n") == "demo_d_n"


@pytest.mark.parametrize("room", sorted(room_links()))
def test_every_rooms_state_becomes_a_link_and_back_unchanged(room: str) -> None:
    """Each room's declaration (torchatlas/<room>/link.py): 200 random states it can be in
    round-trip through its link; tests/app/test_room_links.py opens them in the page."""
    spec = room_links()[room]

    @settings(max_examples=200, deadline=None)
    @given(values=valid_values(spec))
    def check(values) -> None:
        assert spec.read(spec.to_query(values)).values == values

    check()
