"""Length-prefixed JSON over sockets: the only format that crosses a sandbox boundary.

JSON, never pickle: unpickling bytes from a worker that ran hostile code would run that code's
choice of callables in the server. Decoding is bounded too: whole numbers longer than
``MAX_INT_DIGITS`` digits are refused before Python converts them (converting and printing
thousands of digits is slow), and so are ``NaN``/``Infinity`` and over-long number literals.
What the message then holds is checked against a schema by the receiver
(:mod:`torchatlas.sandbox.schema`).
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct("!Q")
# Between the zygote and its spare child: the spare is confined (it can take a job), the
# zygote asks it to warm up (no job is running), the spare is warm.
SPARE_CONFINED = b"confined"
SPARE_WARM_UP = b"warm up"
SPARE_READY = b"ready"
MAX_INT_DIGITS = 40  # 2**128 has 39 digits: beyond any size, count or line a job reports
MAX_FLOAT_CHARS = 64  # json.dumps writes no float longer than ~25 characters


class MessageTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message of {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"a whole number of {len(text):,} digits")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_FLOAT_CHARS:
        raise ValueError(f"a number literal of {len(text):,} characters")
    return float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode(body: bytes | str) -> dict[str, Any]:
    """One message's JSON object; ``ValueError`` (or ``RecursionError`` for absurd nesting)
    when it is not JSON, not an object, or holds numbers past the bounds above."""
    message = json.loads(
        body, parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_no_constant
    )
    if not isinstance(message, dict):
        raise ValueError("a sandbox message must be a JSON object")
    return message


def receive(sock: socket.socket, limit: int) -> dict[str, Any] | None:
    """The next message, ``None`` at end of stream; refuses to buffer more than ``limit`` bytes."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise MessageTooLarge(size, limit)
    body = _read_exactly(sock, size)
    if body is None:
        return None
    return decode(body)
