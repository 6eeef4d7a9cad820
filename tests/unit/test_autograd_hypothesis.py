"""Random programs from the room's grammar — aliases, views, in-place writes, ``no_grad``,
``detach``, ``retain_grad``, earlier backward calls, ``.grad`` resets, integer tensors —
run by the engine and as plain torch (see :mod:`tests.unit.test_autograd_oracle`), every
field compared, backward from a root drawn among those the room offers."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.test_autograd_oracle import check
from torchatlas.autograd import trace

UNARY = ("relu", "sigmoid", "tanh", "exp", "sin", "detach", "clone", "abs", "square")
INPLACE = ("mul_(2)", "add_(1)", "relu_()", "sigmoid_()", "zero_()")


@st.composite
def programs(draw: st.DrawFn) -> str:
    names: list[str] = []
    lines: list[str] = []

    def pick() -> str:
        return draw(st.sampled_from(names))

    def fresh() -> str:
        # sometimes rebind a name the program already used (``x = x * 2``)
        if names and draw(st.integers(0, 4)) == 0:
            return pick()
        name = f"v{len(names)}"
        names.append(name)
        return name

    for _ in range(draw(st.integers(1, 3))):
        maker = draw(
            st.sampled_from(
                (
                    "randn(3, requires_grad=True)",
                    "randn(3)",
                    "ones(3, requires_grad=True)",
                    "arange(3)",
                    "tensor(1.5, requires_grad=True)",
                    "zeros(0, requires_grad=True)",
                )
            )
        )
        lines.append(f"{fresh()} = {maker}")
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.integers(0, 10))
        if kind == 0:
            source = pick()
            lines.append(f"{fresh()} = {source}")  # an alias: one tensor, two names
        elif kind == 1:
            source = pick()
            lines.append(f"{fresh()} = {source}.{draw(st.sampled_from(UNARY))}()")
        elif kind in (2, 3):
            left, right = pick(), pick()
            op = draw(st.sampled_from(("+", "-", "*", ".mul", "torch.add", ".pow")))
            if op == ".mul":
                expression = f"{left}.mul({right})"
            elif op == "torch.add":
                expression = f"torch.add({left}, {right}, alpha=2)"
            elif op == ".pow":
                expression = f"{left}.pow(exponent=2)"
            else:
                expression = f"{left} {op} {right}"
            lines.append(f"{fresh()} = {expression}")
        elif kind == 4:
            lines.append(f"{pick()}.{draw(st.sampled_from(INPLACE))}")
        elif kind == 5:
            source = pick()
            view = draw(st.sampled_from(("[0:2]", ".view(-1)", ".reshape(-1)", "[None]")))
            lines.append(f"{fresh()} = {source}{view}")
        elif kind == 6:
            lines.append(f"{pick()}.retain_grad()")
        elif kind == 7:
            source = pick()
            mode = draw(st.sampled_from(("no_grad", "inference_mode")))
            lines.append(f"with {mode}():\n    {fresh()} = {source} * 2")
        elif kind == 8:
            lines.append(f"{pick()}.sum().backward(retain_graph=True)")
        elif kind == 9:
            lines.append(f"{pick()}.grad = None")
        else:
            left, right = pick(), pick()
            lines.append(f"{left} += {right}")
    lines.append(f"loss = ({' + '.join(names)}).sum()")
    return "\n".join(lines) + "\n"


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # fmt: skip
@given(programs(), st.data())
def test_random_programs_are_what_torch_reports(program: str, data: st.DataObject) -> None:
    graph = trace(program)
    root = None
    if graph.error is None and graph.roots:
        root = data.draw(st.sampled_from(graph.roots))
    check(program, root)
