"""Every query parameter of every room, fed random and hostile values the way a link carries
them: the page always draws (an explained notice or refusal at worst), never an uncaught
exception and never the last wall's unexpected-error card (tests/app/conftest.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app.apptest import open_page
from torchatlas.rooms import room_links

ROOT = Path(__file__).resolve().parents[2]

# Each room's link fields, from its declaration (torchatlas/<room>/link.py), and lang; the
# pages that are no room carry none of their own.
ROOM_LINKS: dict[str, tuple[str, ...]] = {
    **{spec.script: spec.names for spec in room_links().values()},
    "views/home.py": (),
}  # fmt: skip

# Values that broke rooms before, and their relatives: digits that are not ASCII, numbers past
# every integer type, empty and zero-size shapes, offsets near 2**62, shared-reference
# programs, sizes that overflow a storage, separators and control characters.
HOSTILE = [
    "", " ", "²", "①", "١٢", "٣", "𝟗", "-0", "+1", "1e9", "nan", "inf", "-inf", "0x10",
    "9" * 40, str(2**63), str(-(2**63) - 1), str(2**70), "-1", "0", "1.5", "True", "None",
    "(0, 100000, 100000)", "0, 65536, 65536", "(2**40, 2**40)", "1,1,1,1,1,1,1,1,1,1,1,1,1",
    "x[2**70]", "x[0:0, 2**62]", "x[..., None, None, None]", "x[[0]*100000]",
    "as_strided((0,), (1,), 4611686018427387904)", "as_strided((2,), (1,), 2**62)",
    "view(-1, 0)", "reshape(0, 99999, 99999)", "expand(99999, 99999)",
    "a = [1]\na = [a, a, a, a]\na = [a, a, a, a]\na = [a, a, a, a]\na = [a, a, a, a]",
    "x = zeros(0, 30000, 30000)\ny = x.sum(0)",
    "x = ones(3)\ny = x.pow(exponent=ones(4000, 4000))",
    "ij,jk->ik", "i" * 60 + "->", "...,...->...", "\x00", "\u202e", "<script>", "'\"",
    "a" * 5000, "\n" * 500, "💥", "ñ",
]  # fmt: skip


def values() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE),
        st.text(max_size=40),
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
        st.lists(st.integers(min_value=-5, max_value=10**6), max_size=6).map(
            lambda xs: ", ".join(map(str, xs))
        ),
    )


def _links(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, str | list[str]]]:
    fields = [*keys, "lang"]
    one = st.one_of(values(), st.lists(values(), min_size=2, max_size=3))
    return st.dictionaries(st.sampled_from(fields), one, max_size=len(fields))


@pytest.mark.parametrize("room", sorted(room_links()))
def test_each_room_keeps_its_declared_link_through_the_kit(room: str) -> None:
    """The fields fuzzed below are the ones the room reads: its state keeps the declaration
    with the kit's RoomLink, so a renamed field is renamed for both."""
    state = importlib.import_module(f"components.{room}.state")
    assert state.LINK.spec is room_links()[room]


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(ROOM_LINKS))
def test_hostile_links_never_break_a_page(script: str) -> None:
    from components.contained import RECENT_UNEXPECTED

    @settings(
        max_examples=12,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(query=_links(ROOM_LINKS[script]))
    def check(query: dict[str, str | list[str]]) -> None:
        RECENT_UNEXPECTED.clear()
        at = open_page(script, query=query)
        assert not at.exception, (query, [e.value for e in at.exception])
        assert list(RECENT_UNEXPECTED) == [], (query, list(RECENT_UNEXPECTED))
        assert at.title, query  # the page drew its title: it did not stop early

    check()
