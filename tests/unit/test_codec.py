"""The sandbox boundary's codec: engine results cross as JSON and come back as the declared
dataclasses, and a forged reply (wrong types, unbounded sizes, unknown fields) is refused."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchatlas.sandbox.codec import Limits, decode, encode, job_reply
from torchatlas.sandbox.schema import SchemaError


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Leaf:
    name: str
    value: float
    exact: Fraction | None = None
    z: complex = 0j


@dataclass(frozen=True)
class Tree:
    colour: Colour
    leaves: tuple[Leaf, ...]
    shape: tuple[int, int]
    index: dict[int, str] = field(default_factory=dict)
    extra: Any = None
    maybe: Leaf | None = None


def _round_trip(value: Any, hint: Any) -> Any:
    return decode(json.loads(json.dumps(encode(value), allow_nan=False)), hint)


def test_a_nested_result_round_trips_exactly() -> None:
    tree = Tree(
        Colour.BLUE,
        (Leaf("a", math.nan), Leaf("b", -math.inf, Fraction(9007199254740993, 1), 1 - 2j)),
        (2, 3),
        {0: "zero", 7: "seven"},
        {"free": [1, "two", None]},
        Leaf("c", 0.1 + 0.2),
    )
    back = _round_trip(tree, Tree)
    assert back.colour is Colour.BLUE and back.shape == (2, 3) and back.index == tree.index
    assert math.isnan(back.leaves[0].value) and back.leaves[1].value == -math.inf
    assert back.leaves[1].exact == Fraction(9007199254740993) and back.leaves[1].z == 1 - 2j
    assert back.maybe == Leaf("c", 0.30000000000000004)
    assert back.extra == {"free": [1, "two", None]}


@given(
    st.lists(
        st.tuples(
            st.text(max_size=20),
            st.floats(allow_nan=False),
            st.fractions(max_denominator=10**9),
        ),
        max_size=8,
    )
)
def test_random_leaves_round_trip(items: list[tuple[str, float, Fraction]]) -> None:
    leaves = tuple(Leaf(name, value, exact) for name, value, exact in items)
    tree = Tree(Colour.RED, leaves, (0, 1))
    assert _round_trip(tree, Tree) == tree


def _tree(**fields: Any) -> dict[str, Any]:
    return {"colour": "red", "leaves": [], "shape": [1, 2], **fields}


def _leaf(**fields: Any) -> dict[str, Any]:
    return _tree(leaves=[{"name": "x", "value": 1, **fields}])


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"colour": "green", "leaves": [], "shape": [1, 2]}, "not a Colour"),
        ({"colour": "red", "leaves": [], "shape": [1, 2, 3]}, "expected 2 items"),
        ({"colour": "red", "leaves": [], "shape": [1, True]}, "whole number"),
        ({"colour": "red", "leaves": [], "shape": [1, 2.0]}, "whole number"),
        ({"colour": "red", "leaves": [], "shape": [1, 2**200]}, "bits"),
        ({"colour": "red", "leaves": [], "shape": [1, 2], "evil": 1}, "no field"),
        ({"colour": "red", "shape": [1, 2]}, "missing"),
        (_leaf(name="x" * 30_000), "characters"),
        (_leaf(value="1"), "number"),
        (_leaf(exact={"$fraction": "1/0"}), "fraction"),
        (_leaf(exact={"$fraction": "1" * 500 + "/1"}), "fraction"),
        (_leaf(exact={"$fraction": "１/2"}), "fraction"),
        (_leaf(z={"$complex": [1]}), "complex"),
        (_tree(index={"$map": [[1]]}), "pairs"),
        (_tree(index={"$map": [["a", "b"]]}), "whole number"),
    ],
)  # fmt: skip
def test_forged_replies_are_refused(data: dict[str, Any], why: str) -> None:
    with pytest.raises(SchemaError, match=why):
        decode(data, Tree)


def test_sizes_are_bounded_before_anything_is_built() -> None:
    many = {"colour": "red", "leaves": [{"name": "x", "value": 1}] * 50, "shape": [1, 2]}
    with pytest.raises(SchemaError, match="items"):
        decode(many, Tree, Limits(max_items=10))
    with pytest.raises(SchemaError, match="values"):
        decode(many, Tree, Limits(max_nodes=60))
    deep: Any = None
    for _ in range(200):
        deep = [deep]
    with pytest.raises(SchemaError, match="deep"):
        decode({"colour": "red", "leaves": [], "shape": [1, 2], "extra": deep}, Tree)


def test_live_objects_never_cross() -> None:
    import torch

    with pytest.raises(TypeError, match="Tensor"):
        encode(Tree(Colour.RED, (), (1, 1), extra=torch.ones(1)))


class Coded(ValueError):
    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(code)
        self.code, self.params = code, params


def test_a_job_reply_carries_a_result_or_the_engine_s_coded_refusal() -> None:
    assert job_reply(lambda: Leaf("a", 1.0)) == {
        "result": {"name": "a", "value": 1.0, "exact": None, "z": {"$complex": [0.0, 0.0]}}
    }

    def refuse() -> Leaf:
        raise Coded("too_big", size=2**100, shape=(3, 4), what=object())

    reply = job_reply(refuse, refusals=(Coded,))
    assert reply["refused"]["code"] == "too_big"
    assert reply["refused"]["params"]["shape"] == [3, 4]
    assert reply["refused"]["params"]["what"] == "object"
    assert isinstance(reply["refused"]["params"]["size"], int)
    with pytest.raises(KeyError):
        job_reply(lambda: {}["missing"], refusals=(Coded,))


def test_a_field_declared_any_is_plain_json_as_any_json_defines_it() -> None:
    """One definition of "plain JSON, bounded" (schema.AnyJSON): an ``Any`` field's text
    loses its lone surrogates (which would make the page's encoder raise), as a reply's does."""
    back = decode(_tree(extra={"note": ["ok", "bad \ud800 half"]}), Tree)
    assert back.extra == {"note": ["ok", "bad ? half"]}
    with pytest.raises(SchemaError, match="not finite"):
        decode(_tree(extra=[math.inf]), Tree)


def test_encoding_is_decided_per_type_but_checked_per_value() -> None:
    """The encoder picks its way once per type; what depends on the value still is checked
    for each one (a 0-d numpy array is a number, a 2-d one of the same type is refused)."""
    import numpy as np

    class Level(enum.IntEnum):
        LOW = 1

    mixed = [np.float32(0.5), np.array(2.0), Level.LOW, {3, 1, 2}]
    assert encode(mixed) == [0.5, 2.0, 1, [1, 2, 3]]
    with pytest.raises(TypeError, match="ndarray"):
        encode(np.zeros((2, 2)))
    assert encode({1: "a"}) == {"$map": [[1, "a"]]} and encode({"k": (1,)}) == {"k": [1]}


def test_typed_text_loses_its_lone_surrogates_too() -> None:
    """The codec bounds and cleans a typed reply on its own (a caller that decodes with it
    needs no generic check first): a lone surrogate in a ``str`` field would make the page's
    encoder raise, so it is replaced, in a single string and in a list of names alike."""
    back = decode(_tree(leaves=[{"name": "x\udfff", "value": 1}]), Tree)
    assert back.leaves[0].name == "x?"
    assert decode(["a", "b\ud800"], tuple[str, ...]) == ("a", "b?")
    assert decode(["a", "b"], tuple[str, ...]) == ("a", "b")


@dataclass(frozen=True)
class Checked:
    low: int
    high: int = 10

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


@dataclass(frozen=True, slots=True)
class Slotted:
    name: str
    size: int = 1


@dataclass
class Plain:
    name: str
    size: int = 1
    tags: list[str] = field(default_factory=list)


def test_a_decoded_dataclass_is_what_its_constructor_would_build() -> None:
    """Plain frozen dataclasses are filled field by field, without their ``__init__``; the
    instance must be the same: equal, hashable alike, defaults filled, immutable. A class
    whose instance is more than its fields (``__post_init__``, slots, a default factory)
    still goes through its constructor, and its own checks still refuse."""
    leaf = decode({"name": "a", "value": 1.5}, Leaf)
    assert leaf == Leaf("a", 1.5) and hash(leaf) == hash(Leaf("a", 1.5))
    assert leaf.exact is None and leaf.z == 0j and repr(leaf) == repr(Leaf("a", 1.5))
    with pytest.raises(AttributeError):
        leaf.name = "b"  # type: ignore[misc]
    assert decode({"low": 1}, Checked) == Checked(1, 10)
    with pytest.raises(SchemaError, match="low above high"):
        decode({"low": 11}, Checked)
    assert decode({"name": "s"}, Slotted) == Slotted("s", 1)
    plain = decode({"name": "p"}, Plain)
    assert plain == Plain("p") and plain.tags == [] and plain.tags is not Plain("q").tags
