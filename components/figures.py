"""Figures and pictures built once and handed to every visitor as they are.

``st.plotly_chart`` serialises its figure on every rerun (a deep copy, every array encoded),
``st.image`` encodes a PIL image on every rerun, and ``st.dataframe`` converts a pandas frame
to Arrow on every rerun. On a server where a class reruns the same page at once, that work is
the same for everyone: a room builds a figure, a picture or a table once, keeps it in a shared
cache, and hands out the finished result.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
from PIL import Image

JPEG_QUALITY = 90  # what Streamlit itself uses when it re-encodes a picture


class FrozenFigure(go.Figure):
    """A figure nobody changes once built (rooms cache figures process-wide).

    Serialising once and handing out the same dict keeps reruns cheap; the dict holds only
    plain JSON types, so Streamlit's own ``to_json`` of it stays correct.
    """

    def to_dict(self) -> dict[str, Any]:
        serialised = getattr(self, "_serialised", None)
        if serialised is None:
            serialised = super().to_dict()
            self._serialised = serialised
        return serialised


def frozen(figure: go.Figure) -> FrozenFigure:
    """``figure`` as a :class:`FrozenFigure`, already serialised."""
    result = figure if isinstance(figure, FrozenFigure) else FrozenFigure(figure)
    result.to_dict()
    return result


def picture_bytes(image: Image.Image) -> bytes:
    """The file ``st.image`` would make of ``image`` (PNG where it has transparency, else
    JPEG), made once: given bytes of that format, ``st.image`` sends them as they are."""
    buffer = io.BytesIO()
    if image.mode in ("RGBA", "LA", "P", "PA"):
        image.save(buffer, format="PNG")
    else:
        rgb = image if image.mode in ("RGB", "L") else image.convert("RGB")
        rgb.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def table(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as the Arrow table ``st.dataframe`` sends, converted once (its index left
    out: the rooms hide it); given an Arrow table, ``st.dataframe`` only writes its bytes.
    Weigh it in a cache by :attr:`pyarrow.Table.nbytes` (its buffers are not Python objects)."""
    return pa.Table.from_pandas(frame, preserve_index=False)
