"""Indexing: the allow-list parser refuses everything but index literals (never eval), and
view-or-copy is whatever storage identity says on real tensors, checked here against the same
index written as Python."""

from __future__ import annotations

import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchatlas.basics import (
    BasicsValueError,
    ErrorCode,
    IndexKind,
    index,
    parse_index_expression,
    source_tensor,
)

CASES = [
    ("x[1]", lambda x: x[1]),
    ("x[1:, None, ..., [0, 2]]", lambda x: x[1:, None, ..., [0, 2]]),
    ("x[x > 5]", lambda x: x[x > 5]),
    ("x[x % 2 == 0]", lambda x: x[x % 2 == 0]),
    ("[::2]", lambda x: x[::2]),
    ("x[0, 1]", lambda x: x[0, 1]),
    ("x[[0, 1], [1, 2]]", lambda x: x[[0, 1], [1, 2]]),
    ("x[[[0, 1], [1, 0]]]", lambda x: x[torch.tensor([[0, 1], [1, 0]])]),
    ("x[[True, False]]", lambda x: x[torch.tensor([True, False])]),
    ("x[..., -1]", lambda x: x[..., -1]),
    ("x[:, None]", lambda x: x[:, None]),
    ("x[1:,]", lambda x: x[1:,]),
    ("x[...]", lambda x: x[...]),
    ("x[-1, 1:3]", lambda x: x[-1, 1:3]),
]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


@pytest.mark.parametrize(("text", "python"), CASES)
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4)])
def test_view_or_copy_is_storage_identity(text, python, shape) -> None:
    found = index(shape, text)
    x = source_tensor(shape)
    try:
        expected = python(x)
    except (IndexError, RuntimeError) as exc:
        assert found.torch_message == str(exc).split("\n\n")[0].strip()
        return
    assert found.ok
    assert found.result_shape == tuple(expected.shape)
    assert found.is_view == _same_storage(expected, x)
    assert found.values == tuple(expected.reshape(-1).tolist())
    assert found.picked == tuple(sorted(set(expected.reshape(-1).tolist())))
    if found.is_view:
        assert found.result_strides == tuple(expected.stride())
        assert found.storage_offset == expected.storage_offset()
    # the rule of thumb holds on these cases: basic views, advanced copies
    assert found.is_view == (found.kind is IndexKind.BASIC)


def test_torch_refusals_are_torchs_words() -> None:
    for text in ("x[5]", "x[::-1]", "x[[0, 9]]", "x[0, 0, 0]"):
        found = index((2, 3), text)
        assert not found.ok and found.torch_message
        with pytest.raises((IndexError, ValueError, RuntimeError)) as real:
            key = parse_index_expression(text).key(source_tensor((2, 3)))
            source_tensor((2, 3))[key]
        assert found.torch_message == str(real.value).split("\n\n")[0].strip()


@pytest.mark.parametrize(
    "text",
    [
        "x.__class__",
        "x[__import__('os')]",
        "x[x.__class__]",
        "y[1]",
        "x[1.5]",
        "x['a']",
        "x[lambda: 0]",
        "x[(1, 2), 0]",
        "x[{1}]",
        "x[f(1)]",
        "x[[1, [2]]]",
        "x[[]]",
        "x[x > y]",
        "x[x + 1 > 0]",
        "x[0 < x < 3]",
        "x[1]; import os",
        "x[1][0]",
        "x[*a]",
        "x[1:2.5]",
    ],
)
def test_parser_refuses_everything_else(text: str) -> None:
    with pytest.raises(BasicsValueError) as caught:
        parse_index_expression(text)
    assert caught.value.code in {
        ErrorCode.INDEX_SYNTAX,
        ErrorCode.INDEX_NOT_ALLOWED,
    }


def test_bounded_and_linear() -> None:
    with pytest.raises(BasicsValueError) as caught:
        parse_index_expression("x[" + "[" * 5000 + "]" * 5000 + "]")
    assert caught.value.code is ErrorCode.TEXT_TOO_LONG
    with pytest.raises(BasicsValueError) as caught:
        parse_index_expression("x[" + ",".join(["-0"] * 38) + "]")  # 3 nodes per 3 chars
    assert caught.value.code is ErrorCode.INDEX_TOO_COMPLEX
    started = time.perf_counter()
    for _ in range(200):
        with pytest.raises(BasicsValueError):
            parse_index_expression("x[" + "(" * 58 + ")" * 58 + "]")
    assert time.perf_counter() - started < 5  # generous: refusing stays cheap
    with pytest.raises(BasicsValueError) as caught:
        index((100, 100), "x[0]")
    assert caught.value.code is ErrorCode.TOO_MANY_ELEMENTS
    # two lists that broadcast to 14 × 26 positions, each gathering a 4096-element slice
    rows = "[" + ",".join(["0"] * 26) + "]"
    columns = "[" + ",".join(["[0]"] * 14) + "]"
    with pytest.raises(BasicsValueError) as caught:
        index((1, 1, 4096), f"x[{rows},{columns}]")
    assert caught.value.code is ErrorCode.TOO_MANY_ELEMENTS


def test_the_bound_counts_the_real_result() -> None:
    rows = "[" + ",".join(["0"] * 26) + "]"
    columns = "[" + ",".join(["[1]"] * 14) + "]"
    found = index((64, 64), f"x[{rows},{columns}]")  # 364 elements: allowed
    assert found.result_shape == (14, 26) and not found.is_view


def test_strides_op_only_for_what_the_strides_room_reads() -> None:
    assert parse_index_expression("x[1:, None]").strides_op == "[1:, None]"
    assert parse_index_expression("x[[0, 2]]").strides_op == "[[0, 2]]"
    assert parse_index_expression("x[x > 0]").strides_op is None


_INDEX_ITEM = st.one_of(
    st.integers(-2, 1).map(lambda i: (str(i), i)),
    st.tuples(st.sampled_from([None, 0, 1]), st.sampled_from([None, 1, 2]),
              st.sampled_from([None, 1, 2])).map(
        lambda b: (":".join("" if v is None else str(v) for v in b), slice(*b))
    ),
    st.just(("None", None)),
    st.lists(st.integers(0, 1), min_size=1, max_size=3).map(lambda v: (str(v), torch.tensor(v))),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(items=st.lists(_INDEX_ITEM, min_size=1, max_size=3), ellipsis=st.booleans())
def test_random_indices_agree_with_python_indexing(items, ellipsis) -> None:
    if ellipsis:
        items = [*items, ("...", Ellipsis)]
    text = "x[" + ", ".join(part for part, _ in items) + "]"
    key = tuple(value for _, value in items)
    x = source_tensor((2, 3, 4))
    found = index((2, 3, 4), text)
    try:
        expected = x[key]
    except (IndexError, RuntimeError, ValueError) as exc:
        assert found.torch_message == str(exc).split("\n\n")[0].strip()
        return
    assert found.result_shape == tuple(expected.shape)
    assert found.is_view == _same_storage(expected, x)
    assert found.values == tuple(expected.reshape(-1).tolist())
