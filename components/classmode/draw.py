"""Pure builders for class mode: the projected code and QR, the tally chart, the summary table
and safe text. No Streamlit: everything here is a string, a figure or a DataFrame.

Sizes are chosen for a projector seen from the back of a lecture hall: the class code is set
in a monospace face about a tenth of the screen's height, the tally's labels and counts are
28-40 px. Anything a visitor typed (nicknames) goes through :func:`plain` or :func:`html_text`
before it reaches Markdown or HTML.
"""

from __future__ import annotations

import csv
import html
import io
import string
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go
import segno

from components.lessons.draw import option_text
from components.lessons.draw import plain as plain_text
from components.palette import Palette
from torchatlas.cache import byte_lru_cache
from torchatlas.classmode.clean import csv_cell
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


# The projector draws the same class's code in every run (tens of ms each): kept per link, in a
# byte budget (an SVG is a few tens of kB).
@byte_lru_cache(max_bytes=4 << 20)
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


def code_html(code: str, caption: str, palette: Palette, *, corner: bool = False) -> str:
    """The class code as a projector would show it: huge, monospace, spaced (ABC 234).
    ``corner``: the size it keeps once the lesson runs (the step and the tally take the
    screen; latecomers still read it from the back of the room)."""
    spaced = f"{code[:3]}&#8201;{code[3:]}" if len(code) == 6 else html_text(code)
    size = "clamp(2rem,2.6vw,3rem)" if corner else "clamp(3.5rem,11vw,9.5rem)"
    caption_size = "1.05rem" if corner else "1.6rem"
    align = "left" if corner else "center"
    return (
        f"<div style='text-align:{align};line-height:1.05'>"
        f"<div style='font-size:{caption_size};color:{palette.muted}'>{html_text(caption)}</div>"
        f"<div data-testid='classmode-code' style=\"font-family:'JetBrains Mono','Menlo',"
        f"'Consolas',monospace;font-weight:800;font-size:{size};white-space:nowrap;"
        f'letter-spacing:0.06em;color:{palette.text}">{spaced}</div></div>'
    )


RIGHT_MARK = "✓ "  # before the right option's label at the reveal: not told by colour alone


def option_labels(options: Sequence[str], lang: str, correct: int | None = None) -> list[str]:
    """A, B, C… with the option's text, as the tally's axis shows them: plain text (a
    chart shows Markdown's backticks literally); the right one marked once revealed."""
    return [
        f"{RIGHT_MARK if index == correct else ''}{chr(ord('A') + index)}: "
        f"{option_text(option, lang)}"
        for index, option in enumerate(options)
    ]


# The tally's sizes: the projector's (read from the back of a lecture hall, and the whole
# chart above the fold of a 1920×1080 screen with up to six options) and the teacher's bar
# above a room (a glance, the room below it).
PROJECTOR, BAR = "projector", "bar"
_SIZES = {  # per option (px), the rest (px), label and count font sizes (px)
    PROJECTOR: (66, 36, 28, 30),
    BAR: (34, 20, 16, 17),
}


def tally_figure(
    counts: Sequence[int],
    labels: Sequence[str],
    correct: int | None,
    palette: Palette,
    lang: str,
    size: str = PROJECTOR,
) -> go.Figure:
    """Horizontal bars, one per option, with the count at the bar's end. ``correct`` is
    marked only when given (after the reveal: before it the projected chart must not tell
    the room the answer). ``size``: :data:`PROJECTOR` or :data:`BAR`. The same counts give
    the same figure object (the projector redraws its tally every second; building a figure
    costs ~30 ms): treat it as read-only."""
    return _tally_figure(tuple(counts), tuple(labels), correct, palette, lang, size)


# A figure holds about 90 kB of Python objects: the budget keeps a class's questions' tallies
# (both sizes, both themes) without growing with the options' text.
@byte_lru_cache(max_bytes=8 << 20)
def _tally_figure(
    counts: tuple[int, ...],
    labels: tuple[str, ...],
    correct: int | None,
    palette: Palette,
    lang: str,
    size: str,
) -> go.Figure:
    per_option, rest, label_px, count_px = _SIZES[size]
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
            textfont={"size": count_px},
            cliponaxis=False,
            hoverinfo="skip",
        )
    )
    figure.update_layout(
        height=per_option * max(2, len(counts)) + rest,
        margin={"l": 10, "r": 40, "t": 8, "b": 8},
        font={"size": label_px},
        showlegend=False,
        bargap=0.25,
        xaxis={
            "visible": False,
            "range": [0, max(1, max(counts, default=0)) * 1.35],
            "fixedrange": True,
        },
        yaxis={"autorange": "reversed", "automargin": True, "fixedrange": True},
    )
    figure.update_yaxes(tickfont={"size": label_px})
    return figure


def tally_height(options: int, size: str = PROJECTOR) -> int:
    """The chart's height in pixels for ``options`` bars (what :func:`tally_figure` draws)."""
    per_option, rest, _label, _count = _SIZES[size]
    return per_option * max(2, options) + rest


def share_text(share: float | None, lang: str) -> str:
    if share is None:
        return "—"
    return translate("classmode.tally.share_value", lang, percent=round(100 * share))


Row = tuple[int, str, int, int, float | None, bool]


def summary_frame(rows: Sequence[Row], lang: str) -> pd.DataFrame:
    """(step, question, answered, right, share right, revealed) per asked question, as plain
    text; a question the teacher moved on from without revealing is not scored."""
    unscored = translate("classmode.summary.not_revealed", lang)
    return pd.DataFrame(
        [
            {
                translate("classmode.summary.step", lang): step,
                translate("classmode.summary.question", lang): plain_text(prompt),
                translate("classmode.summary.answered", lang): answered,
                translate("classmode.summary.right", lang): str(right) if revealed else "—",
                translate("classmode.summary.share", lang): share_text(share, lang)
                if revealed
                else unscored,
            }
            for step, prompt, answered, right, share, revealed in rows
        ]
    )


# --------------------------------------------------------------------------- the CSV


def csv_bytes(text: str) -> bytes:
    """The CSV as a spreadsheet opens it right: UTF-8 with a byte order mark (Excel reads a
    Korean nickname or question as mojibake without it)."""
    return text.encode("utf-8-sig")


@dataclass(frozen=True)
class Asked:
    """A question the teacher opened, as the CSV tells it: its step and prompt, its options
    as the store keeps them (``raw``) and as students saw them (``shown``), the right one's
    index and whether it was revealed (an unrevealed question is not scored)."""

    step: int
    prompt: str
    raw: tuple[str, ...]
    shown: tuple[str, ...]
    right: int
    revealed: bool


def teacher_csv(store_csv: str, questions: Sequence[Asked], lang: str) -> str:
    """The summary a teacher downloads, from the store's CSV (``nickname``, ``step_<n>``
    holding the option picked, ``step_<n>_right``, ``right_total``, a ``share_right`` row):

    - one row per student: nickname, then per question the answer as the student saw it
      (an option's words, not ``ok`` or ``TypeError``) and 1/0 for right, then how many
      right; a question the teacher moved on from without revealing shows the answer but is
      not scored (its right cell is empty, the total leaves it out);
    - a blank line, then the totals apart: per question its text, torch's answer, whether it
      was revealed, how many answered, how many were right and the share.

    Headers in ``lang``; every text cell that a spreadsheet would run as a formula starts
    with an apostrophe (the store's nicknames already do)."""
    rows = list(csv.reader(io.StringIO(store_csv)))
    header, people = rows[0], [row for row in rows[1:] if row and row[0] != "share_right"]
    column = {name: index for index, name in enumerate(header)}

    def said(key: str, **params: object) -> str:
        return translate(f"classmode.csv.{key}", lang, **params)

    def title(question: Asked) -> str:
        return csv_cell(said("question", step=question.step, question=plain_text(question.prompt)))

    buffer = io.StringIO()
    out = csv.writer(buffer, lineterminator="\r\n")
    head = [said("nickname")]
    for question in questions:
        head += [title(question), said("right", step=question.step)]
    head.append(said("total", revealed=sum(question.revealed for question in questions)))
    out.writerow(head)
    answered = {question.step: 0 for question in questions}
    right = {question.step: 0 for question in questions}
    for person in people:
        cells, total = [person[0]], 0
        for question in questions:
            name = f"step_{question.step}"
            index = _option_index(person[column[name]] if name in column else "", question.raw)
            if index is None:
                cells += ["", ""]
                continue
            answered[question.step] += 1
            good = index == question.right
            cells.append(csv_cell(question.shown[index]))
            cells.append(str(int(good)) if question.revealed else "")
            if question.revealed:
                total += good
                right[question.step] += good
        cells.append(str(total))
        out.writerow(cells)
    out.writerow([])  # the totals apart: a spreadsheet's sum over the rows above stays right
    out.writerow(
        [said(key) for key in ("totals", "answer", "revealed", "answered", "right_count", "share")]
    )
    for question in questions:
        count = answered[question.step]
        scored = question.revealed and count > 0
        out.writerow(
            [
                title(question),
                csv_cell(question.shown[question.right])
                if 0 <= question.right < len(question.shown)
                else "",
                said("yes") if question.revealed else said("no"),
                str(count),
                str(right[question.step]) if question.revealed else "",
                share_text(right[question.step] / count, lang) if scored else "",
            ]
        )
    return buffer.getvalue()


def _option_index(cell: str, raw: Sequence[str]) -> int | None:
    """Which option a store CSV cell names (its raw value, as the store wrote it)."""
    if not cell:
        return None
    for index, option in enumerate(raw):
        if cell in (option, csv_cell(option)):
            return index
    return None
