"""The autograd room's allow-list parser: what it accepts, what it refuses (with a code, the
line and what was refused), and that a refused program never runs, not even its good lines."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import torchatlas.autograd.run as run_module
from torchatlas.autograd import ErrorCode, ProgramRefused, parse, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.parser import MAX_ELEMENTS, MAX_LOOP, MAX_OPS, MAX_SOURCE, python_code
from torchatlas.i18n import placeholders, table, translate


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to run a program fails the test: refusals must come before running."""

    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the interpreter ran a refused program")

    monkeypatch.setattr(run_module, "execute", forbidden)
    import torchatlas.autograd as package

    monkeypatch.setattr(package, "execute", forbidden)


REFUSED: list[tuple[str, ErrorCode, int]] = [
    ("x = randn(3)\ny = x.__class__", ErrorCode.PRIVATE_NAME, 2),
    ("x = randn(3)\ny = x.__class__.__base__.__subclasses__()", ErrorCode.PRIVATE_NAME, 2),
    ("x = randn(3)\nx._version", ErrorCode.PRIVATE_NAME, 2),
    ("import os", ErrorCode.NOT_ALLOWED, 1),
    ("from torch import randn", ErrorCode.NOT_ALLOWED, 1),
    ("f = lambda: 1", ErrorCode.NOT_ALLOWED, 1),
    ("def f():\n    pass", ErrorCode.NOT_ALLOWED, 1),
    ("class A:\n    pass", ErrorCode.NOT_ALLOWED, 1),
    ("x = open('/etc/passwd')", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = eval('1')", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = getattr(randn(3), 'grad')", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = torch.load('f')", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = torch.os", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = torch.hub.load('a', 'b')", ErrorCode.UNKNOWN_METHOD, 1),
    ("x = randn(3)\ny = x.storage()", ErrorCode.UNKNOWN_METHOD, 2),
    ("x = randn(3)\ny = x.data", ErrorCode.UNKNOWN_ATTRIBUTE, 2),
    ("x = randn(3)\ny = x.sum(out=x)", ErrorCode.BAD_KEYWORD, 2),
    ("x = randn(3, device='cuda')", ErrorCode.BAD_KEYWORD, 1),
    ("x = randn(3, **{'a': 1})", ErrorCode.BAD_KEYWORD, 1),
    ("x = randn(*[3])", ErrorCode.NOT_ALLOWED, 1),
    ("x = 'text'", ErrorCode.BAD_LITERAL, 1),
    ("x = f'{1}'", ErrorCode.NOT_ALLOWED, 1),
    ("x = randn(3, dtype=print)", ErrorCode.BAD_LITERAL, 1),
    ("x = [i for i in range(3)]", ErrorCode.NOT_ALLOWED, 1),
    ("x = {1: 2}", ErrorCode.NOT_ALLOWED, 1),
    ("x, y = 1, 2", ErrorCode.BAD_TARGET, 1),
    ("x = y = 1", ErrorCode.BAD_TARGET, 1),
    ("x = randn(3)\nx[0] = 1", ErrorCode.BAD_TARGET, 2),
    ("x = randn(3)\nx.grad = x", ErrorCode.BAD_TARGET, 2),
    ("randn = 1", ErrorCode.RESERVED_NAME, 1),
    ("torch = 1", ErrorCode.RESERVED_NAME, 1),
    ("with open('f'):\n    pass", ErrorCode.BAD_WITH, 1),
    ("with no_grad() as g:\n    pass", ErrorCode.BAD_WITH, 1),
    ("for i in range(1000000):\n    pass", ErrorCode.BAD_LOOP, 1),
    ("for i in range(n):\n    pass", ErrorCode.BAD_LOOP, 1),
    ("x = randn(3)\nfor i in x:\n    pass", ErrorCode.BAD_LOOP, 2),
    ("while True:\n    pass", ErrorCode.NOT_ALLOWED, 1),
    ("x = randn(1)\nif x:\n    pass", ErrorCode.BAD_CONDITION, 2),
    ("x = randn(1)\nif 0 < x < 1:\n    pass", ErrorCode.BAD_CONDITION, 2),
    ("try:\n    pass\nexcept Exception:\n    pass", ErrorCode.NOT_ALLOWED, 1),
    ("x = randn(3)\ndel x", ErrorCode.NOT_ALLOWED, 2),
    ("global x", ErrorCode.NOT_ALLOWED, 1),
    ("x = (yield)", ErrorCode.NOT_ALLOWED, 1),
    ("x = randn(3) if True else 1", ErrorCode.NOT_ALLOWED, 1),
    ("x = not 1", ErrorCode.NOT_ALLOWED, 1),
    ("x = 1 < 2", ErrorCode.NOT_ALLOWED, 1),
    ("x = 7 // 2", ErrorCode.NOT_ALLOWED, 1),
    ("x = randn(3\n", ErrorCode.SYNTAX, 1),
    ("", ErrorCode.EMPTY, 0),
    ("   \n  ", ErrorCode.EMPTY, 0),
    ("x = sum(randn(3))", ErrorCode.UNKNOWN_FUNCTION, 1),
    ("x = " + "-" * 20 + "1", ErrorCode.TOO_DEEP, 1),
    ("x = " + "(" * 300 + "1" + ")" * 300, ErrorCode.TOO_DEEP, 1),
    ("x = " + "[" * 1000 + "]" * 1000, ErrorCode.TOO_DEEP, 1),
    ("with no_grad():\n with no_grad():\n  with no_grad():\n   with no_grad():\n    x = 1",
     ErrorCode.TOO_DEEP, 5),
    ("x = randn(2)\n" * 81, ErrorCode.TOO_MANY_LINES, 81),
    ("x = ones(1)\nfor i in range(10):\n for j in range(10):\n  for k in range(10):\n   x = x + 1",
     ErrorCode.TOO_MANY_OPS, 0),
    ("x = 1\n" + "#" * MAX_SOURCE, ErrorCode.TOO_LONG, 0),
]  # fmt: skip


@pytest.mark.parametrize(("program", "code", "line"), REFUSED)
def test_refused_without_running(
    nothing_runs: None, program: str, code: ErrorCode, line: int
) -> None:
    with pytest.raises(ProgramRefused) as info:
        trace(program)
    assert info.value.code is code, info.value.params
    assert info.value.params["line"] == line
    text = info.value.message
    assert not text.startswith("autograd.errors")  # a real sentence, with its parameters
    template = table("en")[f"autograd.errors.{code}"]
    assert all(f"{{{name}}}" not in text for name in placeholders(template))


def test_refusal_names_what_was_refused() -> None:
    with pytest.raises(ProgramRefused) as info:
        parse("x = randn(3)\ny = x.storage()")
    assert info.value.params["name"] == "storage"
    assert "storage" in info.value.message
    assert "storage" in translate("autograd.errors.unknown_method", "ko", **info.value.params)


def test_a_refused_program_runs_none_of_its_good_lines(tmp_path: Path) -> None:
    """The good first line does not run either: the whole text is checked first."""
    target = tmp_path / "written"
    with pytest.raises(ProgramRefused):
        trace(f"x = randn(3)\nopen({str(target)!r}, 'w')")
    assert not target.exists()


def test_every_error_code_has_text_in_both_languages() -> None:
    for code in ErrorCode:
        for lang in ("en", "ko"):
            assert f"autograd.errors.{code}" in table(lang), (code, lang)


@pytest.mark.parametrize(
    ("program", "code"),
    [
        (f"x = randn({MAX_ELEMENTS + 1})", ErrorCode.TOO_BIG),
        ("x = randn(64, 65)", ErrorCode.TOO_BIG),
        ("x = randn(4096, 1)\ny = randn(1, 4096)\nz = x + y", ErrorCode.TOO_BIG),
        ("x = randn(4096, 1)\ny = randn(1, 4096)\nz = x @ y", ErrorCode.TOO_BIG),
        ("x = randn(4096, 1)\ny = randn(1, 4096)\nz = x.mul(y)", ErrorCode.TOO_BIG),
        ("x = randn(-1)", ErrorCode.BAD_SIZE),
        ("x = randn(2.5)", ErrorCode.BAD_SIZE),
        ("x = arange(0, 100000, 0.5)", ErrorCode.TOO_BIG),
        ("x = tensor([" + ", ".join(["1"] * 600) + "] )\ny = x.view(2, 300)", None),
        (
            "n = 2\nfor i in range(10):\n    n = n * n",
            ErrorCode.NUMBER_TOO_BIG,
        ),  # a number, not elements
        ("n = 2 ** 100000", ErrorCode.NUMBER_TOO_BIG),
        ("x = y + 1", ErrorCode.UNKNOWN_NAME),
        ("x = randn(3)\ny = x.numpy()\nz = y + 1", ErrorCode.NOT_A_TENSOR),
        ("x = randn(3)\nif x > 0:\n    y = x", ErrorCode.AMBIGUOUS_CONDITION),
        ("x = randn(3)\ny = randn(4)\nz = x + y", ErrorCode.SHAPE_MISMATCH),
        ("x = randn(2, 3)\ny = x @ x", ErrorCode.SHAPE_MISMATCH),
        ("x = eye(4096)", ErrorCode.TOO_BIG),
        ("x = eye(64)", None),
        ("x = eye(2, 4096)", ErrorCode.TOO_BIG),
        ("x = randn(3, requires_grad=True)\nx.grad.zero_()", ErrorCode.NOT_A_TENSOR),
        ("x = randn(3)\nn = x.numpy()\nif n > x:\n    y = 1", ErrorCode.NOT_A_TENSOR),
        ("x = torch.sigmoid()", ErrorCode.NOT_A_TENSOR),
    ],
)
def test_bounds_are_checked_before_allocating(program: str, code: ErrorCode | None) -> None:
    started = time.perf_counter()
    graph = trace(program)
    assert (graph.error.code if graph.error else None) is code
    assert time.perf_counter() - started < 5  # nothing enormous was built


def test_a_missing_grad_is_named_as_none() -> None:
    graph = trace("x = randn(3, requires_grad=True)\nx.grad.zero_()")
    assert graph.error.params["what"] == "None"
    assert "None" in graph.error.message


def test_loops_are_bounded_and_counted() -> None:
    program = f"x = ones(1)\nfor i in range({MAX_LOOP}):\n    x = x * 2\n"
    assert parse(program).ops == MAX_LOOP + 1
    assert trace(program).variable("x").values.flat == (2.0**MAX_LOOP,)
    big = "x = ones(1)\n" + "\n".join(["x = x + 1 + 1 + 1 + 1"] * 76)
    with pytest.raises(ProgramRefused) as info:
        parse(big)
    assert info.value.code is ErrorCode.TOO_MANY_OPS and info.value.params["limit"] == MAX_OPS


def test_fifty_operation_program_fits() -> None:
    lines = ["x = randn(8, 8, requires_grad=True)", "h = x * 1"]
    lines += [f"h = (h * 0.9 + {i}).tanh()" for i in range(16)]
    lines += ["loss = h.sum()"]
    program = "\n".join(lines)
    assert parse(program).ops >= 50
    assert trace(program).error is None


def test_parsing_time_grows_linearly() -> None:
    """Twice the text takes about twice the time (never a power of it)."""
    line = "x = (randn(3, requires_grad=True) * 2 + 1).sigmoid().sum()\n"
    small, large = line * 20, line * 40

    def best(text: str) -> float:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            parse(text)
            times.append(time.perf_counter() - started)
        return min(times)

    assert best(large) < 4 * best(small)


def test_examples_all_parse_and_the_code_is_plain_torch() -> None:
    for example in EXAMPLES.values():
        program = parse(example.program)
        code = python_code(program, seed=3)
        assert "generator=g" in code or "rand" not in example.program
        assert "manual_seed(3)" in code
        compile(code, "<example>", "exec")  # valid Python (not run here)


def test_each_backward_counts_as_several_operations() -> None:
    """A backward runs the whole graph: many of them in a loop hit the operation budget."""
    from torchatlas.autograd.run import BACKWARD_COST

    program = (
        "w = randn(3, requires_grad=True)\nloss = (w * w).sum()\n"
        "for i in range(10):\n    for j in range(10):\n        loss.backward(retain_graph=True)\n"
    )
    graph = trace(program)
    assert graph.error is not None and graph.error.code is ErrorCode.TOO_MANY_OPS
    assert graph.backward_calls < 100
    assert graph.backward_calls * BACKWARD_COST <= MAX_OPS
