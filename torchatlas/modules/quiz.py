"""Predict, then reveal: questions about training whose answers come from a live run.

No answer is stored: :func:`answer` runs :func:`~torchatlas.modules.training.train_steps`
(fixed settings, in this process) and reads what torch did; :func:`grade` compares the
student's option with it (:func:`torchatlas.quiz.grade_choice`, the kit's one grade).

>>> grade(Question.PLAIN_STEP, "refused").correct  # doctest: +SKIP
True
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from torchatlas.modules.training import TrainingTrace, train_steps
from torchatlas.quiz import Grade, grade_choice


class Question(StrEnum):
    """``modules.quiz.<value>.{question,options.*}``."""

    PLAIN_STEP = "plain_step"  # will W change after step() if W is a plain tensor?
    FORGOTTEN_ZERO_GRAD = "forgotten_zero_grad"  # what is W.grad in step 2 without zero_grad?


OPTIONS: dict[Question, tuple[str, ...]] = {
    Question.PLAIN_STEP: ("changes", "unchanged", "refused"),
    Question.FORGOTTEN_ZERO_GRAD: ("fresh", "sum", "zero"),
}


@dataclass(frozen=True)
class Answer:
    """torch's answer to ``question`` (one of its :data:`OPTIONS`) and the run it read."""

    question: Question
    expected: str
    trace: TrainingTrace


class NoOptionFits(RuntimeError):
    """torch did something none of the question's options says (a run that raised where the
    options have no "torch raises" answer): the question is not shown with a wrong answer."""


def _plain_step() -> tuple[str, TrainingTrace]:
    """The option "refused" is torch raising (building the optimiser); a run that raised
    anywhere else fits no option."""
    trace = train_steps("mylinear_plain", lr=0.1, steps=1)
    if trace.optimizer_error:
        return "refused", trace
    if trace.backward_error or not trace.steps:
        raise NoOptionFits(trace.backward_error or "no step ran")
    return ("unchanged" if trace.final == trace.initial else "changes"), trace


def _forgotten_zero_grad() -> tuple[str, TrainingTrace]:
    """W.grad after the second backward() without zero_grad(), against the same run with it:
    both runs take the same first step, so their second gradients are taken at the same
    weights, and the zero_grad run's is the fresh one."""
    forgot = train_steps("mylinear", lr=0.1, steps=2, forget_zero_grad=True)
    fresh_run = train_steps("mylinear", lr=0.1, steps=2)
    for run in (forgot, fresh_run):  # no option says "torch raises": never guess one
        if run.optimizer_error or run.backward_error or len(run.steps) < 2:
            raise NoOptionFits(run.optimizer_error or run.backward_error or "fewer than 2 steps")
        if any(step.grads[0] is None for step in run.steps):
            raise NoOptionFits("W.grad is None")
    first, second = forgot.steps[0].grads[0] or (), forgot.steps[1].grads[0] or ()
    fresh = fresh_run.steps[1].grads[0] or ()
    if second and all(value == 0 for value in second):
        return "zero", forgot
    summed = len(second) == len(first) == len(fresh) and all(
        abs(s - (a + b)) <= 1e-5 * max(1.0, abs(s))
        for s, a, b in zip(second, first, fresh, strict=True)
    )
    return ("sum" if summed else "fresh"), forgot


def answer(question: Question | str) -> Answer:
    """What torch does, from a live run (ValueError for a question that is not one)."""
    question = Question(question)
    expected, trace = _plain_step() if question is Question.PLAIN_STEP else _forgotten_zero_grad()
    return Answer(question, expected, trace)


def grade(question: Question | str, given: str, truth: Answer | None = None) -> Grade:
    """The student's ``given`` option against torch's answer (``truth``, default: a live run);
    ValueError for an option the question does not have."""
    question = Question(question)
    options = OPTIONS[question]
    if given not in options:
        raise ValueError(f"{given!r} is not an option of {question.value}")
    truth = truth if truth is not None else answer(question)
    return grade_choice(options, options.index(given), truth.expected)
