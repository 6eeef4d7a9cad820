"""A room job's reply read straight into its dataclasses, in C, when that gives exactly what
the codec would give.

The codec (:mod:`torchatlas.sandbox.codec`) reads a reply as plain JSON and then walks it in
Python, checking every value against the dataclass's type hints and the reply's bounds. For a
room's report of a few thousand values that walk is most of what the server pays to take a
reply. msgspec checks and builds the same dataclasses from the bytes in C.

It is a fast path, never a second judge: :func:`result_reader` returns a reader only for
types whose every check it can state in msgspec's terms, and the reader returns a value only
when the codec would have returned an equal value from the same bytes; otherwise it returns
None and the caller reads the reply the ordinary way (the codec then accepts it or names what
is wrong). What keeps the two the same:

- each bound of the codec's :class:`~torchatlas.sandbox.codec.Limits` is either a constraint
  of a mirror of the types (a ``msgspec.Struct`` per dataclass that refuses unknown fields,
  strings and lists of bounded length, finite floats) that the bytes are checked against
  first, or follows from the body itself: no more bytes than ``max_nodes`` (each value the
  codec counts takes at least a byte), whole numbers of under 19 digits (within
  ``int_bits``; see :mod:`torchatlas.sandbox.protocol`), and the type's own nesting within
  ``max_depth``;
- only ASCII text without ``\\u`` escapes (the codec cleans other text: lone surrogates);
- only types whose meaning is the same for both: dataclasses with dataclasses' own
  ``__init__``, ``X | None`` unions, enums, literals of text or whole numbers, tuples and
  lists of one item type, mappings from text to plain values. Others (``Any`` elsewhere,
  unions of several types, sets, fractions and complex numbers, recursive types) get no
  reader; floats JSON cannot write (the codec's ``$float`` markers) fail the mirror, so such
  a reply takes the ordinary way.

The job's side has the same shortcut (:func:`result_writer`): msgspec writes a result's JSON
in C, and the child keeps those bytes only when they read back through a mirror in which no
value may be null where the codec would have written a number: msgspec writes a float JSON
has no word for (NaN, infinity) as null, where the codec writes its ``$float`` marker.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from torchatlas.sandbox import protocol

if TYPE_CHECKING:
    from torchatlas.sandbox.codec import Limits

Reader = Callable[[bytes | bytearray], "Rebuilt | None"]
Writer = Callable[[Any], "bytes | None"]
_FINITE = msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)
_PLAIN = (str, int, float, bool)


class Rebuilt(dict[str, Any]):
    """A room job's value as :func:`result_reader` rebuilt it: ``{"result": the dataclass}``,
    already checked. Only this module makes one: a reply read as JSON is a plain dict."""


class _NoReader(Exception):
    """The type has a part whose check msgspec cannot state exactly as the codec does."""


@functools.cache
def hints_of(cls: type) -> dict[str, Any]:
    """A dataclass's type hints, resolved once (the codec's decoders read them too)."""
    return typing.get_type_hints(cls)


class _Mirror:
    """msgspec types that check what the codec checks, built once per hint and limits.

    ``limits`` None: no bounds, and no null where the codec writes a number (the check of
    msgspec's own JSON of a result: see :func:`result_writer`)."""

    def __init__(self, limits: Limits | None) -> None:
        self.limits = limits
        self.writing = limits is None
        self.text = (
            str if limits is None else Annotated[str, msgspec.Meta(max_length=limits.max_str)]
        )
        self.building: set[type] = set()

    def bounded(self, kind: Any) -> Any:
        if self.limits is None:
            return kind
        return Annotated[kind, msgspec.Meta(max_length=self.limits.max_items)]

    def of(self, hint: Any) -> tuple[Any, int]:
        """The mirror of ``hint`` and how deep the codec would count its values nested."""
        if hint is str:
            return self.text, 0
        if hint is float:
            return Annotated[float, _FINITE], 0
        if hint in (int, bool, None, type(None)):
            return hint, 0
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Union or origin is types.UnionType:
            others = [arg for arg in args if arg is not type(None)]
            if len(others) != 1 or len(args) != 2:
                raise _NoReader(f"a union of several types: {hint!r}")
            if self.writing and others[0] is float:
                raise _NoReader("a float or null: a null may be a float JSON cannot write")
            mirror, depth = self.of(others[0])
            return mirror | None, depth
        if origin is typing.Literal:
            if not all(type(arg) in (str, int) for arg in args):
                raise _NoReader(f"a literal of other values: {hint!r}")
            return hint, 0
        if (origin is tuple and len(args) == 2 and args[1] is Ellipsis) or origin is list:
            mirror, depth = self.of(args[0])
            kind = tuple[mirror, ...] if origin is tuple else list[mirror]  # type: ignore[valid-type]
            return self.bounded(kind), depth + 1
        if origin is tuple and args and Ellipsis not in args:
            parts = [self.of(arg) for arg in args]
            return tuple[tuple(mirror for mirror, _ in parts)], 1 + max(d for _, d in parts)
        if origin is dict and len(args) == 2 and args[0] is str:
            # Only plain values: a list could be read as the codec's mapping marker.
            value = args[1]
            if value is Any:
                mirror = self.text | int | Annotated[float, _FINITE] | bool
                mirror = mirror if self.writing else mirror | None
            elif value in _PLAIN:
                mirror, _ = self.of(value)
            else:
                raise _NoReader(f"a mapping to {value!r}")
            return self.bounded(dict[self.text, mirror]), 1  # type: ignore[valid-type]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            if not all(type(member.value) in (str, int) for member in hint):
                raise _NoReader(f"an enum of other values: {hint.__name__}")
            return hint, 0
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.struct(hint)
        raise _NoReader(f"no exact check for {hint!r}")

    def struct(self, cls: type) -> tuple[type, int]:
        if cls in self.building:
            raise _NoReader(f"{cls.__name__} holds itself")
        init = cls.__dict__.get("__init__")
        fields = dataclasses.fields(cls)
        if getattr(getattr(init, "__code__", None), "co_filename", None) != "<string>" or not all(
            field.init for field in fields
        ):
            raise _NoReader(f"{cls.__name__} is not built from its fields alone")
        self.building.add(cls)
        try:
            hints = hints_of(cls)
            members: list[tuple[Any, ...]] = []
            deepest = 0
            for field in fields:
                mirror, depth = self.of(hints[field.name])
                deepest = max(deepest, depth)
                if field.default is not dataclasses.MISSING:
                    members.append((field.name, mirror, field.default))
                elif field.default_factory is not dataclasses.MISSING:
                    default = msgspec.field(default_factory=field.default_factory)
                    members.append((field.name, mirror, default))
                else:
                    members.append((field.name, mirror))
        finally:
            self.building.discard(cls)
        struct = msgspec.defstruct(
            f"Mirror{cls.__name__}", members, kw_only=True, forbid_unknown_fields=True
        )
        return struct, deepest + 1


@functools.cache
def result_reader(hint: Any, limits: Limits) -> Reader | None:
    """A reader of a worker's success reply carrying a room job's result of type ``hint``
    (``{"ok": true, "value": {"result": …}}``), or None when ``hint`` has a part it cannot
    check exactly as the codec does. The reader returns :class:`Rebuilt`, or None where the
    ordinary reading must decide."""
    try:
        mirror, depth = _Mirror(limits).of(hint)
        if depth + 2 > limits.max_depth:
            raise _NoReader("nested deeper than the limits allow")
        checked = msgspec.json.Decoder(_envelope(mirror))
        msgspec.convert(None, hint | None)  # refuses a type msgspec cannot build, here
    except (_NoReader, TypeError, ValueError):
        return None

    def read(body: bytes | bytearray) -> Rebuilt | None:
        if len(body) > limits.max_nodes or not body.isascii() or _escapes_unicode(body):
            return None
        if not protocol.plain_numbers(body):
            return None
        try:
            reply = checked.decode(body)
            if reply.ok is not True:
                return None
            # The mirror's value, checked, built as the dataclasses it mirrors.
            result = msgspec.convert(reply.value.result, hint, from_attributes=True)
        except Exception:  # msgspec's errors, or a dataclass's __post_init__ refusing
            return None
        return Rebuilt(result=result)

    return read


# More escapes than a room's report writes (its code's line breaks): such a body is left to
# the codec rather than walked escape by escape here.
MAX_ESCAPES = 4096


def _escapes_unicode(body: bytes | bytearray) -> bool:
    """Whether ``body`` holds a ``\\u`` escape (or too many escapes to look at): found escape
    by escape (a backslash and the character it escapes), since searching for the two
    characters at once took longer than reading the body."""
    if body.count(b"\\") > MAX_ESCAPES:
        return True
    at = body.find(b"\\")
    while at != -1:
        if body[at + 1 : at + 2] == b"u":
            return True
        at = body.find(b"\\", at + 2)
    return False


# The address space a result's writer needs free: msgspec's encoder crashes the process where
# an allocation fails (a sandbox child runs at an address-space limit). A room engine's result
# is bounded by the engine; this is four times the largest reply a job may send.
WRITE_ROOM_BYTES = 32 << 20


@functools.cache
def result_writer(kind: type) -> Writer | None:
    """A writer of a job's result of dataclass ``kind`` as JSON, or None when ``kind`` has a
    part that msgspec might write otherwise than the codec. The writer returns the bytes, or
    None where the codec must write the result (a float JSON has no word for, a value that
    is not of its declared type)."""
    if not dataclasses.is_dataclass(kind):
        return None
    try:
        mirror, _ = _Mirror(None).of(kind)
        check = msgspec.json.Decoder(mirror)
    except (_NoReader, TypeError, ValueError):
        return None
    encoder = msgspec.json.Encoder()

    def write(value: Any) -> bytes | None:
        if not protocol.has_room(WRITE_ROOM_BYTES):  # the encoder would crash, not raise
            return None
        try:
            data = encoder.encode(value)
            check.decode(data)
        except Exception:  # a value msgspec cannot write, or one its mirror refuses
            return None
        return data

    return write


def _envelope(result: Any) -> type:
    """``{"ok": bool, "value": {"result": result}}``, nothing else allowed."""
    value = msgspec.defstruct("Value", [("result", result)], forbid_unknown_fields=True)
    return msgspec.defstruct("Reply", [("ok", bool), ("value", value)], forbid_unknown_fields=True)
