"""Length-prefixed JSON over sockets: the only format that crosses a sandbox boundary.

JSON, never pickle: unpickling bytes from a worker that ran hostile code would run that code's
choice of callables in the server. Decoding is bounded too: whole numbers longer than
``MAX_INT_DIGITS`` digits are refused before Python converts them (converting and printing
thousands of digits is slow), and so are ``NaN``/``Infinity`` and over-long number literals.
What the message then holds is checked against a schema by the receiver
(:mod:`torchatlas.sandbox.schema`).

Messages are written and read with orjson, in C: a room's reply is tens of kilobytes, and
writing and reading it with Python's own ``json`` (the reader calling a bounded-number hook
for every number) was a large share of what crossing the boundary cost.
Each side falls back to ``json`` where orjson would not say exactly the same thing: a whole
number past 64 bits (orjson refuses to write one, and reads one as a float), or text orjson
refuses (a lone surrogate). The reader takes orjson's result only for a body in which every
whole number fits orjson's 64 bits and no fraction or exponent is unusually long (see
``_NUMBER_MARKS``): both readers then give the same object. (orjson reads any number literal
in linear time, so the length bound above is there for Python's reader.)
"""

from __future__ import annotations

import json
import mmap
import socket
import struct
from typing import Any

import orjson

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


# Where orjson and the bounded reader could disagree, the bounded reader reads the body:
# - a whole number of 19 digits may be past orjson's 64 bits (2**63 has 19), and orjson reads
#   such a number as a float;
# - a fraction or exponent of 45 digits makes a literal the bounded reader refuses (no float
#   Python or orjson writes has one).
# The body is mapped to digits, fraction or exponent marks, and the rest, and searched for
# those runs (a regular expression, which tries every position of a digit-heavy body, took
# longer than the read itself). A match may be inside a string too: the bounded reader then
# reads the body, which costs time, never correctness.
_NUMBER_MARKS = bytes(
    ord("0") if byte in b"0123456789" else ord(".") if byte in b".eE" else ord(" ")
    for byte in range(256)
)
_LONG_WHOLE_NUMBER = b" " + b"0" * 19
_LONG_FRACTION = b"." + b"0" * 45


def encode(message: dict[str, Any], *, fast: bool = True) -> bytes:
    """``message`` as one framed JSON body; ``TypeError``/``ValueError`` when it is not JSON.

    ``fast=False`` writes with Python's ``json`` only: orjson cannot stop at a size limit, and
    where an allocation fails (a sandbox child at its address-space limit) it crashes the
    process instead of raising MemoryError, so a child writes an unbounded reply this way."""
    body = None
    if fast:
        try:
            body = orjson.dumps(message)
        except orjson.JSONEncodeError:  # a whole number past 64 bits, a key that is not text
            body = None
    if body is None:
        body = json.dumps(message, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


def has_room(size: int) -> bool:
    """Whether ``size`` more bytes of address space can be mapped now (mapped, never touched,
    and unmapped at once: the address-space limit counts mappings, not pages in use). The
    writers in C (orjson, msgspec's encoder) crash the process where an allocation fails,
    so a sandbox child, which runs at an address-space limit, asks this before using them."""
    try:
        mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS).close()
    except (OSError, ValueError, MemoryError):
        return False
    return True


def _read_exactly(sock: socket.socket, size: int) -> bytearray | None:
    # Read into one buffer of the announced size (within the caller's limit): a recv of a
    # large maximum allocates that maximum for every chunk. Both readers take the buffer as
    # it is (no copy into bytes).
    buffer = bytearray(size)
    view, done = memoryview(buffer), 0
    while done < size:
        count = sock.recv_into(view[done:])
        if not count:
            return None
        done += count
    return buffer


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


def plain_numbers(body: bytes | bytearray) -> bool:
    """Whether every whole number in ``body`` has fewer than 19 digits (so fits 64 bits) and
    no fraction or exponent is unusually long: where orjson reads what the bounded reader
    reads (digits inside strings count too; a false "no" only costs the slower reader)."""
    marks = body.translate(_NUMBER_MARKS)
    return _LONG_WHOLE_NUMBER not in marks and _LONG_FRACTION not in marks


def decode(body: bytes | bytearray | str) -> dict[str, Any]:
    """One message's JSON object; ``ValueError`` (or ``RecursionError`` for absurd nesting)
    when it is not JSON, not an object, or holds numbers past the bounds above."""
    message = None
    if isinstance(body, bytes | bytearray) and plain_numbers(body):
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            message = None  # Python's reader says why (or accepts what orjson would not)
    if message is None:
        message = json.loads(
            body, parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_no_constant
        )
    if not isinstance(message, dict):
        raise ValueError("a sandbox message must be a JSON object")
    return message


def receive_body(sock: socket.socket, limit: int) -> bytearray | None:
    """The next message's body, unread, ``None`` at end of stream; refuses to buffer more than
    ``limit`` bytes."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise MessageTooLarge(size, limit)
    return _read_exactly(sock, size)


def receive(sock: socket.socket, limit: int) -> dict[str, Any] | None:
    """The next message, ``None`` at end of stream; refuses to buffer more than ``limit`` bytes."""
    body = receive_body(sock, limit)
    return None if body is None else decode(body)
