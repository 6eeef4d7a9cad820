"""What a program's run recorded, as frozen dataclasses: each variable as torch reports it,
and the backward graph read from ``grad_fn.next_functions``.

:func:`read` walks the live tensors of a :class:`~torchatlas.autograd.run.Run` once; nothing
here keeps a tensor, so a :class:`Graph` pickles, caches and compares like plain data.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import torch

from torchatlas.autograd.errors import ProgramError
from torchatlas.autograd.text import bounded_text

if TYPE_CHECKING:
    from torchatlas.autograd.run import Run

MAX_SHOWN = 64  # a tensor's values travel with the graph up to this many elements
MAX_TEXT = 80


class SavedState(StrEnum):
    OK = "ok"
    STALE = "stale"  # modified in place after it was saved: backward would refuse it
    FREED = "freed"  # a backward without retain_graph already released it


class ValueKind(StrEnum):
    NUMBER = "number"
    ARRAY = "array"
    NONE = "none"
    OTHER = "other"


@dataclass(frozen=True)
class Values:
    """A tensor's values, flattened (only up to MAX_SHOWN elements), and its norm."""

    shape: tuple[int, ...]
    flat: tuple[float, ...] | None
    norm: float

    @classmethod
    def of(cls, tensor: torch.Tensor) -> Values:
        # Called for every gradient of a backward replay: the common small cases avoid
        # extra tensor ops (a reshape, a norm kernel), which cost more than the values.
        shape = tuple(tensor.shape)
        if not tensor.is_floating_point():
            tensor = tensor.double()  # integers and booleans: the norm needs floats
        if tensor.numel() <= MAX_SHOWN:
            flat = tuple(tensor.reshape(-1).tolist())
            return cls(shape, flat, math.hypot(*flat))
        return cls(shape, None, float(torch.linalg.vector_norm(tensor.detach())))

    def short(self, count: int = 3) -> str:
        """A few values for a label: ``[0.12, -0.5, 1.0, …]``, or the shape and norm."""
        if self.flat is None:
            return f"‖·‖={self.norm:.3g}"
        if not self.shape:
            return f"{self.flat[0]:.3g}"
        shown = ", ".join(f"{v:.3g}" for v in self.flat[:count])
        return f"[{shown}{', …' if len(self.flat) > count else ''}]"


@dataclass(frozen=True)
class TensorInfo:
    """One variable as the program left it, every field as torch reports it."""

    name: str
    line: int
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None
    node: int | None  # index of its grad_fn in Graph.nodes
    version: int | None  # the ``_version`` counter (in-place writes); None: inference tensor
    retains_grad: bool
    is_inference: bool
    values: Values
    grad: Values | None  # ``.grad`` after the program (None while it is None)
    # every name bound to this very tensor when the program ended, in the order the program
    # first bound them (``a = w``: w and a are one tensor); ``aliases[0]`` names it in the
    # graph and the backward steps
    aliases: tuple[str, ...] = ()

    @property
    def primary(self) -> str:
        return self.aliases[0] if self.aliases else self.name


@dataclass(frozen=True)
class OtherValue:
    """A name bound to something other than a tensor (a loop counter, ``.item()``)."""

    name: str
    line: int
    kind: ValueKind
    text: str


@dataclass(frozen=True)
class SavedValue:
    """What a backward node saved for backward, as torch exposes it (``_saved_<name>``)."""

    name: str
    shape: tuple[int, ...] | None  # a tensor's shape; None for a number or a size
    text: str  # a number, a size, or the tensor's dtype
    state: SavedState


@dataclass(frozen=True)
class Edge:
    """``next_functions[i]``: the node the gradient flows to, and which of its inputs."""

    target: int | None  # None: that input needs no gradient
    input_nr: int


@dataclass(frozen=True)
class GraphNode:
    """A Function object of the backward graph."""

    index: int
    name: str  # e.g. ``MulBackward0``; ``AccumulateGrad`` for a leaf
    edges: tuple[Edge, ...]
    saved: tuple[SavedValue, ...]
    leaf: str | None  # the variable an AccumulateGrad node fills
    outputs_of: tuple[str, ...]  # variables whose grad_fn this is


@dataclass(frozen=True)
class Graph:
    """The program, its variables and the backward graph autograd recorded for it."""

    program: str
    seed: int
    variables: tuple[TensorInfo, ...]
    others: tuple[OtherValue, ...]
    nodes: tuple[GraphNode, ...]
    error: ProgramError | None
    backward_calls: int  # ``.backward()`` calls the program itself made

    def variable(self, name: str) -> TensorInfo | None:
        return next((v for v in self.variables if v.name == name), None)

    @property
    def roots(self) -> tuple[str, ...]:
        """Variables backward can start from: those with a ``grad_fn``, scalars first; then
        scalar leaves that require grad (``w.backward()`` fills ``w.grad`` with 1)."""
        with_fn = [v for v in self.variables if v.grad_fn is not None]
        with_fn.sort(key=lambda v: (len(v.shape) > 0 and v.shape != (1,), -v.line))
        leaves = [
            v
            for v in self.variables
            if v.grad_fn is None and v.is_leaf and v.requires_grad and math.prod(v.shape) == 1
        ]
        return tuple(v.name for v in (*with_fn, *leaves))

    @property
    def default_root(self) -> str | None:
        if (loss := self.variable("loss")) is not None and loss.grad_fn is not None:
            return "loss"
        with_fn = [name for name in self.roots if self.variable(name).grad_fn is not None]  # type: ignore[union-attr]
        return with_fn[0] if with_fn else None


def _text(value: Any) -> str:
    """A value a program built, for the page: never ``repr()`` (see :mod:`.text`)."""
    return bounded_text(value, MAX_TEXT)


def _other(name: str, line: int, value: Any) -> OtherValue:
    if value is None:
        kind = ValueKind.NONE
    elif isinstance(value, bool | int | float):
        kind = ValueKind.NUMBER
    elif type(value).__name__ == "ndarray":
        kind = ValueKind.ARRAY
    else:
        kind = ValueKind.OTHER
    return OtherValue(name, line, kind, _text(value))


_SAVED_NAMES: dict[type, tuple[str, ...]] = {}


def _saved_names(node: Any) -> tuple[str, ...]:
    """The ``_saved_*`` attributes of a node's class (``dir`` is slow: once per class)."""
    kind = type(node)
    if kind not in _SAVED_NAMES:
        _SAVED_NAMES[kind] = tuple(n for n in dir(node) if n.startswith("_saved_"))
    return _SAVED_NAMES[kind]


# Saved values and edges repeat across nodes and runs (the same shapes, sizes and alphas);
# they are immutable, so one instance of each serves every graph (a replay builds hundreds).
@functools.lru_cache(maxsize=4096)
def _saved_value(
    name: str, shape: tuple[int, ...] | None, text: str, state: SavedState
) -> SavedValue:
    return SavedValue(name, shape, text, state)


@functools.lru_cache(maxsize=4096)
def _edge(target: int | None, input_nr: int) -> Edge:
    return Edge(target, input_nr)


def _saved(node: Any) -> tuple[SavedValue, ...]:
    out = []
    for attribute in _saved_names(node):
        name = attribute[7:]  # without "_saved_"
        try:
            value = getattr(node, attribute)
        except RuntimeError:
            # torch refuses to unpack a saved tensor that a backward already freed (its data
            # is gone) or that was modified in place since (its data is still there)
            raw = getattr(node, f"_raw_saved_{name}", None)
            freed = getattr(raw, "data", None) is None
            state = SavedState.FREED if freed else SavedState.STALE
            out.append(_saved_value(name, None, "", state))
            continue
        if isinstance(value, torch.Tensor):
            dtype = _DTYPE_NAMES.get(value.dtype) or str(value.dtype).removeprefix("torch.")
            out.append(_saved_value(name, tuple(value.shape), dtype, SavedState.OK))
        elif value is not None:
            out.append(_saved_value(name, None, _text(value), SavedState.OK))
    return tuple(out)


_DTYPE_NAMES: dict[torch.dtype, str] = {
    dtype: str(dtype).removeprefix("torch.")
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64)
}


def walk(roots: list[Any]) -> list[Any]:
    """Every backward node reachable from ``roots``, each once, in a fixed order (depth
    first, ``next_functions`` in order): the index of a node in this list is its id.
    Nodes are told apart by ``id()``: hashing a node object costs far more, and every node
    stays alive in the list while the ids are used."""
    order: list[Any] = []
    seen: set[int] = set()
    stack = [fn for fn in reversed(roots) if fn is not None]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        order.append(fn)
        stack.extend(nxt for nxt, _ in reversed(fn.next_functions) if nxt is not None)
    return order


def node_index(nodes: list[Any]) -> dict[int, int]:
    """``id(node)`` → its index in ``nodes`` (the nodes must stay alive meanwhile)."""
    return {id(fn): i for i, fn in enumerate(nodes)}


def aliases(run: Run) -> dict[int, tuple[str, ...]]:
    """Tensors by identity: ``id(tensor)`` → every name bound to it when the program ended,
    in the order those names were first bound (``a = w`` makes one tensor with two names)."""
    out: dict[int, list[str]] = {}
    for name, value in run.names.items():
        if isinstance(value, torch.Tensor):
            out.setdefault(id(value), []).append(name)
    return {key: tuple(names) for key, names in out.items()}


def labels(run: Run) -> dict[int, str]:
    """One name for every tensor the program bound, by identity: its first current name
    (see :func:`aliases`), else ``name@line`` of its last binding for a tensor no name holds
    any more (``x = x + 1`` leaves two tensors called x)."""
    out: dict[int, str] = {}
    for binding in run.bindings:
        if isinstance(binding.value, torch.Tensor):
            out[id(binding.value)] = f"{binding.name}@{binding.line}"
    out.update({key: names[0] for key, names in aliases(run).items()})
    return out


def tensors(run: Run) -> Iterator[torch.Tensor]:
    """Every tensor the program bound, earlier bindings included, in binding order."""
    for binding in run.bindings:
        if isinstance(binding.value, torch.Tensor):
            yield binding.value


def node_order(run: Run) -> list[Any]:
    return walk([t.grad_fn for t in tensors(run)])


def read(run: Run, nodes: list[Any] | None = None) -> Graph:
    """The frozen record of a run: variables (each field from torch), then the graph.
    ``nodes``: the run's :func:`node_order`, when the caller already walked it."""
    names = labels(run)
    same = aliases(run)
    nodes = node_order(run) if nodes is None else nodes
    index = node_index(nodes)
    outputs: dict[int, list[str]] = {}
    variables, others = [], []
    for name, value in run.names.items():
        line = run.lines[name]
        if not isinstance(value, torch.Tensor):
            others.append(_other(name, line, value))
            continue
        fn = value.grad_fn
        node = index.get(id(fn)) if fn is not None else None
        if node is not None:
            outputs.setdefault(node, []).append(name)
        grad = value.grad if (value.is_leaf or value.retains_grad) else None
        variables.append(
            TensorInfo(
                name=name,
                line=line,
                shape=tuple(value.shape),
                dtype=str(value.dtype).removeprefix("torch."),
                requires_grad=value.requires_grad,
                is_leaf=value.is_leaf,
                grad_fn=None if fn is None else type(fn).__name__,
                node=node,
                version=None if value.is_inference() else value._version,
                retains_grad=value.retains_grad,
                is_inference=value.is_inference(),
                values=Values.of(value),
                grad=None if grad is None else Values.of(grad),
                aliases=same[id(value)],
            )
        )
    graph_nodes = []
    for i, fn in enumerate(nodes):
        leaf = None
        if type(fn).__name__ == "AccumulateGrad":
            leaf = names.get(id(fn.variable), "?")
        edges = tuple(
            _edge(None if nxt is None else index[id(nxt)], nr) for nxt, nr in fn.next_functions
        )
        graph_nodes.append(
            GraphNode(i, type(fn).__name__, edges, _saved(fn), leaf, tuple(outputs.get(i, ())))
        )
    return Graph(
        program=run.program.text,
        seed=run.seed,
        variables=tuple(variables),
        others=tuple(others),
        nodes=tuple(graph_nodes),
        error=run.error,
        backward_calls=run.backward_calls,
    )
