"""Predict, then reveal: a student predicts ``requires_grad``, ``is_leaf`` and whether
``.grad`` is None (after backward) for chosen variables; the answers come from torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from torchatlas.autograd.backward import BackwardTrace
from torchatlas.autograd.graph import Graph


class Question(StrEnum):
    REQUIRES_GRAD = "requires_grad"
    IS_LEAF = "is_leaf"
    GRAD_IS_NONE = "grad_is_none"


@dataclass(frozen=True)
class Answer:
    variable: str
    question: Question
    predicted: bool | None  # None: the student left it open
    actual: bool

    @property
    def correct(self) -> bool:
        return self.predicted is self.actual


@dataclass(frozen=True)
class Score:
    answers: tuple[Answer, ...]

    @property
    def correct(self) -> int:
        return sum(a.correct for a in self.answers)

    @property
    def total(self) -> int:
        return len(self.answers)


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


def grade(
    graph: Graph,
    trace: BackwardTrace | None,
    variables: Sequence[str],
    predictions: Mapping[tuple[str, Question], bool | None],
) -> Score:
    """Score every (variable, question) pair; a missing prediction counts as wrong."""
    answers = []
    for variable in variables:
        if graph.variable(variable) is None:
            continue
        for question, actual in truth(graph, trace, variable).items():
            answers.append(
                Answer(variable, question, predictions.get((variable, question)), actual)
            )
    return Score(tuple(answers))
