"""The basics room's pure builders: pictures carry their numbers, light and dark palettes,
and escape what a visitor typed."""

from __future__ import annotations

import pytest

from components.basics.draw import (
    ReadyHtml,
    aligned_html,
    cells_html,
    creation_markdown,
    einsum_html,
    einsum_markdown,
    promotion_frame,
    promotion_html,
    save_markdown,
    side_by_side_html,
    size_bars,
)
from components.theme import DARK, LIGHT
from torchatlas.basics import broadcast, creation, einsum, index, promotion_table, serialize


@pytest.mark.parametrize("palette", [LIGHT, DARK])
def test_aligned_shapes_show_stretches_strides_and_the_failing_column(palette) -> None:
    ok = aligned_html(broadcast([(2, 3, 5, 5), (3, 1, 1)]), palette, "en")
    assert isinstance(ok, ReadyHtml) and ok._repr_html_() == str(ok)
    assert ok.count("1 → 5") == 2 and "· → 2" in ok
    assert palette.text in ok
    failed = aligned_html(broadcast([(2, 3), (4,)]), palette, "en")
    assert failed.count(f"2px solid {palette.accent}") == 2  # both sizes of the failing column
    assert "→" not in failed


def test_einsum_picture_names_every_letter_with_its_size() -> None:
    picture = einsum_html(einsum("...chw,c->...hw", [(2, 3, 4, 5), (3,)]), LIGHT, "en")
    for chip in ("<b>c</b>=3", "<b>h</b>=4", "<b>w</b>=5", "<b>…0</b>=2"):
        assert chip in picture
    assert "dashed" in picture  # the summed letter
    plan = einsum("ij,jk->ik", [(2, 3), (3, 5)])
    text = einsum_markdown(plan, "en")
    assert "| `j` | 3 |" in text
    assert f"**{plan.counted_flops:,}**" in text and f"**{plan.multiplies:,}**" in text


def test_cells_carry_their_numbers_and_light_the_picked_ones() -> None:
    result = index((2, 3, 4), "x[:, 1, [0, 2]]")
    values = tuple(range(24))
    picture = cells_html((2, 3, 4), values, LIGHT, frozenset(result.picked))
    assert picture is not None
    for value in values:
        assert f">{value}</span>" in picture
    assert picture.count(f"2px solid {LIGHT.accent}") == len(result.picked) == 4
    assert "x[0]" in picture and "x[1]" in picture  # one block per leading index
    assert cells_html((100, 100), None, LIGHT) is None


def test_promotion_table_html_and_creation_text() -> None:
    frame = promotion_frame(promotion_table(), "scalar", "ko")
    assert list(frame.columns) == ["bool", "int", "float", "complex"]
    table = promotion_html(frame, DARK)
    assert table.count("<tr>") == 13 and DARK.text in table
    text = creation_markdown(creation(), "en")
    assert "TypeError" in text and "names" in text and "torch.empty(2, 3)" in text


def test_size_bars_are_proportional_and_numbered() -> None:
    bars = size_bars({"view": 17_577, "clone": 1_577}, LIGHT, highlight="view")
    assert "17,577 B" in bars and "1,577 B" in bars
    assert "width:80.00%" in bars and "width:7.18%" in bars


def test_save_text_carries_every_measured_number() -> None:
    report = serialize((1000, 4), "x[:2]", "float32")
    text = save_markdown(report, "en")
    for number in (report.saved_full, report.saved_view, report.saved_clone, report.view_bytes):
        assert f"{number:,}" in text
    assert report.hdf5.hdf5_type == "H5T_IEEE_F32LE" and "H5T_IEEE_F32LE" in text
    assert "H5T" not in save_markdown(serialize((10, 4), "x[:2]", "bfloat16"), "ko")


def test_side_by_side_pictures_are_one_element_with_escaped_titles() -> None:
    source = cells_html((2, 2), (0, 1, 2, 3), LIGHT, frozenset({1}))
    assert source is not None
    html = side_by_side_html(
        (("x <(2, 2)>: the cells", source), ("the result & more", None)), "Too many cells"
    )
    assert isinstance(html, ReadyHtml)  # st.html takes it as it is
    assert html.count("flex:1 1 16rem") == 2 and "flex-wrap:wrap" in html  # wraps on a phone
    assert "<strong>x &lt;(2, 2)&gt;: the cells</strong>" in html and "<(2, 2)>" not in html
    assert "<strong>the result &amp; more</strong>" in html
    assert source in html
    assert html.count("Too many cells") == 1  # the picture too large to draw says so
