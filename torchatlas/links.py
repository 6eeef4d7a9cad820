"""A room's shared link, declared once: its fields, their types, defaults and bounds.

Every room keeps its state in its link (so a teacher can share "open this"). A room declares
its link with :class:`LinkSpec`; reading a link, writing one, the notice for a broken one,
the session keys behind the widgets and the lessons' and class mode's links into the room
all come from that declaration. Everything here is pure (no Streamlit): the page side is
``components/kit/link_state.py``.

A link is hostile input: every value is parsed in linear time with strict rules (ASCII
digits for numbers, length bounds before any work, a closed list for choices, a bounded
inflate for pasted source), and a value that does not parse keeps the field's default and is
named in :attr:`LinkRead.broken` so the page can say so.

>>> spec = LinkSpec("demo", "demo_", (
...     Int("d_n", 3, low=1, high=9), Choice("d_kind", "a", options=("a", "b"))))
>>> spec.read({"d_n": ["7"], "d_kind": ["zzz"]})
LinkRead(values={'d_n': 7, 'd_kind': 'a'}, broken=('d_kind',))
>>> spec.to_query({"d_n": 7, "d_kind": "a"})
{'d_n': '7'}
"""

from __future__ import annotations

import base64
import math
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_LINK_DIGITS = 18  # whole numbers in links: enough for any bound a room uses, never a bignum
_FLOAT = re.compile(r"[+-]?(?:\d{1,20}(?:\.\d{0,20})?|\.\d{1,20})(?:[eE][+-]?\d{1,3})?")
QueryValue = str | list[str]


class Unreadable(ValueError):
    """A link value a field cannot use (the field keeps its default)."""


def strict_int(text: object, *, low: int, high: int) -> int | None:
    """A whole number from a link or a box: ASCII digits only (``"²".isdigit()`` is true but
    ``int("²")`` fails), an optional minus sign, at most :data:`MAX_LINK_DIGITS` digits,
    within ``[low, high]``; None for anything else."""
    if not isinstance(text, str):
        return None
    body = text.strip()
    digits = body[1:] if body.startswith("-") else body
    if not digits or len(digits) > MAX_LINK_DIGITS or not (digits.isascii() and digits.isdigit()):
        return None
    value = int(body)
    return value if low <= value <= high else None


@dataclass(frozen=True)
class Field:
    """One query parameter of a room's link. ``key`` is the session key behind it (the
    widget's key when a widget edits it); by default the spec's prefix plus the name."""

    name: str
    default: Any
    key: str | None = None
    multi = False  # a repeated parameter (one value per item)

    def parse(self, raw: str) -> Any:  # pragma: no cover - every field type overrides it
        raise NotImplementedError

    def encode(self, value: Any) -> QueryValue:
        return str(value)

    def valid(self, value: Any) -> bool:
        """Whether ``value`` is one this field can carry (what a link written by the room
        holds); a writer that gets an invalid one writes the default instead."""
        try:
            return (
                self.read([self.encode(value)] if not self.multi else list(self.encode(value)))
                == value
            )
        except (Unreadable, TypeError, ValueError):
            return False

    def read(self, raw: Sequence[str]) -> Any:
        """The field's value from every value the link gives its name (the last one counts
        for a single field)."""
        if not raw:
            raise Unreadable(self.name)
        return self.parse(raw[-1])


@dataclass(frozen=True)
class Text(Field):
    """Free text up to ``max_len`` characters; with ``pattern``, only text it fully matches."""

    max_len: int = 200
    pattern: str | None = None

    def parse(self, raw: str) -> str:
        if len(raw) > self.max_len:
            raise Unreadable(self.name)
        if self.pattern is not None and not re.fullmatch(self.pattern, raw):
            raise Unreadable(self.name)
        return raw


@dataclass(frozen=True)
class Int(Field):
    """A whole number in ``[low, high]``, ASCII digits only."""

    low: int = 0
    high: int = 10**9

    def parse(self, raw: str) -> int:
        value = strict_int(raw, low=self.low, high=self.high)
        if value is None:
            raise Unreadable(self.name)
        return value


@dataclass(frozen=True)
class Float(Field):
    """A finite decimal number in ``[low, high]`` (``1e-3``, ``0.5``), ASCII only."""

    low: float = -math.inf
    high: float = math.inf

    def parse(self, raw: str) -> float:
        if len(raw) > 48 or not raw.isascii() or not _FLOAT.fullmatch(raw.strip()):
            raise Unreadable(self.name)
        value = float(raw)
        if not (math.isfinite(value) and self.low <= value <= self.high):
            raise Unreadable(self.name)
        return value

    def encode(self, value: Any) -> str:
        return repr(float(value))


@dataclass(frozen=True)
class Offered(Field):
    """One of the numbers a control offers, exactly as the page writes it (``0.1``, ``40``):
    a link picks what the control offers, never another number (nor ``１`` or ``1e9``)."""

    options: tuple[float, ...] = ()

    def parse(self, raw: str) -> Any:
        for option in self.options:
            if str(option) == raw:
                return option
        raise Unreadable(self.name)


@dataclass(frozen=True)
class Choice(Field):
    """One of a closed list of words."""

    options: tuple[str, ...] = ()

    def parse(self, raw: str) -> str:
        if raw not in self.options:
            raise Unreadable(self.name)
        return raw


@dataclass(frozen=True)
class Flag(Field):
    """On or off: ``1`` or ``0`` in the link."""

    default: bool = False

    def parse(self, raw: str) -> bool:
        if raw not in ("0", "1"):
            raise Unreadable(self.name)
        return raw == "1"

    def encode(self, value: Any) -> str:
        return "1" if value else "0"


@dataclass(frozen=True)
class Texts(Field):
    """A list of short, non-empty texts, one query value each (an op chain), at most
    ``max_items``. An empty list is written as one empty value (``s_ops=``), so a link can
    say "no ops" when the default has some."""

    default: tuple[str, ...] = ()
    max_items: int = 24
    max_len: int = 200
    multi = True

    def read(self, raw: Sequence[str]) -> tuple[str, ...]:
        if list(raw) == [""]:
            return ()
        if len(raw) > self.max_items or any(not 0 < len(item) <= self.max_len for item in raw):
            raise Unreadable(self.name)
        return tuple(raw)

    def encode(self, value: Any) -> list[str]:
        items = [str(item) for item in value]
        return items or [""]


@dataclass(frozen=True)
class Source(Field):
    """Pasted source code, deflated and URL-safe base64 encoded (a link stays short), at most
    ``max_chars`` characters once inflated. Inflating stops at that size, so a small token
    that would inflate to gigabytes costs no more than a long source."""

    default: str = ""
    max_chars: int = 20_000
    max_token_chars: int = 16_000

    def parse(self, raw: str) -> str:
        source = decode_source(raw, self.max_chars, self.max_token_chars)
        if source is None:
            raise Unreadable(self.name)
        return source

    def encode(self, value: Any) -> str:
        return encode_source(str(value))


def encode_source(source: str) -> str:
    packed = zlib.compress(source.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_source(token: str, max_chars: int, max_token_chars: int | None) -> str | None:
    """The source a link's token carries, or None if it is damaged or carries more than a
    room ever puts in a link. Linear in the token."""
    if max_token_chars is not None and len(token) > max_token_chars:
        return None
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decompressor = zlib.decompressobj()
        text = decompressor.decompress(packed, 4 * max_chars)  # ≤ 4 UTF-8 bytes a character
        if decompressor.unconsumed_tail or not decompressor.eof:  # too long, or cut short
            return None
        source = text.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError):
        return None
    return source if len(source) <= max_chars else None


@dataclass(frozen=True)
class LinkRead:
    """A link's values (every field: the link's value or the default) and the names of the
    fields the link carried but could not be used."""

    values: dict[str, Any]
    broken: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinkSpec:
    """A room's link: its key (the page's URL path), the prefix of its session keys, and
    its fields in the order they appear in a link."""

    room: str
    session_prefix: str
    fields: tuple[Field, ...]
    _by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [item.name for item in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.room}: a link field is declared twice")
        for item in self.fields:
            if item.key is not None and not item.key.startswith(self.session_prefix):
                raise ValueError(f"{self.room}: session key {item.key} lacks the room's prefix")
        object.__setattr__(self, "_by_name", {item.name: item for item in self.fields})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.fields)

    @property
    def script(self) -> str:
        return f"views/{self.room}.py"

    def field(self, name: str) -> Field:
        return self._by_name[name]

    def session_key(self, name: str) -> str:
        item = self._by_name[name]
        return item.key or f"{self.session_prefix}{name}"

    def defaults(self) -> dict[str, Any]:
        return {item.name: item.default for item in self.fields}

    def read(self, query: Mapping[str, QueryValue | Sequence[str]]) -> LinkRead:
        """Every field's value from ``query`` (name → value or list of values; other names
        are ignored): the link's when it parses, else the default and the name in
        ``broken``."""
        values, broken = {}, []
        for item in self.fields:
            raw = query.get(item.name)
            if raw is None:
                values[item.name] = item.default
                continue
            raw_list = [raw] if isinstance(raw, str) else list(raw)
            try:
                values[item.name] = item.read(raw_list)
            except (Unreadable, TypeError, ValueError, OverflowError):
                values[item.name] = item.default
                broken.append(item.name)
        return LinkRead(values, tuple(broken))

    def to_query(self, values: Mapping[str, Any]) -> dict[str, QueryValue]:
        """The link for ``values`` (missing names take their default); fields at their
        default are left out, so links stay short and read back the same."""
        query: dict[str, QueryValue] = {}
        for item in self.fields:
            value = values.get(item.name, item.default)
            if value == item.default:
                continue
            query[item.name] = item.encode(value)
        return query
