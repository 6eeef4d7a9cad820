"""Issue 21 through the basics room's links, as a visitor with only a URL would attack it.

Each class of the issue that reaches this room, with payloads of our own (other shapes, ops,
numbers than the issue's): every visit must stay contained (no exception, the server's RSS
rises ≤ 200 MB, no heartbeat late by more than 0.5 s, an answer within 3 s) and explain
itself in the room's words. Each test names what the room did before its fix.
"""

from __future__ import annotations

import pytest

from tests.app.hostile import open_hostile_link, open_page_once
from torchatlas.basics.limits import MAX_REAL_ELEMENTS, MAX_SAVE_ELEMENTS
from torchatlas.i18n import translate

PAGE = "views/basics.py"


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """The room once, so each measurement sees the link's cost, not the room's first import,
    and the sandbox is warm (the first job waits for it)."""
    at = open_page_once(PAGE)
    for section in ("broadcasting", "einsum", "indexing", "saving"):
        at.segmented_control(key="basics_section").set_value(section).run()


def _said(key: str, **params: object) -> str:
    return translate(f"basics.{key}", "en", **params)


# ---------------------------------------------------------------- zero elements, huge results
def test_empty_einsum_letter_with_a_huge_output_is_never_run_on_numbers() -> None:
    """Before: ``products`` was 0 (a letter of size 0), so the broadcast-multiply-sum ran on
    numbers in the server and made the 700000 × 600000 output (terabytes)."""
    visit = open_hostile_link(
        PAGE, {"b_sec": "einsum", "b_eq": "pq,qr->pr", "b_es": "(700000, 0) (0, 600000)"}
    )
    visit.assert_contained()
    visit.assert_refused_with(_said("einsum.not_run"))
    metrics = {m.label: m.value for m in visit.at.metric}
    assert metrics[_said("einsum.metric_output")] == "(700000, 600000)"
    assert "**-" not in visit.said  # no negative count of additions


def test_empty_source_with_a_million_blocks_is_refused_before_drawing() -> None:
    """Before: a (900000, 700000, 0) source has no element, so it passed the element bound,
    and the page's picture walked its 900000 empty blocks in the server."""
    visit = open_hostile_link(
        PAGE, {"b_sec": "indexing", "b_ishape": "900000, 700000, 0", "b_ix": "x[..., None]"}
    )
    visit.assert_contained()
    visit.assert_refused_with(
        _said("errors.too_large_footprint", footprint=900000 * 700000, limit=MAX_REAL_ELEMENTS)
    )


def test_empty_but_enormous_saving_shape_is_refused() -> None:
    """Before: numel 0 passed, and HDF5 laid out a (0, 300000, 200000) dataset in the
    server's temp folder (or crashed the page)."""
    visit = open_hostile_link(
        PAGE, {"b_sec": "saving", "b_sshape": "0, 300000, 200000", "b_sv": "x[:1]"}
    )
    visit.assert_contained()
    visit.assert_refused_with(
        _said("errors.too_large_footprint", footprint=300000 * 200000, limit=MAX_SAVE_ELEMENTS)
    )


# ---------------------------------------------------------------- numbers past 64 bits
def test_python_int_just_past_uint64_gets_the_rooms_explanation() -> None:
    """Before: ``torch.result_type(x, 2**64 + 5)`` raised OverflowError outside any ``try``:
    Streamlit's error screen."""
    visit = open_hostile_link(
        PAGE,
        {"b_sec": "types", "b_l": "int32", "b_lv": "7", "b_rk": "scalar", "b_r": "int",
         "b_rv": str(2**64)},
    )  # fmt: skip
    visit.assert_contained()
    visit.assert_refused_with(_said("types.int_overflow"))


def test_python_int_far_past_64_bits_is_refused_before_torch() -> None:
    visit = open_hostile_link(
        PAGE,
        {"b_sec": "types", "b_l": "float32", "b_lv": "2.5", "b_rk": "zero_dim", "b_r": "int64",
         "b_rv": "-" + "7" * 30},
    )  # fmt: skip
    visit.assert_contained()
    visit.assert_refused_with(_said("errors.int_too_large", text="-" + "7" * 30, limit=2**64))


def test_index_of_2_to_the_75_is_explained() -> None:
    """Before: ``x[2**75]`` raised OverflowError ("Overflow when unpacking long") in the server,
    which the room did not catch: the page crashed."""
    big = str(2**75)
    visit = open_hostile_link(
        PAGE, {"b_sec": "indexing", "b_ishape": "4, 5", "b_ix": f"x[:, {big}]"}
    )
    visit.assert_contained()
    visit.assert_refused_with(_said("errors.index_int_range", part=big, limit=2**63 - 1))


def test_slice_step_past_int64_is_explained() -> None:
    big = str(2**66 + 3)
    visit = open_hostile_link(PAGE, {"b_sec": "saving", "b_sshape": "40, 2", "b_sv": f"x[::{big}]"})
    visit.assert_contained()
    visit.assert_refused_with(_said("errors.index_int_range", part=big, limit=2**63 - 1))


# ---------------------------------------------------------------- shapes whose size overflows
def test_broadcast_shape_whose_storage_overflows_gets_torchs_words() -> None:
    """Before: ``torch.empty(shape, device="meta")`` raised "Storage size calculation
    overflowed" outside any ``try``: Streamlit's error screen."""
    shape = "(999999, 999998, 999997, 999996, 2, 3)"
    visit = open_hostile_link(PAGE, {"b_sec": "broadcasting", "b_shapes": f"{shape} (3,)"})
    visit.assert_contained()
    visit.assert_refused_with("Storage size calculation overflowed", "999999, 999998")


# ---------------------------------------------------------------- digits that are not ASCII
@pytest.mark.parametrize(
    ("section", "key", "text"),
    [
        ("indexing", "b_ishape", "3, ³"),
        ("broadcasting", "b_shapes", "(2, ②) (2,)"),
        ("einsum", "b_es", "(٣, 3) (3,)"),
        ("types", "b_rv", "1٠٠"),
    ],
)
def test_digits_that_are_not_ascii_are_a_broken_link_with_defaults(
    section: str, key: str, text: str
) -> None:
    visit = open_hostile_link(PAGE, {"b_sec": section, key: text})
    visit.assert_contained()
    visit.assert_refused_with(translate("kit.link.broken", "en", fields=key))
    assert "Nothing to read here" not in visit.said and "is not a number" not in visit.said


# ---------------------------------------------------------------- bounded formatting
def test_an_exact_product_of_two_tiny_floats_is_shown_bounded() -> None:
    """Two float64 subnormals multiply to a number with 2148 decimal places: every digit is
    shown once, in the notes; the metric holds a short form that says it is shortened."""
    visit = open_hostile_link(
        PAGE,
        {"b_sec": "types", "b_l": "float64", "b_lv": "5e-324", "b_rk": "tensor",
         "b_r": "float64", "b_rv": "7e-323", "b_op": "mul"},
    )  # fmt: skip
    visit.assert_contained()
    metric = {m.label: m.value for m in visit.at.metric}[_said("types.metric_exact")]
    assert metric.endswith("e-646") and "…" in metric
    assert len(visit.said) < 40_000
