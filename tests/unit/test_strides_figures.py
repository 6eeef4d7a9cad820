"""The strides room's figures are serialised once and shared: what Streamlit sends must be
exactly what a fresh figure would send, and the shared values must be read-only."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from components.strides.draw import FrozenFigure, storage_figure, tensor_figure
from components.strides.state import cached_tensor_figure, flat_indices
from components.theme import DARK, LIGHT
from torchatlas.strides import trace

CHAIN = ((4, 6), "float32", (".t()", "[1:, ::2]"))


@pytest.mark.parametrize("dark", [False, True])
def test_frozen_figure_sends_what_a_fresh_figure_would(dark: bool) -> None:
    step = trace(CHAIN[0], CHAIN[1], list(CHAIN[2]))[-1]
    palette = DARK if dark else LIGHT
    for frozen in (
        tensor_figure(step, {1, 2}, 1, palette, dark),
        storage_figure(step, {7}, 7, palette, dark),
    ):
        assert isinstance(frozen, FrozenFigure)
        first = pio.to_json(frozen.to_dict(), validate=False)
        # what plain go.Figure.to_dict would have handed Streamlit for this very figure
        assert first == pio.to_json(go.Figure.to_dict(frozen), validate=False)
        assert frozen.to_dict() is frozen.to_dict()  # serialised once
        assert pio.to_json(frozen.to_dict(), validate=False) == first  # and unchanged


def test_shared_cache_values_are_read_only() -> None:
    indices = flat_indices(CHAIN, 2)
    assert indices is not None
    x = np.arange(24).reshape(4, 6)  # the start tensor holds its own storage indices
    assert indices.tolist() == x.T[1:, ::2].ravel().tolist()
    with pytest.raises(ValueError):
        indices[0] = 99
    assert cached_tensor_figure(CHAIN, 2, frozenset(), None, False) is cached_tensor_figure(
        CHAIN, 2, frozenset(), None, False
    )
