"""Predict, then reveal: a student predicts ``requires_grad``, ``is_leaf`` and whether
``.grad`` is None (after backward) for chosen variables, one True/False question each; the
answers are what torch reported for the program (:func:`truth`) and the grade is the kit's
(:func:`torchatlas.quiz.grade_choice`).

>>> from torchatlas.autograd import backward, trace
>>> graph = trace("w = ones(2, requires_grad=True)\\nloss = (w * 3).sum()")
>>> grade(graph, backward(graph, "loss"), "loss", Question.IS_LEAF, "True")
Grade(correct=False, expected='False', given='True')
"""

from __future__ import annotations

from enum import StrEnum

from torchatlas.autograd.backward import BackwardTrace
from torchatlas.autograd.graph import Graph
from torchatlas.quiz import Grade, grade_choice

OPTIONS: tuple[str, str] = ("True", "False")  # torch's own words for the answers
# ``.grad is None`` is asked after ``root.backward()``, which torch may refuse: then that
# refusal is the answer, and always among the options of that question.
ERROR = "error"


class Question(StrEnum):
    REQUIRES_GRAD = "requires_grad"
    IS_LEAF = "is_leaf"
    GRAD_IS_NONE = "grad_is_none"


def truth(graph: Graph, trace: BackwardTrace | None, variable: str) -> dict[Question, bool]:
    """What torch reports for ``variable``: ``.grad is None`` after the trace's backward (or
    after the program alone, without one)."""
    info = graph.variable(variable)
    if info is None:
        raise KeyError(variable)
    grad = trace.grad(variable) if trace is not None else None
    grad_is_none = (grad.grad is None) if grad is not None else info.grad is None
    return {
        Question.REQUIRES_GRAD: info.requires_grad,
        Question.IS_LEAF: info.is_leaf,
        Question.GRAD_IS_NONE: grad_is_none,
    }


def options(question: Question | str) -> tuple[str, ...]:
    """The answers offered for ``question``: True and False, and torch's refusal where the
    question is asked after a backward (which torch may refuse)."""
    return (*OPTIONS, ERROR) if Question(question) is Question.GRAD_IS_NONE else OPTIONS


def expected(graph: Graph, trace: BackwardTrace | None, variable: str, question: Question) -> str:
    """Torch's answer to one question, as one of :func:`options`: :data:`ERROR` when the
    question is asked after a backward that torch refused."""
    if Question(question) is Question.GRAD_IS_NONE and trace is not None and trace.error:
        return ERROR
    return str(truth(graph, trace, variable)[Question(question)])


def grade(
    graph: Graph, trace: BackwardTrace | None, variable: str, question: Question, given: str
) -> Grade:
    """Grade one prediction (one of :func:`options`; anything else is wrong) against what
    torch reported for ``variable``."""
    offered = options(question)
    picked = offered.index(given) if given in offered else -1
    return grade_choice(offered, picked, expected(graph, trace, variable, question))
