"""Then vs now: the curriculum's ``Variable`` and ``volatile``, run on today's torch beside
their equivalents. Each case runs when asked, so what the page shows is what this torch does
(``Variable`` still exists and returns a plain Tensor; ``volatile`` only warns)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch.autograd import Variable


@dataclass(frozen=True)
class Outcome:
    code: str  # the lines that ran
    type_name: str  # the type of the result
    requires_grad: bool
    is_leaf: bool
    is_inference: bool
    warnings: tuple[str, ...]  # what torch warned while it ran


@dataclass(frozen=True)
class ThenNow:
    key: str
    then: Outcome
    now: tuple[Outcome, ...]


def _outcome(code: str, make: object) -> Outcome:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = make()  # type: ignore[operator]
    return Outcome(
        code,
        type(result).__module__ + "." + type(result).__name__,
        result.requires_grad,
        result.is_leaf,
        result.is_inference(),
        tuple(dict.fromkeys(str(w.message) for w in caught)),
    )


def then_and_now() -> tuple[ThenNow, ...]:
    """Run the old API and today's equivalents; every field read from torch."""
    data = torch.ones(2, 2)

    def volatile_then() -> torch.Tensor:
        w = Variable(torch.ones(2, 2), requires_grad=True)
        x = Variable(data, volatile=True)
        return w * x

    def no_grad_now() -> torch.Tensor:
        w = torch.ones(2, 2, requires_grad=True)
        with torch.no_grad():
            return w * data

    def inference_now() -> torch.Tensor:
        w = torch.ones(2, 2, requires_grad=True)
        with torch.inference_mode():
            return w * data

    return (
        ThenNow(
            "variable",
            _outcome(
                "x = Variable(torch.ones(2, 2), requires_grad=True)",
                lambda: Variable(torch.ones(2, 2), requires_grad=True),
            ),
            (
                _outcome(
                    "x = torch.ones(2, 2, requires_grad=True)",
                    lambda: torch.ones(2, 2, requires_grad=True),
                ),
                _outcome(
                    "x = torch.tensor([[1., 1.], [1., 1.]], requires_grad=True)",
                    lambda: torch.tensor([[1.0, 1.0], [1.0, 1.0]], requires_grad=True),
                ),
            ),
        ),
        ThenNow(
            "volatile",
            _outcome(
                "w = Variable(torch.ones(2, 2), requires_grad=True)\n"
                "x = Variable(data, volatile=True)\ny = w * x",
                volatile_then,
            ),
            (
                _outcome(
                    "w = torch.ones(2, 2, requires_grad=True)\n"
                    "with torch.no_grad():\n    y = w * data",
                    no_grad_now,
                ),
                _outcome(
                    "w = torch.ones(2, 2, requires_grad=True)\n"
                    "with torch.inference_mode():\n    y = w * data",
                    inference_now,
                ),
            ),
        ),
    )
