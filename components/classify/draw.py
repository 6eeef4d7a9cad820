"""Pure builders for the image classification room: figures, tables, pictures and text.

Each takes the engine's frozen dataclasses, the reader's language and (for colours) a palette,
and returns a Plotly figure, a DataFrame, a PIL image or a string; ``panels`` puts them on the
page. No Streamlit here, so tests call every builder directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from PIL import Image
from plotly.colors import sample_colorscale, unlabel_rgb

from components.palette import Palette
from torchatlas.classify.images import Conversion, Decoded
from torchatlas.classify.models import ModelSpec
from torchatlas.classify.predict import Prediction, Stage
from torchatlas.classify.transforms import ChannelStats
from torchatlas.i18n import translate


def percent(probability: float) -> str:
    return f"{probability * 100:.1f}%"


def model_caption(spec: ModelSpec, downloaded: bool, lang: str) -> str:
    """Where the model's weights come from, and its size, accuracy and input."""
    if spec.embedded:
        where = translate("classify.model.embedded", lang)
    elif downloaded:
        where = translate("classify.model.cached", lang)
    else:
        where = translate("classify.model.download", lang, size_mb=round(spec.file_mb))
    facts = translate(
        "classify.model.facts",
        lang,
        params=f"{spec.num_params / 1e6:.1f}",
        top1=f"{spec.top1:.1f}",
        crop=spec.crop_size,
    )
    return f"{where} · {facts}"


def upright_size(decoded: Decoded) -> tuple[int, int]:
    """The photo's size as it is shown (EXIF orientations 5–8 swap width and height)."""
    info = decoded.info
    turned = info.orientation in (5, 6, 7, 8)
    return (info.height, info.width) if turned else (info.width, info.height)


# --------------------------------------------------------------------------- predictions


def topk_figure(predictions: Sequence[Prediction], colours: Palette, lang: str) -> go.Figure:
    """Horizontal bars, best class on top."""
    labels = [p.label for p in predictions][::-1]
    values = [p.probability for p in predictions][::-1]
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
        xaxis={
            "range": [0, 1],
            "tickformat": ".0%",
            "title": translate("classify.results.chart_x", lang),
        },
        yaxis={"automargin": True},
        showlegend=False,
    )
    return figure


def topk_text(predictions: Sequence[Prediction], lang: str) -> str:
    """The top-k chart as one sentence with its numbers (the chart's text alternative)."""
    items = ", ".join(f"{p.label} {percent(p.probability)}" for p in predictions)
    return translate("classify.a11y.topk", lang, count=len(predictions), items=items)


def topk_frame(predictions: Sequence[Prediction], lang: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            translate("classify.results.rank", lang): range(1, len(predictions) + 1),
            translate("classify.results.class", lang): [p.label for p in predictions],
            translate("classify.results.index", lang): [p.index for p in predictions],
            translate("classify.results.probability", lang): [p.probability for p in predictions],
        }
    )


# --------------------------------------------------------------------------- Grad-CAM


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


def colour_legend(colours: Palette) -> str:
    """A small HTML gradient bar (low → high) for the heatmap's colour scale."""
    stops = ", ".join(f"rgb{tuple(int(v) for v in _colour_table()[i])}" for i in range(0, 256, 51))
    return (
        f'<div style="display:flex;align-items:center;gap:.5rem;color:{colours.muted};'
        f'font-size:.85rem">0<div style="flex:1;height:.6rem;border-radius:.3rem;'
        f'background:linear-gradient(90deg, {stops})"></div>1</div>'
    )


# --------------------------------------------------------------------------- pipeline


def stats_frame(channels: Sequence[ChannelStats], lang: str) -> pd.DataFrame:
    """Per-channel min, max, mean and std of a tensor step, rounded for reading."""
    return pd.DataFrame(
        {
            translate("classify.pipeline.channel", lang): ["R", "G", "B"][: len(channels)],
            translate("classify.pipeline.min", lang): [c.min for c in channels],
            translate("classify.pipeline.max", lang): [c.max for c in channels],
            translate("classify.pipeline.mean", lang): [c.mean for c in channels],
            translate("classify.pipeline.std", lang): [c.std for c in channels],
        }
    ).round(3)


def conversions_text(conversions: Sequence[Conversion], lang: str) -> str:
    """What decoding changed, in words (or that the file was already upright RGB)."""
    if not conversions:
        return translate("classify.pipeline.no_conversion", lang)
    return " · ".join(
        translate(f"classify.pipeline.conversions.{kind}", lang) for kind in conversions
    )


# --------------------------------------------------------------------------- latency

_STAGE_NAMES = {
    Stage.DECODE: "classify.latency.decode",
    Stage.PREPROCESS: "classify.latency.preprocess",
    Stage.FORWARD: "classify.latency.forward",
}


def latency_text(wall_parts: Sequence[tuple[Stage, float]], lang: str) -> str:
    """The latency chart as one sentence with its numbers: shown under the chart and given
    to it as its text alternative."""
    items = ", ".join(
        f"{translate(_STAGE_NAMES[stage], lang)} {seconds * 1000:.1f} ms"
        for stage, seconds in wall_parts
    )
    total = f"{sum(seconds for _, seconds in wall_parts) * 1000:.1f}"
    return translate("classify.a11y.latency", lang, items=items, total=total)


def latency_figure(
    wall_parts: Sequence[tuple[Stage, float]], colours: Palette, lang: str
) -> go.Figure:
    """One stacked bar of wall-clock seconds per stage (shown in ms)."""
    stage_colours = {
        Stage.DECODE: colours.copy,
        Stage.PREPROCESS: colours.highlight,
        Stage.FORWARD: colours.accent,
    }
    figure = go.Figure(
        [
            go.Bar(
                x=[seconds * 1000],
                y=[""],
                orientation="h",
                name=translate(_STAGE_NAMES[stage], lang),
                marker_color=stage_colours[stage],
                text=[f"{seconds * 1000:.1f} ms"],
                textposition="inside",
                hovertemplate="%{fullData.name}: %{x:.1f} ms<extra></extra>",
            )
            for stage, seconds in wall_parts
        ]
    )
    figure.update_layout(
        barmode="stack",
        height=170,
        margin={"l": 0, "r": 10, "t": 10, "b": 40},
        xaxis={"title": translate("classify.latency.axis", lang)},
        legend={"orientation": "h", "y": -0.6},
    )
    return figure
