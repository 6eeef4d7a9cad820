"""Pure builders for class mode: the projected code and QR, the tally chart, the summary table
and safe text. No Streamlit: everything here is a string, a figure or a DataFrame.

Sizes are chosen for a projector seen from the back of a lecture hall: the class code is set
in a monospace face about a tenth of the screen's height, the tally's labels and counts are
28-40 px. Anything a visitor typed (nicknames) goes through :func:`plain` or :func:`html_text`
before it reaches Markdown or HTML.
"""

from __future__ import annotations

import html
import string
from collections.abc import Sequence
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go
import segno

from components.lessons.draw import WORDS
from components.palette import Palette
from torchatlas.i18n import translate

# Every ASCII punctuation character can be backslash-escaped in CommonMark; escaping them all
# also defuses Streamlit's own directives (":material/…:", ":red[…]") and "$" maths.
_MARKDOWN_SPECIAL = frozenset(string.punctuation)


def plain(text: str) -> str:
    """``text`` as literal Markdown: no emphasis, links, directives, HTML or maths."""
    return "".join(f"\\{ch}" if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def html_text(text: str) -> str:
    return html.escape(text, quote=True)


def link(base: str, **query: str) -> str:
    """``base`` with ``query`` appended (values URL-encoded)."""
    return f"{base}?{urlencode(query)}"


def qr_svg(url: str, scale: int = 10) -> str:
    """The join link as an SVG QR code that scales to its box (a viewBox). Dark modules on
    white in both themes, with the quiet zone: phone cameras read that most reliably."""
    svg = segno.make(url, error="m").svg_inline(
        scale=scale, dark="#111111", light="#ffffff", border=3
    )
    head = svg[: svg.index(">")]
    width = head.split('width="')[1].split('"')[0]
    height = head.split('height="')[1].split('"')[0]
    return svg.replace("<svg ", f'<svg viewBox="0 0 {width} {height}" ', 1)


def code_html(code: str, caption: str, palette: Palette) -> str:
    """The class code as a projector would show it: huge, monospace, spaced (ABC 234)."""
    spaced = f"{code[:3]}&#8201;{code[3:]}" if len(code) == 6 else html_text(code)
    return (
        f"<div style='text-align:center;line-height:1.05'>"
        f"<div style='font-size:1.6rem;color:{palette.muted}'>{html_text(caption)}</div>"
        f"<div data-testid='classmode-code' style=\"font-family:'JetBrains Mono','Menlo',"
        f"'Consolas',monospace;font-weight:800;font-size:clamp(3.5rem,11vw,9.5rem);"
        f'letter-spacing:0.06em;color:{palette.text}">{spaced}</div></div>'
    )


def option_labels(options: Sequence[str], lang: str) -> list[str]:
    """A, B, C… with the option's text, as the tally's axis shows them."""
    labels = []
    for index, option in enumerate(options):
        text = translate(f"lessons.value.{option}", lang) if option in WORDS else option
        labels.append(f"{chr(ord('A') + index)}: {text}")
    return labels


def tally_figure(
    counts: Sequence[int],
    labels: Sequence[str],
    correct: int | None,
    palette: Palette,
    lang: str,
) -> go.Figure:
    """Horizontal bars, one per option, with the count at the bar's end. ``correct`` is
    marked only when given (after the reveal: before it the projected chart must not tell
    the room the answer)."""
    total = sum(counts)
    colours = [
        ("#2e9d57" if index == correct else palette.border) if correct is not None else palette.copy
        for index in range(len(counts))
    ]
    texts = [
        f"{count}  ({round(100 * count / total)} %)" if total else str(count) for count in counts
    ]
    figure = go.Figure(
        go.Bar(
            x=list(counts),
            y=list(labels),
            orientation="h",
            marker_color=colours,
            text=texts,
            textposition="outside",
            textfont={"size": 34},
            cliponaxis=False,
            hoverinfo="skip",
        )
    )
    figure.update_layout(
        height=max(260, 110 * len(counts) + 60),
        margin={"l": 10, "r": 40, "t": 20, "b": 20},
        font={"size": 28},
        showlegend=False,
        bargap=0.25,
        xaxis={
            "visible": False,
            "range": [0, max(1, max(counts, default=0)) * 1.35],
            "fixedrange": True,
        },
        yaxis={"autorange": "reversed", "automargin": True, "fixedrange": True},
    )
    figure.update_yaxes(tickfont={"size": 30})
    return figure


def share_text(share: float | None, lang: str) -> str:
    if share is None:
        return "—"
    return translate("classmode.tally.share_value", lang, percent=round(100 * share))


Row = tuple[int, str, int, int, float | None]


def summary_frame(rows: Sequence[Row], lang: str) -> pd.DataFrame:
    """(step, question, answered, right, share right) per asked question."""
    return pd.DataFrame(
        [
            {
                translate("classmode.summary.step", lang): step,
                translate("classmode.summary.question", lang): prompt,
                translate("classmode.summary.answered", lang): answered,
                translate("classmode.summary.right", lang): right,
                translate("classmode.summary.share", lang): share_text(share, lang),
            }
            for step, prompt, answered, right, share in rows
        ]
    )
