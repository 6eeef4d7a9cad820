"""A lesson step's link against another link to the same room: which room fields open the
room otherwise (components.lessons.state.differing), read with the room's own rules."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.lessons.state import differing
from torchatlas.lessons import ROOMS, load_all
from torchatlas.links import Choice, Field, Flag, Int, Offered, Source, Text, Texts, encode_source
from torchatlas.rooms import link_of

STEPS = [(lesson, step) for lesson in load_all() for step in lesson.steps]


def fields_of(step) -> dict[str, list[str]]:
    """The room's fields of the step's link, each as its list of values."""
    query: dict[str, Any] = dict(step.fields())
    spec = ROOMS[step.room]
    if step.source is not None and spec.source_field is not None:
        query[spec.source_field] = encode_source(step.source)
    return {k: [v] if isinstance(v, str) else list(v) for k, v in query.items()}


def values(item: Field) -> st.SearchStrategy[Any]:
    """Values the field carries (what a hand-edited link may hold)."""
    if isinstance(item, Choice | Offered):
        return st.sampled_from(item.options)
    if isinstance(item, Flag):
        return st.booleans()
    if isinstance(item, Int):
        return st.integers(item.low, min(item.high, item.low + 1000))
    if isinstance(item, Texts):
        op = st.sampled_from([".t()", ".flip(0)", "[1:]", ".view(-1)", ".unsqueeze(0)"])
        return st.lists(op, min_size=1, max_size=4).map(tuple)
    if isinstance(item, Source):
        return st.integers(1, 99).map(lambda n: f"import torch\nx = torch.ones({n})\n")
    if isinstance(item, Text):
        return st.sampled_from(["zz", "yy", "Net()", "2, 3", "1×3×8×8"])
    raise AssertionError(item)  # pragma: no cover


@st.composite
def edited(draw) -> tuple[Any, dict[str, list[str]], dict[str, list[str]], str]:
    """A step, its link's room fields, the same with one field set to a value it did not
    hold, and that field's name."""
    _, step = draw(st.sampled_from(STEPS))
    spec = link_of(step.room)
    own = fields_of(step)
    item = draw(st.sampled_from(spec.fields))
    current = spec.read(own).values[item.name]
    value = draw(values(item).filter(lambda v: v != current))
    encoded = item.encode(value)
    return (
        spec,
        own,
        {**own, item.name: [encoded] if isinstance(encoded, str) else encoded},
        item.name,
    )


def test_every_steps_own_link_differs_in_nothing() -> None:
    for _, step in STEPS:
        spec = link_of(step.room)
        assert differing(spec, fields_of(step), fields_of(step)) == ()
        assert differing(spec, fields_of(step), fields_of(step), left={}) == ()


@settings(max_examples=200, deadline=None)
@given(edited())
def test_one_field_set_otherwise_is_the_one_named(case) -> None:
    spec, own, other, name = case
    assert differing(spec, other, own) == (name,)


def test_order_matters_for_a_repeated_field_and_the_last_value_for_a_single_one() -> None:
    spec = link_of("strides")
    step = {"s_shape": ["3"], "s_ops": [".unsqueeze(0)", ".expand(4, 3)"]}
    assert differing(spec, {**step, "s_ops": step["s_ops"][::-1]}, step) == ("s_ops",)
    assert differing(spec, {**step, "s_shape": ["9, 9", "3"]}, step) == ()
    assert differing(spec, {**step, "s_shape": ["3", "9, 9"]}, step) == ("s_shape",)


def test_a_value_the_room_cannot_use_always_differs() -> None:
    spec = link_of("strides")
    step = {"s_shape": ["3"]}
    assert differing(spec, {"s_shape": ["3"], "s_seed": ["²"]}, step) == ("s_seed",)


def test_a_field_left_to_the_room_is_what_the_room_gives_it() -> None:
    spec = link_of("shapes")
    step = {"m_model": ["Net()"], "m_dtypes": ["float32"]}
    written = {"m_model": ["Net()"]}  # the room leaves the preset's own dtypes out
    assert differing(spec, written, step, left={"m_dtypes": "float32"}) == ()
    assert differing(spec, written, step, left={"m_dtypes": "float64"}) == ("m_dtypes",)
    assert differing(spec, written, step) == ()  # before the room has read: the step's
    assert differing(spec, {**written, "m_dtypes": ["float64"]}, step) == ("m_dtypes",)


def test_a_lessons_place_reads_back_and_junk_is_set_aside() -> None:
    from torchatlas.lessons.link import MAX_LESSON_ID, PLACE
    from torchatlas.lessons.loader import MAX_STEPS

    for lesson, step in STEPS:
        written = PLACE.to_query({"lesson": lesson.id, "step": step.number})
        assert PLACE.read(written).values == {
            "lesson": lesson.id,
            "step": step.number,
            "end": False,
        }
    summary = PLACE.to_query({"lesson": "views", "end": True})
    assert summary == {"lesson": "views", "end": "1"}  # no step: the summary's link
    junk = {
        "lesson": "x" * (MAX_LESSON_ID + 1),
        "step": str(MAX_STEPS + 1),
        "end": "yes",
    }
    read = PLACE.read(junk)
    assert read.broken == ("lesson", "step", "end")
    assert read.values == PLACE.defaults()
    for raw in ("٣", "-1", "1e3", "0", "2" * 19, "2; 3"):
        assert "step" in PLACE.read({"lesson": "views", "step": raw}).broken, raw
