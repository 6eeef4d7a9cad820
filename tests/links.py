"""Hypothesis strategies for a room's link declaration (torchatlas.links): values a room can
write into its link, and junk a visitor can put there. The rooms' link test uses them:

>>> @given(values=valid_values(LINK))  # doctest: +SKIP
... def test_round_trip(values): assert LINK.read(LINK.to_query(values)).values == values
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from torchatlas.links import Choice, Field, Flag, Float, Int, LinkSpec, Offered, Source, Text, Texts

# Text a visitor might type: letters, digits, punctuation, spaces, Korean, emoji, no controls.
TYPED_CHARS = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"))
TYPED = st.text(TYPED_CHARS, max_size=40)


def field_values(item: Field) -> st.SearchStrategy[Any]:
    """Values ``item`` can carry (every one reads back the same)."""
    if isinstance(item, Int):
        return st.integers(item.low, item.high)
    if isinstance(item, Float):
        low = max(item.low, -1e12)
        high = min(item.high, 1e12)
        return st.floats(low, high, allow_nan=False, allow_infinity=False)
    if isinstance(item, Choice | Offered):
        return st.sampled_from(item.options)
    if isinstance(item, Flag):
        return st.booleans()
    if isinstance(item, Texts):
        words = st.text(TYPED_CHARS, min_size=1, max_size=min(item.max_len, 40))
        return st.lists(words, max_size=min(item.max_items, 6)).map(tuple)
    if isinstance(item, Source):
        return st.text(max_size=min(item.max_chars, 300))
    if isinstance(item, Text):
        if item.pattern is not None:
            texts = st.from_regex(item.pattern, fullmatch=True)
            return texts.filter(lambda text: len(text) <= item.max_len)
        return st.text(TYPED_CHARS, max_size=min(item.max_len, 60))
    raise TypeError(f"no strategy for {type(item).__name__}")


def valid_values(spec: LinkSpec) -> st.SearchStrategy[dict[str, Any]]:
    """A state of the room: a value for every field."""
    return st.fixed_dictionaries({item.name: field_values(item) for item in spec.fields})


JUNK = st.one_of(
    st.sampled_from(["", " ", "-", "²", "①", "１２", "1e309", "nan", "inf", "9" * 40, "-0x10",
                     "\x00", "%00", "<script>", "a" * 5000, "1_000", "0b1", "١٢"]),
    TYPED,
)  # fmt: skip


def junk_queries(spec: LinkSpec) -> st.SearchStrategy[dict[str, list[str]]]:
    """A query naming some of the room's fields with junk (one to three values each)."""
    names = st.lists(st.sampled_from(spec.names), min_size=1, unique=True)
    return names.flatmap(
        lambda chosen: st.fixed_dictionaries(
            {name: st.lists(JUNK, min_size=1, max_size=3) for name in chosen}
        )
    )


# ------------------------------------------------------------ a room's link, through AppTest
# tests/app/test_room_links.py opens every room's page with these: a random valid state's
# link must fill the room and be written back as it came; junk must keep the declared defaults
# and be named in the kit's notice.
PAGE = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def address_bar(at: Any) -> dict[str, list[str]]:
    """The page's query after the run, every name with all its values."""
    return {
        name: [values] if isinstance(values, str) else list(values)
        for name, values in at.query_params.items()
    }


def assert_link_written(at: Any, spec: LinkSpec, values: dict[str, Any]) -> None:
    """The room wrote exactly the link of ``values`` into the address bar (its own names)."""
    written = {name: value for name, value in address_bar(at).items() if name in spec.names}
    expected = spec.to_query(values)
    assert written == {k: [v] if isinstance(v, str) else list(v) for k, v in expected.items()}


def assert_no_broken_notice(at: Any) -> None:
    assert all("could not be used" not in box.value for box in at.info)


def assert_junk_handled(
    at: Any, spec: LinkSpec, query: dict[str, list[str]], values: dict[str, Any],
    *, fitted: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Each field the link could not use kept its default (``fitted`` fields are fitted to
    another field by the room instead), and one notice names them all."""
    broken = spec.read(query).broken
    for name in broken:
        if name not in fitted:
            assert values[name] == spec.field(name).default, name
    if broken:
        assert any(all(name in box.value for name in broken) for box in at.info), broken
