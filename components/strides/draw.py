"""Drawings for the strides room: the storage strip, the logical tensor, the op history, and
the small text pieces the panels share.

Pure builders: each takes engine results (:class:`torchatlas.strides.Step`, frozen) and plain
values and returns a Plotly figure, an HTML or markdown string; nothing here runs torch or
Streamlit. A cell's colour encodes its storage index, so the same colour in the strip and in
the tensor is the same memory.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from components.figures import FrozenFigure
from components.palette import Palette

if TYPE_CHECKING:
    from torchatlas.strides import Step

MAX_DRAWN = 4096  # elements or storage cells drawn one by one
TEXT_UP_TO = 400  # cells that get their number printed inside
HISTORY_BINS = 96  # footprint bars summarise larger storages into this many bins


def flatten(nested: Any) -> list[Any]:
    """Row-major flat list of a nested list (a scalar becomes a one-item list)."""
    if not isinstance(nested, list):
        return [nested]
    out: list[Any] = []
    stack = [nested]
    while stack:
        node = stack.pop()
        if node and isinstance(node[0], list):
            stack.extend(reversed(node))
        else:
            out.extend(node)
    return out


def unravel(flat: int, size: Sequence[int]) -> tuple[int, ...]:
    """The row-major index of element ``flat`` of a tensor of ``size`` (inside it)."""
    return tuple(map(int, np.unravel_index(flat, size)))


def ravel(index: Sequence[int], size: Sequence[int]) -> int:
    """The row-major position of element ``index`` of a tensor of ``size`` (inside it)."""
    return int(np.ravel_multi_index(tuple(index), tuple(size)))


def format_index(index: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def tuple_text(values: Iterable[Any]) -> str:
    """A size or stride as Python prints a tuple: ``(3,)``, ``(2, 3)``."""
    values = list(values)
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


def _format_real(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.3g}"


def format_value(value: Any) -> str:
    """A cell's value, short enough to print inside its square: ``T``/``F`` for bool,
    ``3+0j`` for complex, whole floats without their ``.0``."""
    if isinstance(value, bool):
        return "T" if value else "F"
    if isinstance(value, float):
        return _format_real(value)
    if isinstance(value, complex):
        imag = _format_real(value.imag)
        sign = "" if imag.startswith("-") else "+"
        return f"{_format_real(value.real)}{sign}{imag}j"
    return str(value)


def heading_markdown(title: str, caption: str, lead: str = "") -> str:
    """A header (h2), an optional bold lead line and a caption as one markdown element: every
    element costs Streamlit bookkeeping on each rerun, and this room reruns on every click."""
    lead_line = f"**{lead}**  \n" if lead else ""
    return f"## {title}\n\n{lead_line}:gray[:small[{caption}]]"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: one element, however many rows."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


class ReadyHtml(str):
    """Finished HTML for st.html. A plain string goes through textwrap.dedent, whose regex
    scans every character on every rerun; st.html takes an object's ``_repr_html_`` as it
    is, and this room reruns on every click."""

    def _repr_html_(self) -> str:
        return str(self)


def _hsl(fraction: float, dark: bool) -> str:
    """A hue sweep over the storage: order stays visible, neighbours stay apart."""
    return f"hsl({205 - 185 * fraction:.0f},70%,{32 if dark else 82}%)"


def colour_scale(dark: bool) -> list[list[Any]]:
    return [[stop / 8, _hsl(stop / 8, dark)] for stop in range(9)]


def _base_layout(palette: Palette, height: int) -> dict[str, Any]:
    hidden = {"visible": False, "fixedrange": True}
    return {
        "height": height,
        "margin": {"l": 6, "r": 6, "t": 24, "b": 6},
        "xaxis": {**hidden},
        "yaxis": {**hidden, "autorange": "reversed", "scaleanchor": "x"},
        "showlegend": False,
        "dragmode": False,
        "hovermode": "closest",
        "clickmode": "event+select",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "paper_bgcolor": "rgba(0,0,0,0)",
        "font": {"color": palette.text},
    }


def _marker_size(columns: int, rows: int) -> float:
    return max(4.0, min(34.0, 640 / max(columns, rows * 1.6, 1)))


def _cells_trace(
    xs: np.ndarray,
    ys: np.ndarray,
    colour: np.ndarray | str,
    custom: np.ndarray,
    hover: str,
    texts: list[str] | None,
    size: float,
    dark: bool,
    palette: Palette,
    opacity: float,
    name: str,
    colour_max: float,
) -> dict[str, Any]:
    """One scatter of square markers. Numbers travel as numpy arrays (typed arrays in the
    JSON) and the hover text is a template, so thousands of cells stay cheap to send."""
    marker: dict[str, Any] = {
        "symbol": "square",
        "size": size,
        "color": colour,
        "opacity": opacity,
        "line": {"color": palette.border, "width": 0.5},
    }
    if not isinstance(colour, str):
        marker.update(colorscale=colour_scale(dark), cmin=0.0, cmax=colour_max)
    return {
        "type": "scatter",
        "name": name,
        "x": xs,
        "y": ys,
        "mode": "markers+text" if texts else "markers",
        "text": texts,
        "textfont": {"color": palette.text, "size": max(8, min(14, size * 0.42))},
        "customdata": custom,
        "hovertemplate": hover + "<extra></extra>",
        "marker": marker,
        "selected": {"marker": {"opacity": opacity}},
        "unselected": {"marker": {"opacity": opacity}},
    }


def _lit_trace(
    xs: np.ndarray,
    ys: np.ndarray,
    custom: np.ndarray,
    hover: str,
    lit: list[int],
    focus: int | None,
    colour: np.ndarray,
    size: float,
    dark: bool,
    palette: Palette,
    colour_max: float,
    texts: list[str] | None = None,
) -> dict[str, Any]:
    """The lit cells drawn again on top, outlined; the focused one in the accent colour."""
    picked = np.asarray(lit, dtype=np.int64)
    widths = np.where(picked == (-1 if focus is None else focus), 4.0, 3.0)
    outline = [palette.accent if i == focus else palette.text for i in lit]
    return {
        "type": "scatter",
        "name": "lit",
        "x": xs[picked],
        "y": ys[picked],
        "mode": "markers+text" if texts else "markers",
        "text": [texts[i] for i in lit] if texts else None,
        "textfont": {"color": palette.text, "size": max(8, min(14, size * 0.42))},
        "customdata": custom[picked],
        "hovertemplate": hover + "<extra></extra>",
        "marker": {
            "symbol": "square",
            "size": size,
            "color": colour[picked],
            "colorscale": colour_scale(dark),
            "cmin": 0.0,
            "cmax": colour_max,
            "line": {"color": outline, "width": widths},
        },
    }


def _compact(positions: np.ndarray) -> np.ndarray:
    """Positions as a compact typed array for the figure JSON: uint16 where every one is a
    whole number (half the bytes of float32; every rerun sends the figure), else float32."""
    if positions.size and positions.max() < 65536 and np.all(positions == np.floor(positions)):
        return positions.astype(np.uint16)
    return positions.astype(np.float32)


def tensor_layout(
    size: Sequence[int],
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, float, float]]]:
    """Grid positions (column, row) for every element, row-major; 3-D+ tensors become small
    multiples of their last two dimensions, each labelled with its leading index."""
    rank = len(size)
    if rank == 0:
        return np.zeros(1), np.zeros(1), []
    if 0 in size:  # no element to place (a zero-size dim may sit beside huge ones)
        return np.zeros(0, dtype=np.uint16), np.zeros(0, dtype=np.uint16), []
    rows = size[-2] if rank >= 2 else 1
    columns = size[-1]
    leading = list(size[:-2])
    blocks = math.prod(leading) if leading else 1
    per_row = max(1, min(blocks, 48 // (columns + 1) or 1))
    block = np.arange(blocks)
    left = (block % per_row) * (columns + 1)
    top = (block // per_row) * (rows + 1.5 if leading else rows)
    row, column = np.divmod(np.arange(rows * columns), columns)
    xs = _compact((left[:, None] + column[None, :]).reshape(-1))
    ys = _compact((top[:, None] + row[None, :]).reshape(-1))
    labels = []
    if leading and blocks:
        prefixes = np.stack(np.unravel_index(np.arange(min(blocks, 256)), leading), axis=1)
        for b, prefix in enumerate(prefixes.tolist()):
            labels.append(
                ("[" + ", ".join(map(str, prefix)) + ", :, :]", float(left[b]), float(top[b]) - 0.9)
            )
    return xs, ys, labels


def tensor_figure(
    step: Step,
    lit_elements: Iterable[int],
    focus_element: int | None,
    palette: Palette,
    dark: bool,
) -> go.Figure:
    """The logical tensor, one square per element, coloured by the storage cell it reads."""
    size = step.size
    indices = np.asarray(flatten(step.storage_indices), dtype=np.int64)
    values = flatten(step.values)
    xs, ys, labels = tensor_layout(size)
    # The colour value is the storage cell itself, so the hover can name it too; customdata
    # stays one flat array (2-D customdata would travel as nested lists).
    colour_max = float(max(step.storage_cells - 1, 1))
    colour = indices.astype(np.uint16 if colour_max < 65535 else np.float32)
    texts = [format_value(v) for v in values] if len(values) <= TEXT_UP_TO else None
    custom = np.arange(len(indices), dtype=np.uint16)
    hover = f"{step.name} element #%{{customdata}} → cell %{{marker.color}}"
    # an empty step (x[5:] of 3 elements) has no squares: one empty cell's worth of room
    width, depth = (float(xs.max()) + 1, float(ys.max()) + 1) if xs.size else (1.0, 1.0)
    marker = _marker_size(int(width), int(depth))
    lit = sorted(set(lit_elements))
    data = [
        _cells_trace(
            xs, ys, colour, custom, hover, texts, marker, dark, palette,
            0.4 if lit else 1.0, "elements", colour_max,
        )
    ]  # fmt: skip
    if lit:
        data.append(
            _lit_trace(
                xs,
                ys,
                custom,
                hover,
                lit,
                focus_element,
                colour,
                marker,
                dark,
                palette,
                colour_max,
                texts,
            )
        )
    height = int(min(620, max(90, depth * marker * 1.12 + 40)))
    layout = _base_layout(palette, height)
    layout["annotations"] = [
        {"text": text, "x": x - 0.5, "y": y, "xanchor": "left", "showarrow": False,
         "font": {"size": 11, "color": palette.muted}}
        for text, x, y in labels
    ]  # fmt: skip
    return FrozenFigure({"data": data, "layout": layout})


def strip_columns(cells: int) -> int:
    if cells <= 24:
        return max(cells, 1)
    return 16 if cells <= 256 else 64


def storage_figure(
    step: Step,
    lit_cells: Iterable[int],
    focus_cell: int | None,
    palette: Palette,
    dark: bool,
) -> go.Figure:
    """Every storage cell (read in this step's dtype), wrapped into rows; cells this step
    never reads are faded."""
    values = step.storage_values
    cells = len(values)
    columns = strip_columns(cells)
    read = np.zeros(cells, dtype=bool)
    read[np.asarray(flatten(step.storage_indices), dtype=np.int64)] = True
    ys, xs = np.divmod(np.arange(cells), columns)
    xs, ys = xs.astype(np.uint16), ys.astype(np.uint16)
    colour_max = float(max(cells - 1, 1))
    colour = np.arange(cells, dtype=np.uint16)
    texts = [format_value(v) for v in values] if cells <= TEXT_UP_TO else None
    custom = np.arange(cells, dtype=np.uint16)
    hover = f"cell %{{customdata}} ({step.element_size} bytes each)"
    marker = _marker_size(columns, int(ys.max()) + 1 if cells else 1)
    lit = sorted(set(lit_cells))
    opacity = 0.4 if lit else 1.0
    data = []
    for mask, tint, name in ((read, colour, "read"), (~read, palette.surface, "unread")):
        if mask.any():
            data.append(
                _cells_trace(
                    xs[mask], ys[mask], tint if isinstance(tint, str) else tint[mask],
                    custom[mask], hover,
                    [text for text, keep in zip(texts, mask, strict=True) if keep]
                    if texts else None,
                    marker, dark, palette, opacity, name, colour_max,
                )
            )  # fmt: skip
    if lit:
        data.append(
            _lit_trace(
                xs,
                ys,
                custom,
                hover,
                lit,
                focus_cell,
                colour,
                marker,
                dark,
                palette,
                colour_max,
                texts,
            )
        )
    rows = int(ys.max()) + 1 if cells else 1
    layout = _base_layout(palette, int(min(620, max(70, rows * marker * 1.15 + 40))))
    # Axis ticks (cheaper than annotations) label each row with its first cell's index, or
    # every cell of a short one-row strip.
    tick_font = {"size": 10, "color": palette.muted}
    if rows == 1 and cells <= 24:
        layout["xaxis"] = {
            **layout["xaxis"],
            "visible": True,
            "side": "top",
            "showgrid": False,
            "zeroline": False,
            "tickvals": list(range(cells)),
            "tickfont": tick_font,
        }
    else:
        every = max(1, rows // 32)
        layout["yaxis"] = {
            **layout["yaxis"],
            "visible": True,
            "showgrid": False,
            "zeroline": False,
            "tickvals": list(range(0, rows, every)),
            "ticktext": [str(row * columns) for row in range(0, rows, every)],
            "tickfont": tick_font,
        }
    return FrozenFigure({"data": data, "layout": layout})


def _footprint_bar(step: Step, palette: Palette, width: int = 220) -> str:
    """One bar for the step's storage; the cells this step reads are marked. Drawn as a CSS
    gradient on one element (st.html strips SVG), runs of cells merged into one stop pair."""
    cells = max(step.storage_cells or 1, 1)
    indices = step.storage_indices
    bins = min(cells, HISTORY_BINS)
    lit = [False] * bins
    if step.footprint is not None:  # the engine's, exact at every size
        lit = list(step.footprint)
        bins = len(lit)
    elif indices is not None:
        for cell in set(flatten(indices)):
            lit[min(bins - 1, cell * bins // cells)] = True
    elif step.byte_range is not None and step.numel:  # the byte range is still exact
        # Only the bins the range spans, by arithmetic: O(bins), whatever the offset.
        size = max(step.element_size or 1, 1)
        first, last = step.byte_range[0] // size, step.byte_range[1] // size - 1
        low, high = max(first, 0), min(last, cells - 1)
        for b in range(low * bins // cells, high * bins // cells + 1) if low <= high else ():
            lit[b] = True
    stops, start = [], None
    for i, on in enumerate([*lit, False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            left, right = 100 * start / bins, 100 * i / bins
            stops.append(
                f"transparent {left:.2f}%,{palette.accent} {left:.2f}%,"
                f"{palette.accent} {right:.2f}%,transparent {right:.2f}%"
            )
            start = None
    gradient = f"linear-gradient(to right,{','.join(stops)})" if stops else "none"
    return (
        f'<span style="display:inline-block;vertical-align:middle;width:{width}px;'
        f"max-width:60vw;height:12px;border:1px solid {palette.border};border-radius:2px;"
        f'background:{gradient},{palette.surface}"></span>'
    )


def history_html(
    steps: Sequence[Step],
    labels: Mapping[str, str],
    shown: int,
    palette: Palette,
    dark: bool,
) -> str:
    """The op history: one card per step with its storage footprint, and whether it made a
    view (same strip as its input) or a copy (a new strip, with the bytes it allocated).
    Cards wrap, so a phone gets the same information in one column. ``labels`` holds the
    translated texts, the storage kinds' under their values (``start``, ``same``, ``view``,
    ``copy``) with ``{storage}`` and ``{nbytes}`` fields."""
    del dark  # the footprint uses the accent colour in both themes
    colours = {
        "start": palette.muted,
        "same": palette.muted,
        "view": palette.accent,
        "copy": palette.copy,
    }
    cards = []
    for step in steps:
        kind = step.storage_kind
        if kind is None:  # the failing op: shown as an error, not as a card
            continue
        badge_colour = colours[kind.value]
        badge = labels[kind.value].format(storage=step.storage_id, nbytes=step.storage_nbytes)
        current = step.index == shown
        border = palette.accent if current else palette.border
        code = step.code if step.index else step.name
        numbers = (
            f"{labels['size']} {tuple_text(step.size)} · {labels['stride']} "
            f"{tuple_text(step.stride)} · {labels['offset']} {step.storage_offset}"
        )
        cards.append(
            f'<div style="border:1px solid {border};border-left:4px solid {badge_colour};'
            f'border-radius:6px;padding:6px 10px;margin:0 0 6px 0">'
            f'<div style="display:flex;flex-wrap:wrap;gap:4px 12px;align-items:baseline">'
            f"<code>{html.escape(code)}</code>"
            f'<span style="color:{badge_colour};font-weight:600">{html.escape(badge)}</span>'
            f"</div>"
            f'<div style="display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;'
            f'color:{palette.muted};font-size:0.85rem">'
            f"<span>{html.escape(numbers)}</span>"
            f'<span title="{html.escape(labels["footprint"])}">'
            f"{step.storage_id} {_footprint_bar(step, palette)}</span></div></div>"
        )
    caption = labels.get("caption")
    intro = (
        f'<p style="color:{palette.muted};font-size:0.875rem;margin:0 0 8px 0">'
        f"{html.escape(caption)}</p>"
        if caption
        else ""
    )
    if labels.get("title"):  # the panel's heading, inside the one element the panel costs
        intro = (  # st.html gets no heading styles: match st.header's computed ones
            '<h2 style="font-size:2.25rem;font-weight:600;line-height:1.2;margin:0;'
            f'padding:1rem 0;letter-spacing:-0.005em">{html.escape(labels["title"])}</h2>'
            f"{intro}"
        )
    return f'<div style="color:{palette.text};font-size:0.92rem">{intro}{"".join(cards)}</div>'
