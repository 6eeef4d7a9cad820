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

import orjson

from torchatlas.sandbox.schema import AnyJSON, SchemaError, clean_text
from torchatlas.sandbox.typed_reply import hints_of, result_writer

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
Encoder = Callable[[Any], Any]
# Values JSON takes as they are: most of a reply (names, sizes, flags) is one of these.
_AS_IS = frozenset({str, int, bool, type(None)})
# How to encode each type met so far, decided once per type (a reply holds thousands of
# values of a few dozen types; asking each value's type the same questions again, dataclass
# fields included, cost more than the encoding itself).
_ENCODERS: dict[type, Encoder] = {}


def encode(value: Any) -> Any:
    """``value`` (dataclasses, enums, tuples, lists, sets, mappings, numbers, strings,
    ``None``; numpy scalars) as JSON-able data. Raises TypeError for anything else (a tensor,
    a module): an engine returns descriptions, never live objects."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _ENCODERS[kind] = _encoder_for(kind)
    return encoder(value)


def _encode_float(value: float) -> Any:
    if math.isfinite(value):
        return float(value)
    return {FLOAT: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _encode_items(items: Any) -> list[Any]:
    return [item if type(item) in _AS_IS else encode(item) for item in items]


def _encode_mapping(value: Mapping[Any, Any]) -> Any:
    if all(type(key) is str for key in value):
        return {key: item if type(item) in _AS_IS else encode(item) for key, item in value.items()}
    return {MAPPING: [[encode(key), encode(item)] for key, item in value.items()]}


def _encode_dataclass(kind: type) -> Encoder:
    names = tuple(field.name for field in dataclasses.fields(kind) if field.init)

    def encode_dataclass(value: Any) -> dict[str, Any]:
        out = {}
        for name in names:
            item = getattr(value, name)
            out[name] = item if type(item) in _AS_IS else encode(item)
        return out

    return encode_dataclass


def _encode_numpy_scalar(value: Any) -> Any:
    if getattr(value, "ndim", 1) == 0:
        return encode(value.item())
    raise TypeError(f"{type(value).__name__} cannot cross the sandbox boundary")


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} cannot cross the sandbox boundary")


def _encoder_for(kind: type) -> Encoder:
    """How to encode instances of ``kind`` (the checks run in this order; the first wins)."""
    if issubclass(kind, enum.Enum):
        return lambda value: encode(value.value)
    if issubclass(kind, bool | str):
        return lambda value: value
    if issubclass(kind, int):
        return int
    if issubclass(kind, float):
        return _encode_float
    if issubclass(kind, complex):
        return lambda value: {COMPLEX: [_encode_float(value.real), _encode_float(value.imag)]}
    if issubclass(kind, Fraction):
        return lambda value: {FRACTION: f"{value.numerator}/{value.denominator}"}
    if dataclasses.is_dataclass(kind):
        return _encode_dataclass(kind)
    if issubclass(kind, Mapping):
        return _encode_mapping
    if issubclass(kind, set | frozenset):
        return lambda value: _encode_items(sorted(value, key=repr))
    if issubclass(kind, list | tuple):
        return _encode_items
    if kind.__module__ == "numpy" and callable(getattr(kind, "item", None)):
        return _encode_numpy_scalar
    return _refuse


# ------------------------------------------------------------------------------ decode
class _Budget:
    """What is left of a decode's bounds: the node count, and the limits read on every node
    (copied here: one attribute read instead of two)."""

    __slots__ = ("int_bits", "left", "limits", "max_depth", "max_items", "max_str")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.left = limits.max_nodes
        self.max_depth = limits.max_depth
        self.max_items = limits.max_items
        self.max_str = limits.max_str
        self.int_bits = limits.int_bits

    def take(self, count: int = 1) -> None:
        self.left -= count
        if self.left < 0:
            self.exhausted()

    def exhausted(self) -> None:
        raise SchemaError(f"more than {self.limits.max_nodes:,} values")

    def too_deep(self) -> None:
        raise SchemaError(f"nested more than {self.max_depth} levels deep")


def _union_members(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


Decoder = Callable[[Any, "_Budget", int], Any]


def _decode(data: Any, hint: Any, budget: _Budget, depth: int) -> Any:
    budget.take()
    if depth > budget.max_depth:
        budget.too_deep()
    return _decoder(hint)(data, budget, depth)


@functools.cache
def _decoder(hint: Any) -> Decoder:
    """The decoding function for ``hint``, built once per type: a reply holds tens of thousands
    of values, and asking ``typing`` what each hint means for every one of them costs more than
    the checks themselves. A decoder finds its parts' decoders on its first call (a dataclass
    may hold itself), and from then on calls them directly; every value still counts as one
    node (two per item of a list) against ``max_nodes`` and as one level against ``max_depth``."""
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
    decoders: list[Decoder] = []

    def decode_union(data: Any, budget: _Budget, depth: int) -> Any:
        if data is None and optional:
            return None
        if not decoders:
            decoders.extend(_decoder(member) for member in others)
        if len(decoders) == 1:  # ``X | None``: X's own reason, not a list of one
            return decoders[0](data, budget, depth)
        reasons = []
        for decoder in decoders:
            try:
                return decoder(data, budget, depth)
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
    if data.bit_length() > budget.int_bits:
        raise SchemaError(f"a whole number of {data.bit_length()} bits")
    return data


def _decode_float(data: Any, budget: _Budget, depth: int) -> float:
    kind = type(data)
    if kind is float and math.isfinite(data):
        return data
    if kind is int and data.bit_length() <= budget.int_bits:
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
    if len(data) > budget.max_str:
        raise SchemaError(f"a string of {len(data):,} characters")
    # Lone surrogates (valid in JSON, not in UTF-8) would make the page's encoder raise.
    return data if data.isascii() else clean_text(data)


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


def _builds_by_fields(cls: type, fields: Mapping[str, dataclasses.Field[Any]]) -> bool:
    """Whether an instance of ``cls`` is exactly its fields: dataclasses' own ``__init__``
    (made from source text, hence ``<string>``), every field an ``__init__`` parameter, no
    ``__post_init__`` and no slots. Then the decoder fills the instance's ``__dict__``
    directly, as that ``__init__`` would (a frozen one sets each field through
    ``object.__setattr__``: slower than checking the field)."""
    init = cls.__dict__.get("__init__")
    return (
        getattr(getattr(init, "__code__", None), "co_filename", None) == "<string>"
        and len(fields) == len(dataclasses.fields(cls))
        and not hasattr(cls, "__post_init__")
        and not hasattr(cls, "__slots__")
        and all(field.default_factory is dataclasses.MISSING for field in fields.values())
    )


def _dataclass_decoder(cls: type) -> Decoder:
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    names = frozenset(fields)
    hints = hints_of(cls)
    missing = dataclasses.MISSING
    required = frozenset(
        name
        for name, field in fields.items()
        if field.default is missing and field.default_factory is missing
    )
    defaults = {
        name: field.default for name, field in fields.items() if field.default is not missing
    }
    by_fields = _builds_by_fields(cls, fields)
    new = object.__new__
    decoders: dict[str, Decoder] = {}

    def decode_dataclass(data: Any, budget: _Budget, depth: int) -> Any:
        if type(data) is not dict:
            raise SchemaError(f"expected an object for {cls.__name__}")
        keys = data.keys()
        if not keys <= names:
            unknown = sorted(keys - names)[0]
            raise SchemaError(f"{cls.__name__} has no field {unknown[:40]!r}")
        if not required <= keys:
            raise SchemaError(f"{cls.__name__}.{sorted(required - keys)[0]} is missing")
        if not decoders:
            decoders.update((name, _decoder(hints[name])) for name in names)
        budget.left -= len(data)  # one node per field
        if budget.left < 0:
            budget.exhausted()
        depth += 1
        if depth > budget.max_depth and data:
            budget.too_deep()
        values = dict(defaults) if by_fields and len(data) < len(names) else {}
        for name, item in data.items():
            try:
                values[name] = decoders[name](item, budget, depth)
            except SchemaError as exc:
                raise exc.at(name) from None
        if by_fields:
            instance = new(cls)
            instance.__dict__.update(values)
            return instance
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


def _all_leaves(data: list[Any], decoder: Decoder, budget: _Budget) -> bool:
    """Whether every item of ``data`` is already what ``decoder`` would return unchanged (a
    list of sizes, of names, of finite floats): then it is checked in one pass, no call per
    item. False sends the list through the decoder item by item (which names the culprit)."""
    if not data:
        return True
    # The decoder first: a list of objects (most lists in a reply) costs no look at its items.
    if decoder is _decode_int:
        kinds = set(map(type, data))
        return kinds == {int} and max(map(int.bit_length, data)) <= budget.int_bits
    if decoder is _decode_str:
        kinds = set(map(type, data))
        return (
            kinds == {str} and max(map(len, data)) <= budget.max_str and all(map(str.isascii, data))
        )
    if decoder is _decode_float:
        return set(map(type, data)) == {float} and all(map(math.isfinite, data))
    return False


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
    decoders: list[Decoder] = []

    def decode_sequence(data: Any, budget: _Budget, depth: int) -> Any:
        if type(data) is not list:
            raise SchemaError("expected a list")
        if len(data) > budget.max_items:
            raise SchemaError(f"a list of {len(data):,} items")
        budget.left -= 2 * len(data)  # two nodes per item
        if budget.left < 0:
            budget.exhausted()
        if fixed and len(data) != len(args):
            raise SchemaError(f"expected {len(args)} items, got {len(data)}")
        depth += 1
        if depth > budget.max_depth:
            budget.too_deep()
        if not decoders:
            decoders.extend(_decoder(hint) for hint in (args if fixed else (item_hint,)))
        if fixed:
            items = []
            for index, (item, decoder) in enumerate(zip(data, decoders, strict=False)):
                try:
                    items.append(decoder(item, budget, depth))
                except SchemaError as exc:
                    raise exc.at(index) from None
            return tuple(items)
        decoder = decoders[0]
        if _all_leaves(data, decoder, budget):
            items = data
        else:
            items = []
            for index, item in enumerate(data):
                try:
                    items.append(decoder(item, budget, depth))
                except SchemaError as exc:
                    raise exc.at(index) from None
        if as_tuple:
            return tuple(items)
        if origin in (set, frozenset):
            try:
                return origin(items)
            except TypeError:
                raise SchemaError("a set item that cannot be hashed") from None
        return list(items)

    return decode_sequence


@functools.cache
def _plain_json(limits: Limits) -> AnyJSON:
    # A container deeper than ``max_depth`` is refused: AnyJSON refuses at its own max_depth.
    return AnyJSON(
        limits.max_depth + 1,
        max_str=limits.max_str,
        max_items=limits.max_items,
        int_bits=limits.int_bits,
    )


def _plain(data: Any, budget: _Budget, depth: int) -> Any:
    """Untyped JSON (a field declared ``Any``): plain JSON within the same bounds, checked by
    :class:`~torchatlas.sandbox.schema.AnyJSON` (lone surrogates in its text replaced)."""
    return _plain_json(budget.limits).check_at(data, budget, depth)


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
class EngineReply(dict[str, Any]):
    """A room job's reply, from :func:`job_reply`: a room engine's result, whose size the
    engine's own checks bound (pasted code's results are not). The worker writes such a
    reply with orjson when the child has room for it (see ``worker.reply_frame``). Its
    ``result`` may be JSON already written (an ``orjson.Fragment`` of ``written``)."""

    written: bytes | None = None


def job_reply(
    compute: Callable[[], Any], refusals: tuple[type[BaseException], ...] = ()
) -> dict[str, Any]:
    """What a room's sandbox job sends back: ``{"result": encode(compute())}``, or
    ``{"refused": {"code", "params"}}`` when ``compute`` raises one of ``refusals`` (an
    engine's coded error: ``.code`` and ``.params``). Other exceptions propagate: the worker
    reports them as a failed job. The result is written by msgspec in C where that writes
    the same JSON (:func:`~torchatlas.sandbox.typed_reply.result_writer`)."""
    try:
        value = compute()
    except refusals as exc:
        code = getattr(exc, "code", None)
        params = getattr(exc, "params", None) or {}
        return EngineReply(
            refused={
                "code": str(getattr(code, "value", code)),
                "params": {str(k): _param(v) for k, v in dict(params).items()},
            }
        )
    write = result_writer(type(value))
    written = write(value) if write is not None else None
    if written is not None:  # msgspec's JSON of it, what the codec would write (see there)
        reply = EngineReply(result=orjson.Fragment(written))
        reply.written = written
        return reply
    return EngineReply(result=encode(value))


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
