"""Predict, then reveal: questions about training whose answers come from a live run.

No answer is stored: :func:`grade` runs :func:`~torchatlas.modules.training.train_steps` and
reads what torch did, then compares it with the student's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from torchatlas.modules.training import TrainingTrace, train_steps


class Question(StrEnum):
    """``modules.quiz.<value>.{question,options.*}``."""

    PLAIN_STEP = "plain_step"  # will W change after step() if W is a plain tensor?
    FORGOTTEN_ZERO_GRAD = "forgotten_zero_grad"  # what is W.grad in step 2 without zero_grad?


OPTIONS: dict[Question, tuple[str, ...]] = {
    Question.PLAIN_STEP: ("changes", "unchanged", "refused"),
    Question.FORGOTTEN_ZERO_GRAD: ("fresh", "sum", "zero"),
}


@dataclass(frozen=True)
class Grade:
    question: Question
    given: str
    expected: str
    trace: TrainingTrace

    @property
    def correct(self) -> bool:
        return self.given == self.expected


def _plain_step() -> tuple[str, TrainingTrace]:
    trace = train_steps("mylinear_plain", lr=0.1, steps=1)
    if trace.optimizer_error:
        return "refused", trace
    return ("unchanged" if trace.final == trace.initial else "changes"), trace


def _forgotten_zero_grad() -> tuple[str, TrainingTrace]:
    """W.grad after the second backward() without zero_grad(), against the same run with it:
    both runs take the same first step, so their second gradients are taken at the same
    weights, and the zero_grad run's is the fresh one."""
    forgot = train_steps("mylinear", lr=0.1, steps=2, forget_zero_grad=True)
    fresh_run = train_steps("mylinear", lr=0.1, steps=2)
    first, second = forgot.steps[0].grads[0] or (), forgot.steps[1].grads[0] or ()
    fresh = fresh_run.steps[1].grads[0] or ()
    if all(value == 0 for value in second):
        return "zero", forgot
    summed = len(second) == len(first) == len(fresh) and all(
        abs(s - (a + b)) <= 1e-5 * max(1.0, abs(s))
        for s, a, b in zip(second, first, fresh, strict=True)
    )
    return ("sum" if summed else "fresh"), forgot


def grade(question: Question | str, given: str) -> Grade:
    """The student's ``given`` option against what torch does (ValueError for an unknown one)."""
    question = Question(question)
    if given not in OPTIONS[question]:
        raise ValueError(f"{given!r} is not an option of {question.value}")
    expected, trace = _plain_step() if question is Question.PLAIN_STEP else _forgotten_zero_grad()
    return Grade(question, given, expected, trace)
