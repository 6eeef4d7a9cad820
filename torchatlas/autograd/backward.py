"""Backward, node by node: run the real ``root.backward()`` with a hook on every node of the
graph and record, in the order autograd calls them, the gradient flowing into each node and
out along each of its edges; then every variable's ``.grad`` and why it is (or stays) None.

A :class:`~torchatlas.autograd.graph.Graph` holds no tensors, so the program runs again from
its text and seed (the same tensors, the same graph, the same node order); the replay is what
a page steps through.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch

from torchatlas.autograd.diagnose import backward_lesson
from torchatlas.autograd.errors import ErrorCode, ProgramError, TorchRefused, explain
from torchatlas.autograd.graph import (
    Graph,
    GraphNode,
    Values,
    labels,
    node_index,
    node_order,
    read,
)
from torchatlas.autograd.parser import Program
from torchatlas.autograd.programs import parse
from torchatlas.autograd.run import Run, execute


class GradReason(StrEnum):
    """Why a variable's ``.grad`` is what it is after backward."""

    FILLED = "filled"  # a leaf that requires grad, reached: AccumulateGrad wrote .grad
    RETAINED = "retained"  # not a leaf, but retain_grad() asked autograd to keep it
    KEPT = "kept"  # not reached now; .grad still holds an earlier backward's gradient
    NOT_LEAF = "not_leaf"  # an intermediate result: autograd does not keep its gradient
    NO_REQUIRES_GRAD = "no_requires_grad"  # a leaf that does not require grad, .grad None
    # a leaf whose requires_grad was turned off after an earlier backward: it keeps the
    # gradient that backward wrote (backward no longer touches it)
    FROZEN_KEPT = "frozen_kept"
    NOT_REACHED = "not_reached"  # requires grad, but the root does not depend on it


@dataclass(frozen=True)
class BackwardStep:
    """One node as autograd ran it: the gradient that came in, the gradients it sent along
    each edge (``None`` where an input needs none)."""

    index: int
    node: int  # index in Graph.nodes
    name: str
    grad_in: tuple[Values | None, ...]
    grad_out: tuple[Values | None, ...]
    leaf: str | None  # for AccumulateGrad: the variable whose .grad this step filled


@dataclass(frozen=True)
class LeafGrad:
    """A variable's ``.grad`` after backward, and the step that filled it."""

    name: str
    reason: GradReason
    grad: Values | None
    before: Values | None  # its .grad before this backward (accumulation)
    filled_at: int | None


@dataclass(frozen=True)
class BackwardTrace:
    """The replay of ``root.backward()``: the steps in autograd's order and the grads."""

    root: str
    graph: Graph  # the graph as recorded before this backward ran
    steps: tuple[BackwardStep, ...]
    total_steps: int
    grads: tuple[LeafGrad, ...]
    error: ProgramError | None

    def grad(self, name: str) -> LeafGrad | None:
        return next((g for g in self.grads if g.name == name), None)

    def reached(self, step: int | None) -> tuple[BackwardStep, ...]:
        """The steps done once ``step`` steps have run (all of them for None)."""
        return self.steps if step is None else self.steps[: max(0, step)]


def grad_reason(
    tensor: torch.Tensor, has_grad: bool, accumulated: bool, reached: bool
) -> GradReason:
    """Why ``tensor.grad`` is what it is after a backward, from what torch reports: whether
    it holds a gradient at all first (a "None: …" reason only for a ``.grad`` that is
    None), then the flags and whether this backward wrote it (``accumulated``: its
    AccumulateGrad ran; ``reached``: for a non-leaf, its grad_fn ran)."""
    if not has_grad:
        if tensor.is_leaf and not tensor.requires_grad:
            return GradReason.NO_REQUIRES_GRAD
        if not tensor.is_leaf and not tensor.retains_grad:
            return GradReason.NOT_LEAF
        return GradReason.NOT_REACHED
    if tensor.is_leaf and accumulated:
        return GradReason.FILLED
    if not tensor.is_leaf and reached:
        return GradReason.RETAINED
    if tensor.is_leaf and not tensor.requires_grad:
        return GradReason.FROZEN_KEPT
    return GradReason.KEPT


def backward(
    graph: Graph,
    root: str,
    *,
    steps: int | None = None,
    retain_graph: bool = False,
) -> BackwardTrace:
    """Run ``root.backward()`` on the program of ``graph`` and record it. ``steps`` keeps only
    the first steps (a notebook's preview); the grads are always the final ones, each with
    the step that filled it."""
    run = execute(parse(graph.program), graph.seed)
    before_graph = read(run)
    if run.error is not None:
        return BackwardTrace(root, before_graph, (), 0, (), run.error)
    return record(run, before_graph, root, steps=steps, retain_graph=retain_graph)


def record(
    run: Run,
    graph: Graph,
    root: str,
    *,
    steps: int | None = None,
    retain_graph: bool = False,
    nodes: list[Any] | None = None,
) -> BackwardTrace:
    """Backward from ``root`` of a live run whose graph was just read (``graph``; ``nodes``
    its :func:`~torchatlas.autograd.graph.node_order` when already walked)."""
    line = run.lines.get(root, 0)
    tensor = run.tensor(root)
    if tensor is None:
        error = ProgramError(ErrorCode.NO_ROOT, line, {"name": root})
        return BackwardTrace(root, graph, (), 0, (), error)
    nodes = node_order(run) if nodes is None else nodes
    names = labels(run)
    nodes, graph = _with_leaf_accumulator(tensor, nodes, graph, names)
    index = node_index(nodes)
    variables = [(name, run.names[name]) for name in run.names if run.tensor(name) is not None]
    before = {
        name: None if t.grad is None else Values.of(t.grad)
        for name, t in variables
        if t.is_leaf or t.retains_grad
    }
    raw: list[tuple[int, str, str | None, tuple[Any, ...], tuple[Any, ...]]] = []
    # Which tensors this backward wrote a .grad into, by identity, as torch reports it (a
    # hook that runs after accumulation): every name of such a tensor was filled.
    accumulated: set[int] = set()
    handles = [fn.register_hook(_node_hook(fn, index[id(fn)], names, raw)) for fn in nodes]
    handles += [
        t.register_post_accumulate_grad_hook(lambda t: accumulated.add(id(t)))
        for t in {id(t): t for _, t in variables if t.is_leaf and t.requires_grad}.values()
    ]
    error = _run_backward(run, tensor, line, retain_graph, handles)
    done = _steps_of_hooks(raw)
    raw.clear()  # the tensors are converted: let them go
    grads = _grads_after(variables, before, accumulated, done, nodes, index)
    kept = tuple(done if steps is None else done[: max(0, steps)])
    return BackwardTrace(root, graph, kept, len(done), grads, error)


def _with_leaf_accumulator(
    tensor: torch.Tensor, nodes: list[Any], graph: Graph, names: dict[int, str]
) -> tuple[list[Any], Graph]:
    """The nodes and graph of a backward from ``tensor``. Backward from a leaf runs the
    leaf's own AccumulateGrad, a node no grad_fn leads to when nothing was computed from the
    leaf: it joins the graph for this replay."""
    if tensor.grad_fn is not None or not tensor.requires_grad:
        return nodes, graph
    accumulator = torch.autograd.graph.get_gradient_edge(tensor).node
    if any(fn is accumulator for fn in nodes):
        return nodes, graph
    added = GraphNode(len(graph.nodes), "AccumulateGrad", (), (), names[id(tensor)], ())
    return [*nodes, accumulator], dataclasses.replace(graph, nodes=(*graph.nodes, added))


def _node_hook(fn: Any, position: int, names: dict[int, str], raw: list[Any]) -> Any:
    """A hook on node ``fn`` that keeps the gradients flowing through it in ``raw``.

    The hooks keep the gradient tensors themselves; they become Values after backward.
    Holding a reference is safe: autograd only accumulates in place into a gradient nobody
    else holds, so a kept tensor never changes."""
    name = type(fn).__name__
    leaf = names.get(id(fn.variable), "?") if name == "AccumulateGrad" else None

    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        # a node hook's grad_outputs come in, its grad_inputs go out along next_functions
        raw.append((position, name, leaf, tuple(grad_outputs), tuple(grad_inputs)))

    return hook


def _run_backward(
    run: Run, tensor: torch.Tensor, line: int, retain_graph: bool, handles: list[Any]
) -> ProgramError | None:
    """Run ``tensor.backward()``, then remove the hooks; a refusal as the program's error."""
    # the lesson of a refusal, read before backward runs (a failing backward frees what it
    # already used): from the root's flags and the saved tensors' state, never torch's words
    lesson = backward_lesson(tensor, {}, run.saved_versions)
    try:
        tensor.backward(retain_graph=retain_graph)
    except Exception as exc:
        return explain(exc if lesson is None else TorchRefused(lesson[0], exc, lesson[1]), line)
    finally:
        for handle in handles:
            handle.remove()
    return None


def _steps_of_hooks(raw: list[Any]) -> list[BackwardStep]:
    """The hooks' records as steps. A gradient passed from one node to the next is one
    tensor: converted once (by id, while every kept tensor is alive)."""
    converted: dict[int, Values] = {}

    def values(grads: tuple[Any, ...]) -> tuple[Values | None, ...]:
        out = []
        for grad in grads:
            if grad is None:
                out.append(None)
                continue
            known = converted.get(id(grad))
            if known is None:
                known = converted[id(grad)] = Values.of(grad)
            out.append(known)
        return tuple(out)

    return [
        BackwardStep(i, position, name, values(grad_in), values(grad_out), leaf)
        for i, (position, name, leaf, grad_in, grad_out) in enumerate(raw)
    ]


def _grads_after(
    variables: list[tuple[str, torch.Tensor]],
    before: dict[str, Values | None],
    accumulated: set[int],
    done: list[BackwardStep],
    nodes: list[Any],
    index: dict[int, int],
) -> tuple[LeafGrad, ...]:
    """Every variable's ``.grad`` after backward, why, and the step that filled it."""
    # the step that filled each leaf, by the tensor's identity (its AccumulateGrad node)
    steps_of = {id(nodes[step.node]): step.index for step in done if step.leaf is not None}
    reached = {step.node for step in done}
    grads = []
    for name, t in variables:
        grad = t.grad if (t.is_leaf or t.retains_grad) else None
        value = None if grad is None else Values.of(grad)
        node = index.get(id(t.grad_fn)) if t.grad_fn is not None else None
        filled_at = None
        if t.is_leaf and t.requires_grad and id(t) in accumulated:
            accumulator = torch.autograd.graph.get_gradient_edge(t).node
            filled_at = steps_of.get(id(accumulator))
        reason = grad_reason(t, value is not None, id(t) in accumulated, node in reached)
        grads.append(LeafGrad(name, reason, value, before.get(name), filled_at))
    return tuple(grads)


def trace_and_backward(
    program: str | Program, root: str | None = None, *, seed: int = 0
) -> tuple[Graph, BackwardTrace | None]:
    """One run for both: the graph, then backward from ``root`` (default: the graph's own
    default root), without running the program twice. ``program`` is its text, or the text
    already checked (:func:`~torchatlas.autograd.programs.parse`)."""
    run = execute(parse(program) if isinstance(program, str) else program, seed)
    nodes = node_order(run)
    graph = read(run, nodes)
    chosen = root or graph.default_root
    if run.error is not None or chosen is None:
        return graph, None
    result = record(run, graph, chosen, nodes=nodes)
    return result.graph, result  # a leaf root adds its AccumulateGrad to the graph
