"""The room's example programs: each a lesson of the curriculum, run on real torch."""

from __future__ import annotations

from dataclasses import dataclass

from torchatlas.autograd.errors import ErrorCode


@dataclass(frozen=True)
class Example:
    key: str
    program: str
    root: str | None = None  # backward starts here (default: the graph's own choice)
    error: ErrorCode | None = None  # the teaching error this example makes torch raise
    quiz: tuple[str, ...] = ()  # the variables the prediction quiz asks about


def _example(key: str, program: str, **kwargs: object) -> Example:
    return Example(key, program.strip() + "\n", **kwargs)  # type: ignore[arg-type]


EXAMPLES: dict[str, Example] = {
    e.key: e
    for e in (
        _example(
            "propagation",
            """
x = randn(5, 5)
y = randn(5, 5)
z = randn(5, 5, requires_grad=True)
a = x + y
b = a + z
loss = (b * b).sum()
""",
            quiz=("a", "b", "z"),
        ),
        _example(
            "mlp",
            """
x = randn(4, 3)
target = randn(4, 2)
w1 = randn(3, 8, requires_grad=True)
b1 = zeros(8, requires_grad=True)
w2 = randn(8, 2, requires_grad=True)
h = (x @ w1 + b1).relu()
out = h @ w2
loss = ((out - target) ** 2).mean()
""",
            quiz=("x", "w1", "h"),
        ),
        _example(
            "control_flow",
            """
x = randn(3, requires_grad=True)
w = randn(3, requires_grad=True)
if (x * w).sum() > 0:
    y = (x * w).exp()
else:
    y = (x * w).sigmoid()
for i in range(2):
    y = y * 2
loss = y.sum()
""",
            quiz=("x", "y", "w"),
        ),
        _example(
            "inplace_trap",
            """
x = randn(4, requires_grad=True)
a = x.sigmoid()
a.mul_(2)
loss = a.sum()
""",
            error=ErrorCode.INPLACE_SAVED,
            quiz=("x", "a"),
        ),
        _example(
            "no_grad",
            """
w = randn(3, requires_grad=True)
x = randn(3)
with no_grad():
    frozen = w * x
with inference_mode():
    fast = w * x
y = w * x
loss = (y + frozen).sum()
""",
            quiz=("frozen", "fast", "y"),
        ),
        _example(
            "detach",
            """
w = randn(3, requires_grad=True)
h = w * 2
d = h.detach()
loss = (h * d).sum()
""",
            quiz=("h", "d", "w"),
        ),
        _example(
            "retain_grad",
            """
w = randn(3, requires_grad=True)
h = w.tanh()
h.retain_grad()
out = h * 3
loss = out.sum()
""",
            quiz=("h", "out", "w"),
        ),
        _example(
            "accumulate",
            """
w = ones(3, requires_grad=True)
x = tensor([1.0, 2.0, 3.0])
first = (w * x).sum()
first.backward()
loss = (w * x).sum()
""",
            quiz=("w", "x", "first"),
        ),
        # the teaching errors the in-place example does not already show
        _example(
            "non_scalar",
            """
w = randn(3, requires_grad=True)
y = w * 2
y.backward()
""",
            error=ErrorCode.NON_SCALAR_BACKWARD,
        ),
        _example(
            "backward_twice",
            """
w = randn(3, requires_grad=True)
loss = (w * w).sum()
loss.backward()
loss.backward()
""",
            error=ErrorCode.BACKWARD_TWICE,
        ),
        _example(
            "int_requires_grad",
            """
n = arange(3, requires_grad=True)
""",
            error=ErrorCode.INT_REQUIRES_GRAD,
        ),
        _example(
            "numpy_requires_grad",
            """
w = randn(3, requires_grad=True)
a = w.numpy()
""",
            error=ErrorCode.NUMPY_REQUIRES_GRAD,
        ),
        _example(
            "leaf_inplace",
            """
w = randn(3, requires_grad=True)
w += 1
""",
            error=ErrorCode.LEAF_INPLACE,
        ),
    )
}
DEFAULT_EXAMPLE = "propagation"
