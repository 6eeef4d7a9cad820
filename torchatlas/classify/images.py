"""Turn whatever bytes a user uploads into a plain RGB ``PIL.Image``, or refuse with a reason.

Every failure is an :class:`~torchatlas.classify.errors.ImageError` with a stable ``code`` and
its ``params``; the translation tables turn them into a message that names the cause and the
fix. Nothing else escapes :func:`decode`: a classroom upload must never become a traceback.

Safety, in the order the checks run:

- The format is recognised from the file's first bytes, and only formats whose decoders are
  compiled code reach PIL (:data:`SUPPORTED_FORMATS`); within them an allow-list of variants
  (BMP without run-length compression, TIFF compressions that libtiff decodes, baseline and
  progressive Huffman JPEG) keeps out PIL's pure-Python decoders.
- The file's structure is walked before PIL parses it, because PIL parses headers, tags and
  chunks in Python, one at a time: marker segments, chunks, tags, strips and GIF blocks are
  counted and capped, and a JPEG's scans are priced (every scan walks every block of the
  components it covers, so a few kilobytes of repeated scans can cost minutes at a fixed pixel
  count).
- The pixel count is read from the header and checked against :data:`MAX_PIXELS` *before* any
  pixel is decoded (decompression bombs), and extreme aspect ratios are refused because
  ``Resize(256)`` on a 10000×1 strip would allocate a 2,560,000×256 image.
- PIL's warnings and log records are dropped on the decoding thread only: a hostile file must
  not flood the server log, and other threads keep theirs.

Together these bound the CPU time of decoding any accepted file (``tests/unit/test_images.py``
builds the worst files each check lets through and times them). :func:`look` decodes a file
once per content hash and keeps a capped copy, so a page never decodes the same upload twice.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import re
import struct
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from torchatlas.cache import BoundedCache
from torchatlas.classify.errors import ErrorCode, ImageError, Variant

# 40 megapixels: larger than any phone camera's default output, far below the ~1 GB a decoded
# bomb would need. .streamlit/config.toml caps uploads at 121 MB to match (its comment says why).
MAX_PIXELS = 40_000_000
# A 50:1 panorama still shows something in the centre crop; beyond that the crop is a sliver
# and the resize step would allocate a huge strip.
MAX_ASPECT_RATIO = 50
SUPPORTED_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF", "MPO")

_HEIF_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"mif1", b"msf1", b"avif"}


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
    conversions: tuple[Conversion, ...] = field(default_factory=tuple)  # in the order applied


@dataclass(frozen=True)
class Decoded:
    image: Image.Image  # mode "RGB", upright (shared: callers copy before changing it)
    info: SourceInfo
    digest: str = ""  # SHA-256 of the file, set by look()
    decode_s: float = 0.0  # wall-clock seconds the decode took

    @property
    def nbytes(self) -> int:
        """Memory the pixels take (RGB, one byte per channel)."""
        return self.image.width * self.image.height * 3


class Conversion(StrEnum):
    """What decoding did to a file's pixels on the way to an upright RGB photo."""

    HIGH_BIT_DEPTH = "high_bit_depth"  # 16-bit or float pixels scaled to 8 bit
    ALPHA = "alpha"  # transparency composited on white
    CMYK = "cmyk"
    GRAYSCALE = "grayscale"
    PALETTE = "palette"
    CONVERT = "convert"  # any other PIL mode
    DRAFT = "draft"  # a JPEG decoded by libjpeg at reduced scale
    EXIF_ROTATE = "exif_rotate"
    FIRST_FRAME = "first_frame"  # animated or multi-page: the rest is ignored
    SHRUNK = "shrunk"  # kept smaller than decoded (see :data:`KEEP_SIDE`)


def _sniff(data: bytes) -> ErrorCode | None:
    """Formats PIL would call 'unidentified' but that deserve their own message."""
    if data[:2] == b"\x1f\x8b":  # gzip: an .svgz drawing? (at most 4 KB inflated to look)
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:65536], 4096)
        except zlib.error:
            return None
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<svg", b"<?xml")) and b"<svg" in data[:4096].lower():
        return ErrorCode.SVG
    if data[4:8] == b"ftyp" and data[8:12] in _HEIF_BRANDS:
        return ErrorCode.HEIC
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


def _to_rgb(image: Image.Image, conversions: list[Conversion]) -> Image.Image:
    mode = image.mode
    if mode in ("I", "F") or mode.startswith("I;16"):
        conversions.append(Conversion.HIGH_BIT_DEPTH)
        array = np.asarray(image)
        return Image.fromarray(_to_uint8(array), mode="L").convert("RGB")
    if mode in ("P", "L", "RGB") and "transparency" in image.info:
        # palette index, grey level or colour marked transparent (PNG tRNS, GIF): composite too
        conversions.append(Conversion.ALPHA)
        return _on_white(image)
    if mode == "RGB":
        return image
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        conversions.append(Conversion.ALPHA)
        return _on_white(image)
    kinds = {
        "CMYK": Conversion.CMYK,
        "L": Conversion.GRAYSCALE,
        "1": Conversion.GRAYSCALE,
        "P": Conversion.PALETTE,
    }
    conversions.append(kinds.get(mode, Conversion.CONVERT))
    try:
        return image.convert("RGB")
    except (ValueError, OSError) as error:
        raise ImageError(ErrorCode.UNSUPPORTED_MODE, mode=mode) from error


def _check_size(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:
        raise ImageError(
            ErrorCode.TOO_MANY_PIXELS,
            width=width,
            height=height,
            megapixels=round(width * height / 1e6, 1),
            limit_mp=MAX_PIXELS // 1_000_000,
        )
    if max(width, height) > MAX_ASPECT_RATIO * max(1, min(width, height)):
        raise ImageError(
            ErrorCode.EXTREME_ASPECT, width=width, height=height, ratio=MAX_ASPECT_RATIO
        )


# --------------------------------------------------------------------------- quiet decoding

_quiet_state = threading.local()


def _is_quiet() -> bool:
    return getattr(_quiet_state, "depth", 0) > 0


class _DropWhileQuiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _is_quiet()


# Filters do not propagate from a parent logger, so each PIL module that logs gets its own.
for _name in (
    "PIL.Image",
    "PIL.ImageFile",
    "PIL.JpegImagePlugin",
    "PIL.MpoImagePlugin",
    "PIL.PngImagePlugin",
    "PIL.GifImagePlugin",
    "PIL.BmpImagePlugin",
    "PIL.TiffImagePlugin",
    "PIL.TiffTags",
    "PIL.WebPImagePlugin",
):
    logging.getLogger(_name).addFilter(_DropWhileQuiet())


def _show_unless_quiet(show: object) -> object:
    def showwarning(*args: object, **kwargs: object) -> None:
        if not _is_quiet():
            show(*args, **kwargs)  # type: ignore[operator]

    showwarning.drops_quiet = True  # type: ignore[attr-defined]
    return showwarning


@contextmanager
def _quiet() -> Iterator[None]:
    """Drop the warnings and PIL log records raised on *this thread* while a file is decoded.

    A hostile TIFF can carry tens of thousands of broken tags, each one a warning, on every
    upload. ``warnings.catch_warnings`` would swap process-wide state under other sessions'
    decodes (it is not thread-safe), so the display hook is wrapped once and asks a thread-local
    flag instead; whoever replaces the hook later (a test runner) is wrapped again on the next
    decode. libjpeg's and libtiff's own messages never reach stderr: Pillow routes them.
    """
    if not getattr(warnings.showwarning, "drops_quiet", False):
        warnings.showwarning = _show_unless_quiet(warnings.showwarning)  # type: ignore[assignment]
    _quiet_state.depth = getattr(_quiet_state, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet_state.depth -= 1


# --------------------------------------------------------------------------- structure checks
#
# PIL parses headers, tags and chunks in Python, one at a time, before (and after) its compiled
# decoders run, and a few of its decoders are pure Python. Each check below walks the file's
# structure (a tight loop that reads lengths and skips, never the pixel data) and refuses what
# would make PIL or libjpeg spend unbounded time: too many pieces, or a variant with a slow
# decoder. Limits are far above what cameras, phones, scanners and image editors write.

# What a JPEG's scans cost libjpeg, priced before it decodes any: every scan walks every 8×8 block
# of the components it covers (so a few kilobytes of repeated scans cost minutes at a fixed
# pixel count), and Huffman-decoding a progressive scan's data is about four times slower per
# byte than a baseline scan's. Upper bounds measured on the 2-core reference machine (a repeated
# DC scan; refinement scans of noise; baseline noise), in nanoseconds:
_JPEG_NS_PER_BLOCK = 20
_JPEG_NS_PER_PROGRESSIVE_BYTE = 35
_JPEG_NS_PER_BASELINE_BYTE = 8
# A JPEG whose scans would cost more is refused. A 40 MP progressive photo (10 scans, ~20 MB)
# prices at about a third of it; the file size cap keeps baseline JPEGs under half of it.
JPEG_SCAN_BUDGET_NS = 2_000_000_000
MAX_JPEG_SEGMENTS = 2_000  # marker segments up to the end of the image: photos have < 100
# PIL skips stray bytes between marker segments one at a time in Python before the first scan.
_JPEG_STRAY_BYTES = 4_096
_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_PLAIN_FRAMES = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive Huffman
_JPEG_VARIANTS = {0xC3: Variant.LOSSLESS, 0xC9: Variant.ARITHMETIC}
_JPEG_VARIANTS |= {marker: Variant.HIERARCHICAL for marker in (0xC5, 0xC6, 0xC7)}
_JPEG_VARIANTS |= {marker: Variant.ARITHMETIC for marker in (0xCA, 0xCB, 0xCD, 0xCE, 0xCF)}
# After a scan header comes entropy-coded data, where 0xFF is always followed by 0x00 (a stuffed
# byte) or a restart marker; anything else ends it.
_JPEG_END_OF_SCAN = re.compile(rb"\xff[^\x00\xd0-\xd7]")

MAX_PNG_CHUNKS = 100_000  # image data included (encoders write 8–64 KB per IDAT chunk)
MAX_PNG_EXTRA_CHUNKS = 1_000  # everything else: text, colour, animation control…
MAX_GIF_EXTENSIONS = 1_000  # extension blocks before the second frame
MAX_GIF_SUB_BLOCKS = 1_000_000  # encoders fill sub-blocks (255 bytes): only tiny ones get here
MAX_TIFF_TAGS = 512  # cameras and scanners write 15–60 tags per directory
MAX_TIFF_PIECES = 50_000  # strips or tiles: PIL sets up each one in Python
MAX_WEBP_CHUNKS = 10_000
# EXIF is parsed in Python for the orientation tag: beyond what a JPEG can hold (one 64 KB
# segment) the block is skipped and the photo treated as upright.
_MAX_EXIF_BYTES = 65_535

# libtiff decodes these in compiled code at memory speed; the rest are rare or slow paths.
# JPEG inside TIFF is left out: each strip is a JPEG stream whose scans libtiff lets run to 100
# (seconds at the pixel cap) without the pricing that plain JPEGs get here.
_TIFF_COMPRESSIONS = frozenset({1, 2, 3, 4, 5, 8, 32773, 32946})
_TIFF_VARIANTS = {6: Variant.OLD_JPEG, 7: Variant.JPEG, 32809: Variant.THUNDERSCAN}
_TIFF_VARIANTS |= {34676: Variant.LOGLUV, 34677: Variant.LOGLUV, 34925: Variant.LZMA}
_TIFF_VARIANTS |= {50000: Variant.ZSTANDARD, 50001: Variant.WEBP}
_BMP_PLAIN = frozenset({0, 3})  # uncompressed, bit fields: PIL's compiled unpackers
_BMP_VARIANTS = {1: Variant.RUN_LENGTH, 2: Variant.RUN_LENGTH}


@dataclass(frozen=True)
class _Layout:
    """What a structure check learnt that PIL would otherwise find out slowly."""

    frames: int | None = None  # 1, or 2 for "more than one"; None: PIL's answer is cheap
    exif_ok: bool = True  # EXIF small enough to parse for the orientation tag


def image_format(data: bytes) -> str | None:
    """The format ``data``'s first bytes announce, if this module decodes it (MPO reads JPEG)."""
    if data[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "PNG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:2] == b"BM":
        return "BMP"
    if data[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "TIFF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    return None


def screen(data: bytes) -> ImageError | None:
    """The cheap first look at an upload (its first bytes only): why it is no image, or None.

    Safe to call where time matters (an upload handler): no PIL, no decoding. A file that
    passes may still be refused by :func:`decode`.
    """
    if not data:
        return ImageError(ErrorCode.EMPTY)
    if image_format(data) is None:
        return ImageError(_sniff(data) or ErrorCode.NOT_IMAGE)
    return None


def _pieces(format: str, limit: int) -> ImageError:
    return ImageError(ErrorCode.TOO_MUCH_METADATA, format=format, limit=limit)


def _check_jpeg(data: bytes) -> _Layout:
    end = len(data)
    pos = 2
    segments = scans = stray = cost = 0
    progressive = False
    blocks: dict[int, int] = {}  # component id → 8×8 blocks it has in the frame
    width = height = 0
    while pos < end:
        if data[pos] != 0xFF:
            following = data.find(b"\xff", pos)
            following = end if following < 0 else following
            if not scans:
                stray += following - pos
                if stray > _JPEG_STRAY_BYTES:
                    raise ImageError(ErrorCode.TRUNCATED if blocks else "not_image")
            pos = following
            continue
        if pos + 1 >= end:
            break
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker == 0xD9:  # end of image; an MPO's further frames are never decoded
            break
        if marker in (0x00, 0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # no length field
            pos += 2
            continue
        if pos + 4 > end:
            raise ImageError(ErrorCode.TRUNCATED)
        length = (data[pos + 2] << 8) | data[pos + 3]
        body = pos + 4
        pos += 2 + max(2, length)
        segments += 1
        if segments > MAX_JPEG_SEGMENTS:
            raise _pieces("JPEG", MAX_JPEG_SEGMENTS)
        if marker in _JPEG_FRAME_MARKERS:
            if marker not in _JPEG_PLAIN_FRAMES:
                raise ImageError(
                    ErrorCode.SLOW_FORMAT, format="JPEG", variant=_JPEG_VARIANTS[marker]
                )
            if blocks or body + 6 > end:
                raise ImageError(ErrorCode.TRUNCATED)
            progressive = marker == 0xC2
            height, width = struct.unpack_from(">HH", data, body + 1)
            sampling = [
                (data[at], max(1, data[at + 1] >> 4), max(1, data[at + 1] & 15))
                for at in range(body + 6, min(end - 2, body + 6 + 3 * data[body + 5]), 3)
            ]
            h_max = max((h for _, h, _ in sampling), default=1)
            v_max = max((v for _, _, v in sampling), default=1)
            for component, h, v in sampling:
                columns = math.ceil(math.ceil(width * h / h_max) / 8)
                rows = math.ceil(math.ceil(height * v / v_max) / 8)
                blocks[component] = columns * rows
        elif marker == 0xDA:  # start of scan: price it, then skip its entropy-coded data
            if not blocks or body >= end:
                raise ImageError(ErrorCode.TRUNCATED)
            scans += 1
            components = data[body + 1 : body + 1 + 2 * data[body] : 2]
            found = _JPEG_END_OF_SCAN.search(data, pos)
            scan_end = found.start() if found else end
            per_byte = _JPEG_NS_PER_PROGRESSIVE_BYTE if progressive else _JPEG_NS_PER_BASELINE_BYTE
            cost += per_byte * (scan_end - pos)
            cost += _JPEG_NS_PER_BLOCK * sum(blocks.get(component, 0) for component in components)
            if cost > JPEG_SCAN_BUDGET_NS:  # at once: the rest of the file cannot make it cheaper
                megapixels = round(width * height / 1e6, 1)
                raise ImageError(ErrorCode.SLOW_JPEG, scans=scans, megapixels=megapixels)
            pos = scan_end
    if not blocks:
        raise ImageError(ErrorCode.TRUNCATED if segments else "not_image")
    return _Layout()


def _check_png(data: bytes) -> _Layout:
    end = len(data)
    pos = 8
    chunks = extra = exif = 0
    while pos + 8 <= end:
        length, kind = struct.unpack_from(">I4s", data, pos)
        pos += 12 + length
        chunks += 1
        if kind != b"IDAT" and kind != b"fdAT":
            extra += 1
            if kind == b"eXIf":
                exif += length
        if chunks > MAX_PNG_CHUNKS:
            raise _pieces("PNG", MAX_PNG_CHUNKS)
        if extra > MAX_PNG_EXTRA_CHUNKS:
            raise _pieces("PNG", MAX_PNG_EXTRA_CHUNKS)
        if kind == b"IEND":
            break
    return _Layout(exif_ok=exif <= _MAX_EXIF_BYTES)


def _check_gif(data: bytes) -> _Layout:
    end = len(data)
    if end < 13:
        raise ImageError(ErrorCode.TRUNCATED)
    flags = data[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)  # global colour table
    frames = extensions = sub_blocks = 0
    while pos < end:
        kind = data[pos]
        if kind == 0x21:  # extension: label, then sub-blocks
            extensions += 1
            if extensions > MAX_GIF_EXTENSIONS:
                raise _pieces("GIF", MAX_GIF_EXTENSIONS)
            pos += 2
        elif kind == 0x2C:  # image descriptor, local colour table, LZW code size, sub-blocks
            if pos + 10 > end:
                raise ImageError(ErrorCode.TRUNCATED)
            frames += 1
            if frames == 2:  # PIL decodes the first frame only: enough to know there are more
                break
            packed = data[pos + 9]
            pos += 11 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
        else:  # trailer, or bytes PIL stops at too
            break
        while pos < end:
            size = data[pos]
            pos += 1 + size
            if not size:
                break
            sub_blocks += 1
            if sub_blocks > MAX_GIF_SUB_BLOCKS:
                raise _pieces("GIF", MAX_GIF_SUB_BLOCKS)
    if not frames:
        raise ImageError(ErrorCode.TRUNCATED)
    return _Layout(frames=frames)


def _check_bmp(data: bytes) -> _Layout:
    if len(data) >= 34 and int.from_bytes(data[14:18], "little") >= 40:
        compression = int.from_bytes(data[30:34], "little")
        if compression in _BMP_VARIANTS:
            raise ImageError(
                ErrorCode.SLOW_FORMAT, format="BMP", variant=_BMP_VARIANTS[compression]
            )
        if compression not in _BMP_PLAIN:
            raise ImageError(
                ErrorCode.UNSUPPORTED_VARIANT,
                format="BMP",
                variant=Variant.COMPRESSION,
                number=compression,
            )
    return _Layout(frames=1)


def _check_tiff(data: bytes) -> _Layout:
    order = "<" if data[:2] == b"II" else ">"
    big = data[2] == 43 or data[3] == 43  # BigTIFF: 64-bit offsets and counts
    count_format, entry_size, value_at = (f"{order}Q", 20, 12) if big else (f"{order}H", 12, 8)
    count_size = struct.calcsize(count_format)
    try:
        (offset,) = struct.unpack_from(f"{order}Q" if big else f"{order}I", data, 8 if big else 4)
        (count,) = struct.unpack_from(count_format, data, offset)
    except struct.error:
        raise ImageError(ErrorCode.TRUNCATED) from None
    if count > MAX_TIFF_TAGS:
        raise _pieces("TIFF", MAX_TIFF_TAGS)
    compression = 1
    for entry in range(offset + count_size, offset + count_size + count * entry_size, entry_size):
        try:
            tag, kind = struct.unpack_from(f"{order}HH", data, entry)
            (values,) = struct.unpack_from(f"{order}{'Q' if big else 'I'}", data, entry + 4)
            if tag == 259:  # compression: a SHORT (or LONG) stored in the entry itself
                value_format = f"{order}H" if kind == 3 else f"{order}I"
                (compression,) = struct.unpack_from(value_format, data, entry + value_at)
        except struct.error:
            raise ImageError(ErrorCode.TRUNCATED) from None
        if tag in (273, 324) and values > MAX_TIFF_PIECES:  # strip or tile offsets
            raise _pieces("TIFF", MAX_TIFF_PIECES)
    if compression not in _TIFF_COMPRESSIONS:
        variant = _TIFF_VARIANTS.get(compression, Variant.COMPRESSION)
        raise ImageError(ErrorCode.SLOW_FORMAT, format="TIFF", variant=variant, number=compression)
    return _Layout()


def _check_webp(data: bytes) -> _Layout:
    end = min(len(data), 8 + int.from_bytes(data[4:8], "little"))
    pos = 12
    chunks = exif = 0
    while pos + 8 <= end:
        kind = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        pos += 8 + size + (size & 1)
        chunks += 1
        if chunks > MAX_WEBP_CHUNKS:
            raise _pieces("WebP", MAX_WEBP_CHUNKS)
        if kind == b"EXIF":
            exif += size
    return _Layout(exif_ok=exif <= _MAX_EXIF_BYTES)


_CHECKS = {
    "JPEG": _check_jpeg,
    "PNG": _check_png,
    "GIF": _check_gif,
    "BMP": _check_bmp,
    "TIFF": _check_tiff,
    "WEBP": _check_webp,
}


# --------------------------------------------------------------------------- decoding


def decode(data: bytes, *, min_side: int | None = None) -> Decoded:
    """Decode ``data`` to an upright RGB image and describe the source.

    ``min_side``: JPEGs may be decoded by libjpeg at 1/2, 1/4 or 1/8 scale (``Image.draft``)
    as long as the shorter side stays at least this long. A phone photo then decodes several
    times faster (libjpeg skips most of the inverse DCT work), and the classifier's own resize
    to 256 px sees the same picture.
    """
    started = time.perf_counter()
    if not data:
        raise ImageError(ErrorCode.EMPTY)
    announced = image_format(data)
    if announced is None:
        raise ImageError(_sniff(data) or ErrorCode.NOT_IMAGE)
    with _quiet():
        layout = _CHECKS[announced](data)
        decoded = _decode_checked(data, announced, layout, min_side)
    return replace(decoded, decode_s=time.perf_counter() - started)


def _decode_checked(data: bytes, announced: str, layout: _Layout, min_side: int | None) -> Decoded:
    try:
        # formats=: only the plugin the magic bytes named parses the file (JPEG covers MPO)
        image = Image.open(io.BytesIO(data), formats=[announced])
    except UnidentifiedImageError:
        raise ImageError(ErrorCode.NOT_IMAGE) from None
    except Image.DecompressionBombError:
        # PIL's own, higher threshold fires inside open() for absurd headers
        raise ImageError(ErrorCode.BOMB, limit_mp=MAX_PIXELS // 1_000_000) from None
    except Exception:  # PIL raises many types on garbage headers; all mean "not an image"
        raise ImageError(ErrorCode.NOT_IMAGE) from None

    image_format = image.format or announced
    if image_format not in SUPPORTED_FORMATS:
        raise ImageError(ErrorCode.UNSUPPORTED_FORMAT, format=image_format)
    width, height = image.size
    _check_size(width, height)  # header only: no pixel decoded yet

    orientation = 1
    if layout.exif_ok:
        try:
            orientation = int(image.getexif().get(0x0112, 1) or 1)
        except Exception:  # a broken EXIF block must not cost the photo
            orientation = 1
    if layout.frames is not None:
        multi_frame = layout.frames > 1
    else:
        # Cheap for these formats (a header field or the next directory's offset). A damaged
        # one fails here and leaves the file positioned part-way: the image is broken.
        try:
            multi_frame = bool(getattr(image, "is_animated", False))
        except Exception:
            raise ImageError(ErrorCode.TRUNCATED) from None
    stored_mode = image.mode
    conversions: list[Conversion] = []
    try:
        if image_format in ("JPEG", "MPO") and min_side and image.mode in ("RGB", "L", "CMYK"):
            scale = min(width, height) / min_side
            if scale >= 2:
                # draft picks the largest DCT scale whose result is still >= the requested size
                image.draft(image.mode, (width // int(scale), height // int(scale)))
                if image.size != (width, height):
                    conversions.append(Conversion.DRAFT)
        image.load()
        decoded_size = image.size
        if orientation not in (0, 1):
            # in place: the default returns a full copy even for an upright photo
            ImageOps.exif_transpose(image, in_place=True)
            conversions.append(Conversion.EXIF_ROTATE)
        rgb = _to_rgb(image, conversions)
    except ImageError:
        raise
    except MemoryError:
        raise ImageError(ErrorCode.BOMB, limit_mp=MAX_PIXELS // 1_000_000) from None
    except Exception:  # truncated or corrupt data surfaces as OSError/ValueError/zlib errors
        raise ImageError(ErrorCode.TRUNCATED) from None
    if multi_frame:
        conversions.append(Conversion.FIRST_FRAME)
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

    Raises :class:`ImageError` (a code and parameters) for anything else.
    """
    return decode(data).image


# --------------------------------------------------------------------------- decode once, keep less

# What a page keeps of an upload once it has looked at it: the upright RGB with its shorter side
# at most this long. Every model resizes to at most 256 px before its crop, and JPEGs are
# already decoded at >= 2× that (draft), so predictions, pipeline and heatmap see the same
# picture; a 12 MP phone photo shrinks from 36 MB of pixels to about 1 MB.
KEEP_SIDE = 512
# ... and its longer side at most this long, so a 50:1 panorama stays a few megabytes too.
KEEP_LONG_SIDE = 4096
LOOK_CACHE_BYTES = 64 * 2**20  # kept images and refusals shared by every session, by content


def shrink(decoded: Decoded, side: int = KEEP_SIDE, long_side: int = KEEP_LONG_SIDE) -> Decoded:
    """``decoded`` with its image scaled down to the kept size (unchanged when already smaller)."""
    width, height = decoded.image.size
    scale = min(side / min(width, height), long_side / max(width, height))
    if scale >= 1:
        return decoded
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    smaller = decoded.image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    info = replace(decoded.info, conversions=(*decoded.info.conversions, Conversion.SHRUNK))
    return replace(decoded, image=smaller, info=info)


def file_digest(data: bytes) -> str:
    """The SHA-256 of a file's bytes, in hex: the key a decoded upload is remembered by."""
    return hashlib.sha256(data).hexdigest()


# Kept images and refusals by digest, priced by their pixels (a refusal by a small constant):
# the image dominates an entry and is exactly what the budget is for.
_looks: BoundedCache[str, Decoded | tuple[ErrorCode, dict[str, object]]] = BoundedCache(
    LOOK_CACHE_BYTES
)
_REFUSAL_BYTES = 256


def look(data: bytes) -> Decoded:
    """Decode a file once per content and keep what a page needs: the upright RGB, shrunk to
    :data:`KEEP_SIDE`, with the file's digest and description. The bytes can go after this.

    The same content (a class uploading one photo, a visitor retrying a hostile file) is decoded
    once per process: kept images and refusals are remembered by digest. Raises
    :class:`ImageError`. The returned image is shared: copy it before changing it.
    """
    started = time.perf_counter()
    digest = file_digest(data)
    known = _looks.get(digest)
    if isinstance(known, Decoded):
        return known
    if known is not None:
        code, params = known
        raise ImageError(code, **params)
    try:
        decoded = shrink(decode(data, min_side=KEEP_SIDE))
    except ImageError as error:
        _looks.put(digest, (error.code, dict(error.params)), _REFUSAL_BYTES)
        raise
    kept = replace(decoded, digest=digest, decode_s=time.perf_counter() - started)
    _looks.put(digest, kept, kept.nbytes)
    return kept
