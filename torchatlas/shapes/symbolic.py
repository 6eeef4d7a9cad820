"""Shapes as formulas of named input dims, and the constraints a model puts on them.

Inputs become FakeTensors whose sizes are SymInts (``FakeTensorMode`` + ``ShapeEnv``); the
same tracer then records each output size as a sympy expression, and every guard the model's
layers add (``Linear`` needs the flattened size to equal ``in_features``…) is attributed to the
layer that added it.

Private PyTorch APIs, pinned to torch 2.14.1 and exercised by tests/unit/test_shapes_symbolic.py
so an upgrade that changes them fails loudly:
``torch.fx.experimental.symbolic_shapes.{ShapeEnv, StatelessSymbolicContext, DimDynamic}``,
``torch._subclasses.fake_tensor.FakeTensorMode``, ``SymInt.node.expr``, ``ShapeEnv.guards``.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext


def _drop_redundant_parens(text: str) -> str:
    """``(((W - 1)//4))`` → ``((W - 1)//4)``: sympy wraps floor divisions twice."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for index, char in enumerate(text):
        if char == "(":
            stack.append(index)
        elif char == ")" and stack:
            pairs[stack.pop()] = index
    drop: set[int] = set()
    for start, end in pairs.items():
        if text[start + 1 : start + 2] == "(" and pairs.get(start + 1) == end - 1:
            drop.update((start, end))
    if text.startswith("(") and pairs.get(0) == len(text) - 1:
        drop.update((0, len(text) - 1))
    return "".join(char for index, char in enumerate(text) if index not in drop)


def dim_names(shapes: list[list[int]], dtypes: list[str]) -> list[list[str]]:
    """Conventional names per input: N×C×H×W images, N×L token ids, N×L×E sequences…"""
    names: list[list[str]] = []
    for index, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True)):
        rank = len(shape)
        integer = dtype in {"long", "int64", "int32", "int"}
        if rank == 4:
            base = ["N", "C", "H", "W"]
        elif rank == 5:
            base = ["N", "C", "D", "H", "W"]
        elif rank == 3:
            base = ["N", "L", "E"]  # sequences; a Conv1d input reads N×L×E as N×C×L
        elif rank == 2:
            base = ["N", "L"] if integer else ["N", "F"]
        elif rank == 1:
            base = ["L"] if integer else ["N"]
        else:
            base = [f"d{axis}" for axis in range(rank)]
        suffix = "" if index == 0 else str(index + 1)
        names.append([name + suffix for name in base])
    return names


class SymbolicInputs:
    """FakeTensor inputs with one symbol per dim, and a printer from symbols back to names."""

    def __init__(self, shapes: list[list[int]], dtypes: list[torch.dtype], names: list[list[str]]):
        # duck_shape=False: two dims that happen to be equal (H = W = 32) stay separate symbols.
        self.shape_env = ShapeEnv(duck_shape=False)
        self.mode = FakeTensorMode(
            shape_env=self.shape_env, static_shapes=False, allow_non_fake_inputs=True
        )
        self.symbol_names: dict[str, str] = {}
        self.tensors: list[torch.Tensor] = []
        for shape, dtype, dims in zip(shapes, dtypes, names, strict=True):
            # Sizes 0 and 1 are specialised by PyTorch; give the batch a neutral example of 2 so
            # it stays a symbol (N), which is what the formulas are about.
            example = list(shape)
            if example and example[0] == 1 and len(example) >= 2:
                example[0] = 2
            real = torch.empty(example, dtype=dtype, device="meta")
            context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * len(example))
            fake = self.mode.from_tensor(real, symbolic_context=context)
            for size, dim in zip(fake.shape, dims, strict=True):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                    self.symbol_names[str(size.node.expr)] = dim
            self.tensors.append(fake)

    def expression(self, expr: Any) -> str:
        if isinstance(expr, sympy.Expr) and isinstance(expr, sympy.Add):
            factored = sympy.factor(expr)  # 16·((H//4) − 3)·((W//4) − 3), not the expansion
            if len(str(factored)) < len(str(expr)):
                expr = factored
        text = _drop_redundant_parens(str(expr))
        text = re.sub(r"\b(s\d+)\b", lambda match: self.symbol_names.get(match.group(1), "?"), text)
        return text.replace("*", "·").replace(" - ", " − ").replace(">=", "≥").replace("<=", "≤")

    def size(self, size: Any) -> str:
        if isinstance(size, int):
            return str(size)
        expr = self.shape_env.simplify(size.node.expr)
        if expr.is_number:
            return str(int(expr))
        return self.expression(expr)

    def readable_guard(self, expr: Any) -> str | None:
        """A constraint worth showing, or None for PyTorch's internal bookkeeping guards."""
        if isinstance(expr, sympy.Eq):
            left, right = expr.args
            if left.is_number and not right.is_number:
                left, right = right, left
            return f"{self.expression(left)} = {self.expression(right)}"
        if (
            isinstance(expr, sympy.Rel)
            and not isinstance(expr, sympy.Ne)
            and len(expr.free_symbols) == 1
            and expr.rhs.is_number
        ):
            return self.expression(expr)
        return None

    def guard_count(self) -> int:
        return len(self.shape_env.guards)

    def guards_since(self, start: int) -> list[str]:
        out: list[str] = []
        for guard in self.shape_env.guards[start:]:
            text = self.readable_guard(guard.expr)
            if text and text not in out:
                out.append(text)
        return out
