"""Pure builders for the shape explorer: tables, figures, DOT, HTML and markdown strings.

Each takes the engine's frozen dataclasses (``torchatlas.shapes``), the reader's language and,
for colours, a palette; it returns a DataFrame, a Plotly figure or a string, and ``panels``
puts it on the page. No Streamlit here, so tests call every builder directly.

Error texts come from the translation tables only: ``shapes.errors.<kind>.*`` filled with the
error's parameters, ``shapes.refusals.<code>`` for each refused line; what the sandbox said in
English is shown, if at all, as a detail.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, String

from components.format import format_bytes
from components.kit.a11y import scroll_region
from components.palette import Palette
from torchatlas.i18n import placeholders, translate
from torchatlas.shapes import (
    DeviceMove,
    LayerRow,
    MoveKind,
    MovePhase,
    RefusalCode,
    RowKind,
    ShapeError,
    ShapeReport,
    WhyMetaPoint,
)

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxHealth

MAX_FLOW_NODES = 60


# ---------------------------------------------------------------- numbers
def shape_text(shapes: Sequence[Sequence[Any]] | None, lang: str) -> str:
    """``1 × 3 × 32 × 32, 1 × 10``; "—" for no tensors."""
    if not shapes:
        return "—"
    scalar = translate("shapes.table.scalar", lang)
    return ", ".join(" × ".join(str(size) for size in shape) or scalar for shape in shapes)


def layer_label(row: LayerRow, model: str) -> str:
    name = row.name or model
    return f"{name} · {row.type}" if row.kind is RowKind.FUNCTION else name


# ---------------------------------------------------------------- health line
HEALTH_LAYERS = (
    "allow_list", "facade", "process_isolation", "scrubbed_env", "rlimits", "seccomp", "own_user",
)  # fmt: skip


def health_text(health: SandboxHealth, lang: str) -> str:
    """``allow-list ✓ · separate process ✓ · seccomp ✗ · free workers 2/2``."""
    parts = [
        f"{translate(f'shapes.health.layers.{key}', lang)} {'✓' if getattr(health, key) else '✗'}"
        for key in HEALTH_LAYERS
        if hasattr(health, key)
    ]
    if getattr(health, "warm_workers", ""):
        parts.append(
            translate("shapes.health.layers.warm_workers", lang, value=health.warm_workers)
        )
    return " · ".join(parts)


# ---------------------------------------------------------------- queue
def ordinal(number: int, lang: str) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``… (``3번째`` in Korean): the table says how each
    class of number reads; English's rule picks the class."""
    if 11 <= number % 100 <= 13:
        form = "other"
    else:
        form = {1: "one", 2: "two", 3: "few"}.get(number % 10, "other")
    return translate(f"shapes.queue.ordinal.{form}", lang, n=number)


def queue_text(position: int, lang: str) -> str:
    """What a student sees while the analysis waits for a worker (1 = next in line)."""
    return translate("shapes.queue.waiting", lang, place=ordinal(position, lang))


# ---------------------------------------------------------------- totals
def output_shapes(report: ShapeReport) -> list[list[Any]]:
    return report.symbolic_outputs if report.symbolic else report.outputs


def output_text(report: ShapeReport, lang: str) -> str:
    """The output shapes; each named by where forward put it (``logits: 4 × 2``) when the
    outputs came in a container or an object rather than as one bare tensor."""
    shapes = output_shapes(report)
    names = report.output_names
    if len(names) != len(shapes) or not any(names):
        return shape_text(shapes, lang)
    return ", ".join(
        translate("shapes.totals.named_output", lang, name=name, shape=shape_text([shape], lang))
        for name, shape in zip(names, shapes, strict=True)
    )


def device_notes_markdown(moves: Sequence[DeviceMove], lang: str) -> str:
    """What the code asked of devices, one line per call site ("" when it asked nothing)."""
    if not moves:
        return ""
    lines = [translate("shapes.devices.title", lang), "", translate("shapes.devices.no_gpu", lang)]
    lines.append("")
    for move in moves:
        at = "" if move.line is None else translate("shapes.devices.at", lang, line=move.line)
        if move.phase is MovePhase.FORWARD:
            where = translate("shapes.devices.forward", lang, layer=move.layer or "model")
        else:
            where = translate("shapes.devices.build", lang)
        key = "move" if move.kind is MoveKind.MOVE else "create"
        text = translate(
            f"shapes.devices.{key}", lang, at=at, call=move.call, tensors=move.tensors,
            device=move.device, where=where,
        )  # fmt: skip
        lines.append(f"- {text}")
    return "\n".join(lines)


def shared_text(row: LayerRow, lang: str) -> str:
    """``20 counted at emb`` for a row whose parameters an earlier row counts ("" if none)."""
    if not row.shared_params:
        return ""
    return translate(
        "shapes.table.shared_with", lang, count=f"{row.shared_params:,}", layer=row.shared_with
    )


def max_depth(report: ShapeReport) -> int:
    return max((row.depth for row in report.layers), default=0)


# ---------------------------------------------------------------- layer table
def layer_frame(report: ShapeReport, depth: int, symbolic: bool, lang: str) -> pd.DataFrame:
    def tr(key: str) -> str:
        return translate(f"shapes.table.{key}", lang)

    records = []
    shared = any(row.shared_params for row in report.layers)
    for index, row in enumerate(report.layers):
        if row.depth > depth and not row.failed:
            continue
        label = layer_label(row, report.model)
        record = {
            "#": index,
            tr("layer"): "\u2003" * row.depth + ("⚠ " if row.failed else "") + label,
            tr("type"): row.type,
            tr("input"): shape_text(row.input_shapes, lang),
            tr("output"): shape_text(row.output_shapes, lang),
        }
        if symbolic:
            record[tr("formula")] = shape_text(row.symbolic_output_shapes, lang)
            record[tr("constraints")] = "; ".join(row.constraints)
        record[tr("params")] = row.params
        if shared:  # a column only for models that share weights
            record[tr("shared")] = shared_text(row, lang)
        record[tr("flops")] = row.flops
        record[tr("activation")] = format_bytes(row.activation_bytes)
        record[tr("line")] = "" if row.line is None else str(row.line)
        records.append(record)
    return pd.DataFrame.from_records(records).set_index("#") if records else pd.DataFrame()


CSV_COLUMNS = (
    "name", "type", "kind", "depth", "input_shapes", "output_shapes", "symbolic_output_shapes",
    "params", "trainable_params", "shared_params", "shared_with", "flops", "activation_bytes",
    "line", "failed", "constraints",
)  # fmt: skip


def csv_bytes(report: ShapeReport) -> bytes:
    """Every row with machine-readable columns (shapes as JSON), for spreadsheets."""
    rows = []
    for row in report.layers:
        record: dict[str, Any] = {}
        for key in CSV_COLUMNS:
            value = getattr(row, key)
            if isinstance(value, list):
                value = json.dumps(value)
            elif isinstance(value, Enum):
                value = value.value
            record[key] = value
        rows.append(record)
    return pd.DataFrame(rows, columns=list(CSV_COLUMNS)).to_csv(index=False).encode("utf-8")


def json_bytes(report: ShapeReport) -> bytes:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------- chart
def activation_figure(report: ShapeReport, colours: Palette, lang: str) -> go.Figure:
    """Activation memory (bars) and output elements (line) for every leaf row, in call order."""
    rows = [row for row in report.layers if row.leaf and row.output_shapes]
    labels = [f"{index + 1}. {layer_label(row, report.model)}" for index, row in enumerate(rows)]
    elements = []
    for row in rows:
        total = 0
        for shape in row.output_shapes:
            numel = 1
            for size in shape:
                numel *= int(size)
            total += numel
        elements.append(total)
    elements_label = translate("shapes.chart.elements", lang)
    figure = go.Figure()
    figure.add_bar(
        x=labels,
        y=[row.activation_bytes / 2**20 for row in rows],
        name=translate("shapes.chart.memory", lang),
        marker_color=colours.accent,
        customdata=[shape_text(row.output_shapes, lang) for row in rows],
        hovertemplate="%{x}<br>%{y:.3g} MiB<br>%{customdata}<extra></extra>",
    )
    figure.add_scatter(
        x=labels,
        y=elements,
        name=elements_label,
        yaxis="y2",
        mode="lines",
        line={"color": colours.copy, "width": 1.5},
        hovertemplate="%{x}<br>%{y:,}<extra>" + html.escape(elements_label) + "</extra>",
    )
    figure.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.1},
        xaxis={"showticklabels": len(rows) <= 40, "title": translate("shapes.chart.x", lang)},
        yaxis={"title": "MiB", "rangemode": "tozero"},
        yaxis2={"title": elements_label, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
    )  # fmt: skip
    return figure


# ---------------------------------------------------------------- shape flow
def flow_dot(report: ShapeReport, depth: int, colours: Palette, lang: str) -> str:
    """Graphviz DOT: the model's rows at ``depth`` (or shallower leaves) as a chain of boxes."""
    rows = [
        row for row in report.layers
        if row.depth >= 1 and (row.depth == depth or (row.depth < depth and row.leaf))
    ]  # fmt: skip
    if not rows:
        rows = report.layers[:1]
    shown = rows[:MAX_FLOW_NODES]
    lines = [
        "digraph G {",
        '  graph [rankdir=TB, bgcolor="transparent", nodesep=0.25, ranksep=0.3];',
        f'  node [shape=box, style="rounded,filled", fillcolor="{colours.surface}", '
        f'color="{colours.border}", fontcolor="{colours.text}", fontname="Helvetica", '
        f"fontsize=11];",
        f'  edge [color="{colours.muted}", fontcolor="{colours.muted}", fontsize=10, '
        f'fontname="Helvetica"];',
    ]
    inputs = report.symbolic_inputs if report.symbolic and report.symbolic_inputs else (
        report.input_shapes
    )  # fmt: skip
    lines.append(
        f'  input [label="{_dot(translate("shapes.flow.input", lang))}\\n'
        f'{_dot(shape_text(inputs, lang))}", shape=ellipse, fillcolor="{colours.background}"];'
    )
    previous = "input"
    for index, row in enumerate(shown):
        node = f"n{index}"
        border = colours.accent if row.failed else colours.border
        formula = row.symbolic_output_shapes if report.symbolic else None
        shape = "⚠" if row.failed else shape_text(formula or row.output_shapes, lang)
        kind = "" if row.kind is RowKind.FUNCTION else f"\\n{_dot(row.type)}"
        label = _dot(layer_label(row, report.model))
        lines.append(f'  {node} [label="{label}{kind}\\n{_dot(shape)}", color="{border}"];')
        lines.append(f"  {previous} -> {node};")
        previous = node
    if len(rows) > len(shown):
        lines.append(f'  more [label="… {len(rows) - len(shown)}", shape=plaintext];')
        lines.append(f"  {previous} -> more;")
        previous = "more"
    outputs = output_shapes(report)
    if outputs and len(rows) == len(shown):
        lines.append(
            f'  output [label="{_dot(translate("shapes.flow.output", lang))}\\n'
            f'{_dot(shape_text(outputs, lang))}", shape=ellipse, '
            f'fillcolor="{colours.background}"];'
        )
        lines.append(f"  {previous} -> output;")
    lines.append("}")
    return "\n".join(lines)


def _dot(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ---------------------------------------------------------------- code listing
# One Light / One Dark hues, darkened where needed so that every colour reads on its theme's
# surface and on a marked line's tinted background (tests/unit/test_shapes_draw.py checks the
# contrast). Keyed by "is the theme dark".
CODE_COLOURS = {
    False: {"keyword": "#9a2499", "string": "#2e6e2d", "number": "#7a5200",
            "comment": "#5c6272", "definition": "#245bb8", "builtin": "#0a6680"},
    True: {"keyword": "#d08ef0", "string": "#98c379", "number": "#e0a870",
           "comment": "#a3a9b7", "definition": "#6cb6ff", "builtin": "#56c2cf"},
}  # fmt: skip
# The note under a marked line (the fix, or why the line was refused): the accent's hue, dark
# enough on the light theme to be read as text.
NOTE_COLOURS = {False: "#b3261e", True: "#ff7a52"}
MARK_ALPHA = "33"  # the accent behind a marked line, about a fifth opaque
# Pygments' token types → the listing's colour classes (anything else stays plain text).
_TOKEN_KINDS: tuple[tuple[Any, str], ...] = (
    (Comment, "comment"),
    (String, "string"),
    (Number, "number"),
    (Name.Function, "definition"),
    (Name.Class, "definition"),
    (Name.Decorator, "definition"),
    (Name.Builtin, "builtin"),  # also Name.Builtin.Pseudo: self, cls
    (Keyword, "keyword"),
    (Operator.Word, "keyword"),  # and, or, not, in, is
)
_KIND_OF: dict[Any, str | None] = {}
# Its own options: keep every character as typed (no newline added or stripped, no tab
# expansion); ``get_tokens_unprocessed`` reads the text without Pygments' preprocessing.
_LEXER = PythonLexer(stripnl=False, ensurenl=False, tabsize=0)


def _kind(token: Any) -> str | None:
    kind = _KIND_OF.get(token, "")
    if kind == "":
        kind = next((name for parent, name in _TOKEN_KINDS if token in parent), None)
        _KIND_OF[token] = kind
    return kind


def highlight_lines(source: str) -> list[list[tuple[str, str | None]]]:
    """Python source as lines of ``(text, kind)`` spans; kinds are CODE_COLOURS keys or None.

    Pygments' Python lexer colours code it cannot parse too (an unclosed bracket or string,
    the code the student is fixing): whatever it cannot read is an error token, shown plain,
    and the lexing goes on. Every character is kept; neighbouring spans of one kind merge.
    """
    lines = source.splitlines() or [""]
    text = "\n".join(lines)
    result: list[list[tuple[str, str | None]]] = [[] for _ in lines]
    row = 0
    position = 0
    for index, token, value in _LEXER.get_tokens_unprocessed(text):
        if index > position:  # never expected; keeps every character even so
            value = text[position:index] + value
            token = Name
        position = index + len(value)
        kind = _kind(token)
        for offset, part in enumerate(value.split("\n")):
            if offset:
                row += 1
            if not part:
                continue
            spans = result[row]
            if spans and spans[-1][1] == kind:
                spans[-1] = (spans[-1][0] + part, kind)
            else:
                spans.append((part, kind))
    if position < len(text):
        result[-1].append((text[position:], None))
    return result


def code_lines_html(source: str, dark: bool) -> list[str]:
    """Each line of ``source`` as coloured HTML (what :func:`source_listing_html` frames).
    The costly part of a listing, so the page caches it per source and theme."""
    colours = CODE_COLOURS[dark]
    return [
        "".join(
            html.escape(text)
            if kind is None
            else f'<span style="color:{colours[kind]}'
            + (";font-style:italic" if kind == "comment" else "")
            + f'">{html.escape(text)}</span>'
            for text, kind in spans
        )
        for spans in highlight_lines(source)
    ]


def source_listing_html(
    code_lines: Sequence[str],
    marks: dict[int, str] | None,
    colours: Palette,
    *,
    col: int | None = None,
    window: tuple[int, int] | None = None,
    max_height: int | None = None,
    testid: str = "shapes-source-listing",
    line_lengths: Sequence[int] | None = None,
    dark: bool = False,
    label: str = "Python",
) -> str:
    """Line-numbered source (``code_lines`` from :func:`code_lines_html`); each marked line
    highlighted, its note below.

    ``marks`` maps line numbers to notes; ``col`` puts a caret under the first marked line (at
    most one past the line's end, when ``line_lengths`` are known); ``window`` shows only
    lines ``start..end``. ``label`` names the listing for screen readers: it scrolls (long
    lines, ``max_height``), so it is a keyboard stop.
    """
    count = len(code_lines)
    marks = {line: note for line, note in (marks or {}).items() if 1 <= line <= count}
    start, end = window or (1, count)
    start, end = max(1, start), min(count, end)
    width = len(str(end))
    first_mark = min(marks, default=None)
    parts = []
    for number in range(start, end + 1):
        marked = number in marks
        style = (
            f"background:{colours.accent}{MARK_ALPHA};border-left:3px solid {colours.accent};"
            if marked
            else "border-left:3px solid transparent;"
        )
        parts.append(
            f'<div data-line="{number}" style="{style}padding-left:6px;white-space:pre">'
            f'<span style="color:{colours.muted};user-select:none">{number:>{width}}  </span>'
            f"{code_lines[number - 1] or ' '}</div>"
        )
        if marked and marks[number]:
            caret = col if number == first_mark else None
            if caret and line_lengths is not None:
                caret = min(caret, line_lengths[number - 1] + 1)
            pointer = " " * (width + 2 + max(0, (caret or 1) - 1)) + "^ " if caret else ""
            parts.append(
                f'<div style="color:{NOTE_COLOURS[dark]};padding-left:9px;white-space:pre-wrap;'
                f'font-weight:600">{html.escape(pointer)}{html.escape(marks[number])}</div>'
            )
    height = f"max-height:{max_height}px;overflow-y:auto;" if max_height else ""
    style = (
        "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:0.85rem;"
        f"line-height:1.45;background:{colours.surface};color:{colours.text};"
        f"border:1px solid {colours.border};border-radius:6px;padding:8px 0;overflow-x:auto;"
        f"{height}"
    )
    return scroll_region("".join(parts), label, style, attributes=f'data-testid="{testid}"')


def marker_window(line_count: int, line: int | None) -> tuple[int, int]:
    """The lines shown around an error: a few before the marked line, fewer after."""
    if line is not None and 1 <= line <= line_count:
        return max(1, line - 6), min(line_count, line + 4)
    return 1, min(line_count, 12)


# ---------------------------------------------------------------- errors
def refusal_text(code: RefusalCode, lang: str) -> str:
    return translate(f"shapes.refusals.{code.value}", lang)


def error_marks(error: ShapeError | None, lang: str) -> dict[int, str]:
    """Line → note for an error: every refused line with its reason, else the error's line
    with the fix (or, without a fix, the message)."""
    if error is None:
        return {}
    refusals = [refusal for refusal in error.refusals if refusal.line]
    if refusals:
        marks: dict[int, str] = {}
        for refusal in refusals:
            marks.setdefault(refusal.line, refusal_text(refusal.code, lang).replace("`", ""))
        return marks
    if not error.line:
        return {}
    note = error.text(lang, "hint") or error.text(lang, "message")
    return {error.line: note.replace("`", "")}


def refusals_markdown(error: ShapeError, lang: str) -> str:
    """Every refused line with its reasons, as one markdown list ("" when none); a line
    refused twice for the same reason (``().__class__.__base__``) is listed once."""
    seen = dict.fromkeys((refusal.line, refusal.code) for refusal in error.refusals)
    return "\n".join(
        translate("shapes.errors.refusal", lang, line=line, message=refusal_text(code, lang))
        for line, code in seen
    )


def error_detail(error: ShapeError, lang: str) -> str:
    """What the sandbox or PyTorch said, when the message does not already include it ("")."""
    detail = error.params.get("detail")
    if not detail:
        return ""
    template = translate(f"shapes.errors.{error.kind.value}.message", lang)
    if "detail" in placeholders(template):
        return ""
    return translate("shapes.errors.detail", lang, detail=str(detail))


# ---------------------------------------------------------------- symbolic
def symbolic_markdown(report: ShapeReport, lang: str) -> tuple[str, str, str]:
    """The symbolic view's texts: (issue, dims caption, constraints) — each one element on the
    page, whatever the number of constraints; "" where there is nothing to say."""
    issue = ""
    if report.symbolic_issue is not None:
        issue = translate(
            f"shapes.symbolic.issues.{report.symbolic_issue.value}",
            lang,
            detail=report.symbolic_detail,
        )
    dims = ""
    if report.dim_names:
        names = "; ".join(" × ".join(names) for names in report.dim_names)
        dims = translate("shapes.symbolic.dims", lang, dims=names)
    if not report.constraints:
        return issue, dims, translate("shapes.symbolic.no_constraints", lang)
    items = [
        "- " + translate("shapes.symbolic.requires", lang, layer=f"`{item.layer}`",
                         constraint=f"`{item.constraint}`")
        for item in report.constraints
    ]  # fmt: skip
    return issue, dims, translate("shapes.symbolic.constraints", lang) + "\n\n" + "\n".join(items)


# ---------------------------------------------------------------- why meta?
def why_meta_figure(points: Sequence[WhyMetaPoint], colours: Palette, lang: str) -> go.Figure:
    figure = go.Figure()
    real = [point for point in points if point.real_s is not None]
    figure.add_scatter(
        x=[point.batch for point in real],
        y=[point.real_s * 1000 for point in real if point.real_s is not None],
        name=translate("shapes.why.real", lang),
        mode="lines+markers",
        line={"color": colours.accent},
    )
    figure.add_scatter(
        x=[point.batch for point in points],
        y=[point.meta_s * 1000 for point in points],
        name=translate("shapes.why.meta", lang),
        mode="lines+markers",
        line={"color": colours.copy},
    )
    figure.update_layout(
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.12},
        xaxis={"type": "log", "title": translate("shapes.why.batch", lang)},
        yaxis={"type": "log", "title": "ms"},
    )
    return figure


def why_meta_frame(points: Sequence[WhyMetaPoint], lang: str) -> pd.DataFrame:
    def tr(key: str) -> str:
        return translate(f"shapes.why.{key}", lang)

    records = [
        {
            tr("batch"): point.batch,
            tr("input"): shape_text(point.input_shapes, lang),
            tr("input_bytes"): format_bytes(point.input_bytes),
            tr("real"): f"{point.real_s * 1000:.1f} ms"
            if point.real_s is not None
            else tr("skipped"),
            tr("meta"): f"{point.meta_s * 1000:.1f} ms",
        }
        for point in points
    ]
    return pd.DataFrame.from_records(records)


def why_meta_summary(points: Sequence[WhyMetaPoint], lang: str) -> tuple[str, str]:
    """(summary markdown, caption): how much each run grew, or why there is no real run."""
    real = [point for point in points if point.real_s is not None]
    if len(real) >= 2:
        first_real, last_real = real[0].real_s or 0.0, real[-1].real_s or 0.0
        summary = translate(
            "shapes.why.summary",
            lang,
            real_growth=f"{last_real / max(first_real, 1e-9):.1f}",
            meta_growth=f"{points[-1].meta_s / max(points[0].meta_s, 1e-9):.1f}",
            first=real[0].batch,
            last_real=real[-1].batch,
            last=points[-1].batch,
        )
        return summary, ""
    if not real:
        return "", translate("shapes.why.too_big", lang)
    return "", ""
