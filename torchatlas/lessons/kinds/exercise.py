"""Kind ``exercise`` ("write the code"): the teacher's goal, setup code and checks; a student
writes a short program, which runs in the sandbox after the setup and is graded by the checks
(:func:`torchatlas.lessons.code_questions.grade`): passed, failed (with what torch computed)
or an error (torch's own words). The teacher's model solution is never shown to students; it
proves the checks run and pass when the lesson is saved and loaded.

.. code-block:: toml

    [steps.question]
    kind = "exercise"
    setup = "x = torch.arange(12.)"
    solution = "y = x.view(2, 6)"
    checks = [
      { template = "shape", name = "y", expected = "(2, 6)" },
      { template = "shares_storage", name = "y", expected = "x" },
    ]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from torchatlas.lessons.kinds.base import CODE, TEXT_KEYS, Context, QuestionKind
from torchatlas.lessons.parsing import LessonError, bounded_text, texts

if TYPE_CHECKING:  # the sandbox's client is imported where a question is graded
    from torchatlas.lessons.code_questions import Check, Verdict
    from torchatlas.sandboxed import RoomJob

MAX_CODE = 2000
MAX_CHECKS = 6


@dataclass(frozen=True)
class ExerciseQuestion:
    setup: str
    solution: str  # the teacher's; never sent to a student's page
    starter: str  # what the student's box starts with
    checks: tuple[Check, ...]
    prompt: dict[str, str]
    explain: dict[str, str]
    kind: ClassVar[str] = "exercise"
    options: ClassVar[tuple[str, ...]] = ()
    answer: ClassVar[int | None] = None


def _check(item: Any, where: str) -> Check:
    """One check, read and put in canonical form by the engine (``"2,6"`` is ``"(2, 6)"``);
    its refusal is the lesson's error at this check."""
    from torchatlas.lessons.code_questions import CodeQuestionError, parse_check

    if not isinstance(item, dict) or set(item) - {"template", "name", "expected"}:
        raise LessonError("bad_check", where=where)
    try:
        return parse_check(item)
    except CodeQuestionError as error:
        code = "unknown_check" if error.code == "unknown_template" else error.code
        params = {"check": error.params.get("template", ""), **error.params}
        raise LessonError(code, where=where, **params) from None


def checks_of(node: dict[str, Any], where: str) -> tuple[Check, ...]:
    items = node.get("checks")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_CHECKS:
        raise LessonError("bad_checks", where=where, limit=MAX_CHECKS)
    return tuple(_check(item, f"{where}.checks[{n}]") for n, item in enumerate(items))


def grade_answer(
    question: ExerciseQuestion,
    code: str,
    *,
    visitor: Any = None,
    pool: Any = None,
    on_queued: Callable[[int], None] | None = None,
) -> RoomJob[Verdict]:
    """A student's program, run after the setup and graded by the checks, in the sandbox
    (``on_queued(place)`` hears its place in the sandbox's line while it waits)."""
    from torchatlas.lessons.code_questions import grade

    return grade(
        question.setup, code, question.checks, visitor=visitor, pool=pool, on_queued=on_queued
    )


def verified(question: ExerciseQuestion, where: str, context: Context) -> ExerciseQuestion:
    """The question, once its solution passes its checks in the sandbox (else the lesson's
    error, naming what failed)."""
    outcome = grade_answer(
        question,
        question.solution,
        visitor=context.visitor,
        pool=context.pool,
        on_queued=context.on_queued,
    )
    if outcome.failure is not None:
        raise LessonError("code_failed", where=where, reason=outcome.failure.kind)
    if outcome.refused is not None:  # the teacher's part: the setup or a check does not run
        code, params = outcome.refused
        raise LessonError("check_broken", where=where, reason=code,
                          detail=str(params.get("message", ""))[:200])  # fmt: skip
    verdict = outcome.value
    if verdict.status != "pass":
        raise LessonError(
            "solution_fails",
            where=where,
            reason=verdict.code,
            error=verdict.error_type,
            detail=verdict.message[:200],
        )
    return question


def parse(node: dict[str, Any], where: str, context: Context) -> ExerciseQuestion:
    setup = bounded_text(node, "setup", where, MAX_CODE, required=False)
    solution = bounded_text(node, "solution", where, MAX_CODE)
    starter = bounded_text(node, "starter", where, MAX_CODE, required=False)
    written = texts(node, where, TEXT_KEYS, {}, context.languages)
    question = ExerciseQuestion(
        setup=setup,
        solution=solution,
        starter=starter,
        checks=checks_of(node, where),
        prompt=written["prompt"],
        explain=written["explain"],
    )
    return verified(question, where, context) if context.verify else question


def export(question: ExerciseQuestion) -> dict[str, Any]:
    table: dict[str, Any] = {}
    if question.setup:
        table["setup"] = question.setup
    table["solution"] = question.solution
    if question.starter:
        table["starter"] = question.starter
    table["checks"] = [
        {
            **({"template": check.template}),
            **({"name": check.name} if check.name else {}),
            "expected": check.expected,
        }
        for check in question.checks
    ]
    return table


KIND = QuestionKind(
    name="exercise",
    answered_with=CODE,
    keys=frozenset({"setup", "solution", "starter", "checks"}),
    parse=parse,
    export=export,
)
