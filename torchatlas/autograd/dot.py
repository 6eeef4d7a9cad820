"""Graphviz DOT text for a graph, and for a backward replay up to a step.

Forward variables are boxes (a double border marks a leaf; the colour says whether it
requires grad); backward nodes are ellipses; a dashed edge joins a variable to its
``grad_fn``. Backward edges run from a node to its ``next_functions``; once the replay has run
a node, the gradients it sent are written on its edges and a leaf's box shows its ``.grad``.
The text is built by hand (no Graphviz package): the browser renders it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchatlas.autograd.backward import BackwardTrace
    from torchatlas.autograd.graph import Graph

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


def to_dot(
    graph: Graph,
    trace: BackwardTrace | None = None,
    step: int | None = None,
    colors: Mapping[str, str] | None = None,
    words: Mapping[str, str] | None = None,
) -> str:
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
    # one box per tensor: names bound to the same tensor (``a = w``) share its box
    box = {v.name: v.primary for v in graph.variables}
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
    names = {v.name for v in graph.variables}
    for node in graph.nodes:
        is_done = node.index in ran
        color, fill = (c["done"], c["done_fill"]) if is_done else (c["node"], c["node_fill"])
        label = node.name
        saved = [s.name for s in node.saved if s.shape is not None]
        if saved:
            label += f"\n{w['saved']}: " + ", ".join(saved[:3])
        lines.append(
            f"  n{node.index} [label={_quote(label)}, shape=ellipse, style=filled, "
            f'color="{color}", fillcolor="{fill}"];'
        )
        for name in dict.fromkeys(box.get(name, name) for name in node.outputs_of):
            lines.append(f"  v_{name} -> n{node.index} [style=dashed, arrowhead=none];")
        if node.leaf in names:
            lines.append(
                f'  n{node.index} -> v_{node.leaf} [color="{c["requires_grad"]}", style=dotted];'
            )
        step_done = ran.get(node.index)
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
    lines.append("}")
    return "\n".join(lines)
