"""images.decode/load_image on real photos and a corpus of hostile and odd files generated here:
each either loads to the right RGB pixels or raises ImageError with a plain message."""

from __future__ import annotations

import gzip
import io
import struct
import time
import tomllib
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from torchatlas.classify import SAMPLES, sample_bytes
from torchatlas.images import MAX_PIXELS, ImageError, decode, load_image


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares width×height but carries almost no pixel data."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def refused(data: bytes, code: str) -> ImageError:
    with pytest.raises(ImageError) as caught:
        decode(data)
    assert caught.value.code == code, caught.value
    message = caught.value.message
    assert len(message) > 30 and "Traceback" not in message
    return caught.value


@pytest.mark.parametrize("key", list(SAMPLES))
def test_bundled_samples_load_as_rgb(key: str) -> None:
    image = load_image(sample_bytes(key))
    assert image.mode == "RGB" and min(image.size) >= 256


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "empty"),
        (bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)), "not_image"),
        (b"Hello, class!\nThis is a text file, not a photo.\n", "not_image"),
        (b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n", "not_image"),
        (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10"/>', "svg"),
        (b'\xef\xbb\xbf  <svg viewBox="0 0 10 10"><circle r="4"/></svg>', "svg"),
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 64, "heic"),
        (b"\x00\x00\x00\x18ftypmif1\x00\x00\x00\x00mif1heic" + b"\x00" * 64, "heic"),
        (gzip.compress(b'<svg xmlns="http://www.w3.org/2000/svg" width="9"/>'), "svg"),
        (gzip.compress(b"not a drawing at all"), "not_image"),
    ],
    ids=["empty", "random", "text", "pdf", "svg", "svg-bom", "heic", "heif-mif1", "svgz", "gzip"],
)
def test_non_images_are_refused_in_plain_words(data: bytes, code: str) -> None:
    refused(data, code)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_files_are_refused(fmt: str) -> None:
    noise = np.random.default_rng(1).integers(0, 256, (300, 400, 3), dtype=np.uint8)
    data = encode(Image.fromarray(noise), fmt)
    refused(data[: len(data) // 2], "truncated")


def test_decompression_bomb_is_refused_before_decoding() -> None:
    started = time.perf_counter()
    refused(png_header_only(50_000, 50_000), "bomb")  # PIL's own limit, inside open()
    error = refused(png_header_only(8_000, 6_000), "too_many_pixels")  # 48 MP: our cap
    assert error.params["width"] == 8000 and error.params["height"] == 6000
    assert f"{MAX_PIXELS // 1_000_000} MP" in error.message
    assert time.perf_counter() - started < 1.0  # no pixel was decoded


def test_extreme_aspect_ratio_is_refused_but_thin_ones_load() -> None:
    refused(encode(Image.new("RGB", (10_000, 1)), "PNG"), "extreme_aspect")
    assert load_image(encode(Image.new("RGB", (1, 1), (9, 8, 7)), "PNG")).getpixel((0, 0)) == (
        9,
        8,
        7,
    )
    assert load_image(encode(Image.new("RGB", (1000, 50)), "PNG")).size == (1000, 50)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"])
def test_every_supported_format_loads(fmt: str) -> None:
    colour = (200, 40, 40)
    options = {"quality": 95} if fmt in ("JPEG", "WEBP") else {}
    image = load_image(encode(Image.new("RGB", (64, 48), colour), fmt, **options))
    assert image.mode == "RGB" and image.size == (64, 48)
    assert np.abs(np.asarray(image).astype(int) - colour).max() <= 12


def test_cmyk_jpeg_becomes_the_right_rgb() -> None:
    cmyk = Image.new("CMYK", (32, 32), (0, 255, 255, 0))  # pure red ink-wise
    decoded = decode(encode(cmyk, "JPEG", quality=95))
    assert decoded.info.mode == "CMYK" and "cmyk" in decoded.info.conversions
    red, green, blue = np.asarray(decoded.image).reshape(-1, 3).mean(axis=0)
    assert red > 240 and green < 20 and blue < 20


def test_16_bit_png_is_scaled_not_clipped() -> None:
    ramp = (np.arange(256, dtype=np.uint32) * 257).astype(np.uint16).reshape(16, 16)
    decoded = decode(encode(Image.fromarray(ramp), "PNG"))
    assert decoded.info.mode.startswith("I")
    pixels = np.asarray(decoded.image)
    assert np.array_equal(pixels[..., 0], np.arange(256).reshape(16, 16))
    assert np.array_equal(pixels[..., 0], pixels[..., 2])


def test_16_bit_image_at_the_pixel_cap_decodes_without_huge_temporaries() -> None:
    """A smooth 40 MP 16-bit PNG is a few hundred KB: its conversion must not need gigabytes.

    Scaling the whole image through float64 temporaries peaked at ~1.5 GB (measured); numpy
    reports its allocations to tracemalloc, so the peak here is the conversion's own.
    """
    width, height = 7000, MAX_PIXELS // 7000
    data = encode(Image.new("I;16", (width, height), 30000), "PNG", compress_level=1)
    assert len(data) < 2_000_000
    tracemalloc.start()
    try:
        image = load_image(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert image.size == (width, height) and image.getpixel((0, 0)) == (117, 117, 117)
    assert peak < 5 * width * height  # 16-bit array (+ its bytes while copied) + uint8 result


def test_float_tiff_in_unit_range_is_scaled() -> None:
    values = np.linspace(0, 1, 100, dtype=np.float32).reshape(10, 10)
    pixels = np.asarray(load_image(encode(Image.fromarray(values, mode="F"), "TIFF")))
    assert pixels[0, 0, 0] == 0 and pixels[-1, -1, 1] == 255
    assert abs(int(pixels[5, 0, 2]) - round(values[5, 0] * 255)) <= 1


def test_float_tiff_out_of_range_is_stretched() -> None:
    values = np.linspace(-1000, 3000, 100, dtype=np.float32).reshape(10, 10)
    pixels = np.asarray(load_image(encode(Image.fromarray(values, mode="F"), "TIFF")))
    assert pixels.min() == 0 and pixels.max() == 255


def test_palette_png_with_transparency_goes_on_white() -> None:
    palette = Image.new("P", (8, 8), 0)
    palette.putpalette([0, 0, 255, 255, 0, 0] + [0] * 762)
    palette.putpixel((0, 0), 1)
    data = encode(palette, "PNG", transparency=0)  # index 0 (blue) is transparent
    pixels = np.asarray(load_image(data))
    assert tuple(pixels[0, 0]) == (255, 0, 0)
    assert tuple(pixels[4, 4]) == (255, 255, 255)


@pytest.mark.parametrize(
    ("mode", "opaque", "clear"),
    [("RGB", (255, 0, 0), (0, 0, 255)), ("L", 200, 0)],
    ids=["rgb-trns", "grey-trns"],
)
def test_png_transparent_colour_goes_on_white(mode: str, opaque: object, clear: object) -> None:
    """PNG's tRNS chunk can mark one colour (RGB) or grey level (L) transparent, no alpha band."""
    image = Image.new(mode, (8, 8), clear)
    image.putpixel((0, 0), opaque)
    decoded = decode(encode(image, "PNG", transparency=clear))
    assert "alpha" in decoded.info.conversions
    pixels = np.asarray(decoded.image)
    expected = opaque if mode == "RGB" else (opaque,) * 3
    assert tuple(pixels[0, 0]) == expected
    assert tuple(pixels[4, 4]) == (255, 255, 255)


@pytest.mark.parametrize(
    ("mode", "value", "expected"),
    [
        ("RGBA", (255, 0, 0, 128), (255, 127, 127)),
        ("RGBA", (0, 0, 0, 0), (255, 255, 255)),
        ("LA", (0, 255), (0, 0, 0)),
        ("LA", (0, 0), (255, 255, 255)),
    ],
)
def test_alpha_is_composited_on_white(mode: str, value: tuple, expected: tuple) -> None:
    decoded = decode(encode(Image.new(mode, (4, 4), value), "PNG"))
    assert "alpha" in decoded.info.conversions
    assert np.abs(np.asarray(decoded.image)[0, 0].astype(int) - expected).max() <= 1


def test_grayscale_becomes_three_equal_channels() -> None:
    pixels = np.asarray(load_image(encode(Image.new("L", (5, 5), 77), "PNG")))
    assert pixels.shape == (5, 5, 3) and (pixels == 77).all()
    bilevel = np.asarray(load_image(encode(Image.new("1", (5, 5), 1), "PNG")))
    assert (bilevel == 255).all()


def test_exif_orientation_is_applied() -> None:
    image = Image.new("RGB", (40, 20), (0, 0, 255))
    image.paste((255, 0, 0), (0, 0, 20, 20))  # left half red
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    decoded = decode(encode(image, "JPEG", quality=95, exif=exif.tobytes()))
    assert decoded.info.orientation == 6 and "exif_rotate" in decoded.info.conversions
    upright = np.asarray(decoded.image).astype(int)
    assert decoded.image.size == (20, 40)
    assert upright[5, 10, 0] > 200 and upright[5, 10, 2] < 60  # red is now on top
    assert upright[35, 10, 2] > 200 and upright[35, 10, 0] < 60


def test_animated_gif_uses_the_first_frame() -> None:
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:], duration=100)
    decoded = decode(buffer.getvalue())
    assert decoded.info.multi_frame and "first_frame" in decoded.info.conversions
    assert tuple(np.asarray(decoded.image)[8, 8]) == (255, 0, 0)


def test_gif_with_a_damaged_second_frame_header_is_refused_in_plain_words() -> None:
    """Found by the mutation test below: a GIF whose trailer byte became ``,`` (the start of
    another frame) made PIL's ``is_animated`` read a header that is not there and raise
    ``struct.error``, which reached the page as a traceback."""
    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), (10, 200, 30)).save(buffer, "GIF")
    gif = buffer.getvalue()
    assert gif.endswith(b";")
    with pytest.raises(ImageError) as refused:
        load_image(gif[:-1] + b",")
    assert refused.value.code == "truncated" and refused.value.message


def test_big_jpeg_is_drafted_only_when_asked() -> None:
    noise = np.random.default_rng(2).integers(0, 256, (1200, 1600, 3), dtype=np.uint8)
    data = encode(Image.fromarray(noise), "JPEG")
    assert decode(data).image.size == (1600, 1200)
    drafted = decode(data, min_side=512)
    assert drafted.image.size == (800, 600) and "draft" in drafted.info.conversions
    assert (drafted.info.width, drafted.info.height) == (1600, 1200)


SEEDS = [encode(Image.new("RGB", (24, 16), (10, 200, 30)), fmt) for fmt in ("PNG", "JPEG", "GIF")]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(SEEDS),
    position=st.integers(min_value=0, max_value=10_000),
    garbage=st.binary(min_size=1, max_size=16),
    cut=st.booleans(),
)
def test_mutated_files_never_raise_anything_but_image_error(
    seed: bytes, position: int, garbage: bytes, cut: bool
) -> None:
    position %= len(seed)
    data = seed[:position] + garbage + (b"" if cut else seed[position + len(garbage) :])
    try:
        image = load_image(data)
    except ImageError as error:
        assert error.message
    else:
        assert image.mode == "RGB" and image.width * image.height >= 1


def test_upload_limit_matches_the_pixel_cap() -> None:
    """.streamlit/config.toml's maxUploadSize lets an uncompressed 8-bit RGB image at the pixel
    cap through (the largest in-cap photo file) and is not much larger than that."""
    config = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"
    limit_mb = tomllib.loads(config.read_text())["server"]["maxUploadSize"]
    largest_in_cap = MAX_PIXELS * 3 + 100_000  # BMP/TIFF pixels + headers and row padding
    assert limit_mb * 1_000_000 >= largest_in_cap  # browsers counting 1 MB = 10^6 bytes
    assert limit_mb * 2**20 <= 1.1 * largest_in_cap  # and those counting 2^20
