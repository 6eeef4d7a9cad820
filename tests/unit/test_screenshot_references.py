"""The e2e screenshot check (tests/e2e/conftest.py), without a browser: every screenshot taken
is compared with its reference in tests/e2e/references/, a missing reference fails, noise
passes and a changed page fails; ``--update-screenshots`` writes the references."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from tests.e2e import conftest as e2e


def page_image(
    dark: bool = False, shift: int = 0, seed: int = 0, panel: bool = True
) -> Image.Image:
    """A stand-in page: a sidebar, a title, lines of text, a coloured panel (a figure)."""
    background, ink = ((14, 17, 23), (250, 250, 250)) if dark else ((255, 255, 255), (30, 30, 30))
    image = Image.new("RGB", (1400, 2000), background)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 300, 2000), fill=(240, 242, 246) if not dark else (38, 39, 48))
    draw.rectangle((360 + shift, 60, 1000 + shift, 110), fill=ink)  # the title
    rng = random.Random(seed)
    for line in range(40):
        y = 160 + line * 28
        draw.rectangle((360 + shift, y, 360 + shift + rng.randint(600, 950), y + 12), fill=ink)
    if panel:
        draw.rectangle((360, 1350, 1300, 1900), fill=(255, 75, 75))
    return image


class FakePage:
    """What save_screenshot asks of a Playwright page."""

    def __init__(self, image: Image.Image) -> None:
        self.image = image
        self.viewport_size = {"width": 1400, "height": 1000}

    def evaluate(self, script: str) -> int:
        return self.image.height

    def set_viewport_size(self, size: dict) -> None:
        self.viewport_size = size

    def screenshot(self, path: str, **options: object) -> None:
        self.image.save(path)


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(e2e, "REFERENCES", tmp_path / "references")
    monkeypatch.setattr(e2e, "README_SCREENSHOTS", tmp_path / "readme")
    monkeypatch.setattr(e2e, "_screenshot_dir", tmp_path / "output")
    monkeypatch.setattr(e2e, "_update_references", False)
    return tmp_path


def _store_reference(folders: Path, monkeypatch: pytest.MonkeyPatch, image: Image.Image) -> None:
    monkeypatch.setattr(e2e, "_update_references", True)
    e2e.save_screenshot(FakePage(image), "room-light")
    monkeypatch.setattr(e2e, "_update_references", False)


def test_a_screenshot_without_a_reference_fails(folders: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="has no reference"):
        e2e.save_screenshot(FakePage(page_image()), "room-light")


def test_update_writes_a_thumbnail_reference_and_the_readme_image(
    folders: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store_reference(folders, monkeypatch, page_image())
    with Image.open(folders / "references" / "room-light.png") as stored:
        assert stored.width == e2e.REFERENCE_WIDTH
    with Image.open(folders / "readme" / "room-light.png") as readme:
        assert readme.size == (1400, 2000)  # the README keeps the full picture


def test_every_screenshot_taken_is_compared(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """save_screenshot itself compares (today's tests need not ask): a dark page saved under
    a light page's name fails there."""
    _store_reference(folders, monkeypatch, page_image())
    e2e.save_screenshot(FakePage(page_image(seed=0)), "room-light")
    with pytest.raises(AssertionError, match="differs from its reference"):
        e2e.save_screenshot(FakePage(page_image(dark=True)), "room-light")


def test_noise_passes(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Other text lengths, a layout two pixels over, a few levels of antialiasing."""
    _store_reference(folders, monkeypatch, page_image())
    noisy = page_image(shift=2, seed=1)
    pixels = noisy.load()
    rng = random.Random(3)
    for _ in range(20000):
        x, y = rng.randrange(noisy.width), rng.randrange(noisy.height)
        pixels[x, y] = tuple(max(0, min(255, c + rng.randint(-6, 6))) for c in pixels[x, y])
    e2e.save_screenshot(FakePage(noisy), "room-light")


def test_a_page_that_lost_a_figure_fails(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store_reference(folders, monkeypatch, page_image())
    with pytest.raises(AssertionError, match="differs from its reference"):
        e2e.save_screenshot(FakePage(page_image(panel=False)), "room-light")


def test_a_page_of_another_height_fails(folders: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store_reference(folders, monkeypatch, page_image())
    short = page_image().crop((0, 0, 1400, 1000))
    with pytest.raises(AssertionError, match="page height changed"):
        e2e.save_screenshot(FakePage(short), "room-light")
