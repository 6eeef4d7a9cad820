"""Bounded validation of JSON that came from a process we do not trust.

A sandbox worker runs hostile code, so whatever it sends back may be forged: well-formed JSON
whose numbers, strings, lists or nesting are large enough to make the page build gigabytes of
text. Every reply is checked against a schema *before* anything formats or renders it:
whole numbers in a range (never a float such as ``3e8`` where a whole number is expected),
strings of bounded length (clipped where a long text is still meaningful), lists of bounded
size, nesting of bounded depth, and a budget on the number of values a check may visit, so
checking is linear in the reply and never slow.

The sandbox knows nothing of what its jobs return: a caller supplies the schema of its own
job's value (each room keeps the schema of its jobs' replies with its own data model).

>>> validate({"depth": 3, "name": "fc"}, Dict({"depth": Int(0, 256), "name": Str(100)}))
{'depth': 3, 'name': 'fc'}
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MAX_NODES = 1_000_000  # values one check may visit; an honest 3000-row report has ~150,000
CLIP_MARK = "…"


class SchemaError(ValueError):
    """The value does not match its schema; ``path`` says where (``layers[3].depth``).

    The message never contains the offending value itself (it may be huge), only its kind.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = []

    def at(self, part: str | int) -> SchemaError:
        if isinstance(part, int):
            self.parts.append(f"[{part}]")
        else:
            self.parts.append("." + _short(part))
        return self

    @property
    def path(self) -> str:
        return "".join(reversed(self.parts)).lstrip(".") or "(top)"

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + CLIP_MARK


def _kind(value: Any) -> str:
    """The value's JSON kind, for messages (never its text: it may be megabytes long)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a whole number" if value.bit_length() <= 64 else "a very large whole number"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _number_text(value: int) -> str:
    # str() of a huge int is slow (and refused past 4300 digits): name its size instead.
    return str(value) if value.bit_length() <= 64 else f"a {value.bit_length()}-bit number"


class _Budget:
    __slots__ = ("left",)

    def __init__(self, nodes: int) -> None:
        self.left = nodes

    def take(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise SchemaError("the value holds too many items to check")


class Spec:
    """One node of a schema; :meth:`check` returns the checked (possibly clipped) value."""

    def check(self, value: Any, budget: _Budget) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class Int(Spec):
    """A whole number in ``low..high``; booleans and floats (``3e8``, ``3.0``) are refused."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def check(self, value: Any, budget: _Budget) -> int:
        if type(value) is not int:
            raise SchemaError(f"expected a whole number, got {_kind(value)}")
        if not self.low <= value <= self.high:
            raise SchemaError(
                f"{_number_text(value)} is outside {_number_text(self.low)}.."
                f"{_number_text(self.high)}"
            )
        return value


class Float(Spec):
    """A finite number in ``low..high`` (a whole number is accepted too)."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def check(self, value: Any, budget: _Budget) -> float | int:
        if type(value) is int:
            if not self.low <= value <= self.high:
                raise SchemaError(f"{_number_text(value)} is out of range")
            return value
        if type(value) is not float:
            raise SchemaError(f"expected a number, got {_kind(value)}")
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise SchemaError("the number is not finite or out of range")
        return value


class Bool(Spec):
    def check(self, value: Any, budget: _Budget) -> bool:
        if type(value) is not bool:
            raise SchemaError(f"expected true or false, got {_kind(value)}")
        return value


def clean_text(value: str) -> str:
    """Lone surrogates (valid in JSON, not in UTF-8) would make the page's encoder raise."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace").decode("utf-8")
    return value


class Str(Spec):
    """A string of at most ``max_len`` characters.

    ``clip``: a longer one is cut (ending in "…") instead of refused, for free text such as an
    error message whose beginning is still worth reading. ``choices`` or ``pattern`` (a full
    match) restrict the value, for codes that select translations or styles.
    """

    def __init__(
        self,
        max_len: int,
        *,
        clip: bool = False,
        choices: Iterable[str] | None = None,
        pattern: str | None = None,
    ) -> None:
        self.max_len = max_len
        self.clip = clip
        self.choices = frozenset(choices) if choices is not None else None
        self.pattern = re.compile(pattern) if pattern else None

    def check(self, value: Any, budget: _Budget) -> str:
        if type(value) is not str:
            raise SchemaError(f"expected a string, got {_kind(value)}")
        if len(value) > self.max_len:
            if not self.clip:
                raise SchemaError(f"a string of {len(value):,} characters (limit {self.max_len:,})")
            value = value[: self.max_len - 1] + CLIP_MARK
        if self.choices is not None and value not in self.choices:
            raise SchemaError("a string that is not one of the expected codes")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise SchemaError("a string that is not in the expected form")
        return clean_text(value)


class Optional(Spec):
    """``null`` or ``spec``."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def check(self, value: Any, budget: _Budget) -> Any:
        return None if value is None else self.spec.check(value, budget)


class List(Spec):
    """A list of at most ``max_items`` items of ``item``; ``clip`` keeps the first ones."""

    def __init__(self, item: Spec, max_items: int, *, clip: bool = False) -> None:
        self.item = item
        self.max_items = max_items
        self.clip = clip

    def check(self, value: Any, budget: _Budget) -> list[Any]:
        if type(value) is not list:
            raise SchemaError(f"expected a list, got {_kind(value)}")
        if len(value) > self.max_items:
            if not self.clip:
                raise SchemaError(f"a list of {len(value):,} items (limit {self.max_items:,})")
            value = value[: self.max_items]
        budget.take(len(value) + 1)
        item = self.item
        if type(item) is Int:  # the common case (a shape): checked without a call per size
            low, high = item.low, item.high
            if all(type(size) is int and low <= size <= high for size in value):
                return list(value)
        out = []
        for index, element in enumerate(value):
            try:
                out.append(item.check(element, budget))
            except SchemaError as exc:
                raise exc.at(index) from None
        return out


class Dict(Spec):
    """An object with known ``fields``; unknown keys are dropped (at most ``max_extra``)."""

    def __init__(
        self, fields: Mapping[str, Spec], *, required: Iterable[str] = (), max_extra: int = 16
    ) -> None:
        self.fields = dict(fields)
        self.required = frozenset(required)
        self.max_keys = len(self.fields) + max_extra

    def check(self, value: Any, budget: _Budget) -> dict[str, Any]:
        if type(value) is not dict:
            raise SchemaError(f"expected an object, got {_kind(value)}")
        if len(value) > self.max_keys:
            raise SchemaError(f"an object with {len(value):,} keys (limit {self.max_keys})")
        budget.take(len(value) + 1)
        out = {}
        for key, spec in self.fields.items():
            if key in value:
                try:
                    out[key] = spec.check(value[key], budget)
                except SchemaError as exc:
                    raise exc.at(key) from None
            elif key in self.required:
                raise SchemaError(f"the key {key!r} is missing")
        return out


class Map(Spec):
    """An object with any keys (each a ``key`` string) whose values are all ``value``."""

    def __init__(self, value: Spec, max_items: int, key: Str | None = None) -> None:
        self.value = value
        self.max_items = max_items
        self.key = key or Str(64)

    def check(self, value: Any, budget: _Budget) -> dict[str, Any]:
        if type(value) is not dict:
            raise SchemaError(f"expected an object, got {_kind(value)}")
        if len(value) > self.max_items:
            raise SchemaError(f"an object with {len(value):,} keys (limit {self.max_items:,})")
        budget.take(len(value) + 1)
        out = {}
        for key, element in value.items():
            checked_key = self.key.check(key, budget)
            try:
                out[checked_key] = self.value.check(element, budget)
            except SchemaError as exc:
                raise exc.at(checked_key) from None
        return out


class OneOf(Spec):
    """The first of ``specs`` that accepts the value."""

    def __init__(self, *specs: Spec) -> None:
        self.specs = specs

    def check(self, value: Any, budget: _Budget) -> Any:
        for spec in self.specs:
            try:
                return spec.check(value, budget)
            except SchemaError:
                continue
        raise SchemaError(f"{_kind(value)} is none of the accepted kinds")


class Where(Spec):
    """``spec``, then ``predicate(value)`` must hold (a relation between parts, e.g. a
    product of sizes that must fit in 64 bits)."""

    def __init__(self, spec: Spec, predicate: Callable[[Any], bool], reason: str) -> None:
        self.spec = spec
        self.predicate = predicate
        self.reason = reason

    def check(self, value: Any, budget: _Budget) -> Any:
        value = self.spec.check(value, budget)
        if not self.predicate(value):
            raise SchemaError(self.reason)
        return value


class AnyJSON(Spec):
    """Any JSON value nested at most ``max_depth`` deep, with finite numbers and ints of
    at most ``int_bits`` bits, strings of at most ``max_str`` and lists/objects of at most
    ``max_items``: the bounds a reply needs before a caller checks its own fields. The one
    definition of "plain JSON, bounded": the codec checks a field declared ``Any`` with it.

    A string is returned as it is unless it holds lone surrogates (then they are replaced);
    containers are returned as cleaned copies."""

    def __init__(
        self,
        max_depth: int = 32,
        *,
        max_str: int = 8 << 20,
        max_items: int = MAX_NODES,
        int_bits: int = 128,
    ) -> None:
        self.max_depth = max_depth
        self.max_str = max_str
        self.max_items = max_items
        self.int_bits = int_bits

    def check(self, value: Any, budget: _Budget) -> Any:
        return self.check_at(value, budget, 0)

    def check_at(self, value: Any, budget: Any, depth: int) -> Any:
        """:meth:`check` of a value found ``depth`` levels down (``budget``: anything with a
        ``take(count)`` that raises :class:`SchemaError` once the count runs out)."""
        kind = type(value)
        if kind is list or kind is dict:
            return self._container(value, budget, depth)
        return self._leaf(value, kind)

    def _leaf(self, value: Any, kind: type) -> Any:
        if value is None or kind is bool:
            return value
        if kind is str:
            if len(value) > self.max_str:
                raise SchemaError(f"a string of {len(value):,} characters")
            return value if value.isascii() else clean_text(value)
        if kind is int:
            if value.bit_length() > self.int_bits:
                raise SchemaError(f"a whole number of {value.bit_length()} bits")
            return value
        if kind is float:
            if not math.isfinite(value):
                raise SchemaError("a number that is not finite")
            return value
        raise SchemaError(f"{_kind(value)} is not JSON")

    def _container(self, value: list[Any] | dict[str, Any], budget: Any, depth: int) -> Any:
        if depth >= self.max_depth:
            raise SchemaError(f"nested more than {self.max_depth} levels deep")
        if len(value) > self.max_items:
            raise SchemaError(f"{_kind(value)} of {len(value):,} items")
        budget.take(len(value) + 1)
        depth += 1
        # Leaves are checked here, not in a call each: most of a reply is leaves.
        max_str, int_bits, isfinite = self.max_str, self.int_bits, math.isfinite
        if type(value) is list:
            out_list = []
            for index, element in enumerate(value):
                kind = type(element)
                if (
                    (kind is str and len(element) <= max_str and element.isascii())
                    or (kind is int and element.bit_length() <= int_bits)
                    or (kind is float and isfinite(element))
                ):
                    out_list.append(element)
                else:
                    try:
                        out_list.append(self.check_at(element, budget, depth))
                    except SchemaError as exc:
                        raise exc.at(index) from None
            return out_list
        out = {}
        for key, element in value.items():
            if type(key) is not str or len(key) > max_str:
                raise SchemaError("an object key that is not a bounded string")
            if not key.isascii():
                key = clean_text(key)
            kind = type(element)
            if (
                (kind is str and len(element) <= max_str and element.isascii())
                or (kind is int and element.bit_length() <= int_bits)
                or (kind is float and isfinite(element))
            ):
                out[key] = element
            else:
                try:
                    out[key] = self.check_at(element, budget, depth)
                except SchemaError as exc:
                    raise exc.at(key) from None
        return out


def validate(value: Any, spec: Spec, *, max_nodes: int = MAX_NODES) -> Any:
    """``value`` checked against ``spec``: a cleaned copy, or :class:`SchemaError`.

    Never raises anything else for data that came from ``json.loads`` (and never
    recurses deeper than the schema, or an :class:`AnyJSON`'s ``max_depth``).
    """
    return spec.check(value, _Budget(max_nodes))
