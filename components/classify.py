"""Renderers for the image-classification room. They take plain data (dicts, lists, arrays,
PIL images) from ``torchatlas.classify`` and draw it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from PIL import Image
from plotly.colors import sample_colorscale, unlabel_rgb

from components.i18n import t
from components.theme import palette


def percent(probability: float) -> str:
    return f"{probability * 100:.1f}%"


def topk_figure(predictions: Sequence[Mapping[str, object]]) -> go.Figure:
    """Horizontal bars, best class on top. ``predictions``: dicts with label and probability."""
    colours = palette()
    labels = [str(p["label"]) for p in predictions][::-1]
    values = [float(p["probability"]) for p in predictions][::-1]
    bar_colours = [colours.border] * (len(values) - 1) + [colours.accent]
    figure = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=bar_colours,
            text=[percent(v) for v in values],
            textposition="auto",
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    figure.update_layout(
        height=60 + 32 * len(values),
        margin={"l": 0, "r": 10, "t": 10, "b": 40},
        xaxis={"range": [0, 1], "tickformat": ".0%", "title": t("classify.results.chart_x")},
        yaxis={"automargin": True},
        showlegend=False,
    )
    return figure


def topk_frame(predictions: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            t("classify.results.rank"): range(1, len(predictions) + 1),
            t("classify.results.class"): [p["label"] for p in predictions],
            t("classify.results.index"): [p["index"] for p in predictions],
            t("classify.results.probability"): [float(p["probability"]) for p in predictions],
        }
    )


def render_topk(predictions: Sequence[Mapping[str, object]], key: str) -> None:
    chart_tab, table_tab = st.tabs([t("classify.results.chart"), t("classify.results.table")])
    with chart_tab:
        st.plotly_chart(
            topk_figure(predictions), theme="streamlit", width="stretch", key=f"{key}_chart"
        )
    with table_tab:
        st.dataframe(
            topk_frame(predictions),
            hide_index=True,
            width="stretch",
            column_config={
                t("classify.results.probability"): st.column_config.ProgressColumn(
                    t("classify.results.probability"), format="percent", min_value=0, max_value=1
                )
            },
            key=f"{key}_table",
        )


@cache
def _colour_table(scale: str = "Turbo") -> np.ndarray:
    """256 RGB entries sampled from a Plotly colour scale (blue = low, red = high)."""
    samples = sample_colorscale(scale, [i / 255 for i in range(256)])
    return np.array([unlabel_rgb(colour) for colour in samples], dtype=np.float32)


def heatmap_overlay(image: Image.Image, heatmap: np.ndarray, opacity: float) -> Image.Image:
    """``image`` with ``heatmap`` (same size, values 0–1) blended on top; opacity 0–1.

    Weak regions are also made more transparent, so the photo stays visible where the model
    did not look.
    """
    base = np.asarray(image.convert("RGB"), dtype=np.float32)
    levels = np.clip(heatmap, 0.0, 1.0)
    colours = _colour_table()[np.rint(levels * 255).astype(np.int64)]
    alpha = (opacity * (0.25 + 0.75 * levels))[..., None]
    blended = base * (1 - alpha) + colours * alpha
    return Image.fromarray(np.clip(blended, 0, 255).astype(np.uint8))


def colour_legend() -> str:
    """A small HTML gradient bar (low → high) for the heatmap's colour scale."""
    stops = ", ".join(f"rgb{tuple(int(v) for v in _colour_table()[i])}" for i in range(0, 256, 51))
    colours = palette()
    return (
        f'<div style="display:flex;align-items:center;gap:.5rem;color:{colours.muted};'
        f'font-size:.85rem">0<div style="flex:1;height:.6rem;border-radius:.3rem;'
        f'background:linear-gradient(90deg, {stops})"></div>1</div>'
    )


def _stats_frame(channels: Sequence[Mapping[str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            t("classify.pipeline.channel"): ["R", "G", "B"][: len(channels)],
            t("classify.pipeline.min"): [c["min"] for c in channels],
            t("classify.pipeline.max"): [c["max"] for c in channels],
            t("classify.pipeline.mean"): [c["mean"] for c in channels],
            t("classify.pipeline.std"): [c["std"] for c in channels],
        }
    )


def _conversions_text(note: str) -> str:
    kinds = [kind for kind in note.split(",") if kind]
    if not kinds:
        return t("classify.pipeline.no_conversion")
    return " · ".join(t(f"classify.pipeline.conversions.{kind}") for kind in kinds)


def render_pipeline(
    steps: Sequence[Mapping[str, object]], images: Mapping[str, Image.Image]
) -> None:
    """One card per transform; ``steps`` are ``Step.to_dict()``s, ``images`` their pictures."""
    picture_steps = [s for s in steps if s["key"] in images]
    tensor_steps = [s for s in steps if s["key"] not in images and s["key"] != "original"]
    original = next((s for s in steps if s["key"] == "original"), None)
    columns = st.columns(len(picture_steps) + (1 if original else 0))
    index = 0
    if original:
        with columns[0].container(border=True):
            st.markdown(f"**1 · {t('classify.pipeline.steps.original')}**")
            st.caption(
                t(
                    "classify.pipeline.original_detail",
                    format=original["note"],
                    mode=original["dtype"],
                    width=original["width"],
                    height=original["height"],
                )
            )
            st.code(str(original["code"]), language="python", wrap_lines=True)
        index = 1
    for offset, step in enumerate(picture_steps):
        number = index + offset + 1
        title = t(f"classify.pipeline.steps.{step['key']}")
        with columns[index + offset].container(border=True):
            st.markdown(f"**{number} · {title}**")
            st.image(images[str(step["key"])], width="stretch")
            size = t("classify.pipeline.size", width=step["width"], height=step["height"])
            detail = _conversions_text(str(step["note"])) if step["key"] == "rgb" else ""
            st.caption(f"{size}  \n{detail}" if detail else size)
            st.code(str(step["code"]), language="python", wrap_lines=True)
    first_tensor = len(picture_steps) + index + 1
    tensor_columns = st.columns(len(tensor_steps))
    for offset, step in enumerate(tensor_steps):
        title = t(f"classify.pipeline.steps.{step['key']}")
        with tensor_columns[offset].container(border=True):
            st.markdown(f"**{first_tensor + offset} · {title}**")
            shape = "×".join(str(n) for n in step["shape"])
            st.caption(t("classify.pipeline.shape", shape=shape, dtype=step["dtype"]))
            st.code(str(step["code"]), language="python", wrap_lines=True)
            st.dataframe(
                _stats_frame(step["channels"]).round(3),
                hide_index=True,
                width="stretch",
            )
    st.caption(t("classify.pipeline.before_after"))


def latency_figure(wall_parts: Mapping[str, float]) -> go.Figure:
    """One stacked bar of wall-clock seconds: decode, preprocess, forward (shown in ms)."""
    colours = palette()
    parts = [
        ("decode", wall_parts["decode"], colours.copy),
        ("preprocess", wall_parts["preprocess"], colours.highlight),
        ("forward", wall_parts["forward"], colours.accent),
    ]
    figure = go.Figure(
        [
            go.Bar(
                x=[seconds * 1000],
                y=[""],
                orientation="h",
                name=t(f"classify.latency.{name}"),
                marker_color=colour,
                text=[f"{seconds * 1000:.1f} ms"],
                textposition="inside",
                hovertemplate="%{fullData.name}: %{x:.1f} ms<extra></extra>",
            )
            for name, seconds, colour in parts
        ]
    )
    figure.update_layout(
        barmode="stack",
        height=170,
        margin={"l": 0, "r": 10, "t": 10, "b": 40},
        xaxis={"title": t("classify.latency.axis")},
        legend={"orientation": "h", "y": -0.6},
    )
    return figure
