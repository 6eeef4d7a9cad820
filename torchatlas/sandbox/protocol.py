"""Length-prefixed JSON over sockets: the only format that crosses a sandbox boundary.

JSON, never pickle: unpickling bytes from a worker that ran hostile code would run that code's
choice of callables in the server.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct("!Q")
SPARE_READY = b"ready"  # a spare child to the zygote: warmed up, it can take a job now


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
    message = json.loads(body)
    if not isinstance(message, dict):
        raise ValueError("a sandbox message must be a JSON object")
    return message
