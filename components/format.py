"""Numbers as people read them, shared by every room (bytes, counts, durations)."""

from __future__ import annotations

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(size: int | float | None) -> str:
    """``4 GiB``, ``58.6 MiB``, ``512 B``; three significant digits, binary units."""
    if size is None:
        return "—"
    value = float(size)
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_count(value: int | float) -> str:
    """``62 k``, ``1.33 G``: parameter and FLOP counts."""
    value = float(value)
    for limit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g} {suffix}"
    return f"{value:.0f}"


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"
