"""einsum, read by torch: each letter's size, which letters are summed, the output shape, the
loop nest it means, the broadcast-multiply-sum that computes the same, and its FLOPs.

The work is measured on both sides, never assumed equal: the loop nest's multiplies and adds
are those its code performs (each ``*`` between operands, each ``+=``); torch's are what
``FlopCounterMode`` counts around the real ``torch.einsum``, beside the list of ops torch ran
(recorded as they are dispatched), so a page can say which of them the counter left out.

torch judges the equation first (``torch.einsum`` on meta tensors of the given shapes), so a
bad equation gets torch's own words; only an equation torch accepted is read here. When the
whole loop nest is small, the broadcast-multiply-sum runs on real numbers beside
``torch.einsum`` and the two results are compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from torchatlas.basics.errors import BasicsValueError, ErrorCode, refused
from torchatlas.basics.limits import MAX_EINSUM_OPERANDS, MAX_EINSUM_RUN, MAX_EINSUM_TEXT
from torchatlas.basics.shapes import check_shape, footprint
from torchatlas.errors import RefusedByTorch, TorchRefusal

ELLIPSIS = "..."


@dataclass(frozen=True)
class OperandPlan:
    name: str  # x0, x1, … in the code
    shape: tuple[int, ...]
    labels: tuple[str, ...]  # one per dimension; ellipsis dimensions are "…0", "…1", …
    diagonals: tuple[tuple[int, int], ...]  # torch.diagonal(dim1, dim2) taken in turn
    permute: tuple[int, ...] | None  # after the diagonals; None when already in order
    index: tuple[str, ...] | None  # ":" or "None" per full-order label; None when not needed


@dataclass(frozen=True)
class EinsumPlan(RefusedByTorch):
    equation: str
    shapes: tuple[tuple[int, ...], ...]
    refusal: TorchRefusal | None = None  # torch refused the equation
    operands: tuple[OperandPlan, ...] = ()
    sizes: tuple[tuple[str, int], ...] = ()  # each label's size, in order of appearance
    output: tuple[str, ...] = ()  # the output's labels
    summed: tuple[str, ...] = ()  # labels summed away
    output_shape: tuple[int, ...] = ()  # torch's own result shape
    explicit: bool = True  # the equation names its output with "->"
    products: int = 0  # terms of the loop nest: the product of every label's size
    multiplies: int = 0  # the loop nest's: (operands - 1) per term
    additions: int = 0  # the loop nest's: one ``total += …`` per term when a letter is summed
    counted_flops: int | None = None  # torch.utils.flop_counter.FlopCounterMode's total
    checked: bool | None = None  # the broadcast-multiply-sum equals torch.einsum (None: too big)
    # What torch.einsum ran, as dispatched: each op that is not a view (aten name, calls), in
    # the order first run; and the FLOPs FlopCounterMode counted for each op it counted.
    torch_ops: tuple[tuple[str, int], ...] = ()
    flop_ops: tuple[tuple[str, int], ...] = ()

    @property
    def loop_operations(self) -> int:
        """The loop nest's multiplies and adds together (FlopCounterMode's unit: one each)."""
        return self.multiplies + self.additions

    @property
    def uncounted_ops(self) -> tuple[str, ...]:
        """Ops torch ran for which FlopCounterMode counted nothing."""
        counted = {name for name, flops in self.flop_ops if flops}
        return tuple(name for name, _ in self.torch_ops if name not in counted)

    @property
    def ok(self) -> bool:
        return self.refusal is None

    @property
    def size_of(self) -> dict[str, int]:
        return dict(self.sizes)

    def variable(self, label: str) -> str:
        return "e" + label[1:] if label.startswith("…") else label

    @property
    def loop_code(self) -> str:
        """The loop nest einsum means, as runnable Python over tensors x0, x1, …"""
        size = self.size_of
        lines = [f"out = torch.zeros({', '.join(str(size[k]) for k in self.output)})"]
        if not self.output:
            lines = ["out = torch.zeros(())"]
        depth = 0

        def emit(text: str) -> None:
            lines.append("    " * depth + text)

        for label in self.output:
            emit(f"for {self.variable(label)} in range({size[label]}):")
            depth += 1
        terms = " * ".join(self._element(operand) for operand in self.operands)
        target = "out[" + ", ".join(self.variable(k) for k in self.output) + "]"
        if not self.output:
            target = "out[()]"
        if self.summed:
            emit("total = 0")
            for label in self.summed:
                emit(f"for {self.variable(label)} in range({size[label]}):")
                depth += 1
            emit(f"total += {terms}")
            depth -= len(self.summed)
            emit(f"{target} = total")
        else:
            emit(f"{target} = {terms}")
        return "\n".join(lines)

    def _element(self, operand: OperandPlan) -> str:
        size = self.size_of
        parts = []
        for label, dim in zip(operand.labels, operand.shape, strict=True):
            parts.append("0" if dim == 1 and size[label] != 1 else self.variable(label))
        return f"{operand.name}[{', '.join(parts)}]" if parts else f"{operand.name}"

    @property
    def broadcast_code(self) -> str:
        """The same result without einsum: line each operand up on every label (diagonals,
        permute, None for the labels it lacks), multiply, then sum the summed labels."""
        lines = []
        names = []
        for operand in self.operands:
            expression = operand.name
            for dim1, dim2 in operand.diagonals:
                expression = f"torch.diagonal({expression}, 0, {dim1}, {dim2})"
            if operand.permute is not None:
                expression += f".permute({', '.join(map(str, operand.permute))})"
            if operand.index is not None:
                expression += "[" + ", ".join(operand.index) + "]"
            if expression != operand.name:
                lines.append(f"{operand.name}_ = {expression}")
                names.append(f"{operand.name}_")
            else:
                names.append(operand.name)
        product = " * ".join(names)
        if self.summed:
            first = len(self.output)
            dims = tuple(range(first, first + len(self.summed)))
            dims_text = str(dims[0]) if len(dims) == 1 else str(dims)
            lines.append(f"out = ({product}).sum(dim={dims_text})")
        else:
            lines.append(f"out = {product}")
        return "\n".join(lines)

    @property
    def einsum_code(self) -> str:
        names = ", ".join(operand.name for operand in self.operands)
        return f"out = torch.einsum({self.equation!r}, {names})"


class _Dispatched(TorchDispatchMode):
    """Records each op torch dispatches that is not a view (a view's schema says it aliases
    its input: it computes nothing), with how often it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if not func.is_view:
            name = str(func.overloadpacket)
            self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class _Run:
    shape: torch.Size
    flops: int
    ops: tuple[tuple[str, int], ...]
    flop_ops: tuple[tuple[str, int], ...]


def _meta_run(equation: str, shapes: list[tuple[int, ...]]) -> _Run:
    """torch.einsum on meta tensors: its shape, FlopCounterMode's count (in total and per
    op) and the ops it dispatched."""
    tensors = [torch.empty(shape, device="meta") for shape in shapes]
    dispatched = _Dispatched()
    with FlopCounterMode(display=False) as counter, dispatched:
        out = torch.einsum(equation, *tensors)
    per_op = counter.get_flop_counts().get("Global", {})
    flop_ops = tuple((str(op), int(flops)) for op, flops in per_op.items())
    return _Run(out.shape, int(counter.get_total_flops()), tuple(dispatched.calls.items()),
                flop_ops)  # fmt: skip


def _terms(text: str) -> list[str]:
    """A term's labels: letters, and ``...`` as one item."""
    labels, i = [], 0
    text = text.replace(" ", "")
    while i < len(text):
        if text.startswith(ELLIPSIS, i):
            labels.append(ELLIPSIS)
            i += 3
        else:
            labels.append(text[i])
            i += 1
    return labels


def _label_dimensions(
    inputs: list[list[str]], shapes: tuple[tuple[int, ...], ...]
) -> tuple[dict[str, int], list[tuple[str, ...]], list[str]]:
    """Each label's size, each operand's labels (an ellipsis spelled out as ``…0``, ``…1``
    … aligned on the right, as broadcasting aligns them) and the ellipsis' own labels."""
    ellipsis_rank = max(
        (len(shape) - (len(term) - 1) for term, shape in zip(inputs, shapes, strict=True)
         if ELLIPSIS in term),
        default=0,
    )  # fmt: skip
    sizes: dict[str, int] = {}
    operand_labels: list[tuple[str, ...]] = []
    for term, shape in zip(inputs, shapes, strict=True):
        labels: list[str] = []
        for item in term:
            if item == ELLIPSIS:
                own = len(shape) - (len(term) - 1)
                labels.extend(f"…{k}" for k in range(ellipsis_rank - own, ellipsis_rank))
            else:
                labels.append(item)
        for label, dim in zip(labels, shape, strict=True):
            if dim != 1 or label not in sizes:
                sizes[label] = dim if label not in sizes or sizes[label] == 1 else sizes[label]
        operand_labels.append(tuple(labels))
    return sizes, operand_labels, [f"…{k}" for k in range(ellipsis_rank)]


def _output_labels(
    inputs: list[list[str]], right: str | None, ellipsis_labels: list[str]
) -> list[str]:
    """The output's labels: as written after ``->`` (``right``), else einsum's implicit
    rule (the ellipsis, then every letter written once, in alphabetical order)."""
    if right is not None:
        output: list[str] = []
        for item in _terms(right):
            output.extend(ellipsis_labels if item == ELLIPSIS else [item])
        return output
    letters = [item for term in inputs for item in term if item != ELLIPSIS]
    return ellipsis_labels + sorted(k for k in set(letters) if letters.count(k) == 1)


def einsum(
    equation: str, shapes: list[tuple[int, ...]] | tuple[tuple[int, ...], ...]
) -> EinsumPlan:
    """Plan ``torch.einsum(equation, *tensors of these shapes)``."""
    if len(equation) > MAX_EINSUM_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(equation), limit=MAX_EINSUM_TEXT)
    if not isinstance(shapes, list | tuple) or not 1 <= len(shapes) <= MAX_EINSUM_OPERANDS:
        raise BasicsValueError(
            ErrorCode.EINSUM_OPERANDS, count=len(shapes), limit=MAX_EINSUM_OPERANDS
        )
    shapes = tuple(check_shape(shape) for shape in shapes)
    try:
        ran = _meta_run(equation, list(shapes))
    except (RuntimeError, ValueError, TypeError, IndexError, OverflowError) as exc:
        return EinsumPlan(equation, shapes, refusal=refused(exc))

    explicit = "->" in equation
    left, _, right = equation.partition("->")
    inputs = [_terms(term) for term in left.split(",")]
    sizes, operand_labels, ellipsis_labels = _label_dimensions(inputs, shapes)
    output = _output_labels(inputs, right if explicit else None, ellipsis_labels)
    for label in ellipsis_labels:
        sizes.setdefault(label, 1)
    order = list(dict.fromkeys(label for labels in operand_labels for label in labels))
    summed = [label for label in order if label not in output]
    full = output + summed
    operands = tuple(
        _line_up(f"x{i}", shape, labels, full)
        for i, (shape, labels) in enumerate(zip(shapes, operand_labels, strict=True))
    )
    products = math.prod(sizes[label] for label in full)
    out_shape = ran.shape
    plan = EinsumPlan(
        equation,
        shapes,
        operands=operands,
        sizes=tuple((label, sizes[label]) for label in order),
        output=tuple(output),
        summed=tuple(summed),
        output_shape=tuple(out_shape),
        explicit=explicit,
        products=products,
        # the loop code's own arithmetic: each term multiplies the operands' elements, and
        # is added to its total by one ``+=`` when a letter is summed
        multiplies=(len(shapes) - 1) * products,
        additions=products if summed else 0,
        counted_flops=ran.flops,
        torch_ops=ran.ops,
        flop_ops=ran.flop_ops,
    )
    # Run on numbers only when every tensor the run makes is small: the broadcast product
    # spans every letter, and a letter of size 0 makes ``products`` 0 while the output (the
    # other letters) may still be huge, so the bound counts each 0 as 1.
    spans = [footprint(shape) for shape in shapes]
    spans.append(math.prod(max(sizes[label], 1) for label in full))
    if max(spans) <= MAX_EINSUM_RUN:
        return _checked(plan)
    return plan


def _line_up(
    name: str, shape: tuple[int, ...], labels: tuple[str, ...], full: list[str]
) -> OperandPlan:
    """Diagonals for repeated labels, then a permute into ``full``'s order, then None for the
    labels this operand lacks."""
    current = list(labels)
    diagonals = []
    while len(set(current)) != len(current):
        seen: dict[str, int] = {}
        for dim, label in enumerate(current):
            if label in seen:
                first = seen[label]
                diagonals.append((first, dim))
                # torch.diagonal drops both dims and appends the diagonal last
                current = [k for d, k in enumerate(current) if d not in (first, dim)] + [label]
                break
            seen[label] = dim
    wanted = sorted(current, key=full.index)
    permute = tuple(current.index(label) for label in wanted)
    if permute == tuple(range(len(current))):
        permute = None  # type: ignore[assignment]
    index = tuple(":" if label in current else "None" for label in full)
    if all(part == ":" for part in index):
        index = None  # type: ignore[assignment]
    return OperandPlan(name, shape, labels, tuple(diagonals), permute, index)


def run_broadcast(plan: EinsumPlan, tensors: list[torch.Tensor]) -> torch.Tensor:
    """The broadcast-multiply-sum of :attr:`EinsumPlan.broadcast_code`, run on ``tensors``."""
    lined = []
    for operand, tensor in zip(plan.operands, tensors, strict=True):
        for dim1, dim2 in operand.diagonals:
            tensor = torch.diagonal(tensor, 0, dim1, dim2)
        if operand.permute is not None:
            tensor = tensor.permute(*operand.permute)
        if operand.index is not None:
            tensor = tensor[tuple(slice(None) if part == ":" else None for part in operand.index)]
        lined.append(tensor)
    product = lined[0]
    for tensor in lined[1:]:
        product = product * tensor
    if plan.summed:
        first = len(plan.output)
        product = product.sum(dim=tuple(range(first, first + len(plan.summed))))
    return product


def _checked(plan: EinsumPlan) -> EinsumPlan:
    generator = torch.Generator().manual_seed(0)
    tensors = [
        torch.randn(shape, generator=generator, dtype=torch.float64) for shape in plan.shapes
    ]
    expected = torch.einsum(plan.equation, *tensors)
    got = run_broadcast(plan, tensors)
    same = got.shape == expected.shape and torch.allclose(got, expected)
    return EinsumPlan(**{**plan.__dict__, "checked": bool(same)})
