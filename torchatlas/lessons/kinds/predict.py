"""Kind ``predict``: the teacher's own PyTorch snippet, and what is asked about a name in it
(its shape, strides, dtype, storage offset, ``is_contiguous()``, whether it shares storage
with another name, a value, ``requires_grad`` / ``is_leaf`` / ``.grad``, or which error torch
raises). Torch computes the answer in the sandbox each time the lesson is read (saved, loaded):
the teacher never writes which option is right. The options are the teacher's (torch's answer
must be one of them, once) or generated: plausible wrong answers of the same kind.

.. code-block:: toml

    [steps.question]
    kind = "predict"
    code = "x = torch.arange(12).view(3, 4)\\ny = x.t()"
    ask = "stride"
    name = "y"
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from torchatlas.lessons.kinds.base import OPTION, TEXT_KEYS, Context, QuestionKind
from torchatlas.lessons.parsing import LessonError, bounded_text, options_of, texts

MAX_CODE = 2000
MAX_NAME = 40
GENERATED_OPTIONS = 4
NEEDS_OTHER = frozenset({"shares_storage"})  # asks about two names
NEEDS_NO_NAME = frozenset({"error"})  # asks about the snippet as a whole

if TYPE_CHECKING:
    from torchatlas.lessons.code_questions import Ask, CodeAnswer


@dataclass(frozen=True)
class PredictQuestion:
    code: str
    ask: Ask
    options: tuple[str, ...]
    answer: int  # index into options: torch's answer, computed in the sandbox
    prompt: dict[str, str]
    explain: dict[str, str]
    options_given: bool  # the teacher's options (exported), else generated (not exported)
    kind: ClassVar[str] = "predict"

    @property
    def value(self) -> str:
        return self.options[self.answer]


def _name(node: dict[str, Any], key: str, where: str, *, required: bool) -> str:
    name = node.get(key, "")
    if not isinstance(name, str) or len(name) > MAX_NAME:
        raise LessonError("bad_name", where=where, key=key)
    if name and not name.isidentifier():
        raise LessonError("bad_name", where=where, key=key)
    if required and not name:
        raise LessonError("missing_name", where=where, key=key)
    return name


def ask_of(node: dict[str, Any], where: str) -> Ask:
    """The ask of a question table, checked (what is asked, about which names)."""
    from torchatlas.lessons.code_questions import ASKS, Ask

    what = node.get("ask")
    if what not in ASKS:
        raise LessonError("unknown_ask", where=where, ask=str(what)[:40])
    name = _name(node, "name", where, required=what not in NEEDS_NO_NAME)
    other = _name(node, "other", where, required=what in NEEDS_OTHER)
    return Ask(what, name, other)


def seed_of(code: str, ask: Ask) -> int:
    """The generated options' seed: the same snippet and ask always give the same options."""
    return zlib.crc32(f"{code}\0{ask.what}\0{ask.name}\0{ask.other}".encode())


def answer_of(code: str, ask: Ask, where: str, context: Context) -> CodeAnswer:
    """Torch's answer, computed in the sandbox; a snippet without one is the lesson's error."""
    from torchatlas.lessons.code_questions import compute_answer

    outcome = compute_answer(
        code, ask, visitor=context.visitor, pool=context.pool, on_queued=context.on_queued
    )
    if outcome.failure is not None:
        raise LessonError("code_failed", where=where, reason=outcome.failure.kind)
    if outcome.refused is not None:
        code_name, params = outcome.refused
        raise LessonError("code_refused", where=where, reason=code_name, **params)
    return outcome.value


def parse(node: dict[str, Any], where: str, context: Context) -> PredictQuestion:
    from torchatlas.lessons.code_questions import options_for

    code = bounded_text(node, "code", where, MAX_CODE)
    ask = ask_of(node, where)
    answer = answer_of(code, ask, where, context)
    value = answer.value
    given = "options" in node
    if given:
        options = options_of(node, where)
    else:  # drawn first from the snippet's own values (hints), so wrong options are plausible
        options = options_for(answer, GENERATED_OPTIONS, seed_of(code, ask))
    if options.count(value) != 1:
        raise LessonError("answer_not_an_option", where=where, fact=ask.what, value=value)
    written = texts(node, where, TEXT_KEYS, {}, context.languages)
    return PredictQuestion(
        code=code,
        ask=ask,
        options=tuple(options),
        answer=options.index(value),
        prompt=written["prompt"],
        explain=written["explain"],
        options_given=given,
    )


def export(question: PredictQuestion) -> dict[str, Any]:
    table: dict[str, Any] = {"code": question.code, "ask": question.ask.what}
    if question.ask.name:
        table["name"] = question.ask.name
    if question.ask.other:
        table["other"] = question.ask.other
    if question.options_given:
        table["options"] = list(question.options)
    return table


KIND = QuestionKind(
    name="predict",
    answered_with=OPTION,
    keys=frozenset({"code", "ask", "name", "other", "options"}),
    parse=parse,
    export=export,
)
