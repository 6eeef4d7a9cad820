"""Engine results across the sandbox boundary: frozen dataclasses to bounded JSON and back.

A room's engine returns frozen dataclasses. When the engine runs in a sandbox child (because a
visitor chose its sizes, values or structure), :func:`encode` turns the result into plain JSON
there, and the server rebuilds it with :func:`decode`, driven by the dataclass's own type
hints: every field must be present with the declared type, every whole number in range, every
string and list bounded, nesting and the total number of values bounded. The child may have
run hostile input, so its reply is hostile input: nothing it sends becomes an object of a type
the server did not ask for.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Point:
...     x: int
...     label: str | None = None
>>> decode(encode(Point(3, "a")), Point)
Point(x=3, label='a')
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from torchatlas.sandbox.schema import SchemaError

# Markers for values JSON has no word for; a marker is an object with exactly one of these keys.
FLOAT, COMPLEX, FRACTION, MAPPING = "$float", "$complex", "$fraction", "$map"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclasses.dataclass(frozen=True)
class Limits:
    """The bounds a decoded value must keep. The defaults suit a room's report: far above an
    honest result, far below what would slow the page that draws it."""

    max_str: int = 20_000  # characters in one string
    max_items: int = 100_000  # items in one list, tuple or mapping
    max_nodes: int = 1_000_000  # values in the whole reply
    max_depth: int = 48
    int_bits: int = 128  # a whole number's magnitude, in bits
    fraction_digits: int = 400  # digits of an exact fraction's numerator and denominator


DEFAULT_LIMITS = Limits()


# ------------------------------------------------------------------------------ encode
def encode(value: Any) -> Any:
    """``value`` (dataclasses, enums, tuples, lists, sets, mappings, numbers, strings,
    ``None``; numpy scalars) as JSON-able data. Raises TypeError for anything else (a tensor,
    a module): an engine returns descriptions, never live objects."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, enum.Enum):
        return encode(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return {FLOAT: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, complex):
        return {COMPLEX: [encode(value.real), encode(value.imag)]}
    if isinstance(value, Fraction):
        return {FRACTION: f"{value.numerator}/{value.denominator}"}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: encode(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if field.init
        }
    if isinstance(value, Mapping):
        if all(type(key) is str for key in value):
            return {key: encode(item) for key, item in value.items()}
        return {MAPPING: [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [encode(item) for item in items]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy" and getattr(value, "ndim", 1) == 0:
        return encode(item())
    raise TypeError(f"{type(value).__name__} cannot cross the sandbox boundary")


# ------------------------------------------------------------------------------ decode
class _Budget:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.left = limits.max_nodes

    def take(self, count: int = 1) -> None:
        self.left -= count
        if self.left < 0:
            raise SchemaError(f"more than {self.limits.max_nodes:,} values")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _union_members(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


Decoder = Callable[[Any, "_Budget", int], Any]


def _decode(data: Any, hint: Any, budget: _Budget, depth: int) -> Any:
    budget.take()
    if depth > budget.limits.max_depth:
        raise SchemaError(f"nested more than {budget.limits.max_depth} levels deep")
    return _decoder(hint)(data, budget, depth)


@functools.cache
def _decoder(hint: Any) -> Decoder:
    """The decoding function for ``hint``, built once per type: a reply holds tens of thousands
    of values, and asking ``typing`` what each hint means for every one of them costs more than
    the checks themselves."""
    if hint is Any or hint is object:
        return _plain
    if hint is None or hint is type(None):
        return _decode_none
    members = _union_members(hint)
    if members is not None:
        return _union_decoder(members)
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return _literal_decoder(typing.get_args(hint))
    if origin is not None:
        return _generic_decoder(origin, typing.get_args(hint))
    if isinstance(hint, type):
        return _type_decoder(hint)
    raise TypeError(f"cannot decode the type {hint!r}")


def _decode_none(data: Any, budget: _Budget, depth: int) -> None:
    if data is not None:
        raise SchemaError("expected null")


def _union_decoder(members: tuple[Any, ...]) -> Decoder:
    optional = type(None) in members
    others = tuple(member for member in members if member is not type(None))

    def decode_union(data: Any, budget: _Budget, depth: int) -> Any:
        if data is None and optional:
            return None
        reasons = []
        for member in others:
            try:
                return _decoder(member)(data, budget, depth)
            except SchemaError as exc:
                reasons.append(str(exc))
        raise SchemaError("matches none of its types: " + "; ".join(reasons)[:300])

    return decode_union


def _literal_decoder(allowed: tuple[Any, ...]) -> Decoder:
    kinds = {type(a) for a in allowed}

    def decode_literal(data: Any, budget: _Budget, depth: int) -> Any:
        if data not in allowed or type(data) not in kinds:
            raise SchemaError("a value outside its allowed set")
        return data

    return decode_literal


def _decode_bool(data: Any, budget: _Budget, depth: int) -> bool:
    if type(data) is not bool:
        raise SchemaError("expected true or false")
    return data


def _decode_int(data: Any, budget: _Budget, depth: int) -> int:
    if type(data) is not int:
        raise SchemaError("expected a whole number")
    if data.bit_length() > budget.limits.int_bits:
        raise SchemaError(f"a whole number of {data.bit_length()} bits")
    return data


def _decode_float(data: Any, budget: _Budget, depth: int) -> float:
    kind = type(data)
    if kind is float and math.isfinite(data):
        return data
    if kind is int and data.bit_length() <= budget.limits.int_bits:
        return float(data)
    if kind is dict and set(data) == {FLOAT} and data[FLOAT] in _NON_FINITE:
        return _NON_FINITE[data[FLOAT]]
    raise SchemaError("expected a number")


def _decode_complex(data: Any, budget: _Budget, depth: int) -> complex:
    if type(data) is dict and set(data) == {COMPLEX} and type(data[COMPLEX]) is list:
        parts = data[COMPLEX]
        if len(parts) == 2:
            return complex(*(_decode(part, float, budget, depth + 1) for part in parts))
    raise SchemaError("expected a complex number")


def _decode_fraction(data: Any, budget: _Budget, depth: int) -> Fraction:
    if type(data) is dict and set(data) == {FRACTION} and type(data[FRACTION]) is str:
        numerator, slash, denominator = data[FRACTION].partition("/")
        digits = max(len(numerator), len(denominator))
        if (
            slash
            and digits <= budget.limits.fraction_digits
            and numerator.lstrip("-").isascii()
            and numerator.lstrip("-").isdecimal()
            and denominator.isascii()
            and denominator.isdecimal()
            and int(denominator) > 0
        ):
            return Fraction(int(numerator), int(denominator))
    raise SchemaError("expected an exact fraction")


def _decode_str(data: Any, budget: _Budget, depth: int) -> str:
    if type(data) is not str:
        raise SchemaError("expected a string")
    if len(data) > budget.limits.max_str:
        raise SchemaError(f"a string of {len(data):,} characters")
    return data


_SIMPLE: dict[type, Decoder] = {
    bool: _decode_bool,
    int: _decode_int,
    float: _decode_float,
    complex: _decode_complex,
    Fraction: _decode_fraction,
    str: _decode_str,
}


def _type_decoder(hint: type) -> Decoder:
    if issubclass(hint, enum.Enum):

        def decode_enum(data: Any, budget: _Budget, depth: int) -> Any:
            try:
                return hint(data)
            except (ValueError, TypeError):
                raise SchemaError(f"not a {hint.__name__}") from None

        return decode_enum
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    if dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    if hint in (tuple, list):
        items = _generic_decoder(list, (Any,))
        return lambda data, budget, depth: hint(items(data, budget, depth))
    if hint is dict:
        return _generic_decoder(dict, (Any, Any))
    raise TypeError(f"cannot decode the type {hint.__name__}")


def _dataclass_decoder(cls: type) -> Decoder:
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    names = frozenset(fields)
    hints = _hints(cls)
    missing = dataclasses.MISSING
    required = frozenset(
        name
        for name, field in fields.items()
        if field.default is missing and field.default_factory is missing
    )

    def decode_dataclass(data: Any, budget: _Budget, depth: int) -> Any:
        if type(data) is not dict:
            raise SchemaError(f"expected an object for {cls.__name__}")
        keys = data.keys()
        if not keys <= names:
            unknown = sorted(keys - names)[0]
            raise SchemaError(f"{cls.__name__} has no field {unknown[:40]!r}")
        if not required <= keys:
            raise SchemaError(f"{cls.__name__}.{sorted(required - keys)[0]} is missing")
        values = {}
        for name, item in data.items():
            try:
                values[name] = _decode(item, hints[name], budget, depth + 1)
            except SchemaError as exc:
                raise exc.at(name) from None
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"{cls.__name__} refused its fields: {str(exc)[:200]}") from None

    return decode_dataclass


def _pairs(data: Any, limits: Limits) -> list[tuple[Any, Any]]:
    if type(data) is dict and set(data) == {MAPPING} and type(data[MAPPING]) is list:
        pairs = data[MAPPING]
        if len(pairs) > limits.max_items:
            raise SchemaError(f"a mapping of {len(pairs):,} items")
        if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
            raise SchemaError("a mapping whose items are not pairs")
        return [(pair[0], pair[1]) for pair in pairs]
    if type(data) is dict:
        if len(data) > limits.max_items:
            raise SchemaError(f"a mapping of {len(data):,} items")
        return list(data.items())
    raise SchemaError("expected a mapping")


def _generic_decoder(origin: Any, args: tuple[Any, ...]) -> Decoder:
    if origin in (dict, Mapping) or origin is typing.Mapping:
        key_hint, value_hint = args or (Any, Any)

        def decode_mapping(data: Any, budget: _Budget, depth: int) -> Any:
            pairs = _pairs(data, budget.limits)
            budget.take(len(pairs))
            out = {}
            for key, item in pairs:
                clean_key = _decode(key, key_hint, budget, depth + 1)
                try:
                    hash(clean_key)
                except TypeError:
                    raise SchemaError("a mapping key that cannot be a key") from None
                out[clean_key] = _decode(item, value_hint, budget, depth + 1)
            return out

        return decode_mapping
    if origin not in (tuple, list, set, frozenset, Sequence) and origin is not typing.Sequence:
        raise TypeError(f"cannot decode the type {origin!r}")
    fixed = origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)
    item_hint = args[0] if args else Any
    as_tuple = origin in (tuple, Sequence) or origin is typing.Sequence

    def decode_sequence(data: Any, budget: _Budget, depth: int) -> Any:
        if type(data) is not list:
            raise SchemaError("expected a list")
        limits = budget.limits
        if len(data) > limits.max_items:
            raise SchemaError(f"a list of {len(data):,} items")
        budget.take(len(data))
        if fixed:
            if len(data) != len(args):
                raise SchemaError(f"expected {len(args)} items, got {len(data)}")
            hints = args
        else:
            hints = (item_hint,) * len(data)
        if depth + 1 > limits.max_depth:
            raise SchemaError(f"nested more than {limits.max_depth} levels deep")
        items = []
        for index, (item, hint) in enumerate(zip(data, hints, strict=True)):
            try:
                items.append(_decoder(hint)(item, budget, depth + 1))
            except SchemaError as exc:
                raise exc.at(index) from None
        budget.take(len(data))
        if as_tuple or fixed:
            return tuple(items)
        if origin in (set, frozenset):
            try:
                return origin(items)
            except TypeError:
                raise SchemaError("a set item that cannot be hashed") from None
        return items

    return decode_sequence


def _plain(data: Any, budget: _Budget, depth: int) -> Any:
    """Untyped JSON (a field declared ``Any``): kept as it is, within the same bounds."""
    limits = budget.limits
    kind = type(data)
    if data is None or kind is bool:
        return data
    if kind is int:
        if data.bit_length() > limits.int_bits:
            raise SchemaError(f"a whole number of {data.bit_length()} bits")
        return data
    if kind is float:
        if not math.isfinite(data):
            raise SchemaError("a number that is not finite")
        return data
    if kind is str:
        if len(data) > limits.max_str:
            raise SchemaError(f"a string of {len(data):,} characters")
        return data
    if depth > limits.max_depth:
        raise SchemaError(f"nested more than {limits.max_depth} levels deep")
    if kind is list:
        if len(data) > limits.max_items:
            raise SchemaError(f"a list of {len(data):,} items")
        budget.take(len(data))
        return [_plain(item, budget, depth + 1) for item in data]
    if kind is dict:
        if len(data) > limits.max_items:
            raise SchemaError(f"an object of {len(data):,} items")
        budget.take(len(data))
        out = {}
        for key, item in data.items():
            if type(key) is not str or len(key) > limits.max_str:
                raise SchemaError("an object key that is not a bounded string")
            out[key] = _plain(item, budget, depth + 1)
        return out
    raise SchemaError(f"{kind.__name__} is not JSON")


def decode(data: Any, hint: Any, limits: Limits = DEFAULT_LIMITS) -> Any:
    """``data`` (JSON from an untrusted process) rebuilt as ``hint`` (a dataclass, enum,
    ``tuple[...]``, ``X | None``, …); :class:`~torchatlas.sandbox.schema.SchemaError` when it
    does not match or breaks a bound. Never raises anything else for ``json.loads`` output
    (a hint the codec cannot decode is the caller's mistake: TypeError, before any data)."""
    _decoder(hint)
    try:
        return _decode(data, hint, _Budget(limits), 0)
    except RecursionError:
        raise SchemaError("nested too deep") from None


# ------------------------------------------------------------------ the job's side
def job_reply(
    compute: Callable[[], Any], refusals: tuple[type[BaseException], ...] = ()
) -> dict[str, Any]:
    """What a room's sandbox job sends back: ``{"result": encode(compute())}``, or
    ``{"refused": {"code", "params"}}`` when ``compute`` raises one of ``refusals`` (an
    engine's coded error: ``.code`` and ``.params``). Other exceptions propagate: the worker
    reports them as a failed job."""
    try:
        value = compute()
    except refusals as exc:
        code = getattr(exc, "code", None)
        params = getattr(exc, "params", None) or {}
        return {
            "refused": {
                "code": str(getattr(code, "value", code)),
                "params": {str(k): _param(v) for k, v in dict(params).items()},
            }
        }
    return {"result": encode(value)}


def _param(value: Any) -> Any:
    """An error's parameter as JSON: numbers, text and flags as they are; anything else as
    bounded text (a parameter is shown in a sentence, never computed with)."""
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
            return f"{value:.3e}" if value.bit_length() < 1000 else "a very large number"
        return value[:2000] if isinstance(value, str) else value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return _param(value.value)
    if isinstance(value, list | tuple) and len(value) <= 64:
        return [_param(item) for item in value]
    return type(value).__name__
