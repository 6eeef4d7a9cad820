"""Questions from a teacher's code (torchatlas.lessons.code_questions) through a real sandbox:
every ask's answer compared with torch run on the same snippet in this process, the options
a question offers, and code exercises graded (pass, fail, the student's errors, the
teacher's broken parts, objects made to fool a check). One pool for the whole file."""

from __future__ import annotations

import math
import operator
import re
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.sandbox_jobs import warm_pool
from torchatlas.lessons import jobs as lesson_jobs
from torchatlas.lessons.code_questions import (
    ASKS,
    COMMON_ERRORS,
    MAX_CHECKS,
    MAX_OPTION,
    NO_ERROR,
    Ask,
    Check,
    CodeAnswer,
    CodeQuestionError,
    Verdict,
    check_ask,
    check_checks,
    compute_answer,
    grade,
    options_for,
    parse_ask,
    parse_check,
)
from torchatlas.sandbox import SandboxPool


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    """This file's own pool with only the lessons' jobs: the quickest to warm."""
    options = {"jobs": lesson_jobs.JOBS, "warm_up_requests": lesson_jobs.WARM_UP}
    with warm_pool(rate_limit=0, memory_mb=512, **options) as sandbox:
        yield sandbox


# ---------------------------------------------------------------- torch here, as the oracle
def _text(value: Any) -> str:
    """The canonical text of a value, written independently of the engine."""
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return repr(float(f"{value:.6g}"))
    return str(value)


def _run_here(snippet: str) -> tuple[dict[str, Any], BaseException | None]:
    namespace: dict[str, Any] = {"torch": torch, "nn": nn, "F": F, "math": math}
    try:
        exec(snippet, namespace)  # the test's own snippets, in this process
    except Exception as exc:
        return namespace, exc
    return namespace, None


def _oracle(snippet: str, ask: Ask) -> str:
    namespace, raised = _run_here(snippet)
    if ask.what == "error":
        return NO_ERROR if raised is None else type(raised).__name__
    assert raised is None
    root, _, rest = ask.name.partition(".")
    value = operator.attrgetter(rest)(namespace[root]) if rest else namespace[root]
    if ask.what == "shape":
        return str(tuple(value.shape))
    if ask.what == "stride":
        return str(tuple(value.stride()))
    if ask.what == "dtype":
        return str(value.dtype).removeprefix("torch.")
    if ask.what == "storage_offset":
        return str(value.storage_offset())
    if ask.what == "is_contiguous":
        return str(value.is_contiguous())
    if ask.what == "shares_storage":
        other = namespace[ask.other]
        return str(value.untyped_storage().data_ptr() == other.untyped_storage().data_ptr())
    if ask.what in ("requires_grad", "is_leaf"):
        return str(getattr(value, ask.what))
    if ask.what == "grad":
        with warnings.catch_warnings():  # .grad of a non-leaf: None, and torch says so
            warnings.simplefilter("ignore")
            grad = value.grad
        return "None" if grad is None else _text(grad.tolist())
    return _text(value.tolist() if isinstance(value, torch.Tensor) else value)


VIEWS = """x = torch.arange(12.).view(3, 4)
y = x.t()
z = x[1:, ::2]
w = y.contiguous()
v = x.unsqueeze(0).expand(2, 3, 4)
d = x.to(torch.float64)
i = torch.arange(6, dtype=torch.int32)
b = x > 5
c = x.clone()
s = x.view(12)[3:]
"""
GRADS = """x = torch.ones(3, requires_grad=True)
h = x * torch.tensor([1.0, 2.0, 3.0])
loss = (h * h).sum()
loss.backward()
frozen = x.detach()
m = nn.Linear(2, 1)
with torch.no_grad():
    m.weight.fill_(1.0)
m(torch.ones(1, 2)).sum().backward()
"""
ERRORS = {
    "torch.ones(2, 3).view(4)": 1,
    "a = torch.ones(3)\nb = a[5]": 2,
    "x = torch.ones(2)\ny = x + 'a'": 2,
    "x = torch.ones(2, 3).t()\ny = x.view(6)": 2,
    "x = torch.ones(2, 3).t()\ny = x.reshape(6)": None,
    "def f(t):\n    return t.view(5)\n\ny = f(torch.ones(4))": 2,
}

CASES = [
    *((VIEWS, Ask("shape", name)) for name in ("y", "z", "v", "s")),
    *((VIEWS, Ask("stride", name)) for name in ("y", "z", "v")),
    *((VIEWS, Ask("dtype", name)) for name in ("d", "i", "b")),
    *((VIEWS, Ask("storage_offset", name)) for name in ("z", "s", "x")),
    *((VIEWS, Ask("is_contiguous", name)) for name in ("y", "w", "z")),
    *((VIEWS, Ask("shares_storage", name, other)) for name, other in
      (("y", "x"), ("w", "x"), ("c", "x"), ("s", "x"))),
    *((VIEWS, Ask("value", name)) for name in ("y", "z", "i", "b")),
    *((GRADS, Ask("requires_grad", name)) for name in ("x", "h", "frozen")),
    *((GRADS, Ask("is_leaf", name)) for name in ("x", "h", "m.weight")),
    *((GRADS, Ask("grad", name)) for name in ("x", "h", "m.weight", "m.bias")),
    *((snippet, Ask("error")) for snippet in ERRORS),
]  # fmt: skip


def test_every_ask_is_tried() -> None:
    assert {ask.what for _, ask in CASES} == set(ASKS)


@pytest.mark.parametrize(("snippet", "ask"), CASES, ids=lambda case: str(case)[:40])
def test_the_sandbox_answers_what_torch_here_answers(
    pool: SandboxPool, snippet: str, ask: Ask
) -> None:
    outcome = compute_answer(snippet, ask, pool=pool)
    assert outcome.ok, (outcome.refused, outcome.failure)
    answer = outcome.value
    assert isinstance(answer, CodeAnswer) and answer.what == ask.what
    assert answer.value == _oracle(snippet, ask)
    assert answer.value not in answer.hints
    if ask.what == "error":
        assert answer.line == ERRORS[snippet]
        if answer.value != NO_ERROR:
            assert answer.message  # torch's own words come along


def test_the_named_cases_of_the_issue(pool: SandboxPool) -> None:
    assert compute_answer("torch.ones(2,3).view(4)", Ask("error"), pool=pool).value.value == (
        "RuntimeError"
    )
    grad = compute_answer(GRADS, Ask("grad", "x"), pool=pool).value
    assert grad.value == "[2.0, 8.0, 18.0]"
    assert "None" in grad.hints  # "no gradient" is offered as a wrong answer
    shape = compute_answer(VIEWS, Ask("shape", "y"), pool=pool).value
    assert shape.value == "(4, 3)" and "(3, 4)" in shape.hints  # x's shape, right beside it


def test_what_a_snippet_cannot_answer_comes_back_coded(pool: SandboxPool) -> None:
    missing = compute_answer("x = torch.ones(2)", Ask("shape", "y"), pool=pool)
    assert missing.refused == ("missing_name", {"name": "y"})
    scalar = compute_answer("n = 3", Ask("shape", "n"), pool=pool)
    assert scalar.refused is not None and scalar.refused[0] == "not_a_tensor"
    raised = compute_answer("x = torch.ones(2)\ny = x.view(3)", Ask("shape", "y"), pool=pool)
    assert raised.refused is not None and raised.refused[0] == "snippet_raised"
    assert raised.refused[1]["error_type"] == "RuntimeError" and raised.refused[1]["line"] == 2
    big = compute_answer("x = torch.zeros(100)", Ask("value", "x"), pool=pool)
    assert big.refused is not None and big.refused[0] == "value_too_long"
    number = compute_answer("x = torch.ones(2, 3)\nn = x.numel()", Ask("value", "n"), pool=pool)
    assert number.value is not None and number.value.value == "6"


def test_sandbox_failures_name_the_snippet_s_own_lines(pool: SandboxPool) -> None:
    refused = compute_answer("x = torch.ones(2)\nimport os", Ask("shape", "x"), pool=pool)
    assert refused.failure is not None and refused.failure.kind == "refused"
    assert refused.failure.line == 2 and refused.failure.refusals[0].line == 2
    syntax = compute_answer("x = (", Ask("shape", "x"), pool=pool)
    assert syntax.failure is not None and syntax.failure.kind == "syntax"
    assert syntax.failure.line == 1


def test_a_question_is_checked_before_any_job() -> None:
    for ask, code in [
        (Ask("colour", "x"), "unknown_ask"),
        (Ask("shape", ""), "bad_name"),
        (Ask("shape", "x.__class__"), "bad_name"),
        (Ask("shape", "x.f_globals"), "bad_name"),
        (Ask("shape", "x" * 41), "bad_name"),
        (Ask("shares_storage", "x"), "bad_name"),
        (Ask("shape", "x", "y"), "bad_name"),
        (Ask("shape", "_atlas_ref_1"), "bad_name"),
    ]:
        with pytest.raises(CodeQuestionError) as error:
            check_ask(ask)
        assert error.value.code == code, ask
        assert compute_answer("x = 1", ask).refused[0] == code  # no pool: no job was needed
    check_ask(Ask("error"))
    check_ask(Ask("grad", "model.fc.weight"))
    assert parse_ask({"what": "shares_storage", "name": "y", "other": "x"}).other == "x"
    with pytest.raises(CodeQuestionError):
        parse_ask({"what": "shape", "name": "x", "colour": "red"})
    assert compute_answer("x = 1\n" * 400, Ask("shape", "x")).refused[0] == "too_long"


# ---------------------------------------------------------------- options
ANSWERS = [
    CodeAnswer("shape", "(4, 3)", ("(3, 4)", "(12,)")),
    CodeAnswer("shape", "()"),
    CodeAnswer("shape", "(2, 3, 4)"),
    CodeAnswer("stride", "(1, 4)"),
    CodeAnswer("stride", "(12, 4, 1)", ("(4, 1)",)),
    CodeAnswer("dtype", "float32"),
    CodeAnswer("dtype", "int64", ("float32",)),
    CodeAnswer("dtype", "complex64"),
    CodeAnswer("storage_offset", "0"),
    CodeAnswer("storage_offset", "5"),
    CodeAnswer("is_contiguous", "False"),
    CodeAnswer("shares_storage", "True"),
    CodeAnswer("requires_grad", "True"),
    CodeAnswer("is_leaf", "False"),
    CodeAnswer("error", "RuntimeError"),
    CodeAnswer("error", NO_ERROR),
    CodeAnswer("error", "ZeroDivisionError"),
    CodeAnswer("value", "[[0, 1], [2, 3]]", ("[0, 1, 2, 3]",)),
    CodeAnswer("value", "[0.5, nan, -1.0]"),
    CodeAnswer("value", "3"),
    CodeAnswer("value", "2.5"),
    CodeAnswer("value", "True"),
    CodeAnswer("value", "[]"),
    CodeAnswer("value", "(3, 4)"),
    CodeAnswer("grad", "None", ("[1.0, 1.0]", "[0.0, 0.0]")),
    CodeAnswer("grad", "[2.0, 8.0, 18.0]", ("None",)),
]
SHAPE_TEXT = re.compile(r"\((\d+(, \d+)*,?)?\)|\(\d+,\)")
DTYPE_NAMES = {
    str(value).removeprefix("torch.")
    for value in vars(torch).values()
    if isinstance(value, torch.dtype)
}
VALUE_TEXT = re.compile(r"[\[\]\d., e+\-nainfTrueFalsNo()]+")


def _same_kind(what: str, text: str) -> bool:
    if what in ("shape", "stride"):
        return SHAPE_TEXT.fullmatch(text) is not None
    if what == "dtype":
        return text in DTYPE_NAMES
    if what == "storage_offset":
        return text.isdecimal()
    if what in ("is_contiguous", "shares_storage", "requires_grad", "is_leaf"):
        return text in ("True", "False")
    if what == "error":
        return text in COMMON_ERRORS or text == NO_ERROR
    return VALUE_TEXT.fullmatch(text) is not None


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: f"{a.what}:{a.value}")
def test_options_hold_the_right_value_once_and_distinct_wrong_ones(answer: CodeAnswer) -> None:
    orders = set()
    for seed in range(20):
        options = options_for(answer, 4, seed)
        assert options.count(answer.value) == 1
        assert len(set(options)) == len(options)
        boolean = answer.value in ("True", "False") and answer.what != "value"
        assert len(options) == (2 if boolean or answer.value in ("True", "False") else 4)
        assert all(len(text) <= MAX_OPTION for text in options)
        wrong = [text for text in options if text != answer.value]
        if answer.what != "error" or answer.value in COMMON_ERRORS:
            assert all(_same_kind(answer.what, text) for text in wrong), wrong
        assert options_for(answer, 4, seed) == options  # the same seed, the same options
        orders.add(options)
    assert len(orders) > 1  # the seed changes the draw or the order


def test_options_prefer_the_snippet_s_own_values_and_common_errors() -> None:
    assert "(3, 4)" in options_for(CodeAnswer("shape", "(4, 3)", ("(3, 4)",)), 4, 7)
    options = options_for(CodeAnswer("error", "RuntimeError"), 4, 3)
    assert set(options) <= {"RuntimeError", "TypeError", "IndexError", "ValueError", NO_ERROR}
    assert len(options_for(CodeAnswer("shape", "(2, 3)"), 6, 0)) == 6


# ---------------------------------------------------------------- grading
SETUP = "x = torch.arange(12.)"
VIEW_CHECKS = (Check("shape", "y", "(2, 6)"), Check("shares_storage", "y", "x"))


def _grade(pool: SandboxPool, code: str, checks: tuple[Check, ...] = VIEW_CHECKS,
           setup: str = SETUP, **options: Any) -> Verdict:  # fmt: skip
    outcome = grade(setup, code, checks, pool=pool, **options)
    assert outcome.ok, (outcome.refused, outcome.failure)
    assert isinstance(outcome.value, Verdict)
    return outcome.value


def test_a_view_passes_and_a_copy_does_not(pool: SandboxPool) -> None:
    assert _grade(pool, "y = x.view(2, 6)") == Verdict("pass", "passed")
    copy = _grade(pool, "y = x.clone().view(2, 6)")
    assert (copy.status, copy.code) == ("fail", "not_shared")
    assert copy.param("check") == "1" and copy.param("other") == "x"
    wrong = _grade(pool, "y = x.view(3, 4)")
    assert (wrong.code, wrong.param("expected"), wrong.param("got")) == (
        "wrong_shape",
        "(2, 6)",
        "(3, 4)",
    )
    # Rebinding the setup's name to a copy does not make the copy the setup's tensor.
    rebound = _grade(pool, "x = x.clone()\ny = x.view(2, 6)")
    assert rebound.code == "not_shared"


def test_the_student_s_errors_are_verdicts_with_their_own_lines(pool: SandboxPool) -> None:
    raised = _grade(pool, "y = x.view(5, 5)")
    assert (raised.status, raised.code, raised.error_type, raised.line) == (
        "error",
        "raised",
        "RuntimeError",
        1,
    )
    assert "invalid for input of size 12" in raised.message
    later = _grade(pool, "a = 1\n\ny = x.view(5, 5)")
    assert later.line == 3
    # A setup's helper that raises when the student calls it: the student's own line.
    helper = "x = torch.arange(12.)\ndef as_grid(t):\n    return t.view(5, 5)"
    called = _grade(pool, "a = 1\ny = as_grid(x)", setup=helper)
    assert (called.code, called.line) == ("raised", 2)
    looping = _grade(pool, "while True:\n    pass", timeout_s=1)
    assert (looping.status, looping.code, looping.error_type) == ("error", "timeout", "Timeout")
    refused = _grade(pool, "y = x.view(2, 6)\nimport os")
    assert (refused.status, refused.error_type, refused.line) == ("error", "Refused", 2)
    assert refused.param("rule") == "import"
    syntax = _grade(pool, "y = x.view(2, 6\n")
    assert (syntax.status, syntax.error_type, syntax.line) == ("error", "SyntaxError", 1)
    memory = _grade(pool, "y = torch.ones(1 << 31)")
    assert (memory.status, memory.error_type) == ("error", "Memory")
    long = _grade(pool, "y = 1\n" * 400)
    assert (long.status, long.code) == ("error", "too_long")


def test_teacher_assertions_pass_and_fail(pool: SandboxPool) -> None:
    checks = (
        Check("assertions", "", "assert y.shape == (2, 6)\nassert torch.equal(y[1], x[6:])"),
        Check("assertions", "", "assert y.sum() == 67, 'the sum'"),
    )
    failed = _grade(pool, "y = x.view(2, 6)", checks)
    assert (failed.status, failed.code, failed.message) == ("fail", "assertion_failed", "the sum")
    assert failed.param("check") == "1" and failed.param("line") == "1"
    passed = _grade(pool, "y = x.view(2, 6)", checks[:1])
    assert passed.passed
    # A student who rebinds torch does not change what the assertions call.
    assert _grade(pool, "y = x.view(2, 6)\ntorch = None", checks[:1]).passed
    missing = _grade(pool, "z = x.view(2, 6)", checks[:1])
    assert (missing.code, missing.param("name")) == ("missing_name", "y")
    odd = _grade(pool, "y = [1, 2]", checks[:1])
    assert (odd.code, odd.error_type) == ("assertion_raised", "AttributeError")


def _taken_by_a_loop(one_slot: SandboxPool) -> threading.Thread:
    """The pool's only slot busy with a student's endless loop (stopped at its timeout)."""
    busy = threading.Thread(
        target=grade, args=(SETUP, "while True:\n    pass", VIEW_CHECKS),
        kwargs={"pool": one_slot, "timeout_s": 2}, daemon=True,
    )  # fmt: skip
    busy.start()
    deadline = time.monotonic() + 10
    while one_slot.health().warm_workers != "0/1":
        assert time.monotonic() < deadline, "the loop never took the slot"
        time.sleep(0.01)
    return busy


def _moved_up_then_ran(places: list[int]) -> None:
    """Places heard while waiting: each closer to the front (a slot still being given back
    may count once as a job ahead), next in line, then started."""
    assert places[-2:] == [1, 0], places
    assert places == sorted(set(places), reverse=True), places


def test_a_queued_job_reports_its_place_in_line() -> None:
    """While every sandbox slot is taken, a student's answer and a teacher's snippet wait in
    line and say where (1 = next), then 0 as they start: what the kit's code answer and the
    author page show."""
    options = {"jobs": lesson_jobs.JOBS, "warm_up_requests": lesson_jobs.WARM_UP}
    with warm_pool(concurrency=1, rate_limit=0, memory_mb=512, **options) as one_slot:
        busy = _taken_by_a_loop(one_slot)
        places: list[int] = []
        outcome = grade(SETUP, "y = x.view(2, 6)", VIEW_CHECKS, pool=one_slot,
                        on_queued=places.append)  # fmt: skip
        assert outcome.value == Verdict("pass", "passed")
        _moved_up_then_ran(places)
        busy.join()
        busy = _taken_by_a_loop(one_slot)
        places.clear()
        answer = compute_answer(VIEWS, Ask("shape", "y"), pool=one_slot, on_queued=places.append)
        assert answer.value is not None
        _moved_up_then_ran(places)
        busy.join()


def test_objects_made_to_fool_a_check_pass_nothing(pool: SandboxPool) -> None:
    fake = "class Fake:\n    shape = (2, 6)\n    dtype = torch.float32\ny = Fake()"
    assert _grade(pool, fake).code == "not_a_tensor"
    lying = (
        "class Lying(torch.Tensor):\n"
        "    def size(self, *dims):\n        return torch.Size([2, 6])\n"
        "    @property\n    def shape(self):\n        return torch.Size([2, 6])\n"
        "y = x.view(3, 4).as_subclass(Lying)\n"
        "assert y.shape == (2, 6) and y.size() == (2, 6)\n"
    )
    verdict = _grade(pool, lying)
    assert (verdict.code, verdict.param("got")) == ("wrong_shape", "(3, 4)")
    patched = "torch.Tensor.size = lambda self, *dims: torch.Size([2, 6])\ny = x.view(3, 4)"
    outcome = grade(SETUP, patched, VIEW_CHECKS, pool=pool).value
    assert outcome is not None and not outcome.passed
    modules = (
        "nn.Module.parameters = lambda self, recurse=True: iter([torch.zeros(1100)])\n"
        "m = nn.Linear(1, 1)"
    )
    count = _grade(pool, modules, (Check("param_count", "m", "1100"),), setup="")
    assert (count.code, count.param("got")) == ("wrong_param_count", "2")


def test_references_are_taken_from_the_setup_before_the_student_s_code(pool: SandboxPool) -> None:
    checks = (Check("values_equal", "y", "x.view(2, 6) * 2"),)
    assert _grade(pool, "y = (x * 2).view(2, 6)", checks).passed
    assert _grade(pool, "y = (x * 2).view(2, 6).double()", checks).passed  # values, not dtype
    zeroed = _grade(pool, "x.mul_(0)\ny = (x * 2).view(2, 6)", checks)
    assert zeroed.code == "values_differ"
    assert zeroed.param("got") == str([[0.0] * 6] * 2)
    assert zeroed.param("expected") == str([[0.0, 2.0, 4.0, 6.0, 8.0, 10.0],
                                            [12.0, 14.0, 16.0, 18.0, 20.0, 22.0]])  # fmt: skip


def test_module_and_gradient_checks(pool: SandboxPool) -> None:
    count = (Check("param_count", "model", "1100"),)
    assert _grade(pool, "model = nn.Linear(10, 100)", count, setup="").passed
    wrong = _grade(pool, "model = nn.Linear(100, 10, bias=False)", count, setup="")
    assert (wrong.code, wrong.param("got")) == ("wrong_param_count", "1000")
    assert _grade(pool, "model = torch.ones(3)", count, setup="").code == "not_a_module"
    setup = "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)"
    grad = (Check("grad_equals", "x", "2 * x"),)
    assert _grade(pool, "y = (x * x).sum()\ny.backward()", grad, setup=setup).passed
    cubed = _grade(pool, "y = (x * x * x).sum()\ny.backward()", grad, setup=setup)
    assert (cubed.code, cubed.param("expected"), cubed.param("got")) == (
        "grad_differs",
        "[2.0, 4.0, 6.0]",
        "[3.0, 12.0, 27.0]",
    )
    none = _grade(pool, "y = (x * x).sum()", grad, setup=setup)
    assert (none.code, none.param("got")) == ("grad_differs", "None")
    other = (Check("strides", "y", "(1, 4)"), Check("dtype", "y", "torch.float"))
    assert _grade(pool, "y = x.view(3, 4).t()", other).passed
    assert _grade(pool, "y = x.view(3, 4).t().contiguous()", other).code == "wrong_strides"
    assert _grade(pool, "y = x.view(4, 3).double().t()", other[1:]).code == "wrong_dtype"


def test_a_broken_setup_or_check_is_the_teacher_s_not_a_verdict(pool: SandboxPool) -> None:
    broken = grade("x = torch.arange(12.)\nx = x.view(5, 5)", "y = x", VIEW_CHECKS, pool=pool)
    assert broken.value is None and broken.refused is not None
    assert broken.refused[0] == "setup_failed"
    assert broken.refused[1]["error_type"] == "RuntimeError" and broken.refused[1]["line"] == 2
    refused = grade("import os", "y = 1", VIEW_CHECKS, pool=pool)
    assert refused.refused is not None and refused.refused[0] == "setup_failed"
    reference = grade(SETUP, "y = x", (Check("values_equal", "y", "w * 2"),), pool=pool)
    assert reference.refused is not None and reference.refused[0] == "check_failed"
    assert reference.refused[1]["check"] == 0 and reference.refused[1]["error_type"] == "NameError"
    bad = grade(SETUP, "y = x", (Check("shape", "y", "two by six"),), pool=pool)
    assert bad.refused is not None and bad.refused[0] == "bad_expected"


def test_checks_are_validated_and_put_in_canonical_form() -> None:
    assert parse_check({"template": "shape", "name": "y", "expected": "2,6"}).expected == "(2, 6)"
    assert parse_check(Check("strides", "y", "[12]")).expected == "(12,)"
    assert parse_check(Check("dtype", "y", "torch.float")).expected == "float32"
    assert parse_check(Check("param_count", "m", " 1100 ")).expected == "1100"
    assert parse_check(Check("values_equal", "y", "x.view(2,\n 6)")).expected == "x.view(2, 6)"
    for check, code in [
        (Check("colour", "y", "red"), "unknown_template"),
        (Check("shape", "y.__dict__", "(2,)"), "bad_name"),
        (Check("shape", "y", "(2, -1)"), "bad_expected"),
        (Check("dtype", "y", "float33"), "bad_expected"),
        (Check("values_equal", "y", "x +"), "bad_expression"),
        (Check("values_equal", "y", "open('f')"), "refused_expression"),
        (Check("values_equal", "y", "x" * 201), "too_long"),
        (Check("assertions", "", "assert (y"), "bad_assertions"),
        (Check("assertions", "", "import os"), "refused_assertions"),
        (Check("assertions", "", "assert y\n" * 200), "too_long"),
    ]:
        with pytest.raises(CodeQuestionError) as error:
            parse_check(check)
        assert error.value.code == code, check
    with pytest.raises(CodeQuestionError) as error:
        check_checks([Check("shape", "y", "(1,)")] * (MAX_CHECKS + 1))
    assert error.value.code == "too_many_checks"
    with pytest.raises(CodeQuestionError) as error:
        check_checks([Check("shape", "y", "(1,)"), Check("shape", "y", "(x)")])
    assert error.value.params["check"] == 1
