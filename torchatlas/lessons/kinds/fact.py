"""Kind ``fact``: a question about one of the named facts torch computes in process
(:mod:`torchatlas.lessons.facts`), answered by picking an option. The loader finds the option
equal to torch's value; a file whose options do not hold it exactly once does not load.

.. code-block:: toml

    [steps.question]            # kind = "fact" is the default
    fact = "preprocess_shape"
    args = { resize = 256, crop = 224 }
    options = ["(3, 256, 256)", "(3, 224, 224)"]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from torchatlas.lessons.facts import FactError, evaluate
from torchatlas.lessons.kinds.base import OPTION, TEXT_KEYS, Context, QuestionKind
from torchatlas.lessons.parsing import LessonError, args_of, options_of, texts, thawed


@dataclass(frozen=True)
class Question:
    fact: str
    args: tuple[tuple[str, Any], ...]
    options: tuple[str, ...]
    answer: int  # index into options: the one equal to torch's value
    prompt: dict[str, str]  # language → text
    explain: dict[str, str]
    kind: ClassVar[str] = "fact"

    @property
    def value(self) -> str:
        return self.options[self.answer]


def fact_value(fact: str, args: tuple[tuple[str, Any], ...], where: str) -> str:
    """Torch's value of ``fact`` on ``args``; a fact that refuses them is the lesson's error."""
    try:
        return evaluate(fact, {k: thawed(v) for k, v in args})
    except FactError as error:
        params = {"fact": fact, **error.params}  # the fact's own parameters may name it too
        raise LessonError(f"fact_{error.code}", where=where, **params) from None


def parse(node: dict[str, Any], where: str, context: Context) -> Question:
    options = options_of(node, where)
    fact = str(node.get("fact", ""))
    args = args_of(node.get("args"), where)
    value = fact_value(fact, args, where)
    if options.count(value) != 1:
        raise LessonError("answer_not_an_option", where=where, fact=fact, value=value)
    written = texts(node, where, TEXT_KEYS, {}, context.languages)
    return Question(
        fact, args, options, options.index(value), written["prompt"], written["explain"]
    )


def export(question: Question) -> dict[str, Any]:
    table: dict[str, Any] = {"fact": question.fact}
    if question.args:
        table["args"] = {key: thawed(value) for key, value in question.args}
    table["options"] = list(question.options)
    return table


KIND = QuestionKind(
    name="fact",
    answered_with=OPTION,
    keys=frozenset({"fact", "args", "options"}),
    parse=parse,
    export=export,
)
