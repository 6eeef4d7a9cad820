"""The app's own accessible markup and colours, without a browser (tests/e2e/test_a11y.py runs
axe-core on the pages): every block of hand-drawn HTML that can scroll is a named keyboard
stop, and every colour chosen for contrast keeps WCAG AA (4.5:1 for text)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from components.autograd import draw as autograd_draw
from components.basics.draw import (
    aligned_html,
    cells_html,
    einsum_html,
    promotion_frame,
    promotion_html,
)
from components.classify import draw as classify_draw
from components.kit.a11y import scroll_region
from components.palette import DARK, LIGHT, Palette
from components.shapes import draw as shapes_draw
from components.theme import _BOTH, _DARK, _LIGHT
from torchatlas.basics import broadcast, einsum, promotion_table
from torchatlas.classify.predict import Prediction, Stage

ROOT = Path(__file__).resolve().parents[2]
AA = 4.5
# Streamlit 1.67's backgrounds behind the colours components/theme.py sets: its code blocks'
# (codeBackgroundColor, light and dark, and the shades it draws them on) and its pages'.
CODE_LIGHT = ("#fcfcfb", "#f7f7f6", "#f1f1f0")
CODE_DARK = ("#22211e", "#242321", "#1a1917", "#2a2926")
PAGE_DARK = "#171614"


def luminance(colour: str) -> float:
    red, green, blue = (int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4))

    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.03928 else ((channel + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(first: str, second: str) -> float:
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


REGION = re.compile(r'^<div role="region" tabindex="0" aria-label="([^"]+)"[^>]* style="')


def test_a_scroll_region_is_a_named_keyboard_stop() -> None:
    label = 'wide "table" <1>'
    block = scroll_region("<p>x</p>", label, "overflow-x:auto", attributes='data-x="1"')
    assert block == (
        '<div role="region" tabindex="0" aria-label="wide &quot;table&quot; &lt;1&gt;" '
        'data-x="1" style="overflow-x:auto"><p>x</p></div>'
    )


@pytest.mark.parametrize("palette", [LIGHT, DARK])
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_scrolling_block_of_the_rooms_is_a_named_region(palette: Palette, lang: str) -> None:
    frame = promotion_frame(promotion_table(), "tensor", lang)
    cells = cells_html((2, 3), tuple(range(6)), palette)
    assert cells is not None
    blocks = {
        "promotion": promotion_html(frame, palette, label="tensor ⊕ tensor"),
        "broadcast": aligned_html(broadcast([(2, 3), (3,)]), palette, lang),
        "einsum": einsum_html(einsum("ij,jk->ik", [(2, 3), (3, 4)]), palette, lang),
        "cells": cells,
        "autograd": autograd_draw.scrolling("| a |\n|---|\n| 1 |", "Variables table"),
        "listing": shapes_draw.source_listing_html(["x = 1"], {}, palette, label="Your code"),
    }
    for name, block in blocks.items():
        found = REGION.match(block)
        assert found and found[1].strip(), name
        assert "overflow" in block.split(">", 1)[0], name
    assert REGION.match(blocks["cells"])[1] == "x: (2, 3)"  # type: ignore[index]
    assert 'data-testid="shapes-source-listing"' in blocks["listing"].split(">", 1)[0]


def _theme() -> dict[str, dict[str, str]]:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]


def test_the_theme_colours_keep_aa_contrast() -> None:
    light, dark = _theme()["light"], _theme()["dark"]
    # Light: white labels on primary buttons, the primary as text (a selected pill).
    assert contrast("#ffffff", light["primaryColor"]) >= AA
    assert contrast(light["primaryColor"], "#fdedea") >= AA  # its tint behind a chosen pill
    # Dark: the primary as text on the page, and the near-black label of a primary button.
    assert contrast(dark["primaryColor"], PAGE_DARK) >= AA
    button = re.search(r"stBaseButton-primary'\]:not.*?color: (#\w{6})", _DARK, re.S)
    assert button and contrast(button[1], dark["primaryColor"]) >= AA
    # The app's own accent as text, on each palette's background.
    for palette in (LIGHT, DARK):
        assert contrast(palette.accent_text, palette.background) >= AA
    assert LIGHT.accent_text == light["primaryColor"] and DARK.accent_text == dark["primaryColor"]


@pytest.mark.parametrize(
    ("sheet", "backgrounds"), [(_LIGHT, CODE_LIGHT), (_DARK, CODE_DARK)], ids=["light", "dark"]
)
def test_code_token_colours_keep_aa_contrast(sheet: str, backgrounds: tuple[str, ...]) -> None:
    rules = re.findall(r"([^{}]*\.token[^{}]*)\{\s*color: (#\w{6});", sheet)
    assert len(rules) >= 4
    for selectors, colour in rules:
        for background in backgrounds:
            assert contrast(colour, background) >= AA, (selectors.strip(), colour, background)
    assert "color: inherit" in _BOTH  # inline code in a caption: the caption's own colour


def test_classify_charts_say_their_numbers() -> None:
    predictions = (Prediction(281, "tabby", 0.625), Prediction(282, "tiger cat", 0.2))
    assert classify_draw.topk_text(predictions, "en") == (
        "Bar chart of the model's top 2 classes: tabby 62.5%, tiger cat 20.0%"
    )
    parts = ((Stage.DECODE, 0.0031), (Stage.PREPROCESS, 0.002), (Stage.FORWARD, 0.0402))
    text = classify_draw.latency_text(parts, "ko")
    assert "3.1 ms" in text and "2.0 ms" in text and "40.2 ms" in text and "45.3" in text
