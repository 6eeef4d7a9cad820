"""Questions a teacher writes as PyTorch code, answered and graded by torch in the sandbox.

Two kinds of question rest on this engine (the pages, the store and the kind registry are
built on top of it elsewhere):

- *predict from code*: a short snippet and an :class:`Ask` about a name in it (its shape,
  strides, dtype, storage offset, contiguity, whether it shares storage with another name,
  its value, ``requires_grad`` / ``is_leaf`` / ``.grad``, or which exception the snippet
  raises). :func:`compute_answer` runs the snippet in a sandbox child and reads the answer
  with torch there; :func:`options_for` makes the multiple-choice options (the right value
  and plausible wrong ones of the same kind).
- *write the code*: setup code, :class:`Check` s and a model solution. :func:`grade` runs the
  setup, then a student's program, then the checks, in one sandbox child, and answers a
  :class:`Verdict` (pass / fail / error with torch's own words). A model solution is graded
  the same way when the teacher saves, which proves the checks run and pass.

Nothing here trusts the text it is given: every program, reference expression and assertion
runs only in the sandbox (:func:`torchatlas.sandboxed.run_room_job`), after the sandbox's
allow-list accepted it, and the replies come back as bounded frozen dataclasses. Errors are
codes with parameters (:class:`CodeQuestionError`), never sentences: each page translates them.

Every program starts with :data:`PREAMBLE` (``torch``, ``nn``, ``F`` and ``math`` imported),
so a snippet may start with ``x = torch.arange(12.)``. Line numbers handed back are counted
in the text the teacher or the student wrote (the preamble and the engine's own lines are
never counted).

How one graded run is laid out (one program, run once, top to bottom):

1. :data:`PREAMBLE`;
2. the teacher's setup;
3. one line per check that needs a reference taken *from the setup's state*: a
   ``values_equal`` or ``grad_equals`` expression is evaluated here (under ``torch.no_grad()``,
   cloned), and the storage of a ``shares_storage`` target that the setup defines is held
   here, each under a name with a random part per call (``_atlas_ref_<hex>_<k>``) that the
   student's code cannot guess. So a reference is what the setup made, whatever the
   student's code later rebinds or changes in place (``x = x.clone()`` does not make a copy
   share storage with the setup's ``x``). A reference expression therefore sees the setup's
   names only;
4. the student's program;
5. :data:`PREAMBLE` again (a student who rebinds ``torch`` cannot change what an assertion
   calls), then each ``assertions`` check's statements, in the teacher's order.

The job then reads the student's names with torch's own C accessors (a fake object with a
``.shape`` property, or a tensor subclass whose ``size`` lies, passes nothing) and answers
the first check that fails, in the teacher's order. An exception is placed by the line of
the top-level statement that raised: in the setup or a reference line it is the teacher's
(:attr:`RoomJob.refused` ``setup_failed`` / ``check_failed``, never a verdict, so a student's
tally never counts it), in the student's program it is the verdict ``error`` with the
student's line, in an assertion block a ``fail`` of that check.
"""

from __future__ import annotations

import ast
import functools
import keyword
import math
import random
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from torchatlas.lessons.facts import _number, shape_text
from torchatlas.sandbox.codec import Limits
from torchatlas.sandbox.policy import (
    FORBIDDEN_ATTRIBUTE_PREFIXES,
    FORBIDDEN_ATTRIBUTES,
    FORBIDDEN_CALLS,
    FRAME_ATTRIBUTES,
    TEXT_EVALUATING_ATTRIBUTES,
    check_source,
)
from torchatlas.sandboxed import JobFailure, Refusal, RoomJob, run_room_job

if TYPE_CHECKING:
    from torchatlas.clients import Visitor
    from torchatlas.sandbox import SandboxPool

# ------------------------------------------------------------------------------ vocabulary
ASKS = (
    "shape", "stride", "dtype", "storage_offset", "is_contiguous", "shares_storage",
    "value", "requires_grad", "is_leaf", "grad", "error",
)  # fmt: skip
TEMPLATES = (
    "shape", "strides", "dtype", "shares_storage", "values_equal", "param_count",
    "grad_equals", "assertions",
)  # fmt: skip
STATUSES = ("pass", "fail", "error")
# The answer of the "error" ask when the snippet runs through (facts.named_tensors says the
# same "ok" where torch accepts).
NO_ERROR = "ok"
# Asks answered True / False.
BOOLEAN_ASKS = frozenset({"is_contiguous", "shares_storage", "requires_grad", "is_leaf"})
# The exceptions a question about "which error" offers, most common in teaching first.
COMMON_ERRORS = (
    "RuntimeError", "TypeError", "IndexError", "ValueError", NO_ERROR, "AttributeError",
    "ZeroDivisionError", "KeyError",
)  # fmt: skip

# Bounds of what a teacher or a student may hand in (characters unless named otherwise).
MAX_NAME = 40
MAX_CODE = 2000  # a snippet, a setup, a student's program, a model solution
MAX_EXPECTED = 200  # a shape, a dtype, a count, a reference expression, a name
MAX_ASSERTIONS = 1000
MAX_CHECKS = 6
MAX_OPTION = 120  # one option's text, and one value an answer shows
MAX_MESSAGE = 300  # torch's words, as a verdict carries them
MAX_HINTS = 8
MAX_RANK = 12

# Every program starts with these imports; a graded run repeats them before the assertions.
PREAMBLE = "import torch; import torch.nn as nn; import torch.nn.functional as F; import math"
PREAMBLE_LINES = 1

# Job names (torchatlas.lessons.jobs registers them) and their limits.
PREDICT = "lessons.predict"
GRADE = "lessons.grade"
# An honest snippet or exercise runs in milliseconds; a loop that never ends is stopped here
# (the child's CPU limit is a couple of seconds above).
PREDICT_TIMEOUT_S = 3.0
GRADE_TIMEOUT_S = 3.0
# Replies are a few short strings: far above an honest one, far below anything costly.
ANSWER_LIMITS = Limits(max_str=400, max_items=16, max_nodes=80, max_depth=4, int_bits=64)
VERDICT_LIMITS = Limits(max_str=400, max_items=16, max_nodes=120, max_depth=5, int_bits=64)


class CodeQuestionError(ValueError):
    """A question, a check or a program that this engine refuses: ``code`` and ``params``,
    no sentence (the page says it in the reader's language)."""

    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(code)
        self.code = code
        self.params = params


# ------------------------------------------------------------------------------ data types
@dataclass(frozen=True)
class Ask:
    """What a predict-from-code question asks: one of :data:`ASKS` about the (dotted) name
    ``name`` (``"x"``, ``"model.fc.weight"``); ``other`` is the second name of
    ``shares_storage``. The ``error`` ask needs no name."""

    what: str
    name: str = ""
    other: str = ""


@dataclass(frozen=True)
class CodeAnswer:
    """torch's answer to an :class:`Ask`, as canonical text: shapes and strides ``"(2, 3)"``,
    dtypes ``"float32"``, booleans ``"True"``/``"False"``, offsets ``"4"``, values as the
    nested list ``tolist()`` gives (floats to six significant digits: ``"[1.0, 2.5]"``),
    ``"None"`` for a missing ``.grad``, an exception's class name (``"RuntimeError"``) or
    :data:`NO_ERROR`.

    ``hints``: the same property read from the snippet's other tensors (a plausible wrong
    answer is often the value of the name next to it), for :func:`options_for`. For the
    ``error`` ask, ``message`` is torch's message and ``line`` the snippet's line that
    raised."""

    what: str
    value: str
    hints: tuple[str, ...] = ()
    message: str = ""
    line: int | None = None


@dataclass(frozen=True)
class Check:
    """One check of a write-the-code exercise: a :data:`TEMPLATES` entry about ``name`` (a
    dotted name the student's program defines) and its ``expected`` text:

    - ``shape`` / ``strides``: ``"(2, 6)"``; ``dtype``: ``"float32"``;
    - ``shares_storage``: the name of a tensor ``name`` must share storage with (no copy);
      when the setup defines it, the setup's tensor is meant, whatever the student rebinds;
    - ``values_equal``: a reference expression over the setup's names (``"x.view(2, 6)"``),
      evaluated before the student's program runs; values compared, not dtypes;
    - ``param_count``: ``"1100"`` (every parameter of the module ``name``, counted once);
    - ``grad_equals``: an expression over the setup's names (``"2 * x"``) that
      ``name.grad`` must equal after the student's program;
    - ``assertions``: Python statements (``assert`` …) run after the student's program over
      its names (``name`` unused)."""

    template: str
    name: str = ""
    expected: str = ""


@dataclass(frozen=True)
class Verdict:
    """A graded program: ``status`` ``"pass"``, ``"fail"`` (a check failed) or ``"error"``
    (the program did not run to its end: it raised, or the sandbox stopped or refused it).

    ``code``: ``passed``; a failed check's ``wrong_shape``, ``wrong_strides``, ``wrong_dtype``,
    ``not_shared``, ``values_differ``, ``wrong_param_count``, ``grad_differs``,
    ``assertion_failed``, ``assertion_raised``, ``missing_name``, ``not_a_tensor``,
    ``not_a_module``; or for an error ``raised`` (the program raised), ``syntax``, ``refused``
    (the sandbox's allow-list), ``timeout``, ``memory``, ``too_long``.
    ``params``: text pairs (``("check", "0")``, ``("expected", "(2, 6)")``,
    ``("got", "(3, 4)")``, ``("name", "y")``, ``("rule", "import")`` …).
    ``error_type``: what a teacher's tally counts, the exception's class name
    (``"RuntimeError"``), or ``"SyntaxError"``, ``"Refused"``, ``"Timeout"``, ``"Memory"``.
    ``message``: torch's (or the sandbox's, or the teacher's assertion's) own words, at most
    :data:`MAX_MESSAGE` characters. ``line``: the student's line, counted in the student's
    program."""

    status: str
    code: str
    params: tuple[tuple[str, str], ...] = ()
    error_type: str = ""
    message: str = ""
    line: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def param(self, key: str, default: str = "") -> str:
        """The parameter ``key``'s text (``default`` when absent)."""
        return dict(self.params).get(key, default)


# ------------------------------------------------------------------------------ validation
_INTERNAL = FORBIDDEN_ATTRIBUTES | FRAME_ATTRIBUTES | TEXT_EVALUATING_ATTRIBUTES | FORBIDDEN_CALLS


def _name_ok(path: Any) -> bool:
    """A dotted name a question may read: identifiers only, no keyword, nothing that leads
    into Python's internals (the sandbox's own list of refused attributes), the engine's
    ``_atlas_`` names unreachable."""
    if type(path) is not str or not 0 < len(path) <= MAX_NAME or not path.isascii():
        return False
    parts = path.split(".")
    return all(
        part.isidentifier()
        and not keyword.iskeyword(part)
        and "__" not in part
        and not part.startswith(("_atlas_", *FORBIDDEN_ATTRIBUTE_PREFIXES))
        and part not in _INTERNAL
        for part in parts
    )


def _root(path: str) -> str:
    return path.partition(".")[0]


def check_code(text: Any, part: str = "code", limit: int = MAX_CODE) -> str:
    """``text`` if it is a program this engine takes (text of at most ``limit`` characters),
    with its line ends made ``\\n``; raises ``bad_code`` / ``too_long`` (``part``,
    ``limit``, ``length``)."""
    if type(text) is not str:
        raise CodeQuestionError("bad_code", part=part)
    if len(text) > limit:
        raise CodeQuestionError("too_long", part=part, limit=limit, length=len(text))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_ask(ask: Ask) -> None:
    """Raise :class:`CodeQuestionError` unless ``ask`` is a question this engine answers:
    ``unknown_ask`` (``what``) or ``bad_name`` (``field``: ``name`` / ``other``)."""
    if not isinstance(ask, Ask) or ask.what not in ASKS:
        raise CodeQuestionError("unknown_ask", what=str(getattr(ask, "what", ""))[:MAX_NAME])
    if ask.what == "error":
        if ask.name and not _name_ok(ask.name):
            raise CodeQuestionError("bad_name", field="name", name=str(ask.name)[:MAX_NAME])
    elif not _name_ok(ask.name):
        raise CodeQuestionError("bad_name", field="name", name=str(ask.name)[:MAX_NAME])
    if ask.what == "shares_storage":
        if not _name_ok(ask.other):
            raise CodeQuestionError("bad_name", field="other", name=str(ask.other)[:MAX_NAME])
    elif ask.other != "":
        raise CodeQuestionError("bad_name", field="other", name=str(ask.other)[:MAX_NAME])


def _fields(data: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(data, Mapping):
        raise CodeQuestionError("bad_field", field="")
    unknown = sorted(str(key)[:MAX_NAME] for key in data if key not in allowed)
    if unknown:
        raise CodeQuestionError("unknown_field", field=unknown[0])
    out = {}
    for key, value in data.items():
        if type(value) is not str:
            raise CodeQuestionError("bad_field", field=key)
        out[key] = value
    return out


def parse_ask(data: Mapping[str, Any] | Ask) -> Ask:
    """An :class:`Ask` from a stored mapping (``what``, ``name``, ``other``), checked by
    :func:`check_ask`; ``unknown_field`` / ``bad_field`` for anything else."""
    ask = data if isinstance(data, Ask) else Ask(**_fields(data, ("what", "name", "other")))
    check_ask(ask)
    return ask


_INTS = re.compile(r"\s*[\(\[]?\s*((?:-?\d+\s*,\s*)*-?\d+)?\s*,?\s*[\)\]]?\s*")


def _int_tuple(text: str) -> tuple[int, ...] | None:
    """``"(2, 6)"``, ``"2, 6"``, ``"[2, 6]"``, ``"(12,)"``, ``"()"`` as a tuple; else None."""
    match = _INTS.fullmatch(text)
    if match is None:
        return None
    body = match.group(1)
    values = tuple(int(part) for part in body.split(",")) if body else ()
    if len(values) > MAX_RANK or any(not 0 <= value < 2**40 for value in values):
        return None
    return values


def _dtype_name(text: str) -> str | None:
    """The canonical name (``"float32"``) of a dtype written ``float32``, ``torch.float32``
    or an alias torch knows (``float``, ``long``); else None."""
    import torch

    name = text.strip().removeprefix("torch.")
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,19}", name):
        return None
    dtype = getattr(torch, name, None)
    return str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else None


def _expression(text: str, field: str) -> str:
    """A reference expression as one line of Python the sandbox's allow-list accepts."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CodeQuestionError("bad_expression", field=field) from None
    if any(isinstance(node, ast.Yield | ast.YieldFrom | ast.Await) for node in ast.walk(tree)):
        raise CodeQuestionError("bad_expression", field=field)
    line = ast.unparse(tree)  # one line, whatever line breaks the teacher's text had
    refusal = _static_refusal(line)
    if refusal is not None:
        raise CodeQuestionError("refused_expression", field=field, rule=refusal.code)
    return line


def parse_check(data: Mapping[str, Any] | Check) -> Check:
    """A :class:`Check` from a stored mapping (``template``, ``name``, ``expected``) or a
    Check, checked and with ``expected`` in canonical form (``"2,6"`` becomes ``"(2, 6)"``,
    ``"torch.float"`` becomes ``"float32"``, an expression one line). Raises
    :class:`CodeQuestionError`: ``unknown_template``, ``bad_name``, ``too_long``,
    ``bad_expected`` (``template``), ``bad_expression`` / ``refused_expression``,
    ``bad_assertions`` / ``refused_assertions`` (``line``, ``rule``)."""
    if isinstance(data, Check):
        check = data
    else:
        check = Check(**_fields(data, ("template", "name", "expected")))
    template, name, expected = check.template, check.name, check.expected
    if template not in TEMPLATES:
        raise CodeQuestionError("unknown_template", template=str(template)[:MAX_NAME])
    if type(expected) is not str:
        raise CodeQuestionError("bad_field", field="expected")
    if template == "assertions":
        if name != "":
            raise CodeQuestionError("bad_name", field="name", name=str(name)[:MAX_NAME])
        text = check_code(expected, "assertions", MAX_ASSERTIONS)
        refusal = _static_refusal(text)
        if refusal is not None:
            code = "bad_assertions" if refusal.code == "syntax" else "refused_assertions"
            raise CodeQuestionError(code, line=refusal.line, rule=refusal.code)
        return Check(template, "", text)
    if not _name_ok(name):
        raise CodeQuestionError("bad_name", field="name", name=str(name)[:MAX_NAME])
    if len(expected) > MAX_EXPECTED:
        raise CodeQuestionError(
            "too_long", part="expected", limit=MAX_EXPECTED, length=len(expected)
        )
    canonical: str | None
    if template in ("shape", "strides"):
        sizes = _int_tuple(expected)
        canonical = None if sizes is None else shape_text(sizes)
    elif template == "dtype":
        canonical = _dtype_name(expected)
    elif template == "param_count":
        text = expected.strip()
        canonical = (
            str(int(text)) if text.isascii() and text.isdecimal() and len(text) < 16 else None
        )
    elif template == "shares_storage":
        canonical = expected.strip() if _name_ok(expected.strip()) else None
    else:  # values_equal, grad_equals
        canonical = _expression(expected, "expected")
    if canonical is None:
        raise CodeQuestionError("bad_expected", template=template)
    return Check(template, name, canonical)


def check_checks(checks: Iterable[Mapping[str, Any] | Check]) -> tuple[Check, ...]:
    """Every check parsed (:func:`parse_check`), at most :data:`MAX_CHECKS`, at least one;
    raises ``no_checks`` / ``too_many_checks`` (``limit``), or a check's own code with its
    position (``check``)."""
    items = list(checks) if not isinstance(checks, str | bytes | Mapping) else None
    if items is None:
        raise CodeQuestionError("bad_field", field="checks")
    if not items:
        raise CodeQuestionError("no_checks")
    if len(items) > MAX_CHECKS:
        raise CodeQuestionError("too_many_checks", limit=MAX_CHECKS, count=len(items))
    parsed = []
    for index, item in enumerate(items):
        try:
            parsed.append(parse_check(item))
        except CodeQuestionError as error:
            raise CodeQuestionError(error.code, check=index, **error.params) from None
        except TypeError:  # a mapping with a field missing
            raise CodeQuestionError("bad_field", check=index, field="template") from None
    return tuple(parsed)


@functools.lru_cache(maxsize=512)
def _static_refusal(text: str) -> Refusal | None:
    """The sandbox's allow-list on one part of a program alone (its first refusal, lines
    counted in that part), or None: the same check the child makes, done here so that a
    refused or mistyped line is placed in the right part and costs no job. Cached: a class
    submits the same setup sixty times."""
    refusals = check_source(text)
    if not refusals:
        return None
    first = refusals[0]
    return Refusal(int(first.line), int(first.col), str(first.code), str(first.message))


# ------------------------------------------------------------------------------ predict
def _shifted(failure: JobFailure, offset: int) -> JobFailure:
    """A failure's lines counted in the teacher's text instead of the whole program."""

    def shift(line: int | None) -> int | None:
        return None if line is None else max(1, line - offset)

    refusals = tuple(replace(item, line=shift(item.line) or 1) for item in failure.refusals)
    # The sandbox's own sentence names lines of the whole program: the first refusal's
    # reason names none.
    detail = refusals[0].detail if refusals else failure.detail
    return replace(failure, detail=detail, line=shift(failure.line), refusals=refusals)


def compute_answer(
    snippet: str,
    ask: Ask,
    *,
    visitor: Visitor | str | None = None,
    pool: SandboxPool | None = None,
    timeout_s: float = PREDICT_TIMEOUT_S,
    on_queued: Callable[[int], None] | None = None,
) -> RoomJob[CodeAnswer]:
    """torch's answer to ``ask`` about ``snippet``, computed in a sandbox child. Never raises.

    - ``value``: a :class:`CodeAnswer`;
    - ``refused``: the question itself (``unknown_ask``, ``bad_name``, ``too_long`` …), or
      what the snippet did: ``snippet_raised`` (``error_type``, ``message``, ``line``: a
      snippet that raises can only be asked ``error``), ``missing_name`` (``name``),
      ``not_a_tensor`` (``name``, ``type``), ``no_value`` (``name``, ``type``: a value that
      has no text form here, such as a meta tensor), ``value_too_long`` (``name``,
      ``limit``);
    - ``failure``: the sandbox's (``syntax``, ``refused`` with lines counted in the snippet,
      ``timeout``, ``memory``, ``busy`` …).

    ``on_queued(place)`` hears the job's place in the sandbox's line while it waits (0: it
    starts), as a room's own jobs report it (the author page shows it while saving)."""
    try:
        text = check_code(snippet, "snippet")
        check_ask(ask)
    except CodeQuestionError as error:
        return RoomJob(refused=(error.code, error.params))
    params = {"what": ask.what, "name": ask.name, "other": ask.other, "first_line": 2}
    outcome = run_room_job(
        PREDICT,
        params,
        CodeAnswer,
        source=f"{PREAMBLE}\n{text}",
        visitor=visitor,
        timeout_s=timeout_s,
        limits=ANSWER_LIMITS,
        pool=pool,
        on_queued=on_queued,
    )
    if outcome.failure is not None:
        return replace(outcome, failure=_shifted(outcome.failure, PREAMBLE_LINES))
    answer = outcome.value
    if answer is not None and (answer.what != ask.what or len(answer.value) > MAX_OPTION):
        return RoomJob(failure=JobFailure("untrusted"), usage=outcome.usage)
    return outcome


# ------------------------------------------------------------------------------ options
def _ints_of(text: str) -> tuple[int, ...] | None:
    return _int_tuple(text) if text.startswith("(") else None


def _tuple_variants(values: tuple[int, ...], strides: bool) -> list[tuple[int, ...]]:
    """Shapes (or strides) a student plausibly writes instead: reversed, two sizes swapped,
    a dimension dropped or added, one size doubled or halved, flattened."""
    out: list[tuple[int, ...]] = [values[::-1]]
    for i in range(len(values) - 1):
        swapped = list(values)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        out.append(tuple(swapped))
    out.extend(values[:i] + values[i + 1 :] for i in range(len(values)))
    out.extend([(1, *values), (*values, 1)])
    if strides:
        out.extend((*values[:i], 0, *values[i + 1 :]) for i in range(len(values)))
        out.append(tuple(1 for _ in values) or (1,))
        out.append(tuple(math.prod(values[i + 1 :]) for i in range(len(values))))
    else:
        out.append((math.prod(values),))
    for i, value in enumerate(values):
        out.append((*values[:i], value * 2, *values[i + 1 :]))
        if value > 1:
            out.append((*values[:i], value // 2 or 1, *values[i + 1 :]))
    if not values:
        out.extend([(1,), (0,), (1, 1)])
    return out


# Dtypes a student confuses with each other, the likeliest first.
_DTYPE_NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "float32": ("float64", "int64", "float16", "bfloat16"),
    "float64": ("float32", "int64", "float16", "complex128"),
    "float16": ("float32", "bfloat16", "float64", "int16"),
    "bfloat16": ("float16", "float32", "float64", "int16"),
    "int64": ("int32", "float32", "float64", "int8"),
    "int32": ("int64", "float32", "int16", "float64"),
    "int16": ("int32", "int64", "int8", "float16"),
    "int8": ("uint8", "int16", "int64", "bool"),
    "uint8": ("int8", "bool", "int64", "float32"),
    "bool": ("uint8", "int64", "float32", "int8"),
    "complex64": ("complex128", "float32", "float64", "int64"),
    "complex128": ("complex64", "float64", "float32", "int64"),
}
_ANY_DTYPES = ("float32", "float64", "int64", "int32", "float16", "bool", "uint8", "bfloat16")

_TOKEN = re.compile(r"\s*(\[|\]|,|True|False|-?(?:nan|inf)|-?\d+(?:\.\d*)?(?:e[-+]?\d+)?)")


def _parse_value(text: str) -> Any:
    """A value's text (``"[[1.0, 2.0], [3.0, 4.0]]"``, ``"3"``, ``"True"``, ``"nan"``) as
    nested lists of bools, ints and floats; None for anything else (a complex number, None).
    A small parser of its own: the text is a reply, and nothing of it is evaluated."""
    tokens: list[str] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            return None
        tokens.append(match.group(1))
        position = match.end()
        while position < len(text) and text[position] == " ":
            position += 1

    def leaf(token: str) -> Any:
        if token in ("True", "False"):
            return token == "True"
        if any(mark in token for mark in ".en"):
            return float(token)
        return int(token)

    def read(index: int, depth: int) -> tuple[Any, int]:
        if index >= len(tokens) or depth > 8:
            raise ValueError
        token = tokens[index]
        if token == "[":
            items: list[Any] = []
            index += 1
            while index < len(tokens) and tokens[index] != "]":
                item, index = read(index, depth + 1)
                items.append(item)
                if index < len(tokens) and tokens[index] == ",":
                    index += 1
            if index >= len(tokens):
                raise ValueError
            return items, index + 1
        if token in ("]", ","):
            raise ValueError
        return leaf(token), index + 1

    try:
        value, end = read(0, 0)
    except (ValueError, OverflowError):
        return None
    return value if end == len(tokens) else None


def _render(value: Any) -> str:
    """A parsed value as the answer's text (the same form the job writes)."""
    if isinstance(value, list):
        return "[" + ", ".join(_render(item) for item in value) + "]"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _refill(structure: Any, leaves: Iterable[Any]) -> Any:
    """``structure`` with its leaves replaced, in order, by ``leaves``."""
    source = iter(leaves)

    def fill(node: Any) -> Any:
        return [fill(item) for item in node] if isinstance(node, list) else next(source)

    return fill(structure)


def _shift(leaf: Any, by: int) -> Any:
    if isinstance(leaf, bool):
        return not leaf
    return leaf + by if isinstance(leaf, int) else leaf + float(by)


def _value_variants(value: Any) -> list[Any]:
    """Values a student plausibly predicts instead: the elements in another order (reversed,
    rotated, transposed), the structure flattened or split, one element or all off by one,
    everything doubled, ints written as floats or floats truncated."""
    leaves = _leaves(value)
    if not isinstance(value, list):
        if isinstance(value, bool):
            return [not value]
        return [_shift(value, 1), _shift(value, -1), value * 2, -value, type(value)(0)]
    out: list[Any] = []
    if len(leaves) > 1:
        out.append(_refill(value, leaves[::-1]))
        out.append(_refill(value, leaves[1:] + leaves[:1]))
    if value and all(isinstance(row, list) for row in value):
        widths = {len(row) for row in value}
        if (
            len(widths) == 1
            and widths != {0}
            and not any(isinstance(item, list) for row in value for item in row)
        ):
            out.append([list(column) for column in zip(*value, strict=True)])
        out.append(leaves)
    elif len(leaves) > 2 and len(leaves) % 2 == 0:
        half = len(leaves) // 2
        out.append([leaves[:half], leaves[half:]])
    if leaves:
        out.append(_refill(value, [_shift(leaves[0], 1), *leaves[1:]]))
        out.append(_refill(value, [_shift(leaf, 1) for leaf in leaves]))
        if not all(isinstance(leaf, bool) for leaf in leaves):
            out.append(_refill(value, [leaf * 2 for leaf in leaves]))
        if all(type(leaf) is int for leaf in leaves):
            out.append(_refill(value, [float(leaf) for leaf in leaves]))
        elif all(type(leaf) is float and math.isfinite(leaf) for leaf in leaves):
            out.append(_refill(value, [int(leaf) for leaf in leaves]))
    out.append([value])
    return out


# The last resort of a value question whose value gave too few variants (``[]``, a complex).
_FALLBACK_VALUES = ("0", "0.0", "[0.0]", "[1.0]", "None")


def _generated(answer: CodeAnswer) -> list[list[str]]:
    """Wrong answers of the answer's own kind, made from its value alone, in tiers: the
    likeliest confusions first (:func:`options_for` draws from a tier before the next)."""
    what, right = answer.what, answer.value
    if what in BOOLEAN_ASKS:
        return [["False" if right == "True" else "True"]]
    if what == "error":
        return [list(COMMON_ERRORS[:5]), list(COMMON_ERRORS[5:])]
    if what == "dtype":
        return [list(_DTYPE_NEIGHBOURS.get(right, ())), list(_ANY_DTYPES)]
    if what == "storage_offset":
        if not right.isdecimal():
            return []
        n = int(right)
        near = [str(c) for c in (n + 1, n - 1, 0) if c >= 0]
        return [near, [str(c) for c in (2 * n, n + 2, n - 2, 1, n + 4) if c >= 0]]
    if what in ("shape", "stride"):
        values = _ints_of(right)
        if values is None:
            return []
        return [[shape_text(item) for item in _tuple_variants(values, what == "stride")]]
    # value, grad
    if right == "None":
        return [list(_FALLBACK_VALUES)]
    sizes = _ints_of(right) if right.startswith("(") else None
    if sizes is not None:  # a value that is a torch.Size or a tuple of ints
        return [[shape_text(item) for item in _tuple_variants(sizes, False)]]
    parsed = _parse_value(right)
    if type(parsed) is bool:
        return [["False" if parsed else "True"]]
    variants = [] if parsed is None else [_render(item) for item in _value_variants(parsed)]
    return [[*variants, "None"] if what == "grad" else variants, list(_FALLBACK_VALUES)]


def options_for(answer: CodeAnswer, count: int = 4, seed: int = 0) -> tuple[str, ...]:
    """The options of a multiple-choice question on ``answer``: its right value once and up
    to ``count - 1`` distinct wrong ones of the same kind (the snippet's other tensors'
    values of the same property first, then values made from the right one: shapes swapped,
    transposed, a dimension dropped or added; strides alike; neighbouring dtypes; offsets
    ±; the other boolean; common exceptions or :data:`NO_ERROR`; values perturbed), each at
    most :data:`MAX_OPTION` characters and never equal to the right one. A kind with fewer
    values has fewer options (booleans: two). The choice and the order depend only on the
    answer and ``seed``."""
    right = answer.value
    count = max(1, min(int(count), 12))
    rng = random.Random(f"{seed}\x00{answer.what}\x00{right}")
    wrong: list[str] = []
    for tier in (list(answer.hints), *_generated(answer)):
        fresh = [
            text
            for text in dict.fromkeys(tier)
            if type(text) is str and text and text != right and len(text) <= MAX_OPTION
            and text not in wrong
        ]  # fmt: skip
        rng.shuffle(fresh)
        wrong.extend(fresh[: count - 1 - len(wrong)])
    options = [right, *wrong]
    rng.shuffle(options)
    return tuple(options)


# ------------------------------------------------------------------------------ grading
@dataclass(frozen=True)
class GradingPlan:
    """One graded run as the sandbox gets it: the program, and where each part of it lies
    (``parts``: first line, last line, kind, check index) so that a line the child names is
    placed in the teacher's or the student's text; ``checks``: each check with the name of
    its reference (empty when it has none)."""

    source: str
    parts: tuple[tuple[int, int, str, int], ...]
    checks: tuple[tuple[str, str, str, str], ...]
    student_first: int

    def part_of(self, line: int | None) -> tuple[str, int, int]:
        """(kind, check index, line within the part) of a line of the program."""
        for first, last, kind, index in self.parts:
            if line is not None and first <= line <= last:
                return kind, index, line - first + 1
        return "student", -1, line or 1


def _bound_names(setup: str) -> frozenset[str]:
    """Names the setup binds at its top level (assignments, imports, definitions, loops)."""
    try:
        tree = ast.parse(setup)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    names: set[str] = set()
    # Names bound inside a function, a class, a lambda or a comprehension are not the
    # module's: those scopes are not entered.
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
              ast.SetComp, ast.DictComp, ast.GeneratorExp)  # fmt: skip
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.add(node.target.id)  # ``(y := …)`` binds in the enclosing scope
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if not isinstance(node, scopes):
            pending.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def plan_grading(
    setup: str, code: str, checks: Sequence[Check], *, tag: str | None = None
) -> GradingPlan:
    """The program :func:`grade` runs (see the module's docstring for its layout), for
    checked parts (``setup`` and ``code`` line ends already ``\\n``). ``tag`` names the
    references; by default a fresh random one per call, so that the student's program
    cannot name them (a fixed one is for the warm-up only)."""
    tag = tag if tag is not None else secrets.token_hex(6)
    lines: list[str] = [PREAMBLE]
    parts: list[tuple[int, int, str, int]] = [(1, PREAMBLE_LINES, "setup", -1)]

    def add(text: str, kind: str, index: int) -> int:
        first = len(lines) + 1
        lines.extend(text.split("\n"))
        parts.append((first, len(lines), kind, index))
        return first

    add(setup, "setup", -1)
    bound = _bound_names(setup)
    planned: list[tuple[str, str, str, str]] = []
    for index, check in enumerate(checks):
        reference = ""
        if check.template in ("values_equal", "grad_equals"):
            reference = f"_atlas_ref_{tag}_{index}"
            add(
                f"with torch.no_grad(): {reference} = ({check.expected}); {reference} = "
                f"{reference}.clone() if isinstance({reference}, torch.Tensor) else {reference}",
                "reference",
                index,
            )
        elif check.template == "shares_storage" and _root(check.expected) in bound:
            reference = f"_atlas_ref_{tag}_{index}"
            add(f"{reference} = {check.expected}.untyped_storage()", "reference", index)
        planned.append((check.template, check.name, check.expected, reference))
    student_first = add(code, "student", -1)
    if any(check.template == "assertions" for check in checks):
        add(PREAMBLE, "setup", -1)
        for index, check in enumerate(checks):
            if check.template == "assertions":
                add(check.expected, "assertions", index)
    return GradingPlan("\n".join(lines), tuple(parts), tuple(planned), student_first)


def _error_verdict(code: str, error_type: str, message: str = "", line: int | None = None,
                   params: tuple[tuple[str, str], ...] = ()) -> Verdict:  # fmt: skip
    return Verdict("error", code, params, error_type, message[:MAX_MESSAGE], line)


# The sandbox's failures of a student's program, as verdicts (the tally counts error_type).
_FAILURE_VERDICTS = {
    "timeout": ("timeout", "Timeout"),
    "memory": ("memory", "Memory"),
    "syntax": ("syntax", "SyntaxError"),
    "refused": ("refused", "Refused"),
    "code_error": ("raised", "BaseException"),
}


def _teacher_refusal(kind: str, index: int, params: dict[str, Any]) -> RoomJob[Verdict]:
    """A failure placed in the teacher's text: a reference or an assertion block is its
    check's, anything else the setup's."""
    if kind in ("reference", "assertions"):
        return RoomJob(refused=("check_failed", {"check": index, **params}))
    return RoomJob(refused=("setup_failed", params))


def _from_failure(
    failure: JobFailure, plan: GradingPlan, usage: dict[str, Any]
) -> RoomJob[Verdict]:
    """A sandbox failure of a graded run: the student's (a verdict ``error``), the teacher's
    (``setup_failed`` / ``check_failed``), or the sandbox's own (kept as the failure). A
    timeout or a memory limit is the student's: the setup and the checks ran within them
    when the model solution was graded."""
    if failure.kind not in _FAILURE_VERDICTS:
        return RoomJob(failure=failure, usage=usage)
    code, error_type = _FAILURE_VERDICTS[failure.kind]
    if failure.kind in ("timeout", "memory"):
        return RoomJob(value=_error_verdict(code, error_type), usage=usage)
    place = failure.refusals[0].line if failure.refusals else failure.line
    kind, index, line = plan.part_of(place)
    rule = failure.refusals[0].code if failure.refusals else failure.kind
    message = failure.refusals[0].detail if failure.refusals else failure.detail
    if failure.kind == "code_error" and failure.refused is not None:
        error_type = failure.refused.raised[:MAX_NAME] or error_type
    if kind != "student":
        params = {"error_type": error_type, "rule": rule, "line": line,
                  "message": message[:MAX_MESSAGE]}  # fmt: skip
        return replace(_teacher_refusal(kind, index, params), usage=usage)
    params = (("rule", rule),) if failure.kind == "refused" else ()
    verdict = _error_verdict(code, error_type, message, line, params)
    return RoomJob(value=verdict, usage=usage)


def _checked_verdict(outcome: RoomJob[Verdict]) -> RoomJob[Verdict]:
    """The job's verdict, refused as untrusted when it is outside the vocabulary."""
    verdict = outcome.value
    if verdict is None:
        return outcome
    if (
        verdict.status not in STATUSES
        or not re.fullmatch(r"[a-z_]{1,40}", verdict.code)
        or len(verdict.message) > MAX_MESSAGE
        or (verdict.line is not None and not 0 < verdict.line <= MAX_CODE)
    ):
        return RoomJob(failure=JobFailure("untrusted"), usage=outcome.usage)
    return outcome


def grade(
    setup: str,
    code: str,
    checks: Sequence[Check],
    *,
    visitor: Visitor | str | None = None,
    pool: SandboxPool | None = None,
    timeout_s: float = GRADE_TIMEOUT_S,
    on_queued: Callable[[int], None] | None = None,
) -> RoomJob[Verdict]:
    """Run the student's ``code`` after the teacher's ``setup``, then ``checks``, in one
    sandbox child; never raises.

    - ``value``: the student's :class:`Verdict`: ``pass``, ``fail`` (the first failing
      check, in the teacher's order: ``check`` is its index) or ``error`` (the student's
      program raised, has a syntax error, was refused by the sandbox's allow-list, ran out of
      time or memory, or is too long), lines counted in the student's program;
    - ``refused``: the teacher's part is broken or invalid: ``setup_failed`` (``error_type``,
      ``message``, ``line`` in the setup, or ``rule`` for the allow-list), ``check_failed``
      (``check``: a reference expression or an assertion block that does not compile or that
      the allow-list refuses, or a reference that raises), or a check's own code from
      :func:`check_checks`. An author page grades the model solution on save and shows
      these; a student's tally never sees them;
    - ``failure``: the sandbox's own (``busy``, ``crashed``, ``too_many_jobs``,
      ``untrusted``, ``unavailable`` …): worth trying again.

    A timeout counts as the student's: the setup ran within the limit when the model
    solution was graded (grade ``setup`` with ``code=""`` to time the setup alone).

    ``on_queued(place)``: the job's place in the sandbox's line while it waits (0: it starts),
    for the student's page to show, as a room's code editor does."""
    try:
        setup_text = check_code(setup, "setup")
        checked = check_checks(checks)
    except CodeQuestionError as error:
        return RoomJob(refused=(error.code, error.params))
    if type(code) is not str:
        return RoomJob(refused=("bad_code", {"part": "code"}))
    if len(code) > MAX_CODE:
        params = (("limit", str(MAX_CODE)), ("length", str(len(code))))
        return RoomJob(value=_error_verdict("too_long", "Refused", params=params))
    student = check_code(code)
    refusal = _static_refusal(setup_text)
    if refusal is not None:
        error_type = "SyntaxError" if refusal.code == "syntax" else "Refused"
        params = {"error_type": error_type, "rule": refusal.code, "line": refusal.line}
        return RoomJob(refused=("setup_failed", {**params, "message": refusal.detail[:300]}))
    refusal = _static_refusal(student)
    if refusal is not None:
        syntax = refusal.code == "syntax"
        verdict = _error_verdict(
            "syntax" if syntax else "refused",
            "SyntaxError" if syntax else "Refused",
            refusal.detail,
            refusal.line,
            () if syntax else (("rule", refusal.code),),
        )
        return RoomJob(value=verdict)
    plan = plan_grading(setup_text, student, checked)
    params = {
        "checks": [list(item) for item in plan.checks],
        "parts": [list(item) for item in plan.parts],
    }
    outcome = run_room_job(
        GRADE,
        params,
        Verdict,
        source=plan.source,
        visitor=visitor,
        timeout_s=timeout_s,
        limits=VERDICT_LIMITS,
        pool=pool,
        on_queued=on_queued,
    )
    if outcome.failure is not None:
        return _from_failure(outcome.failure, plan, outcome.usage)
    return _checked_verdict(outcome)


__all__ = [
    "ASKS",
    "COMMON_ERRORS",
    "GRADE",
    "MAX_CHECKS",
    "MAX_CODE",
    "NO_ERROR",
    "PREAMBLE",
    "PREDICT",
    "STATUSES",
    "TEMPLATES",
    "Ask",
    "Check",
    "CodeAnswer",
    "CodeQuestionError",
    "GradingPlan",
    "Verdict",
    "check_ask",
    "check_checks",
    "check_code",
    "compute_answer",
    "grade",
    "options_for",
    "parse_ask",
    "parse_check",
    "plan_grading",
]
