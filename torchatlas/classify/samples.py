"""The sample photos bundled with the app (sources and licences: assets/samples/LICENSE.md)."""

from __future__ import annotations

from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "samples"
# Sample photo files in display order.
SAMPLES: dict[str, str] = {
    "cat": "cat.jpg",
    "coffee": "coffee.jpg",
    "rocket": "rocket.jpg",
    "camera": "camera.png",
    "astronaut": "astronaut.jpg",
}


def sample_bytes(key: str) -> bytes:
    """The file contents of sample ``key`` (one of :data:`SAMPLES`)."""
    return (SAMPLES_DIR / SAMPLES[key]).read_bytes()
