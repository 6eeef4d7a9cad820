"""Autograd: the graph PyTorch records for a small program, and backward walked node by node.

>>> graph = trace("x = randn(3)\\nz = randn(3, requires_grad=True)\\nloss = (x * z).sum()")
>>> [(v.name, v.requires_grad, v.is_leaf, v.grad_fn) for v in graph.variables]
[('x', False, True, None), ('z', True, True, None), ('loss', True, False, 'SumBackward0')]
>>> [step.name for step in backward(graph, "loss").steps]
['SumBackward0', 'MulBackward0', 'AccumulateGrad']

Modules, each importing only those above it: ``errors`` (codes; PyTorch's errors explained),
``text`` (the bounded formatter), ``parser`` (the allow list), ``run`` (the interpreter),
``programs`` (checked programs, cached), ``graph`` (the frozen record), ``backward`` (the
replay), then ``quiz``, ``freeze``, ``history`` (then vs now), ``examples``, ``link`` (the
room's shared link) and ``jobs`` (the sandbox job). The engine returns data only: the page
draws it (``components/autograd/draw.py`` builds the Graphviz text).
"""

from __future__ import annotations

from torchatlas.autograd.backward import (
    BackwardStep,
    BackwardTrace,
    GradReason,
    LeafGrad,
    backward,
    trace_and_backward,
)
from torchatlas.autograd.errors import (
    TEACHING_CODES,
    AutogradError,
    ErrorCode,
    ProgramError,
    ProgramRefused,
)
from torchatlas.autograd.graph import (
    Edge,
    Graph,
    GraphNode,
    OtherValue,
    SavedState,
    SavedValue,
    TensorInfo,
    Values,
    read,
)
from torchatlas.autograd.parser import Program, python_code
from torchatlas.autograd.programs import parse
from torchatlas.autograd.run import execute

__all__ = [
    "TEACHING_CODES",
    "AutogradError",
    "BackwardStep",
    "BackwardTrace",
    "Edge",
    "ErrorCode",
    "GradReason",
    "Graph",
    "GraphNode",
    "LeafGrad",
    "OtherValue",
    "Program",
    "ProgramError",
    "ProgramRefused",
    "SavedState",
    "SavedValue",
    "TensorInfo",
    "Values",
    "backward",
    "execute",
    "parse",
    "python_code",
    "trace",
    "trace_and_backward",
]


def trace(program: str, *, seed: int = 0) -> Graph:
    """Parse ``program`` (the allow list; :class:`ProgramRefused` if it steps outside), run it
    on real torch with a generator seeded by ``seed``, and read what autograd recorded."""
    return read(execute(parse(program), seed))
