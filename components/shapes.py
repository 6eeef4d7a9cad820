"""Renderers for the shape explorer. They take the plain dicts of ``ShapeReport.to_dict()``."""

from __future__ import annotations

import base64
import bisect
import html
import io
import json
import keyword
import tokenize
import zlib
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components.format import format_bytes, format_count
from components.i18n import t
from components.theme import is_dark, palette
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS

MAX_FLOW_NODES = 60
MAX_URL_SOURCE_CHARS = 6000  # browsers and proxies accept URLs far longer; links stay shareable


# ---------------------------------------------------------------- URL state
def encode_source(source: str) -> str:
    packed = zlib.compress(source.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_source(
    token: str,
    max_chars: int = MAX_SOURCE_CHARS,
    max_token_chars: int | None = MAX_URL_SOURCE_CHARS,
) -> str | None:
    """The source a shared link carries, or None if the link is damaged or carries more than
    this app ever puts in a link: a token longer than ``max_token_chars`` (the page never
    writes one) or a source longer than ``max_chars``. Linear in the token."""
    if max_token_chars is not None and len(token) > max_token_chars:
        return None
    try:
        packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decompressor = zlib.decompressobj()
        # At most 4 bytes per character in UTF-8: decompression stops there, so a small
        # token that inflates to gigabytes (a "zip bomb") costs no more than a long source.
        text = decompressor.decompress(packed, 4 * max_chars)
        if decompressor.unconsumed_tail or not decompressor.eof:  # too long, or cut short
            return None
        source = text.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError):
        return None
    return source if len(source) <= max_chars else None


# ---------------------------------------------------------------- numbers


def shape_text(shapes: list[list[Any]] | None) -> str:
    if not shapes:
        return "—"
    return ", ".join(" × ".join(str(size) for size in shape) or "scalar" for shape in shapes)


def layer_label(row: dict[str, Any], model: str) -> str:
    name = row["name"] or model
    return f"{name} · {row['type']}" if row["kind"] == "function" else name


# ---------------------------------------------------------------- health line
HEALTH_LAYERS = (
    "allow_list", "facade", "process_isolation", "scrubbed_env", "rlimits", "seccomp", "own_user",
)  # fmt: skip


def health_text(health: dict[str, Any]) -> str:
    """``allow-list ✓ · process isolation ✓ · seccomp ✗ · warm workers 2/2`` from health data."""
    parts = [
        f"{t(f'shapes.health.layers.{key}')} {'✓' if health[key] else '✗'}"
        for key in HEALTH_LAYERS
        if key in health
    ]
    if health.get("warm_workers"):
        parts.append(t("shapes.health.layers.warm_workers", value=health["warm_workers"]))
    return " · ".join(parts)


# ---------------------------------------------------------------- totals
def totals(report: dict[str, Any]) -> None:
    columns = st.columns(5)
    columns[0].metric(t("shapes.totals.params"), format_count(report["total_params"]))
    columns[1].metric(t("shapes.totals.trainable"), format_count(report["trainable_params"]))
    columns[2].metric(t("shapes.totals.param_memory"), format_bytes(report["param_bytes"]))
    columns[3].metric(t("shapes.totals.activations"), format_bytes(report["activation_bytes"]))
    columns[4].metric(t("shapes.totals.flops"), format_count(report["flops"]))
    outputs = report["symbolic_outputs"] if report.get("symbolic") else report["outputs"]
    if outputs:
        st.markdown(t("shapes.totals.output", shape=f"`{shape_text(outputs)}`"))


# ---------------------------------------------------------------- layer table
def max_depth(report: dict[str, Any]) -> int:
    return max((row["depth"] for row in report["layers"]), default=0)


def layer_frame(report: dict[str, Any], depth: int, symbolic: bool) -> pd.DataFrame:
    records = []
    for index, row in enumerate(report["layers"]):
        if row["depth"] > depth and not row["failed"]:
            continue
        label = layer_label(row, report["model"])
        record = {
            "#": index,
            t("shapes.table.layer"): "\u2003" * row["depth"]
            + ("⚠ " if row["failed"] else "")
            + label,
            t("shapes.table.type"): row["type"],
            t("shapes.table.input"): shape_text(row["input_shapes"]),
            t("shapes.table.output"): shape_text(row["output_shapes"]),
        }
        if symbolic:
            record[t("shapes.table.formula")] = shape_text(row.get("symbolic_output_shapes"))
            record[t("shapes.table.constraints")] = "; ".join(row.get("constraints") or [])
        record[t("shapes.table.params")] = row["params"]
        record[t("shapes.table.flops")] = row["flops"]
        record[t("shapes.table.activation")] = format_bytes(row["activation_bytes"])
        record[t("shapes.table.line")] = "" if row["line"] is None else str(row["line"])
        records.append(record)
    return pd.DataFrame.from_records(records).set_index("#") if records else pd.DataFrame()


def layer_table(report: dict[str, Any], depth: int, symbolic: bool) -> None:
    frame = layer_frame(report, depth, symbolic)
    st.dataframe(
        frame,
        width="stretch",
        height=min(38 + 35 * len(frame), 560),
        column_config={
            t("shapes.table.params"): st.column_config.NumberColumn(format="compact"),
            t("shapes.table.flops"): st.column_config.NumberColumn(format="compact"),
            # Text, not a number column: a row with no line (the model itself) shows an empty
            # cell, where a number column would print "None".
            t("shapes.table.line"): st.column_config.TextColumn(width="small"),
        },
    )


def csv_bytes(report: dict[str, Any]) -> bytes:
    """Every row with machine-readable columns (shapes as JSON), for spreadsheets."""
    columns = ["name", "type", "kind", "depth", "input_shapes", "output_shapes",
               "symbolic_output_shapes", "params", "trainable_params", "flops",
               "activation_bytes", "line", "failed", "constraints"]  # fmt: skip
    rows = [
        {key: json.dumps(row.get(key)) if isinstance(row.get(key), list) else row.get(key)
         for key in columns}
        for row in report["layers"]
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns).to_csv(index=False).encode("utf-8")


def json_bytes(report: dict[str, Any]) -> bytes:
    return json.dumps(report, indent=2, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------- chart
def activation_figure(report: dict[str, Any]) -> go.Figure:
    """Activation memory (bars) and output elements (line) for every leaf row, in call order."""
    colours = palette()
    rows = [row for row in report["layers"] if row["leaf"] and row["output_shapes"]]
    labels = [f"{index + 1}. {layer_label(row, report['model'])}" for index, row in enumerate(rows)]
    elements = []
    for row in rows:
        total = 0
        for shape in row["output_shapes"]:
            numel = 1
            for size in shape:
                numel *= int(size)
            total += numel
        elements.append(total)
    figure = go.Figure()
    figure.add_bar(
        x=labels,
        y=[row["activation_bytes"] / 2**20 for row in rows],
        name=t("shapes.chart.memory"),
        marker_color=colours.accent,
        customdata=[shape_text(row["output_shapes"]) for row in rows],
        hovertemplate="%{x}<br>%{y:.3g} MiB<br>%{customdata}<extra></extra>",
    )
    figure.add_scatter(
        x=labels,
        y=elements,
        name=t("shapes.chart.elements"),
        yaxis="y2",
        mode="lines",
        line={"color": colours.copy, "width": 1.5},
        hovertemplate="%{x}<br>%{y:,} elements<extra></extra>",
    )
    figure.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.1},
        xaxis={"showticklabels": len(rows) <= 40, "title": t("shapes.chart.x")},
        yaxis={"title": "MiB", "rangemode": "tozero"},
        yaxis2={"title": t("shapes.chart.elements"), "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
    )  # fmt: skip
    return figure


# ---------------------------------------------------------------- shape flow
def flow_dot(report: dict[str, Any], depth: int) -> str:
    """Graphviz DOT: the model's rows at ``depth`` (or shallower leaves) as a chain of boxes."""
    colours = palette()
    rows = [
        row for row in report["layers"]
        if row["depth"] >= 1 and (row["depth"] == depth or (row["depth"] < depth and row["leaf"]))
    ]  # fmt: skip
    if not rows:
        rows = report["layers"][:1]
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
    inputs = report["symbolic_inputs"] if report.get("symbolic") and report.get(
        "symbolic_inputs"
    ) else report["input_shapes"]  # fmt: skip
    lines.append(
        f'  input [label="{_dot(t("shapes.flow.input"))}\\n{_dot(shape_text(inputs))}", '
        f'shape=ellipse, fillcolor="{colours.background}"];'
    )
    previous = "input"
    for index, row in enumerate(shown):
        node = f"n{index}"
        border = colours.accent if row["failed"] else colours.border
        formula = row.get("symbolic_output_shapes") if report.get("symbolic") else None
        shape = "⚠" if row["failed"] else shape_text(formula or row["output_shapes"])
        title = layer_label(row, report["model"])
        kind = "" if row["kind"] == "function" else f"\\n{_dot(row['type'])}"
        label = _dot(title)
        lines.append(f'  {node} [label="{label}{kind}\\n{_dot(shape)}", color="{border}"];')
        lines.append(f"  {previous} -> {node};")
        previous = node
    if len(rows) > len(shown):
        lines.append(f'  more [label="… {len(rows) - len(shown)}", shape=plaintext];')
        lines.append(f"  {previous} -> more;")
        previous = "more"
    outputs = report["symbolic_outputs"] if report.get("symbolic") else report["outputs"]
    if outputs and len(rows) == len(shown):
        lines.append(
            f'  output [label="{_dot(t("shapes.flow.output"))}\\n{_dot(shape_text(outputs))}", '
            f'shape=ellipse, fillcolor="{colours.background}"];'
        )
        lines.append(f"  {previous} -> output;")
    lines.append("}")
    return "\n".join(lines)


def _dot(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ---------------------------------------------------------------- code listing
# One Light / One Dark colours: readable on both themes' surfaces (checked in the screenshots).
CODE_COLOURS = {
    False: {"keyword": "#a626a4", "string": "#50a14f", "number": "#986801",
            "comment": "#6a7080", "definition": "#2f6fd0", "builtin": "#0e7c9b"},
    True: {"keyword": "#d08ef0", "string": "#98c379", "number": "#e0a870",
           "comment": "#a3a9b7", "definition": "#6cb6ff", "builtin": "#56c2cf"},
}  # fmt: skip
_BUILTINS = frozenset(
    {"self", "super", "range", "len", "print", "isinstance", "enumerate", "zip", "min", "max",
     "sum", "abs", "int", "float", "list", "tuple", "dict", "round", "sorted", "reversed"}
)  # fmt: skip
_KEYWORDS = frozenset(keyword.kwlist)


def highlight_lines(source: str) -> list[list[tuple[str, str | None]]]:
    """Python source as lines of ``(text, kind)`` spans; kinds are CODE_COLOURS keys or None.

    Uses the standard library's tokenizer; from a point it cannot tokenize (an unclosed
    bracket or string: the code the student is fixing) the rest stays plain text.
    """
    lines = source.splitlines() or [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    text = "\n".join(lines)
    spans: list[tuple[int, int, str]] = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            kind = None
            if token.type == tokenize.COMMENT:
                kind = "comment"
            elif token.type == tokenize.STRING:
                kind = "string"
            elif token.type == tokenize.NUMBER:
                kind = "number"
            elif token.type == tokenize.NAME:
                if previous in ("def", "class"):
                    kind = "definition"
                elif token.string in _KEYWORDS:
                    kind = "keyword"
                elif token.string in _BUILTINS:
                    kind = "builtin"
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                  tokenize.DEDENT, tokenize.COMMENT):  # fmt: skip
                previous = token.string
            if kind is not None and token.start[0] <= len(lines):
                begin = starts[token.start[0] - 1] + token.start[1]
                finish = starts[min(token.end[0], len(lines)) - 1] + token.end[1]
                spans.append((begin, min(finish, len(text)), kind))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # keep what was coloured so far
    result: list[list[tuple[str, str | None]]] = [[] for _ in lines]
    position = 0
    for begin, finish, kind in [*spans, (len(text), len(text), "")]:
        for piece_kind, piece_begin, piece_end in ((None, position, begin), (kind, begin, finish)):
            if piece_end <= piece_begin or piece_kind == "":
                continue
            chunk = text[piece_begin:piece_end]
            row = bisect.bisect_right(starts, piece_begin) - 1
            for offset, part in enumerate(chunk.split("\n")):
                if part:
                    result[row + offset].append((part, piece_kind))
        position = max(position, finish)
    return result


def source_listing_html(
    source: str,
    marks: dict[int, str] | None = None,
    *,
    col: int | None = None,
    window: tuple[int, int] | None = None,
    max_height: int | None = None,
    testid: str = "shapes-source-listing",
) -> str:
    """Syntax-highlighted, line-numbered source; each marked line highlighted, its note below.

    ``marks`` maps line numbers to notes; ``col`` puts a caret under the first marked line;
    ``window`` shows only lines ``start..end``.
    """
    colours = palette()
    code_colours = CODE_COLOURS[is_dark()]
    lines = highlight_lines(source)
    marks = {line: note for line, note in (marks or {}).items() if 1 <= line <= len(lines)}
    start, end = window or (1, len(lines))
    start, end = max(1, start), min(len(lines), end)
    width = len(str(end))
    first_mark = min(marks, default=None)
    parts = []
    for number in range(start, end + 1):
        code = "".join(
            html.escape(text)
            if kind is None
            else f'<span style="color:{code_colours[kind]}'
            + (";font-style:italic" if kind == "comment" else "")
            + f'">{html.escape(text)}</span>'
            for text, kind in lines[number - 1]
        )
        marked = number in marks
        style = (
            f"background:{colours.accent}33;border-left:3px solid {colours.accent};"
            if marked
            else "border-left:3px solid transparent;"
        )
        parts.append(
            f'<div data-line="{number}" style="{style}padding-left:6px;white-space:pre">'
            f'<span style="color:{colours.muted};user-select:none">{number:>{width}}  </span>'
            f"{code or ' '}</div>"
        )
        if marked and marks[number]:
            caret = col if number == first_mark else None
            pointer = " " * (width + 2 + max(0, (caret or 1) - 1)) + "^ " if caret else ""
            parts.append(
                f'<div style="color:{colours.accent};padding-left:9px;white-space:pre-wrap;'
                f'font-weight:600">{html.escape(pointer)}{html.escape(marks[number])}</div>'
            )
    height = f"max-height:{max_height}px;overflow-y:auto;" if max_height else ""
    return (
        f'<div data-testid="{testid}" style="font-family:ui-monospace,SFMono-Regular,Menlo,'
        f"Consolas,monospace;font-size:0.85rem;line-height:1.45;background:{colours.surface};"
        f"color:{colours.text};border:1px solid {colours.border};border-radius:6px;"
        f'padding:8px 0;overflow-x:auto;{height}">' + "".join(parts) + "</div>"
    )


def error_marks(error: dict[str, Any] | None) -> dict[int, str]:
    """Line → note for an error: every refused line with its reason, else the error's line."""
    if not error:
        return {}
    refusals = [r for r in error.get("refusals") or [] if r.get("line")]
    if refusals:
        marks: dict[int, str] = {}
        for refusal in refusals:
            marks.setdefault(refusal["line"], refusal["message"].replace("`", ""))
        return marks
    if not error.get("line"):
        return {}
    params = {key: str(value) for key, value in (error.get("params") or {}).items()}
    kind = error["kind"]
    hint = _translated(f"shapes.errors.{kind}.hint", error.get("hint") or "", params)
    message = _translated(f"shapes.errors.{kind}.message", error["message"], params)
    return {error["line"]: (hint or message).replace("`", "")}


def source_view(source: str, error: dict[str, Any] | None, max_height: int) -> None:
    """The whole source, highlighted and numbered, with the error's lines marked inline."""
    st.markdown(
        source_listing_html(
            source, error_marks(error), col=(error or {}).get("col"), max_height=max_height
        ),
        unsafe_allow_html=True,
    )


def source_with_marker(
    source: str, marks: dict[int, str], line: int | None, col: int | None
) -> None:
    """A window of the source around ``line``, highlighted, with each mark's note inline."""
    count = len(source.splitlines()) or 1
    if line is not None and 1 <= line <= count:
        window = (max(1, line - 6), min(count, line + 4))
    else:
        window = (1, min(count, 12))
    st.markdown(
        source_listing_html(source, marks, col=col, window=window, testid="shapes-source-marker"),
        unsafe_allow_html=True,
    )


def error_panel(error: dict[str, Any], source: str) -> None:
    kind = error["kind"]
    params = {key: str(value) for key, value in (error.get("params") or {}).items()}
    known = f"shapes.errors.{kind}.title"
    title = t(known) if t(known) != known else t("shapes.errors.unknown.title")
    message = _translated(f"shapes.errors.{kind}.message", error["message"], params)
    hint = _translated(f"shapes.errors.{kind}.hint", error.get("hint") or "", params)
    body = f"**{title}**\n\n{message}"
    if error.get("layer"):
        body += "\n\n" + t("shapes.errors.where", layer=error["layer"],
                           shapes=shape_text(error.get("input_shapes")))  # fmt: skip
    st.error(body, icon=":material/error:")
    if hint:
        st.info(hint, icon=":material/lightbulb:")
    for refusal in error.get("refusals") or []:
        st.markdown(t("shapes.errors.refusal", line=refusal["line"], message=refusal["message"]))
    marks = error_marks(error)
    if marks:
        line = error.get("line") or min(marks)
        source_with_marker(source, marks, line, error.get("col") if line == min(marks) else None)


def _translated(key: str, english: str, params: dict[str, str]) -> str:
    """The Korean text where a template exists and its placeholders are all known."""
    text = t(key, **params)
    if text == key or "{" in text:
        return english
    return text


# ---------------------------------------------------------------- symbolic
def constraints_list(report: dict[str, Any]) -> None:
    if report.get("symbolic_note"):
        st.warning(t("shapes.symbolic.note", note=report["symbolic_note"]))
    if report.get("dim_names"):
        names = "; ".join(" × ".join(dims) for dims in report["dim_names"])
        st.caption(t("shapes.symbolic.dims", dims=names))
    if not report.get("constraints"):
        st.caption(t("shapes.symbolic.no_constraints"))
        return
    st.markdown(t("shapes.symbolic.constraints"))
    for item in report["constraints"]:
        st.markdown(
            "- " + t("shapes.symbolic.requires", layer=f"`{item['layer']}`",
                     constraint=f"`{item['constraint']}`")
        )  # fmt: skip


# ---------------------------------------------------------------- why meta?
def why_meta_figure(points: list[dict[str, Any]]) -> go.Figure:
    colours = palette()
    figure = go.Figure()
    real = [point for point in points if point["real_s"] is not None]
    figure.add_scatter(
        x=[point["batch"] for point in real],
        y=[point["real_s"] * 1000 for point in real],
        name=t("shapes.why.real"),
        mode="lines+markers",
        line={"color": colours.accent},
    )
    figure.add_scatter(
        x=[point["batch"] for point in points],
        y=[point["meta_s"] * 1000 for point in points],
        name=t("shapes.why.meta"),
        mode="lines+markers",
        line={"color": colours.copy},
    )
    figure.update_layout(
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.12},
        xaxis={"type": "log", "title": t("shapes.why.batch")},
        yaxis={"type": "log", "title": "ms"},
    )
    return figure


def why_meta_table(points: list[dict[str, Any]]) -> None:
    records = [
        {
            t("shapes.why.batch"): point["batch"],
            t("shapes.why.input"): shape_text(point["input_shapes"]),
            t("shapes.why.input_bytes"): format_bytes(point["input_bytes"]),
            t("shapes.why.real"): f"{point['real_s'] * 1000:.1f} ms"
            if point["real_s"] is not None
            else t("shapes.why.skipped"),
            t("shapes.why.meta"): f"{point['meta_s'] * 1000:.1f} ms",
        }
        for point in points
    ]
    st.dataframe(pd.DataFrame.from_records(records), width="stretch", hide_index=True)
