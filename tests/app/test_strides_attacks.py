"""Issue 21, strides room: hostile links, opened the way a visitor opens them (AppTest through
app.py's navigation), each measured by :mod:`tests.app.hostile`: the server's resident set
rises by at most 200 MB, no other session stalls more than 0.5 s, the visitor has an answer
within 3 s, and the page explains itself.

Each class of the issue has its own variants here (other sizes, ops and orders than the
issue's): a zero-element ``as_strided`` view far into its storage, offsets near 2**62, shapes
whose element count overflows int64, a view of a few elements on a large storage followed by
a long chain, integer arguments past 64 bits, and numbers in a link that are not ASCII.
"""

from __future__ import annotations

import pytest

from components.strides.state import ROOM_CACHE
from tests.app.hostile import open_hostile_link, open_page_once
from torchatlas.i18n import translate

PAGE = "views/strides.py"


@pytest.fixture(scope="module", autouse=True)
def warm_page() -> None:
    """The room once with no link: imports, caches and the sandbox's zygote are warm, so each
    visit below measures its link's cost."""
    open_page_once(PAGE)


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    ROOM_CACHE.clear()  # every visit runs its chain (no earlier test's result to reuse)


def link(shape: str, ops: list[str], dtype: str = "float32", **extra: str) -> dict:
    return {"s_shape": shape, "s_dtype": dtype, "s_ops": ops, **extra}


# ------------------------------------------------------ a zero-element view far into storage
@pytest.mark.parametrize(
    ("ops", "offset"),
    [
        # offset 60 million: the old index range was that long (480 MB) on every step
        ([".T", ".as_strided((3, 0), (1, 1), 60000000)", ".unsqueeze(0)"], "60000000"),
        # a zero size beside a size of five million: tolist() built five million empty lists
        (["[1:]", ".as_strided((5000000, 0), (2, 1), 11)", ".flatten()"], "11"),
    ],
)
def test_zero_element_view_far_into_its_storage_is_described_from_its_extent(
    ops: list[str], offset: str
) -> None:
    visit = open_hostile_link(PAGE, link("6, 5", ops, dtype="float64"))
    visit.assert_contained()
    visit.assert_refused_with(f"| storage_offset | `{offset}` |", "none (no elements")


def test_offsets_near_two_to_the_62_are_shown_exactly() -> None:
    offset = 2**62 - 77
    ops = ["[2:]", f".as_strided((0, 2, 0), (5, 1, 3), {offset})", ".transpose(0, 2)",
           ".contiguous()", ".view(torch.int16)"]  # fmt: skip
    visit = open_hostile_link(PAGE, link("4, 4", ops, dtype="int32"))
    visit.assert_contained()
    visit.at.session_state["strides_step"] = 2  # the transposed zero-element view
    visit.at.run()
    assert not visit.at.exception
    visit.assert_refused_with(f"| storage_offset | `{offset}` |", "| size | `(0, 2, 0)` |")


# ------------------------------------------------------------- element counts past int64
@pytest.mark.parametrize(
    ("ops", "size"),
    [
        # no element, but 2**62 rows: tolist() and the old index range built them all
        (["[:0]", ".view(4611686018427387904, 0)"], "(4611686018427387904, 0)"),
        # 3037000500² rows of nothing: past int64 when multiplied out
        ([".T", "[:0]", ".unflatten(0, (3037000500, 3037000500, 0))"],
         "(3037000500, 3037000500, 0, 2)"),
    ],
)  # fmt: skip
def test_shapes_whose_sizes_multiply_past_int64_are_described_not_built(
    ops: list[str], size: str
) -> None:
    visit = open_hostile_link(PAGE, link("2, 3", ops))
    visit.assert_contained()
    visit.assert_refused_with(f"| size | `{size}` |", "none (no elements")


# ------------------------------------------- a few elements on a large storage, a long chain
def test_a_few_elements_on_a_large_storage_then_a_24_op_chain_stay_small_and_fast() -> None:
    # The last four elements of a 16 MiB storage, read as bytes: the old index range and
    # footprint strip of every step were as long as the storage (16,777,216 cells).
    tail = [".unsqueeze(0)", ".squeeze(0)", ".T", "[None]", "[0]", ".detach()"] * 4
    ops = ["[1023, -4:]", ".view(torch.uint8)", *tail][:24]
    visit = open_hostile_link(PAGE, link("1024, 1024", ops, dtype="complex128"))
    visit.assert_contained()
    # 16 MiB of storage read as 16,777,216 one-byte cells: described, not built
    visit.assert_refused_with("16777216")
    assert len(visit.at.session_state["strides_ops"].splitlines()) == 24


# ------------------------------------------------------------ integers past 64 bits
@pytest.mark.parametrize(
    "op",
    [
        "[0, 2361183241434822606848]",
        ".select(1, -1180591620717411303425)",
        ".narrow(0, 0, 36893488147419103232)",
    ],
)
def test_integers_past_64_bits_are_refused_in_the_rooms_words(op: str) -> None:
    visit = open_hostile_link(PAGE, link("3, 4", [".t()", op]))
    visit.assert_contained()
    visit.assert_refused_with("does not fit in 64 bits")


def test_integers_past_64_bits_are_refused_in_korean_too() -> None:
    visit = open_hostile_link(PAGE, link("3, 4", ["[4722366482869645213696]"]), lang="ko")
    visit.assert_contained()
    visit.assert_refused_with("64비트에 들어가지 않습니다")


# ------------------------------------------------------------ numbers that are not ASCII
@pytest.mark.parametrize(
    ("key", "value"),
    [("s_seed", "①3"), ("s_seed", "٣٤"), ("s_step", "²"), ("s_step", "1" * 30), ("s_seed", "-5")],
)
def test_link_numbers_that_are_not_plain_ascii_keep_their_default(key: str, value: str) -> None:
    visit = open_hostile_link(PAGE, link("3, 4", [".t()", ".contiguous()"], **{key: value}))
    visit.assert_contained()
    visit.assert_refused_with(translate("kit.link.broken", fields=key))
    if key == "s_seed":
        assert visit.at.session_state["strides_seed"] == 1
    else:
        assert visit.at.session_state["strides_step"] == 2  # the chain's last step


def test_a_shared_step_opens_on_that_step() -> None:
    visit = open_hostile_link(PAGE, link("3, 4", [".t()", ".contiguous()"], s_step="1"))
    visit.assert_contained()
    assert visit.at.session_state["strides_step"] == 1
    visit.assert_refused_with("| stride (elements) | `(1, 4)` |")  # y1 = x.t()
