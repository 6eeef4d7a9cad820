"""The oracle: every shipped example and a few dozen tricky programs, each run twice — by the
room's engine, and as plain Python on plain torch here (the program text executed with the
room's names bound to torch's own functions and a generator seeded the same way) — and every
field the room shows compared with what torch reports.

The truth is computed without the engine's code: names are read from the executed namespace
(two names of one tensor are two names of the same object), "filled by this backward" is
decided from the graph's structure (the leaf's AccumulateGrad is reachable from the root, or
the leaf is the root), the steps are the nodes reachable from the root.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from torchatlas.autograd import ErrorCode, GradReason, Graph, Values, backward, trace
from torchatlas.autograd.diagnose import call_lesson, inplace_lesson
from torchatlas.autograd.errors import TorchRefused, explain
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.parser import DTYPES
from torchatlas.autograd.quiz import ERROR, Question, expected, options

# ----------------------------------------------------------------------------- plain torch


@dataclass
class Plain:
    """A program run as plain Python: its names, the line it stopped at (and why)."""

    names: dict[str, Any]
    error_line: int | None = None
    error: BaseException | None = None
    backward_error: BaseException | None = None
    before: dict[int, torch.Tensor | None] = field(default_factory=dict)


def _namespace(seed: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    names: dict[str, Any] = {
        "torch": torch,
        "randn": lambda *a, **k: torch.randn(*a, generator=generator, **k),
        "rand": lambda *a, **k: torch.rand(*a, generator=generator, **k),
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
        "enable_grad": torch.enable_grad,
        "range": range,
    }
    for name in ("zeros", "ones", "tensor", "arange", "full", "eye"):
        names[name] = getattr(torch, name)
    for name in DTYPES:
        names[name] = getattr(torch, name)
    return names


def run_plain(program: str, seed: int = 0) -> Plain:
    namespace = _namespace(seed)
    fixed = set(namespace)
    error_line, error = None, None
    try:
        exec(compile(program, "<program>", "exec"), namespace)  # the test's own table
    except Exception as exc:  # where plain Python stopped, to compare with the room
        error = exc
        tb = sys.exc_info()[2]
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == "<program>":
                error_line = tb.tb_lineno
            tb = tb.tb_next
    names = {k: v for k, v in namespace.items() if k not in fixed and not k.startswith("__")}
    return Plain(names, error_line, error)


def _flat(tensor: torch.Tensor) -> list[float]:
    return tensor.detach().to(torch.float64).reshape(-1).tolist()


def assert_values(values: Values | None, tensor: torch.Tensor | None, what: str) -> None:
    if tensor is None:
        assert values is None, what
        return
    assert values is not None, what
    assert values.shape == tuple(tensor.shape), what
    if values.flat is not None:
        expected = _flat(tensor)
        assert len(values.flat) == len(expected), what
        for got, want in zip(values.flat, expected, strict=True):
            assert got == want or (math.isnan(got) and math.isnan(want)), what
    else:
        # the room shows ‖·‖ to 3 digits, computed in the tensor's own precision
        norm = float(torch.linalg.vector_norm(tensor.detach().to(torch.float64)))
        assert values.norm == pytest.approx(norm, rel=1e-5, nan_ok=True), what


def _reachable(fn: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    stack = [fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(n for n, _ in node.next_functions)
    return list(seen.values())


# ----------------------------------------------------------------------------- the comparison


def assert_graph_is_torch(graph: Graph, plain: Plain) -> None:
    """Every variable the room lists, field by field, is what torch reports for that name."""
    tensors = {k: v for k, v in plain.names.items() if isinstance(v, torch.Tensor)}
    assert {v.name for v in graph.variables} == set(tensors)
    assert {o.name for o in graph.others} == set(plain.names) - set(tensors)
    for info in graph.variables:
        t = tensors[info.name]
        what = info.name
        assert info.shape == tuple(t.shape), what
        assert info.dtype == str(t.dtype).removeprefix("torch."), what
        assert info.requires_grad is t.requires_grad, what
        assert info.is_leaf is t.is_leaf, what
        assert info.grad_fn == (None if t.grad_fn is None else type(t.grad_fn).__name__), what
        assert info.is_inference is t.is_inference(), what
        assert info.version == (None if t.is_inference() else t._version), what
        assert info.retains_grad is t.retains_grad, what
        assert_values(info.values, t, what)
        assert_values(info.grad, t.grad if (t.is_leaf or t.retains_grad) else None, what)
        # identity: every name bound to this very object, and only those
        same = {name for name, other in tensors.items() if other is t}
        assert set(info.aliases) == same, what
    # every backward node reachable from the names is in the room's graph
    reachable = {type(n).__name__ for t in tensors.values() for n in _reachable(t.grad_fn)}
    assert reachable <= {n.name for n in graph.nodes}


def assert_backward_is_torch(graph: Graph, plain: Plain, root: str) -> None:
    """Backward from ``root``: the room's replay against plain ``root.backward()``."""
    result = backward(graph, root)
    tensors = {k: v for k, v in plain.names.items() if isinstance(v, torch.Tensor)}
    root_tensor = tensors[root]
    before = {
        name: (t.grad.clone() if (t.is_leaf or t.retains_grad) and t.grad is not None else None)
        for name, t in tensors.items()
    }
    if root_tensor.grad_fn is not None:
        reached = _reachable(root_tensor.grad_fn)
        leaves = {id(n.variable) for n in reached if type(n).__name__ == "AccumulateGrad"}
        nodes = {id(n) for n in reached}
    else:  # a leaf root: backward runs its AccumulateGrad alone
        reached, leaves, nodes = [None], {id(root_tensor)}, set()
    try:
        root_tensor.backward()
    except RuntimeError as exc:
        assert result.error is not None, f"torch raised {exc}, the room did not"
        return
    assert result.error is None, result.error
    assert result.total_steps == len(reached)
    filled_names = set()
    for grad in result.grads:
        t = tensors[grad.name]
        what = grad.name
        after = t.grad if (t.is_leaf or t.retains_grad) else None
        assert_values(grad.grad, after, what)
        assert_values(grad.before, before[grad.name], what)
        # a "None: …" reason only where torch's .grad is None (issue 34.7)
        if after is None and t.is_leaf and not t.requires_grad:
            expected = GradReason.NO_REQUIRES_GRAD
        elif after is None and not t.is_leaf and not t.retains_grad:
            expected = GradReason.NOT_LEAF
        elif after is None:
            expected = GradReason.NOT_REACHED
        elif t.is_leaf and id(t) in leaves:
            expected = GradReason.FILLED
        elif not t.is_leaf and id(t.grad_fn) in nodes:
            expected = GradReason.RETAINED
        elif t.is_leaf and not t.requires_grad:
            expected = GradReason.FROZEN_KEPT
        else:
            expected = GradReason.KEPT
        if after is not None:
            assert not grad.reason.value.startswith(("no_", "not_")), what
        assert grad.reason is expected, (what, grad.reason, expected)
        if expected is GradReason.FILLED:
            filled_names.add(grad.name)
            step = result.steps[grad.filled_at]
            assert step.name == "AccumulateGrad"
    # every name of a filled tensor is filled (one tensor, several names)
    for name in filled_names:
        assert {n for n, t in tensors.items() if t is tensors[name]} <= filled_names


def check(program: str, root: str | None, seed: int = 0) -> Graph:
    program = program.strip() + "\n"
    graph = trace(program, seed=seed)
    plain = run_plain(program, seed)
    if plain.error is not None:
        assert graph.error is not None, f"torch raised {plain.error!r}, the room did not"
        assert graph.error.line == plain.error_line
    else:
        assert graph.error is None, graph.error
    assert_graph_is_torch(graph, plain)
    if root is not None and graph.error is None:
        assert root in graph.roots
        assert_backward_is_torch(graph, run_plain(program, seed), root)
    return graph


# ----------------------------------------------------------------------------- the table

TRICKY: dict[str, tuple[str, str | None]] = {
    "alias_leaf": ("w = ones(3, requires_grad=True)\na = w\nloss = (a * 2).sum()", "loss"),
    "alias_three_names": (
        "w = randn(2, requires_grad=True)\na = w\nb = a\nloss = (w * b).sum()",
        "loss",
    ),
    "alias_non_leaf_retained": (
        "w = ones(3, requires_grad=True)\nh = w * 2\ng = h\ng.retain_grad()\nloss = h.sum()",
        "loss",
    ),
    "alias_then_rebind": (
        "w = ones(2, requires_grad=True)\na = w\nw = w * 3\nloss = (a + w).sum()",
        "loss",
    ),
    "alias_reset_through_other_name": (
        "w = ones(2, requires_grad=True)\na = w\nl1 = (w * 2).sum()\nl1.backward()\n"
        "a.grad = None\nloss = (a * 3).sum()",
        "loss",
    ),
    "alias_accumulates": (
        "w = ones(2, requires_grad=True)\na = w\nl1 = (a * 2).sum()\nl1.backward()\n"
        "loss = (w * 3).sum()",
        "loss",
    ),
    "views_of_views": (
        "x = randn(4, 4, requires_grad=True)\nv = x[1:3]\nu = v[:, 0]\nloss = (u * 2).sum()",
        "loss",
    ),
    "view_reshape_t": (
        "x = randn(2, 3, requires_grad=True)\ny = x.view(3, 2).t()\nz = y.reshape(6)\n"
        "loss = z.sum()",
        "loss",
    ),
    "inplace_on_view": (
        "x = randn(3, requires_grad=True)\ny = x * 1\nv = y[0:2]\nv.mul_(2)\nloss = y.sum()",
        "loss",
    ),
    "inplace_relu": (
        "x = randn(4, requires_grad=True)\ny = x * 2\ny.relu_()\nloss = y.sum()",
        "loss",
    ),
    "augmented_in_loop": (
        "w = ones(2, requires_grad=True)\ny = w * 1\nfor i in range(3):\n    y += w\n"
        "loss = y.sum()",
        "loss",
    ),
    "no_grad_product": (
        "w = randn(3, requires_grad=True)\nwith no_grad():\n    y = w * 2\nloss = (w * y).sum()",
        "loss",
    ),
    "inference_tensor_saved": (
        "w = randn(3, requires_grad=True)\nwith inference_mode():\n    y = w * 2\n"
        "loss = (w * y).sum()",
        None,
    ),
    "enable_inside_no_grad": (
        "w = randn(2, requires_grad=True)\nwith no_grad():\n    with enable_grad():\n"
        "        y = w * 2\nloss = y.sum()",
        "loss",
    ),
    "detach_shares_version": (
        "w = randn(3, requires_grad=True)\nh = w * 1\nd = h.detach()\nd.zero_()\n"
        "loss = (w * 2).sum()",
        "loss",
    ),
    "clone_then_inplace": (
        "w = randn(2, requires_grad=True)\nc = w.clone()\nc.add_(1)\nloss = c.sum()",
        "loss",
    ),
    "retain_graph_twice": (
        "w = randn(3, requires_grad=True)\nloss = (w * w).sum()\nloss.backward(retain_graph=True)",
        "loss",
    ),
    "gradient_keyword": (
        "w = randn(3, requires_grad=True)\ny = w * 2\ny.backward(gradient=ones(3))\nloss = y.sum()",
        "loss",
    ),
    "not_reached": (
        "w = randn(3, requires_grad=True)\nv = randn(3, requires_grad=True)\nloss = (w * 2).sum()",
        "loss",
    ),
    "int_operand": (
        "n = arange(4)\nx = randn(4, requires_grad=True)\nloss = (x * n).sum()",
        "loss",
    ),
    "int_requires_grad_method": ("n = arange(3)\nn.requires_grad_()", None),
    "int_requires_grad_keyword": ("n = tensor([1, 2], requires_grad=True)", None),
    "bool_mask": (
        "b = ones(3, dtype=bool)\nx = randn(3, requires_grad=True)\nloss = (x * b).sum()",
        "loss",
    ),
    "float64_meets_float32": (
        "x = randn(3, dtype=float64, requires_grad=True)\ny = randn(3, requires_grad=True)\n"
        "loss = (x * y).sum()",
        "loss",
    ),
    "float16_values": ("x = randn(3, dtype=float16)\ny = x * 2", None),
    "arange_float_leaf": (
        "x = arange(4, dtype=float32, requires_grad=True)\nloss = (x * x).sum()",
        "loss",
    ),
    "empty_leaf": ("x = zeros(0, 3, requires_grad=True)\nloss = x.sum()", "loss"),
    "empty_reduced_over_dim": (
        "x = zeros(0, 3, requires_grad=True)\ny = x.sum(0)\nloss = y.sum()",
        "loss",
    ),
    "empty_mean_is_nan": ("x = zeros(0, requires_grad=True)\nloss = x.mean()", "loss"),
    "leaf_root_used": ("w = tensor(2.0, requires_grad=True)\ny = w * 3", "w"),
    "leaf_root_alone": ("w = tensor(2.0, requires_grad=True)", "w"),
    "leaf_root_one_element": ("w = ones(1, requires_grad=True)\na = w", "w"),
    "leaf_root_after_backward": (
        "w = tensor(1.5, requires_grad=True)\nl = w * w\nl.backward()",
        "w",
    ),
    "pow_keyword_tensor": (
        "x = randn(3, requires_grad=True)\ne = full((3,), 2.0)\nloss = x.pow(exponent=e).sum()",
        "loss",
    ),
    "item_then_use": (
        "x = randn(3, requires_grad=True)\nn = x.sum().item()\nloss = (x * n).sum()",
        "loss",
    ),
    "vector_matmul": (
        "v = randn(3, requires_grad=True)\nm = randn(3, 4, requires_grad=True)\n"
        "loss = (v @ m).sum()",
        "loss",
    ),
    "transpose_attribute": (
        "x = randn(2, 3, requires_grad=True)\nloss = (x.T @ x).sum()",
        "loss",
    ),
    "abs_at_zero": ("x = zeros(3, requires_grad=True)\nloss = x.abs().sum()", "loss"),
    "sqrt_at_zero_inf_grad": (
        "x = zeros(2, requires_grad=True)\nloss = x.sqrt().sum()",
        "loss",
    ),
    "log_of_negative_nan": (
        "x = full((2,), -1.0, requires_grad=True)\nloss = x.log().sum()",
        "loss",
    ),
    "mean_keepdim": (
        "x = randn(2, 3, requires_grad=True)\nm = x.mean(dim=1, keepdim=True)\n"
        "loss = (x - m).sum()",
        "loss",
    ),
    "eye_leaf": ("e = eye(3, requires_grad=True)\nloss = (e * 2).sum()", "loss"),
    "sub_alpha": (
        "x = randn(3, requires_grad=True)\ny = randn(3, requires_grad=True)\n"
        "loss = x.sub(y, alpha=2).sum()",
        "loss",
    ),
    "large_tensor_norm_only": (
        "x = randn(10, 10, requires_grad=True)\nloss = (x * x).sum()",
        "loss",
    ),
    "frozen_after_backward": (
        "w = ones(2, requires_grad=True)\nl = (w * 2).sum()\nl.backward()\n"
        "w.requires_grad_(False)\nv = randn(2, requires_grad=True)\nloss = (w * v).sum()",
        "loss",
    ),
    "frozen_after_backward_then_reset": (
        "w = ones(2, requires_grad=True)\nl = (w * 2).sum()\nl.backward()\n"
        "w.requires_grad_(False)\nw.grad = None\nv = randn(2, requires_grad=True)\n"
        "loss = (w * v).sum()",
        "loss",
    ),
    "inference_inplace_inside": (
        "with inference_mode():\n    y = randn(3)\n    y.add_(1)\n"
        "w = randn(3, requires_grad=True)\nloss = (w * 2).sum()",
        "loss",
    ),
    "inference_inplace_outside": ("with inference_mode():\n    y = randn(3)\ny.add_(1)", None),
    "inference_augmented_outside": ("with inference_mode():\n    y = randn(3)\ny += 1", None),
    "inference_requires_grad_outside": (
        "with inference_mode():\n    y = randn(3)\ny.requires_grad_()",
        None,
    ),
    "non_leaf_root_not_loss": (
        "w = randn(3, requires_grad=True)\nh = w.sigmoid()\nh2 = h.sum()\nloss = (h * 2).sum()",
        "h2",
    ),
}


def test_the_table_is_a_few_dozen_programs() -> None:
    assert len(TRICKY) >= 40


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_every_example_is_what_torch_reports(key: str) -> None:
    example = EXAMPLES[key]
    graph = trace(example.program)
    root = None if graph.error else (example.root or graph.default_root)
    check(example.program, root)


@pytest.mark.parametrize("key", sorted(TRICKY))
def test_tricky_programs_are_what_torch_reports(key: str) -> None:
    program, root = TRICKY[key]
    check(program, root)


def test_one_leaf_under_two_names_is_filled_under_both() -> None:
    """Issue 22.1: after ``a = w`` backward fills the one tensor's .grad; neither name is
    reported as "kept" (not filled by this backward)."""
    program = "w = ones(3, requires_grad=True)\na = w\nloss = (a * 2).sum()\n"
    graph = trace(program)
    assert graph.variable("w").aliases == ("w", "a") == graph.variable("a").aliases
    result = backward(graph, "loss")
    assert result.grad("w").reason is GradReason.FILLED
    assert result.grad("a").reason is GradReason.FILLED
    assert result.grad("w").filled_at == result.grad("a").filled_at is not None


def test_backward_from_a_scalar_leaf_fills_it() -> None:
    """Issue 22.2: ``w.backward()`` on a scalar leaf writes ``w.grad = 1``."""
    graph = trace("w = tensor(2.0, requires_grad=True)\n")
    assert "w" in graph.roots
    result = backward(graph, "w")
    assert result.error is None
    assert result.grad("w").reason is GradReason.FILLED
    assert result.grad("w").grad.flat == (1.0,)
    assert [s.name for s in result.steps] == ["AccumulateGrad"]


# ----------------------------------------------------------------------------- explanations


def torch_lesson(message: str) -> ErrorCode:
    """The lesson torch's own message names: the test's oracle (never the room's)."""
    table = [
        ("implicitly created only for scalar outputs", ErrorCode.NON_SCALAR_BACKWARD),
        ("backward through the graph a second time", ErrorCode.BACKWARD_TWICE),
        ("modified by an inplace operation", ErrorCode.INPLACE_SAVED),
        ("floating point", ErrorCode.INT_REQUIRES_GRAD),
        ("Can't call numpy() on Tensor that requires grad", ErrorCode.NUMPY_REQUIRES_GRAD),
        ("leaf Variable that requires grad is being used in an in-place", ErrorCode.LEAF_INPLACE),
        ("does not require grad and does not have a grad_fn", ErrorCode.NO_GRAD_FN),
        ("Inplace update to inference tensor outside InferenceMode", ErrorCode.INFERENCE_INPLACE),
        (
            "Setting requires_grad=True on inference tensor outside",
            ErrorCode.INFERENCE_REQUIRES_GRAD,
        ),
        ("Inference tensors cannot be saved for backward", ErrorCode.INFERENCE_TENSOR),
        ("Boolean value of Tensor with more than one value", ErrorCode.AMBIGUOUS_CONDITION),
        ("must match the size", ErrorCode.SHAPE_MISMATCH),
        ("cannot be multiplied", ErrorCode.SHAPE_MISMATCH),
        ("is invalid for input of size", ErrorCode.SHAPE_MISMATCH),
    ]
    return next((code for words, code in table if words in message), ErrorCode.TORCH_ERROR)


ERRORS: dict[str, str] = {
    "inference_inplace_outside": "with inference_mode():\n    y = randn(3)\ny.add_(1)",
    "inference_inplace_from_leaf": (
        "w = randn(3, requires_grad=True)\nwith inference_mode():\n    y = w * 2\ny.mul_(2)"
    ),
    "inference_augmented": "with inference_mode():\n    y = randn(3)\ny += 1",
    "inference_requires_grad": "with inference_mode():\n    y = randn(3)\ny.requires_grad_()",
    "inference_saved": (
        "w = randn(3, requires_grad=True)\nwith inference_mode():\n    y = w * 2\nz = w * y"
    ),
    "inference_saved_method": (
        "w = randn(3, requires_grad=True)\nwith inference_mode():\n    y = ones(3)\nz = w.mul(y)"
    ),
    "leaf_inplace": "w = randn(3, requires_grad=True)\nw.mul_(2)",
    "leaf_augmented": "w = randn(3, requires_grad=True)\nw += 1",
    "non_scalar": "w = randn(3, requires_grad=True)\ny = w * 2\ny.backward()",
    "twice": "w = randn(3, requires_grad=True)\nl = (w * w).sum()\nl.backward()\nl.backward()",
    "stale": (
        "a = randn(3, requires_grad=True)\ns = a.sigmoid()\ns.mul_(2)\nl = s.sum()\nl.backward()"
    ),
    "stale_exp": "a = randn(3, requires_grad=True)\ne = a.exp()\ne.add_(1)\ne.sum().backward()",
    "no_grad_fn": "x = randn(3)\nx.sum().backward()",
    "frozen_root": (
        "w = ones(2, requires_grad=True)\nw.requires_grad_(False)\nl = (w * 2).sum()\nl.backward()"
    ),
    "numpy": "w = randn(3, requires_grad=True)\nn = w.numpy()",
    "int_method": "n = arange(3)\nn.requires_grad_()",
    "int_keyword": "n = tensor([1, 2], requires_grad=True)",
    "ambiguous": "x = randn(3)\nif x > 0:\n    y = x",
    "broadcast": "x = randn(3)\ny = randn(4)\nz = x + y",
    "broadcast_method": "x = randn(3)\ny = randn(4)\nz = x.mul(y)",
    "matmul": "x = randn(2, 3)\ny = x @ x",
    "view": "x = randn(2, 3)\ny = x.view(4, 2)",
    "index_past_end": "x = randn(3)\ny = x[5]",
}


@pytest.mark.parametrize("key", sorted(ERRORS))
def test_each_refusal_is_explained_by_its_condition(key: str) -> None:
    """The room's lesson (decided from flags, saved tensors and the mode) is the one torch's
    own message names, on the same line."""
    program = ERRORS[key] + "\n"
    plain = run_plain(program)
    assert plain.error is not None, key
    graph = trace(program)
    assert graph.error is not None and graph.error.line == plain.error_line
    assert graph.error.code is torch_lesson(str(plain.error)), (key, graph.error, plain.error)
    assert graph.error.torch_message  # torch's words travel along


def test_a_stale_saved_tensor_reports_its_versions_from_torch() -> None:
    graph = trace(ERRORS["stale"] + "\n")
    plain = run_plain(ERRORS["stale"] + "\n")
    numbers = re.search(r"is at version (\d+); expected version (\d+)", str(plain.error))
    assert graph.error.params["version"] == int(numbers.group(1))
    assert graph.error.params["expected"] == int(numbers.group(2))


MISLEADING = [
    "Inference tensors cannot be saved for backward.",
    "a leaf Variable that requires grad is being used in an in-place operation.",
    "grad can be implicitly created only for scalar outputs",
    "Trying to backward through the graph a second time",
    "mat1 and mat2 shapes cannot be multiplied; Dimension out of range",
]


@pytest.mark.parametrize("words", MISLEADING)
def test_reworded_messages_never_change_the_lesson(words: str) -> None:
    """A fake torch error full of another lesson's words: the lesson is the condition's (an
    in-place write into an inference tensor outside inference mode), or no lesson at all
    without a condition."""
    with torch.inference_mode():
        y = torch.ones(3)
    fake = RuntimeError(words)
    lesson = inplace_lesson(y, [y])
    assert lesson is not None
    error = explain(TorchRefused(lesson[0], fake, lesson[1]), 3)
    assert error.code is ErrorCode.INFERENCE_INPLACE and error.torch_message == words
    assert call_lesson("add_", y, [1], {}, {})[0] is ErrorCode.INFERENCE_INPLACE
    with torch.inference_mode():  # inside inference mode the same write is allowed
        assert inplace_lesson(y, [y]) is None
        y.add_(1)
    assert explain(fake, 3).code is ErrorCode.TORCH_ERROR  # the words alone pick nothing


def test_a_stale_grad_after_requires_grad_off_is_not_called_none() -> None:
    program = TRICKY["frozen_after_backward"][0] + "\n"
    result = backward(trace(program), "loss")
    w = result.grad("w")
    assert w.grad is not None and w.grad.flat == (2.0, 2.0)
    assert w.reason is GradReason.FROZEN_KEPT


# ----------------------------------------------------------------------------- the quiz

QUIZ_SEEDS = [*range(0, 12), 999_999, 10**6]


def _plain_backward(program: str, seed: int, root: str) -> tuple[dict[str, Any], bool]:
    plain = run_plain(program, seed)
    try:
        plain.names[root].backward()
    except RuntimeError:
        return plain.names, True
    return plain.names, False


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_every_quiz_question_over_the_seed_range_is_torchs_answer(key: str) -> None:
    """For every example and seed: each question the quiz asks (the example's variables,
    each flag) has torch's answer among its options, and it is what plain torch says —
    "torch raises an error" where backward is refused."""
    example = EXAMPLES[key]
    program = example.program.strip() + "\n"
    for seed in QUIZ_SEEDS:
        graph = trace(program, seed=seed)
        if graph.error is not None:
            continue  # the quiz asks nothing of a program that stopped
        root = example.root or graph.default_root
        result = backward(graph, root) if root else None
        names, refused = _plain_backward(program, seed, root) if root else (None, False)
        plain = run_plain(program, seed).names
        variables = [v for v in example.quiz if graph.variable(v)] or [
            v.name for v in graph.variables[:3]
        ]
        for variable in variables:
            for question in Question:
                right = expected(graph, result, variable, question)
                assert right in options(question), (key, seed, variable, question)
                t = plain[variable]
                if question is Question.REQUIRES_GRAD:
                    assert right == str(t.requires_grad)
                elif question is Question.IS_LEAF:
                    assert right == str(t.is_leaf)
                elif refused:
                    assert right == ERROR
                else:
                    after = names[variable]
                    grad = after.grad if (after.is_leaf or after.retains_grad) else None
                    assert right == str(grad is None)


def test_a_refused_backward_is_the_quiz_answer() -> None:
    program = "w = randn(3, requires_grad=True)\ny = w * 2\n"
    graph = trace(program)
    result = backward(graph, "y")  # not a scalar: torch refuses
    assert result.error is not None
    assert expected(graph, result, "w", Question.GRAD_IS_NONE) == ERROR
    assert ERROR in options(Question.GRAD_IS_NONE)


@pytest.mark.parametrize(
    ("program", "code", "what"),
    [
        ("x = torch.zeros(True)", "bool_not_number", "True"),
        ("x = torch.ones(3, requires_grad=True)\ny = x[False]", "bool_not_number", "False"),
        ("x = torch.ones(4, requires_grad=True)\ny = x[[0, 1]].sum()", "index_list", None),
    ],
)
def test_booleans_and_index_lists_are_refused_by_name_not_as_sizes(program, code, what) -> None:
    """A boolean literal or an index list is named as what it is, never as 'not a size'."""
    from torchatlas.autograd.jobs import run_program

    error = run_program(program, 0, None, cached=False).graph.error
    assert error is not None and error.code.value == code, error
    if what is not None:
        assert error.params.get("what") == what, error.params


def test_a_bool_tensor_literal_is_accepted() -> None:
    from torchatlas.autograd.jobs import run_program

    run = run_program("x = torch.tensor([True, False])\ny = x.sum()", 0, None, cached=False)
    assert run.graph.error is None, run.graph.error
