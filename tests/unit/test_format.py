from __future__ import annotations

from components.format import format_bytes, format_count, format_seconds


def test_bytes_use_binary_units_and_three_digits() -> None:
    assert format_bytes(None) == "—"
    assert format_bytes(512) == "512 B"
    assert format_bytes(4 * 1024**3) == "4 GiB"
    assert format_bytes(int(58.6 * 1024**2)) == "58.6 MiB"
    assert format_bytes(1024**6 * 3) == "3.07e+03 PiB"


def test_counts_and_seconds() -> None:
    assert format_count(61_706) == "61.7 k"
    assert format_count(999) == "999"
    assert format_seconds(2.5e-6) == "2.50 µs"
    assert format_seconds(0.0123) == "12.30 ms"
    assert format_seconds(None) == "—"
