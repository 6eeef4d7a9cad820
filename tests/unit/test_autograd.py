"""torchatlas.autograd against torch itself: each program is also written as plain PyTorch
here (the same tensors from the same seeded generator), and every field of the Graph and the
BackwardTrace is compared with what torch reports for those tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchatlas.autograd import (
    TEACHING_CODES,
    BackwardTrace,
    ErrorCode,
    GradReason,
    Graph,
    SavedState,
    Values,
    backward,
    parse,
    python_code,
    trace,
    trace_and_backward,
)
from torchatlas.autograd.examples import EXAMPLES

Torch = Callable[[torch.Generator], dict[str, Any]]
CASES: dict[str, tuple[str, Torch, str | None]] = {}


def case(program: str, root: str | None = "loss") -> Callable[[Torch], Torch]:
    def register(function: Torch) -> Torch:
        CASES[function.__name__] = (program.strip() + "\n", function, root)
        return function

    return register


def _tensors(namespace: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in namespace.items() if isinstance(v, torch.Tensor)}


# ----------------------------------------------------------------------------- programs


@case(EXAMPLES["propagation"].program)
def propagation(g):
    x = torch.randn(5, 5, generator=g)
    y = torch.randn(5, 5, generator=g)
    z = torch.randn(5, 5, generator=g, requires_grad=True)
    a = x + y
    b = a + z
    loss = (b * b).sum()
    return locals()


@case(EXAMPLES["mlp"].program)
def mlp(g):
    x = torch.randn(4, 3, generator=g)
    target = torch.randn(4, 2, generator=g)
    w1 = torch.randn(3, 8, generator=g, requires_grad=True)
    b1 = torch.zeros(8, requires_grad=True)
    w2 = torch.randn(8, 2, generator=g, requires_grad=True)
    h = (x @ w1 + b1).relu()
    out = h @ w2
    loss = ((out - target) ** 2).mean()
    return locals()


@case(EXAMPLES["control_flow"].program)
def control_flow(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    w = torch.randn(3, generator=g, requires_grad=True)
    y = (x * w).exp() if (x * w).sum() > 0 else (x * w).sigmoid()
    for _i in range(2):
        y = y * 2
    loss = y.sum()
    return locals()


@case(EXAMPLES["no_grad"].program)
def no_grad(g):
    w = torch.randn(3, generator=g, requires_grad=True)
    x = torch.randn(3, generator=g)
    with torch.no_grad():
        frozen = w * x
    with torch.inference_mode():
        fast = w * x
    y = w * x
    loss = (y + frozen).sum()
    return locals()


@case(EXAMPLES["detach"].program)
def detach(g):
    w = torch.randn(3, generator=g, requires_grad=True)
    h = w * 2
    d = h.detach()
    loss = (h * d).sum()
    return locals()


@case(EXAMPLES["retain_grad"].program)
def retain_grad(g):
    w = torch.randn(3, generator=g, requires_grad=True)
    h = w.tanh()
    h.retain_grad()
    out = h * 3
    loss = out.sum()
    return locals()


@case(EXAMPLES["accumulate"].program)
def accumulate(g):
    w = torch.ones(3, requires_grad=True)
    x = torch.tensor([1.0, 2.0, 3.0])
    first = (w * x).sum()
    first.backward()
    loss = (w * x).sum()
    return locals()


@case(
    """
w = rand(2, 3, requires_grad=True)
v = w.view(3, 2)
u = v.t()
loss = (u.exp() * 0.5 - 1).mean()
"""
)
def views(g):
    w = torch.rand(2, 3, generator=g, requires_grad=True)
    v = w.view(3, 2)
    u = v.t()
    loss = (u.exp() * 0.5 - 1).mean()
    return locals()


@case(
    """
a = full((2, 2), 3.0, requires_grad=True)
b = eye(2)
c = a @ b + a.T
loss = c.pow(2).sum()
"""
)
def matrix(g):
    a = torch.full((2, 2), 3.0, requires_grad=True)
    b = torch.eye(2)
    c = a @ b + a.T
    loss = c.pow(2).sum()
    return locals()


@case(
    """
x = arange(6, dtype=float32).reshape(2, 3)
x.requires_grad_()
s = torch.sigmoid(x)
t = torch.tanh(s)
loss = torch.sum(t * s)
"""
)
def functions(g):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    x.requires_grad_()
    s = torch.sigmoid(x)
    t = torch.tanh(s)
    loss = torch.sum(t * s)
    return locals()


@case(
    """
x = randn(4, requires_grad=True)
y = x.clone()
y.mul_(3)
loss = y.sum()
"""
)
def clone_inplace(g):
    x = torch.randn(4, generator=g, requires_grad=True)
    y = x.clone()
    y.mul_(3)
    loss = y.sum()
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
h = x * 1
for i in range(4):
    h = h * x + i
loss = h.sum()
"""
)
def loop(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    h = x * 1
    for i in range(4):
        h = h * x + i
    loss = h.sum()
    return locals()


@case(
    """
x = randn(2, 2, dtype=float64, requires_grad=True)
y = -x
z = y.abs().sqrt()
loss = z.log().sum() / 4
"""
)
def float64(g):
    x = torch.randn(2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    y = -x
    z = y.abs().sqrt()
    loss = z.log().sum() / 4
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
y = randn(3, requires_grad=True)
q = x * y
loss = q.sum()
loss.backward(retain_graph=True)
again = q.mean()
""",
    root="again",
)
def retain_graph(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    y = torch.randn(3, generator=g, requires_grad=True)
    q = x * y
    loss = q.sum()
    loss.backward(retain_graph=True)
    again = q.mean()
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
x.grad = None
y = (x * 2).sum()
y.backward()
x.grad = None
loss = (x.sin()).sum()
"""
)
def grad_reset(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    x.grad = None
    y = (x * 2).sum()
    y.backward()
    x.grad = None
    loss = (x.sin()).sum()
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
unused = randn(3, requires_grad=True)
y = x.cos()
loss = y[0] + y[2]
"""
)
def unreached(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    unused = torch.randn(3, generator=g, requires_grad=True)
    y = x.cos()
    loss = y[0] + y[2]
    return locals()


@case(
    """
w = randn(3, 3, requires_grad=True)
x = ones(3)
with no_grad():
    w.sub_(0.5)
y = w.mm(x.view(3, 1))
loss = y.square().sum()
"""
)
def update_in_no_grad(g):
    w = torch.randn(3, 3, generator=g, requires_grad=True)
    x = torch.ones(3)
    with torch.no_grad():
        w.sub_(0.5)
    y = w.mm(x.view(3, 1))
    loss = y.square().sum()
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
a = x.relu()
b = x.sigmoid()
c = torch.mul(a, b)
d = torch.add(c, x, alpha=2)
loss = d.div(3).sum()
"""
)
def diamond(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    a = x.relu()
    b = x.sigmoid()
    c = torch.mul(a, b)
    d = torch.add(c, x, alpha=2)
    loss = d.div(3).sum()
    return locals()


@case(
    """
x = randn(2, 3)
x.requires_grad_(True)
total = zeros(1)
for i in range(3):
    total = total + (x * i).sum()
loss = total.sum()
"""
)
def accumulate_loop(g):
    x = torch.randn(2, 3, generator=g)
    x.requires_grad_(True)
    total = torch.zeros(1)
    for i in range(3):
        total = total + (x * i).sum()
    loss = total.sum()
    return locals()


@case(
    """
x = randn(3)
y = x * 2
loss = y.sum()
""",
    root=None,
)
def nothing_requires_grad(g):
    x = torch.randn(3, generator=g)
    y = x * 2
    loss = y.sum()
    return locals()


@case(
    """
w = randn(3, requires_grad=True)
x = randn(3)
loss = (w * x).sum()
n = loss.item()
"""
)
def item(g):
    w = torch.randn(3, generator=g, requires_grad=True)
    x = torch.randn(3, generator=g)
    loss = (w * x).sum()
    n = loss.item()
    return locals()


@case(
    """
x = randn(3, requires_grad=True)
with no_grad():
    y = x * 2
    with enable_grad():
        z = x * 3
loss = (z + y).sum()
"""
)
def enable_grad(g):
    x = torch.randn(3, generator=g, requires_grad=True)
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = x * 3
    loss = (z + y).sum()
    return locals()


@case(
    """
x = randn(4, requires_grad=True)
x = x * 2
x = x + 1
loss = x.sum()
"""
)
def rebinding(g):
    x = torch.randn(4, generator=g, requires_grad=True)
    x = x * 2
    x = x + 1
    loss = x.sum()
    return locals()


def test_at_least_twenty_programs() -> None:
    assert len(CASES) >= 20


# ----------------------------------------------------------------------------- comparisons


def _walk(fn: Any) -> list[Any]:
    seen, order, stack = set(), [], [fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(n for n, _ in node.next_functions)
    return order


def _same(values: Values | None, tensor: torch.Tensor | None) -> None:
    if tensor is None:
        assert values is None
        return
    assert values is not None
    assert values.shape == tuple(tensor.shape)
    assert values.flat is not None
    expected = tensor.detach().reshape(-1).tolist()
    assert list(values.flat) == pytest.approx(expected, rel=1e-6, abs=1e-6, nan_ok=True)


def assert_graph_matches(graph: Graph, namespace: dict[str, Any]) -> None:
    tensors = _tensors(namespace)
    assert [v.name for v in graph.variables] == list(tensors)
    for info in graph.variables:
        t = tensors[info.name]
        assert info.shape == tuple(t.shape)
        assert info.dtype == str(t.dtype).removeprefix("torch.")
        assert info.requires_grad is t.requires_grad
        assert info.is_leaf is t.is_leaf
        assert info.retains_grad is t.retains_grad
        assert info.is_inference is t.is_inference()
        assert info.version == (None if t.is_inference() else t._version)
        _same(info.values, t)
        _same(info.grad, t.grad if (t.is_leaf or t.retains_grad) else None)
        if t.grad_fn is None:
            assert info.grad_fn is None and info.node is None
            continue
        assert info.grad_fn == type(t.grad_fn).__name__
        node = graph.nodes[info.node]
        assert node.name == info.grad_fn
        assert info.name in node.outputs_of
        # the edges, as next_functions lists them
        expected = [
            (None if n is None else type(n).__name__, nr) for n, nr in t.grad_fn.next_functions
        ]
        got = [
            (None if e.target is None else graph.nodes[e.target].name, e.input_nr)
            for e in node.edges
        ]
        assert got == expected
    # every node reachable from a variable is in the graph, once
    reachable = {fn for t in tensors.values() if t.grad_fn is not None for fn in _walk(t.grad_fn)}
    named = sorted(type(fn).__name__ for fn in reachable)
    assert sorted(n.name for n in graph.nodes if _reachable_from_final(graph, n.index)) == named
    # AccumulateGrad nodes name the leaf they fill
    for node in graph.nodes:
        if node.name == "AccumulateGrad" and node.leaf in tensors:
            assert tensors[node.leaf].is_leaf and tensors[node.leaf].requires_grad


def _reachable_from_final(graph: Graph, index: int) -> bool:
    starts = [v.node for v in graph.variables if v.node is not None]
    seen, stack = set(), list(starts)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        stack.extend(e.target for e in graph.nodes[i].edges if e.target is not None)
    return index in seen


def assert_backward_matches(result: BackwardTrace, namespace: dict[str, Any], root: str) -> None:
    tensors = _tensors(namespace)
    root_tensor = tensors[root]
    before = {
        name: None if t.grad is None else t.grad.clone()
        for name, t in tensors.items()
        if t.is_leaf or t.retains_grad
    }
    expected_nodes = _walk(root_tensor.grad_fn)
    root_tensor.backward()
    assert result.error is None
    # autograd ran each node reachable from the root exactly once (no_grad edges excluded)
    assert sorted(s.name for s in result.steps) == sorted(
        type(fn).__name__ for fn in expected_nodes
    )
    assert result.total_steps == len(result.steps)
    # the first step is the root's grad_fn, seeded with ones
    first = result.steps[0]
    assert first.name == type(root_tensor.grad_fn).__name__
    _same(first.grad_in[0], torch.ones_like(root_tensor))
    # a node runs only after every node that sends it a gradient
    position = {s.node: s.index for s in result.steps}
    for s in result.steps:
        for edge in result.graph.nodes[s.node].edges:
            if edge.target is not None and edge.target in position:
                assert position[edge.target] > s.index
    # the final .grad of every variable, and why it is None where it is
    assert [g.name for g in result.grads] == list(tensors)
    for g in result.grads:
        t = tensors[g.name]
        grad = t.grad if (t.is_leaf or t.retains_grad) else None
        _same(g.grad, grad)
        _same(g.before, before.get(g.name))
        if t.is_leaf and not t.requires_grad:
            assert g.reason is GradReason.NO_REQUIRES_GRAD
        elif not t.is_leaf and not t.retains_grad:
            assert g.reason is GradReason.NOT_LEAF
        elif grad is None:
            assert g.reason is GradReason.NOT_REACHED
        if g.reason is GradReason.FILLED:
            step = result.steps[g.filled_at]
            assert step.name == "AccumulateGrad" and step.leaf == g.name
            # what came into AccumulateGrad is what this backward added to .grad
            added = grad - (before[g.name] if before[g.name] is not None else 0)
            _same(step.grad_in[0], added)


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_and_backward_match_torch(name: str) -> None:
    program, build, root = CASES[name]
    graph = trace(program, seed=0)
    assert graph.error is None, graph.error
    namespace = build(torch.Generator().manual_seed(0))
    assert_graph_matches(graph, namespace)
    if root is None:
        assert graph.default_root is None
        return
    assert root in graph.roots
    result = backward(graph, root)
    assert result.graph == graph  # the replay ran the same program to the same graph
    assert_backward_matches(result, namespace, root)


def test_other_values_are_recorded() -> None:
    graph = trace(CASES["item"][0])
    (n,) = graph.others
    assert n.name == "n" and n.kind == "number"
    namespace = item(torch.Generator().manual_seed(0))
    assert float(n.text) == pytest.approx(namespace["n"])


def test_seed_changes_the_graph_under_control_flow() -> None:
    """The graph is rebuilt per run: a different input takes the other branch."""
    names = set()
    for seed in range(12):
        graph = trace(EXAMPLES["control_flow"].program, seed=seed)
        names.add(tuple(sorted(n.name for n in graph.nodes)))
        namespace = control_flow(torch.Generator().manual_seed(seed))
        assert_graph_matches(graph, namespace)
    assert len(names) == 2


def test_saved_tensors_are_read_from_the_nodes() -> None:
    graph = trace("x = randn(3, requires_grad=True)\ny = x.sigmoid()\nz = x * y\n")
    sigmoid = graph.nodes[graph.variable("y").node]
    assert [(s.name, s.shape, s.state) for s in sigmoid.saved] == [("result", (3,), SavedState.OK)]
    mul = graph.nodes[graph.variable("z").node]
    assert {s.name for s in mul.saved} == {"self", "other"}


def test_trace_and_backward_is_one_run_with_the_same_answer() -> None:
    program = EXAMPLES["mlp"].program
    graph, result = trace_and_backward(program)
    assert graph == trace(program)
    assert result is not None
    again = backward(graph, "loss")
    assert result.steps == again.steps and result.grads == again.grads


def test_steps_keep_a_prefix() -> None:
    graph = trace(EXAMPLES["mlp"].program)
    full = backward(graph, "loss")
    three = backward(graph, "loss", steps=3)
    assert three.steps == full.steps[:3] and three.total_steps == full.total_steps
    assert three.grads == full.grads
    assert full.reached(2) == full.steps[:2]


def test_python_code_runs_to_the_same_values() -> None:
    """The code the page shows for copying is plain PyTorch and gives the same tensors."""
    program, _, _ = CASES["mlp"]
    code = python_code(parse(program), seed=0)
    assert code.startswith("import torch")
    namespace: dict[str, Any] = {}
    exec(compile(code, "<room code>", "exec"), namespace)
    graph = trace(program)
    for info in graph.variables:
        _same(info.values, namespace[info.name])


# ----------------------------------------------------------------------------- teaching errors


@pytest.mark.parametrize("code", TEACHING_CODES)
def test_every_teaching_error_comes_from_torch(code: ErrorCode) -> None:
    example = next(e for e in EXAMPLES.values() if e.error is code)
    graph = trace(example.program)
    error = graph.error
    if error is None:  # raised by backward, not by the program
        root = example.root or graph.default_root
        error = backward(graph, root).error
    assert error is not None and error.code is code
    assert error.torch_message  # torch's own words travel along
    assert error.line >= 1
    assert "autograd.errors" not in error.message  # English text exists


def test_in_place_trap_shows_the_version_counter() -> None:
    graph = trace(EXAMPLES["inplace_trap"].program)
    a = graph.variable("a")
    assert a.version == 1
    (saved,) = graph.nodes[a.node].saved if a.grad_fn == "SigmoidBackward0" else (None,)
    result = backward(graph, "loss")
    assert result.error.code is ErrorCode.INPLACE_SAVED
    assert result.error.params["version"] == 1 and result.error.params["expected"] == 0
    # the saved output of sigmoid is stale: torch refuses to unpack it
    x = graph.variable("x")
    sigmoid = next(n for n in graph.nodes if n.name == "SigmoidBackward0")
    assert [s.state for s in sigmoid.saved] == [SavedState.STALE]
    assert x.version == 0
    assert saved is None or saved.state is SavedState.STALE


def test_torch_words_alone_never_pick_a_lesson() -> None:
    """Issue 34.7: the lesson is decided where torch raised, from the condition (flags,
    saved tensors, mode). The same exceptions handed to ``explain`` bare, without the
    condition, keep torch's words and are no lesson: a message's wording picks nothing."""
    from torchatlas.autograd.errors import explain

    w = torch.ones(3, requires_grad=True)
    raised = []
    for action in (
        lambda: (w * 2).backward(),
        lambda: torch.tensor([1, 2], requires_grad=True),
        lambda: w.numpy(),
        lambda: w.add_(1),
        lambda: torch.ones(3).sum().backward(),
    ):
        with pytest.raises(RuntimeError) as info:
            action()
        error = explain(info.value, 1)
        assert error.torch_message and error.torch_message in str(info.value)
        raised.append(error.code)
    assert raised == [ErrorCode.TORCH_ERROR] * 5


@pytest.mark.parametrize(
    ("program", "code"),
    [
        ("w = ones(3, requires_grad=True)\ny = w * 2\ny.backward()", ErrorCode.NON_SCALAR_BACKWARD),
        ("n = tensor([1, 2], requires_grad=True)", ErrorCode.INT_REQUIRES_GRAD),
        ("w = ones(3, requires_grad=True)\nn = w.numpy()", ErrorCode.NUMPY_REQUIRES_GRAD),
        ("w = ones(3, requires_grad=True)\nw.add_(1)", ErrorCode.LEAF_INPLACE),
        ("x = ones(3)\nx.sum().backward()", ErrorCode.NO_GRAD_FN),
        (
            "w = ones(3, requires_grad=True)\nl = (w * w).sum()\nl.backward()\nl.backward()",
            ErrorCode.BACKWARD_TWICE,
        ),
    ],
)
def test_teaching_errors_through_the_room_get_their_codes(program: str, code: ErrorCode) -> None:
    error = trace(program).error
    assert error is not None and error.code is code and error.torch_message


def test_program_error_keeps_what_ran_before() -> None:
    graph = trace("w = randn(3, requires_grad=True)\na = w * 2\nb = a.numpy()\nc = a + 1\n")
    assert graph.error.code is ErrorCode.NUMPY_REQUIRES_GRAD and graph.error.line == 3
    assert [v.name for v in graph.variables] == ["w", "a"]


def test_backward_from_a_name_that_is_not_a_tensor() -> None:
    graph = trace(CASES["item"][0])
    assert backward(graph, "n").error.code is ErrorCode.NO_ROOT
    assert backward(graph, "missing").error.code is ErrorCode.NO_ROOT


# ----------------------------------------------------------------------------- property test

UNARY = ("relu", "sigmoid", "tanh", "exp", "sin", "detach", "clone")
BINARY = ("+", "-", "*")


@st.composite
def programs(draw: st.DrawFn) -> list[tuple[str, ...]]:
    leaves = draw(st.integers(2, 3))
    ops: list[tuple[str, ...]] = [
        ("leaf", f"v{i}", str(draw(st.booleans()))) for i in range(leaves)
    ]
    for index in range(draw(st.integers(1, 6))):
        name = f"v{leaves + index}"
        pool = [op[1] for op in ops]
        if draw(st.booleans()):
            ops.append(("unary", name, draw(st.sampled_from(UNARY)), draw(st.sampled_from(pool))))
        else:
            ops.append(
                (
                    "binary",
                    name,
                    draw(st.sampled_from(BINARY)),
                    draw(st.sampled_from(pool)),
                    draw(st.sampled_from(pool)),
                )
            )
    return ops


def _render(ops: list[tuple[str, ...]]) -> tuple[str, dict[str, Any]]:
    lines, namespace = [], {}
    g = torch.Generator().manual_seed(0)
    for op in ops:
        if op[0] == "leaf":
            lines.append(f"{op[1]} = randn(3, requires_grad={op[2]})")
            namespace[op[1]] = torch.randn(3, generator=g, requires_grad=op[2] == "True")
        elif op[0] == "unary":
            lines.append(f"{op[1]} = {op[3]}.{op[2]}()")
            namespace[op[1]] = getattr(namespace[op[3]], op[2])()
        else:
            lines.append(f"{op[1]} = {op[3]} {op[2]} {op[4]}")
            left, right = namespace[op[3]], namespace[op[4]]
            namespace[op[1]] = {"+": left + right, "-": left - right, "*": left * right}[op[2]]
    lines.append("loss = (" + " + ".join(op[1] for op in ops) + ").sum()")
    total = namespace[ops[0][1]]
    for op in ops[1:]:
        total = total + namespace[op[1]]
    namespace["loss"] = total.sum()
    return "\n".join(lines) + "\n", namespace


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_programs_match_torch(ops: list[tuple[str, ...]]) -> None:
    program, namespace = _render(ops)
    graph = trace(program)
    assert graph.error is None
    assert_graph_matches(graph, namespace)
    if namespace["loss"].requires_grad:
        assert_backward_matches(backward(graph, "loss"), namespace, "loss")
    else:
        assert graph.variable("loss").grad_fn is None
