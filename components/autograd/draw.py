"""Pure builders for the autograd room: the graph's DOT text in the theme's colours, tables,
step text, the freezing chart. No Streamlit here, so tests call every builder directly; the
engine returns data only, and ``components/autograd/state.py`` asks these builders for what
the page shows (and caches it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from components.format import format_bytes, format_count
from components.kit.a11y import scroll_region
from components.palette import Palette
from torchatlas.autograd import BackwardTrace, Graph, ProgramError, TensorInfo, Values
from torchatlas.autograd.backward import BackwardStep
from torchatlas.autograd.errors import ErrorCode
from torchatlas.autograd.freeze import FreezeReport
from torchatlas.autograd.graph import GraphNode
from torchatlas.autograd.history import Outcome
from torchatlas.i18n import translate
from torchatlas.quiz import Grade


def dot_colors(palette: Palette, dark: bool) -> dict[str, str]:
    """The DOT colours for the page's theme: the graph sits on the page's own background."""
    if dark:
        return {
            "text": palette.text,
            "requires_grad": "#ff7a52",
            "requires_grad_fill": "#4a2419",
            "plain": "#8a8f98",
            "plain_fill": "#262b36",
            "node": "#5aa3f0",
            "node_fill": "#1b2b40",
            "done": "#3cc7a6",
            "done_fill": "#163a33",
            "edge": "#a3a9b7",
        }
    return {"text": palette.text}


DEFAULT_COLORS: dict[str, str] = {
    "background": "transparent",
    "text": "#262730",
    "requires_grad": "#ee4c2c",  # PyTorch's orange-red
    "requires_grad_fill": "#fde4de",
    "plain": "#8a8f98",
    "plain_fill": "#f0f2f6",
    "node": "#2f7fd8",
    "node_fill": "#e3eefb",
    "done": "#2ca58d",
    "done_fill": "#dcf3ee",
    "edge": "#8a8f98",
}


def _quote(text: str) -> str:
    """A DOT string literal: quotes and backslashes escaped, newlines as line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


DEFAULT_WORDS: dict[str, str] = {"leaf": "leaf", "saved": "saved"}


def dot_text(
    graph: Graph,
    trace: BackwardTrace | None = None,
    step: int | None = None,
    colors: Mapping[str, str] | None = None,
    words: Mapping[str, str] | None = None,
) -> str:
    """Graphviz DOT text of ``graph`` (for ``st.graphviz_chart`` or any Graphviz).

    Forward variables are boxes (a double border marks a leaf; the colour says whether it
    requires grad); backward nodes are ellipses; a dashed edge joins a variable to its
    ``grad_fn``. Backward edges run from a node to its ``next_functions``; with a backward
    ``trace``, the gradients the nodes reached by ``step`` (default: all) sent are written on
    their edges and a leaf's box shows its ``.grad``. ``colors`` and ``words`` (``leaf``,
    ``saved``) replace the defaults: the page passes its theme's colours and its reader's
    language. Built by hand (no Graphviz package): the browser renders it."""
    c = {**DEFAULT_COLORS, **(colors or {})}
    w = {**DEFAULT_WORDS, **(words or {})}
    done = trace.reached(step) if trace is not None else ()
    ran = {s.node: s for s in done}
    filled = {s.leaf for s in done if s.leaf is not None}
    lines = [
        "digraph autograd {",
        f'  graph [rankdir=BT, bgcolor="{c["background"]}", fontcolor="{c["text"]}", '
        "nodesep=0.25, ranksep=0.35];",
        f'  node [fontname="Helvetica", fontsize=11, fontcolor="{c["text"]}"];',
        f'  edge [fontname="Helvetica", fontsize=9, color="{c["edge"]}", fontcolor="{c["text"]}"];',
    ]
    lines += _variable_lines(graph, trace, step, filled, c, w)
    box = {v.name: v.primary for v in graph.variables}
    names = {v.name for v in graph.variables}
    for node in graph.nodes:
        lines += _node_lines(node, ran.get(node.index), box, names, c, w)
    lines.append("}")
    return "\n".join(lines)


def _variable_lines(
    graph: Graph,
    trace: BackwardTrace | None,
    step: int | None,
    filled: set[str],
    c: Mapping[str, str],
    w: Mapping[str, str],
) -> list[str]:
    """One box per tensor: names bound to the same tensor (``a = w``) share its box, which
    shows its ``.grad`` once the step that filled it ran."""
    lines = []
    for v in graph.variables:
        if v.primary != v.name:
            continue
        label = f"{' = '.join(v.aliases or (v.name,))}\n{_shape(v.shape)}"
        if v.is_leaf:
            label += f" {w['leaf']}"
        grad = trace.grad(v.name) if trace is not None else None
        if (
            grad is not None
            and grad.grad is not None
            and (v.name in filled or (step is None and grad.filled_at is not None))
        ):
            label += f"\n.grad {grad.grad.short()}"
        color, fill = (
            (c["requires_grad"], c["requires_grad_fill"]) if v.requires_grad
            else (c["plain"], c["plain_fill"])
        )  # fmt: skip
        periph = 2 if v.is_leaf else 1
        lines.append(
            f'  v_{v.name} [label={_quote(label)}, shape=box, style="rounded,filled", '
            f'color="{color}", fillcolor="{fill}", peripheries={periph}];'
        )
    return lines


def _node_lines(
    node: GraphNode,
    step_done: BackwardStep | None,
    box: dict[str, str],
    names: set[str],
    c: Mapping[str, str],
    w: Mapping[str, str],
) -> list[str]:
    """A backward node's ellipse, its dashed link to the boxes it produced, and its edges
    (with the gradient it sent along each once it ran: ``step_done``)."""
    ran = step_done is not None
    color, fill = (c["done"], c["done_fill"]) if ran else (c["node"], c["node_fill"])
    label = node.name
    saved = [s.name for s in node.saved if s.shape is not None]
    if saved:
        label += f"\n{w['saved']}: " + ", ".join(saved[:3])
    lines = [
        f"  n{node.index} [label={_quote(label)}, shape=ellipse, style=filled, "
        f'color="{color}", fillcolor="{fill}"];'
    ]
    for name in dict.fromkeys(box.get(name, name) for name in node.outputs_of):
        lines.append(f"  v_{name} -> n{node.index} [style=dashed, arrowhead=none];")
    if node.leaf in names:
        lines.append(
            f'  n{node.index} -> v_{node.leaf} [color="{c["requires_grad"]}", style=dotted];'
        )
    for position, edge in enumerate(node.edges):
        if edge.target is None:
            continue
        attrs = []
        if step_done is not None and position < len(step_done.grad_out):
            value = step_done.grad_out[position]
            if value is not None:
                attrs.append(f"label={_quote(value.short())}")
                attrs.append(f'color="{c["done"]}", penwidth=2')
        extra = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  n{node.index} -> n{edge.target}{extra};")
    return lines


def values_text(values: Values | None, lang: str) -> str:
    return translate("autograd.graph.nothing", lang) if values is None else values.short(4)


def _many(values: tuple[Values | None, ...], lang: str) -> str:
    shown = [v.short(3) for v in values if v is not None]
    return ", ".join(shown) if shown else translate("autograd.graph.nothing", lang)


def step_text(result: BackwardTrace, step: int, lang: str) -> str:
    """What the step just shown did, in words."""
    total = len(result.steps)
    if step <= 0:
        return translate("autograd.graph.before", lang)
    done = result.steps[step - 1]
    if done.leaf is not None:
        grad = result.grad(done.leaf)
        value = grad.grad if grad is not None else None
        if grad is not None and grad.before is not None:
            return translate(
                "autograd.graph.accumulated",
                lang,
                step=step,
                total=total,
                leaf=done.leaf,
                added=_many(done.grad_in, lang),
                before=values_text(grad.before, lang),
                grad=values_text(value, lang),
            )
        return translate(
            "autograd.graph.filled",
            lang,
            step=step,
            total=total,
            leaf=done.leaf,
            grad=values_text(value, lang),
        )
    return translate(
        "autograd.graph.at_step",
        lang,
        step=step,
        total=total,
        node=done.name,
        grad_in=_many(done.grad_in, lang),
        grad_out=_many(done.grad_out, lang),
    )


def grads_rows(result: BackwardTrace, step: int, lang: str) -> list[tuple[str, str, str]]:
    """Each variable's ``.grad`` as it stands after ``step`` steps, and why."""
    rows = []
    for grad in result.grads:
        reason = translate(f"autograd.grads.reasons.{grad.reason}", lang)
        if grad.filled_at is not None and grad.filled_at >= step:
            value = values_text(grad.before, lang) if grad.before is not None else "—"
            reason = translate("autograd.grads.pending", lang, step=grad.filled_at + 1)
        else:
            value = "None" if grad.grad is None else grad.grad.short(4)
        rows.append((grad.name, value, reason))
    return rows


def grads_table(result: BackwardTrace, step: int, lang: str) -> str:
    header = [translate(f"autograd.grads.col_{c}", lang) for c in ("variable", "grad", "why")]
    rows = [
        (f"`{name}`", f"`{value}`", reason)
        for name, value, reason in grads_rows(result, step, lang)
    ]
    return markdown_table(header, rows)


def shape_text(shape: tuple[int, ...]) -> str:
    """``5×5``: short, and it does not wrap in a narrow column (``()`` for a scalar)."""
    return "×".join(map(str, shape)) if shape else "()"


def variables_table(graph: Graph, lang: str) -> str:
    """Every variable, each field as torch reports it (torch's own True/False and names)."""
    header = [
        translate(f"autograd.variables.col_{c}", lang)
        for c in (
            "name", "line", "shape", "dtype", "requires_grad", "is_leaf", "grad_fn", "version",
            "values",
        )
    ]  # fmt: skip
    rows = [
        (
            _name_cell(v, lang),
            v.line,
            shape_text(v.shape),
            v.dtype,
            v.requires_grad,
            v.is_leaf,
            v.grad_fn or "None",
            "—" if v.version is None else v.version,
            v.values.short(4),
        )
        for v in graph.variables
    ]
    return markdown_table(header, rows)


def _name_cell(variable: TensorInfo, lang: str) -> str:
    """A variable's name, and the other names of the same tensor (``a = w``)."""
    others = [name for name in variable.aliases if name != variable.name]
    if not others:
        return f"`{variable.name}`"
    return translate(
        "autograd.variables.same_tensor",
        lang,
        name=variable.name,
        others=", ".join(f"`{name}`" for name in others),
    )


def saved_lines(graph: Graph, lang: str) -> list[str]:
    """One markdown line per node that saved something for backward."""
    lines = []
    for node in graph.nodes:
        parts = []
        for saved in node.saved:
            if saved.state == "stale":
                parts.append(f"`{saved.name}`: {translate('autograd.variables.saved_stale', lang)}")
            elif saved.state == "freed":
                parts.append(f"`{saved.name}`: {translate('autograd.variables.saved_freed', lang)}")
            elif saved.shape is not None:
                parts.append(f"`{saved.name}` {tuple(saved.shape)} {saved.text}")
            else:
                parts.append(f"`{saved.name}` = {saved.text}")
        if parts:
            lines.append(f"- **{node.name}**: " + "; ".join(parts))
    return lines


def version_note(graph: Graph, error: ProgramError, lang: str) -> str | None:
    """For the in-place trap: the variable whose ``_version`` moved past what was saved."""
    if error.code is not ErrorCode.INPLACE_SAVED:
        return None
    version = error.params.get("version")
    match = [v for v in graph.variables if v.version == version and version]
    if not match:
        return None
    return translate(
        "autograd.variables.version_note",
        lang,
        name=match[0].name,
        version=version,
        expected=error.params.get("expected"),
    )


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A markdown table: one element, however many rows (cheaper to send than a table
    widget on every rerun)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def scrolling(table: str, label: str) -> str:
    """A markdown table inside a block that scrolls sideways: on a phone a wide table
    would otherwise be cut off (show it with ``unsafe_allow_html``; only our own markup).
    ``label`` names the block for screen readers: a keyboard stop, so it can be scrolled.
    The blank lines let markdown see the table inside the HTML block."""
    return scroll_region(f"\n\n{table}\n\n", label, "overflow-x:auto")


def freeze_bar_html(report: FreezeReport, palette: Palette, lang: str) -> str:
    """One bar, a segment per block sized by its parameter count: trainable blocks in the
    accent colour, frozen ones muted; a legend with the counts below. Plain HTML: it is
    redrawn on every rerun, and a chart library would cost more than the rest of the panel."""
    total = sum(b.numel for b in report.blocks) or 1
    segments = []
    for block in report.blocks:
        colour = palette.accent if block.trainable else palette.border
        width = max(100 * block.numel / total, 0.6)
        segments.append(
            f'<div title="{block.name}: {block.numel:,}" style="flex:0 0 {width:.2f}%;'
            f'background:{colour};height:22px;border-right:1px solid {palette.background}"></div>'
        )
    trainable = translate("autograd.freeze.chart_trainable", lang)
    frozen = translate("autograd.freeze.chart_frozen", lang)
    legend = " · ".join(
        f"<b>{b.name}</b> {format_count(b.numel)} ({trainable if b.trainable else frozen})"
        for b in report.blocks
    )
    swatch = "display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 10px"
    return (
        f'<div style="font-size:0.85rem;color:{palette.text}">'
        f"<b>{translate('autograd.freeze.chart_title', lang)}</b>"
        f'<span style="{swatch};background:{palette.accent}"></span>{trainable}'
        f'<span style="{swatch};background:{palette.border}"></span>{frozen}'
        f'<div style="display:flex;width:100%;margin:6px 0;border-radius:4px;overflow:hidden">'
        f"{''.join(segments)}</div>"
        f'<div style="color:{palette.muted}">{legend}</div></div>'
    )


def optimizer_table(report: FreezeReport, lang: str) -> str:
    rows = [
        (
            (f"`{o.source}`", o.groups, o.tensors, format_count(o.numel), o.frozen_tensors)
            if o.refused is None
            else (
                f"`{o.source}`",
                translate("autograd.freeze.refused", lang, message=o.refused),
                "—",
                "—",
                "—",
            )
        )
        for o in report.optimizers
    ]
    header = [
        translate(f"autograd.freeze.col_{c}", lang)
        for c in ("source", "groups", "tensors", "numel", "frozen")
    ]
    return markdown_table(header, rows)


def freeze_code(report: FreezeReport) -> str:
    """The recipe for the toggles as they stand, as code to copy."""
    trained = [b for b in report.trainable]
    lines = [
        "import torch",
        "import torchvision",
        "",
        "model = torchvision.models.resnet18(weights=None)  # or weights='DEFAULT'",
        f"model.fc = torch.nn.Linear({report.new_fc[0]}, {report.new_fc[1]})",
        "for param in model.parameters():",
        "    param.requires_grad = False",
    ]
    for block in trained:
        modules = ("model.conv1", "model.bn1") if block == "stem" else (f"model.{block}",)
        for module in modules:
            lines += [f"for param in {module}.parameters():", "    param.requires_grad = True"]
    chosen = report.optimizers[1]
    lines.append("")
    if chosen.refused is not None:  # torch's own words, from building it
        lines.append(f"# torch raises ValueError here: {chosen.refused}")
    lines.append(f"optimizer = torch.optim.SGD({chosen.source}, lr=0.01)")
    return "\n".join(lines) + "\n"


def saved_text(report: FreezeReport) -> tuple[str, str]:
    return format_bytes(report.saved_bytes), format_bytes(report.saved_bytes_unfrozen)


def outcome_text(outcome: Outcome, lang: str) -> str:
    text = translate(
        "autograd.history.result",
        lang,
        type_name=outcome.type_name,
        requires_grad=outcome.requires_grad,
        is_leaf=outcome.is_leaf,
        is_inference=outcome.is_inference,
    )
    for warning in outcome.warnings:
        text += "  \n" + translate("autograd.history.warned", lang, warning=f"“{warning}”")
    return text


def quiz_markdown(rows: Sequence[tuple[str, str, Grade]], lang: str) -> str:
    """The predictions revealed so far: the variable, the flag asked about, the prediction
    and torch's answer, marked right or wrong."""
    header = [translate(f"autograd.quiz.col_{c}", lang)
              for c in ("variable", "question", "predicted", "torch")]  # fmt: skip
    lines = []
    for variable, question, grade in rows:
        mark = ":green[✓]" if grade.correct else ":red[✗]"
        asked = translate(f"autograd.quiz.prompts.{question}", lang, name=variable)
        given, right = (
            translate("autograd.quiz.error", lang) if word == "error" else word
            for word in (grade.given, grade.expected)
        )
        lines.append((f"`{variable}`", asked, f"{mark} {given}", f"`{right}`"))
    return markdown_table(header, lines)
