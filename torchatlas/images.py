"""Turn whatever bytes a user uploads into a plain RGB ``PIL.Image``, or refuse in plain words.

Every failure is an :class:`ImageError` with a stable ``code`` (for translated messages), its
``params`` and an English message that names the cause and the fix. Nothing else escapes
:func:`decode`: a classroom upload must never become a traceback.

Safety: the pixel count is read from the header and checked against :data:`MAX_PIXELS`
*before* any pixel is decoded (decompression bombs), and extreme aspect ratios are refused
because ``Resize(256)`` on a 10000×1 strip would allocate a 2,560,000×256 image.
"""

from __future__ import annotations

import io
import math
import warnings
import zlib
from dataclasses import asdict, dataclass, field

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

# 40 megapixels: larger than any phone camera's default output, far below the ~1 GB a decoded
# bomb would need. .streamlit/config.toml caps uploads at 121 MB to match (its comment says why).
MAX_PIXELS = 40_000_000
# A 50:1 panorama still shows something in the centre crop; beyond that the crop is a sliver
# and the resize step would allocate a huge strip.
MAX_ASPECT_RATIO = 50
SUPPORTED_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF", "MPO")

_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1", b"avif"}
_MESSAGES = {
    "empty": "The file is empty (0 bytes). Upload the image again; the transfer may have failed.",
    "not_image": "This file is not an image this room can read. Upload a JPEG, PNG, WebP, BMP, "
    "GIF or TIFF photo.",
    "svg": "SVG is a vector drawing, not a photo made of pixels, so it cannot be classified. "
    "Export it as PNG and upload that.",
    "heic": "HEIC/HEIF (the iPhone photo format) is not supported here. Choose 'Most compatible' "
    "in the camera settings, or export the photo as JPEG, and upload that.",
    "unsupported_format": "{format} images are not supported. Convert the image to JPEG or PNG "
    "and upload that.",
    "too_many_pixels": "This image is {width} × {height} pixels ({megapixels} MP), over the "
    "{limit_mp} MP limit. Shrink it (any photo editor) and upload it again.",
    "bomb": "This file declares an enormous image (over {limit_mp} MP), the signature of a "
    "'decompression bomb'. It was not opened. Upload an ordinary photo instead.",
    "extreme_aspect": "This image is {width} × {height} pixels: one side is more than "
    "{ratio} times the other, so the centre crop would see only a thin sliver. Crop it to a less "
    "extreme shape and try again.",
    "truncated": "The image data stops before the end (the file is truncated or damaged). "
    "Upload the original file again.",
    "unsupported_mode": "The pixel format {mode} cannot be shown as a colour photo. Save the image "
    "as an ordinary 8-bit RGB JPEG or PNG and upload that.",
}


class ImageError(ValueError):
    """A file that cannot be turned into an RGB photo, with a plain message and a stable code."""

    def __init__(self, code: str, **params: object) -> None:
        self.code = code
        self.params = params
        super().__init__(_MESSAGES[code].format(**params))

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class SourceInfo:
    """What the file said about itself, before any conversion."""

    format: str
    mode: str  # PIL mode of the stored pixels: RGB, L, P, CMYK, I;16, F, RGBA…
    width: int  # as stored, before EXIF rotation
    height: int
    orientation: int  # EXIF orientation tag, 1 = upright
    multi_frame: bool  # animated GIF / multi-page TIFF: only the first frame is used
    file_bytes: int
    decoded_width: int = 0  # after JPEG draft scaling (equal to width when not scaled)
    decoded_height: int = 0
    conversions: tuple[str, ...] = field(default_factory=tuple)  # e.g. ("exif_rotate", "alpha")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Decoded:
    image: Image.Image  # mode "RGB", upright
    info: SourceInfo


def _sniff(data: bytes) -> str | None:
    """Formats PIL would call 'unidentified' but that deserve their own message."""
    if data[:2] == b"\x1f\x8b":  # gzip: an .svgz drawing? (at most 4 KB inflated to look)
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:65536], 4096)
        except zlib.error:
            return None
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<svg", b"<?xml")) and b"<svg" in data[:4096].lower():
        return "svg"
    if data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS:
        return "heic"
    return None


_CHUNK_ELEMENTS = 1 << 20  # high-bit-depth pixels are scaled this many at a time


def _to_uint8(array: np.ndarray) -> np.ndarray:
    """Scale a 2-D high-bit-depth or float image into 0–255 (PIL's own convert just clips).

    Works through the rows in chunks of about a million pixels: a 40 MP 16-bit PNG can be a
    file of a few hundred kilobytes, and whole-image float64 temporaries cost ~1.5 GB.
    """
    rows = max(1, _CHUNK_ELEMENTS // max(1, array.shape[1]))
    chunks = [slice(start, start + rows) for start in range(0, array.shape[0], rows)]
    is_float = array.dtype.kind == "f"

    def finite(part: np.ndarray) -> np.ndarray:
        part = part.astype(np.float64)
        return np.nan_to_num(part, nan=0.0, posinf=0.0, neginf=0.0, copy=False)

    if is_float:
        low, high = math.inf, -math.inf
        for chunk in chunks:  # one float64 copy per chunk serves both bounds
            part = finite(array[chunk])
            low, high = min(low, float(part.min())), max(high, float(part.max()))
    else:
        low, high = float(array.min()), float(array.max())
    if low >= 0 and high <= 1.0 and is_float:
        offset, factor = 0.0, 255.0  # float images in [0, 1]
    elif low >= 0 and high <= 255:
        offset, factor = 0.0, 1.0
    elif low >= 0 and high <= 65535:
        offset, factor = 0.0, 1 / 257.0  # 16-bit
    else:
        span = high - low
        offset, factor = low, (255.0 / span if span > 0 else 0.0)
    out = np.empty(array.shape, dtype=np.uint8)
    for chunk in chunks:
        part = finite(array[chunk])
        part -= offset
        part *= factor
        out[chunk] = np.clip(np.rint(part, out=part), 0, 255, out=part)
    return out


def _on_white(image: Image.Image) -> Image.Image:
    """Composite an image with alpha over white (``Image.alpha_composite``'s result ±1).

    ``paste`` with the image as its own mask blends in place on one RGB canvas: about half the
    memory of ``alpha_composite`` on RGBA copies, which matters at 40 MP.
    """
    if image.mode != "RGBA":
        image = image.convert("RGBA")
    canvas = Image.new("RGB", image.size, (255, 255, 255))
    canvas.paste(image, mask=image)
    return canvas


def _to_rgb(image: Image.Image, conversions: list[str]) -> Image.Image:
    mode = image.mode
    if mode in ("I", "F") or mode.startswith("I;16"):
        conversions.append("high_bit_depth")
        array = np.asarray(image)
        return Image.fromarray(_to_uint8(array), mode="L").convert("RGB")
    if mode in ("P", "L", "RGB") and "transparency" in image.info:
        # palette index, grey level or colour marked transparent (PNG tRNS, GIF): composite too
        conversions.append("alpha")
        return _on_white(image)
    if mode == "RGB":
        return image
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        conversions.append("alpha")
        return _on_white(image)
    kinds = {"CMYK": "cmyk", "L": "grayscale", "1": "grayscale", "P": "palette"}
    conversions.append(kinds.get(mode, "convert"))
    try:
        return image.convert("RGB")
    except (ValueError, OSError) as error:
        raise ImageError("unsupported_mode", mode=mode) from error


def _check_size(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:
        raise ImageError(
            "too_many_pixels",
            width=width,
            height=height,
            megapixels=round(width * height / 1e6, 1),
            limit_mp=MAX_PIXELS // 1_000_000,
        )
    if max(width, height) > MAX_ASPECT_RATIO * max(1, min(width, height)):
        raise ImageError("extreme_aspect", width=width, height=height, ratio=MAX_ASPECT_RATIO)


def decode(data: bytes, *, min_side: int | None = None) -> Decoded:
    """Decode ``data`` to an upright RGB image and describe the source.

    ``min_side``: JPEGs may be decoded by libjpeg at 1/2, 1/4 or 1/8 scale (``Image.draft``)
    as long as the shorter side stays at least this long. A 12 MP phone photo then decodes
    about 10× faster, and the classifier's own resize to 256 px sees the same picture.
    """
    if not data:
        raise ImageError("empty")
    sniffed = _sniff(data)
    if sniffed:
        raise ImageError(sniffed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, SyntaxError, EOFError):
        raise ImageError("not_image") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # PIL's own, higher threshold fires inside open() for absurd headers
        raise ImageError("bomb", limit_mp=MAX_PIXELS // 1_000_000) from None
    except Exception:  # PIL raises many types on garbage headers; all mean "not an image"
        raise ImageError("not_image") from None

    image_format = image.format or "?"
    if image_format not in SUPPORTED_FORMATS:
        if image_format in ("AVIF", "HEIF"):
            raise ImageError("heic")
        raise ImageError("unsupported_format", format=image_format)
    width, height = image.size
    _check_size(width, height)  # header only: no pixel decoded yet

    try:
        orientation = int(image.getexif().get(0x0112, 1) or 1)
    except Exception:  # a broken EXIF block must not cost the photo
        orientation = 1
    # is_animated stops at the second frame; n_frames would walk a hostile GIF to the end.
    # It reads that frame's header, so a damaged one fails here (struct.error and the like),
    # and leaves the file positioned part-way: the image is broken, not a single frame.
    try:
        multi_frame = bool(getattr(image, "is_animated", False))
    except Exception:
        raise ImageError("truncated") from None
    stored_mode = image.mode
    conversions: list[str] = []
    try:
        if image_format in ("JPEG", "MPO") and min_side and image.mode in ("RGB", "L", "CMYK"):
            scale = min(width, height) / min_side
            if scale >= 2:
                # draft picks the largest DCT scale whose result is still >= the requested size
                image.draft(image.mode, (width // int(scale), height // int(scale)))
                if image.size != (width, height):
                    conversions.append("draft")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # palette/transparency chatter from PIL
            image.load()
            decoded_size = image.size
            if orientation not in (0, 1):
                # in place: the default returns a full copy even for an upright photo
                ImageOps.exif_transpose(image, in_place=True)
                conversions.append("exif_rotate")
            rgb = _to_rgb(image, conversions)
    except ImageError:
        raise
    except MemoryError:
        raise ImageError("bomb", limit_mp=MAX_PIXELS // 1_000_000) from None
    except Exception:  # truncated or corrupt data surfaces as OSError/ValueError/zlib errors
        raise ImageError("truncated") from None
    if multi_frame:
        conversions.append("first_frame")
    info = SourceInfo(
        format=image_format,
        mode=stored_mode,
        width=width,
        height=height,
        orientation=orientation,
        multi_frame=multi_frame,
        file_bytes=len(data),
        decoded_width=decoded_size[0],
        decoded_height=decoded_size[1],
        conversions=tuple(conversions),
    )
    return Decoded(image=rgb, info=info)


def load_image(data: bytes) -> Image.Image:
    """``data`` (JPEG, PNG, WebP, BMP, GIF first frame, TIFF) as an upright RGB image.

    Raises :class:`ImageError` with a plain message for anything else.
    """
    return decode(data).image
