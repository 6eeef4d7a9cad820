"""Issue 21 in the engine itself: the in-process checks are the first wall and run inside the
sandbox job too, so each must hold on its own. Sizes are known before torch runs an op (the op
is never called for a refused result), nothing a program built is formatted unbounded, lists
count toward the budgets, numbers past int64 are refused in the room's words, and the parse
cache prices what it holds. Issue 22.3-4: the integer lesson decided from the dtype, torch's
refusal of an empty optimiser."""

from __future__ import annotations

import ast
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from torchatlas.autograd import ErrorCode, ProgramRefused, parse, programs, trace
from torchatlas.autograd import parser as parser_module
from torchatlas.autograd.text import bounded_text

# 4**12 numbers unfolded (about 80 MB of text for repr())
SHARED = "a = [1.0, 2.0]\nfor i in range(6):\n    for j in range(2):\n        a = [a, a, a, a]\n"


@contextmanager
def never_called(name: str) -> Iterator[list[str]]:
    """Replace ``torch.Tensor.<name>`` by a spy that records a call, then calls torch."""
    original = getattr(torch.Tensor, name)
    calls: list[str] = []

    def spy(self, *args, **kwargs):
        calls.append(name)
        return original(self, *args, **kwargs)

    setattr(torch.Tensor, name, spy)
    try:
        yield calls
    finally:
        setattr(torch.Tensor, name, original)


# ----------------------------------------------------------------------------- sizes first


@pytest.mark.parametrize(
    ("program", "method"),
    [
        # a zero-element tensor reduced over its empty dimension makes A×B out of nothing
        ("z = zeros(0, 3000, 3000)\ny = z.sum(0)", "sum"),
        ("z = zeros(0)\nw = z.reshape(0, 2000, 2000)\ny = w.mean(dim=0)", "mean"),
        ("z = zeros(2000, 0, 2000)\ny = torch.sum(z, (1,), True)", "sum"),
        # a tensor passed by keyword broadcasts too
        ("x = randn(3000, 1)\ny = randn(1, 3000)\nz = x.pow(exponent=y)", "pow"),
        ("x = randn(1, 3000)\ny = randn(3000, 1)\nz = torch.pow(x, exponent=y)", "pow"),
        # so does a comparison in an ``if``
        ("x = randn(3000, 1)\ny = randn(1, 3000)\nif x > y:\n    z = 1", "__gt__"),
        ("x = randn(1, 4000)\ny = randn(4000, 1)\nif x == y:\n    z = 1", "__eq__"),
        # an outer product through matmul
        ("x = randn(4000, 1)\ny = randn(1, 4000)\nz = torch.matmul(x, y)", "matmul"),
        ("x = randn(4000, 1)\ny = randn(1, 4000)\nz = x.mm(y)", "mm"),
        ("x = randn(4000, 1)\ny = randn(1, 4000)\nz = x.add(y, alpha=2)", "add"),
    ],
)
def test_a_result_too_big_is_refused_before_torch_runs_the_op(program: str, method: str) -> None:
    with never_called(method) as calls:
        graph = trace(program + "\n")
    assert graph.error is not None and graph.error.code is ErrorCode.TOO_BIG, graph.error
    assert calls == [], f"torch ran {method} before the refusal"


def test_every_listed_method_has_a_size_rule_or_a_meta_dry_run() -> None:
    from torchatlas.autograd.run import _SIZE_RULES

    missing = set(parser_module.METHODS) - set(_SIZE_RULES)
    assert missing == set()  # anything new falls back to the meta device: say so here


# ----------------------------------------------------------------------------- bounded text


def test_bounded_text_of_shared_references_costs_nothing() -> None:
    value: list = [1.0]
    for _ in range(60):  # 4**60 leaves unfolded
        value = [value, value, value, value]
    started = time.thread_time()
    text = bounded_text(value, 80)
    assert time.thread_time() - started < 0.05
    assert len(text) <= 80 and text.endswith("…")
    assert bounded_text(2**4000, 80) == "<4001-bit int>"


@pytest.mark.parametrize(
    "tail",
    [
        "b = 1",  # the name itself, shown among "other names"
        "x = randn(3)\ny = x.view(a)",
        "x = randn(3)\ny = x.sum(a)",
        "x = randn(3)\ny = x + a",
        "if a > 1:\n    y = 1",
        "x = randn(3)\ny = x[a]",
        "x = randn(3)\ny = full(a, 1.0)",
        "x = randn(a)",
        "x = randn(3)\nx.backward(gradient=a)",
    ],
)
def test_shared_reference_lists_are_cheap_everywhere_the_room_reads_them(tail: str) -> None:
    started = time.thread_time()
    graph = trace(SHARED + tail + "\n")
    assert time.thread_time() - started < 0.5
    texts = [o.text for o in graph.others]
    if graph.error is not None:
        texts += [str(v) for v in graph.error.params.values()]
        texts.append(graph.error.torch_message or "")
    assert all(len(text) <= 400 for text in texts)


def test_error_messages_do_not_format_what_the_program_built() -> None:
    from torchatlas.autograd.errors import exception_text

    value: list = [1]
    for _ in range(50):
        value = [value, value]
    started = time.thread_time()
    assert exception_text(KeyError(value)) == "KeyError"  # str() would print it all
    assert time.thread_time() - started < 0.05


def test_a_tensor_literal_of_shared_sublists_is_refused_without_walking_them() -> None:
    # c holds 4,096 numbers (within the bound); d holds c 900 times: 3.7 M numbers unfolded
    program = (
        "a = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n"
        "b = [" + ", ".join(["a"] * 64) + "]\n"
        "c = [b, b, b, b, b, b, b, b]\n"
        "d = [" + ", ".join(["c"] * 900) + "]\n"
        "t = tensor(d)\n"
    )
    started = time.thread_time()
    graph = trace(program)
    assert time.thread_time() - started < 0.5
    assert graph.error is not None and graph.error.code is ErrorCode.TOO_BIG


# ----------------------------------------------------------------------------- budgets


def test_lists_count_toward_the_operation_budget() -> None:
    program = (
        "a = [1.0]\nfor i in range(10):\n    for j in range(10):\n"
        "        for k in range(10):\n            a = [a, a]\n"
    )
    with pytest.raises(ProgramRefused) as refused:  # the static count sees the lists
        parse(program)
    assert refused.value.code is ErrorCode.TOO_MANY_OPS


def test_lists_count_toward_the_element_budget() -> None:
    from torchatlas.autograd.parser import MAX_TOTAL_ELEMENTS

    items = ", ".join(["1.0"] * 600)
    program = f"a = [{items}]\nfor i in range(10):\n    b = [a, a]\n"
    graph = trace(program)
    assert graph.error is None  # 2 × 10 + 600 items: well within
    from torchatlas.autograd.run import Run, _Interpreter

    run = Run(program=parse(program), seed=0)
    it = _Interpreter(run, torch.Generator())
    run.elements = MAX_TOTAL_ELEMENTS - 1
    with pytest.raises(Exception) as too_much:
        it.sequence([1, 2, 3])
    assert getattr(too_much.value, "code", None) is ErrorCode.TOO_MUCH_MEMORY


@pytest.mark.parametrize(
    "program",
    [
        "x = randn(3)\ny = x * 1180591620717411303424",  # 2**70 as a literal
        "x = randn(3)\ny = x[1180591620717411303424]",
        "n = 9223372036854775808",  # 2**63
    ],
)
def test_numbers_past_int64_are_refused_when_read(program: str) -> None:
    with pytest.raises(ProgramRefused) as refused:
        parse(program + "\n")
    assert refused.value.code is ErrorCode.NUMBER_TOO_BIG


@pytest.mark.parametrize(
    "program",
    [
        "n = 2 ** 62\nm = n * 4\nx = randn(3)\ny = x * m",
        "n = 2 ** 62\nm = n + n\nx = randn(3)\ny = x[m]",
        "n = -9223372036854775807\nm = n - 2",
        "n = 3 ** 40",
        "n = 2 ** 40\nm = n * n",
    ],
)
def test_numbers_past_int64_are_refused_when_computed(program: str) -> None:
    graph = trace(program + "\n")
    assert graph.error is not None and graph.error.code is ErrorCode.NUMBER_TOO_BIG


def test_torchs_whole_numbers_are_64_bit_as_the_refusal_says() -> None:
    """The claim in ``errors.number_too_big``, checked against torch."""
    assert int(torch.tensor((1 << 63) - 1)) == (1 << 63) - 1
    with pytest.raises((RuntimeError, OverflowError, ValueError)):
        torch.tensor(1 << 63)
    with pytest.raises((RuntimeError, OverflowError, ValueError)):
        torch.ones(3) * (1 << 70)


# ----------------------------------------------------------------------------- parse cache


def _plans(tree: ast.AST) -> int:
    return sum(1 for node in ast.walk(tree) if hasattr(node, "_atlas_plan"))


def test_the_parse_cache_prices_programs_with_their_plans_attached() -> None:
    program = "x = randn(3, requires_grad=True)\ny = (x[0:2] * 2).sigmoid()\nloss = y.sum()\n"
    parsed = parse(program)
    planned = _plans(parsed.tree)
    assert planned > 0 and parsed.plan_bytes > 0
    trace(program)  # a run attaches nothing new: what was measured is what is held
    assert _plans(parsed.tree) == planned
    size = programs.PARSED._sizeof((program, parsed))  # type: ignore[attr-defined]
    from torchatlas.cache import deep_size

    assert size >= deep_size((program, parsed)) + parsed.plan_bytes


# ----------------------------------------------------------------------------- issue 22.3-4


def test_requires_grad_on_an_integer_tensor_is_the_rooms_lesson() -> None:
    graph = trace("n = arange(3)\nn.requires_grad_()\n")
    assert graph.error.code is ErrorCode.INT_REQUIRES_GRAD and graph.error.line == 2
    assert graph.error.torch_message  # torch's own words are still shown


def test_the_integer_lesson_is_decided_from_the_dtype_not_the_wording(monkeypatch) -> None:
    original = torch.Tensor.requires_grad_

    def reworded(self, *args, **kwargs):
        if not self.is_floating_point():
            raise RuntimeError("a future torch says this differently")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "requires_grad_", reworded)
    graph = trace("n = tensor([1, 2])\nn.requires_grad_(True)\n")
    assert graph.error.code is ErrorCode.INT_REQUIRES_GRAD
    # a float tensor that torch refuses for another reason is not the integer lesson
    graph = trace("x = randn(3, requires_grad=True)\ny = x * 2\ny.requires_grad_(False)\n")
    assert graph.error is not None and graph.error.code is not ErrorCode.INT_REQUIRES_GRAD


def test_freezing_everything_shows_torchs_refusal() -> None:
    from torchatlas.autograd.freeze import freeze

    with pytest.raises(ValueError) as torch_says:
        torch.optim.SGD([], lr=0.01)
    report = freeze(trainable=())
    everything, chosen = report.optimizers
    assert everything.refused is None and everything.groups == 1
    assert chosen.refused == str(torch_says.value)
    assert chosen.groups == chosen.tensors == 0
    # "records no graph and saves nothing for backward"; the full list holds only frozen ones
    assert report.saved_tensors == report.saved_bytes == 0
    assert everything.frozen_tensors == everything.tensors == len(report.params)
    # the table says torch refused, in torch's words, rather than "0 groups"
    from components.autograd.draw import freeze_code, optimizer_table

    table = optimizer_table(report, "en")
    assert str(torch_says.value) in table and "| 0 |" not in table
    assert str(torch_says.value) in freeze_code(report)
