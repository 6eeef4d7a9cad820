"""The sandbox jobs of the lessons' code questions (:mod:`torchatlas.lessons.code_questions`),
by name, and their warm-up.

- ``lessons.predict``: a teacher's snippet has run; read what an :class:`Ask` asks about one
  of its names (or which exception it raised) with torch, as a :class:`CodeAnswer`.
- ``lessons.grade``: setup, references, a student's program and assertion blocks have run
  (one program: :func:`~torchatlas.lessons.code_questions.plan_grading`); read the student's
  names and answer a :class:`Verdict`.

The sandbox runs the pasted program first and only then calls the job with the names it
defined. A program that raises would end there, as the sandbox's ``code_error``, with no
way to tell torch's refusal (an answer, or a student's error) from a broken setup. So each
job has an ``exec_context`` (the worker runs the program's top level under it): it records
the exception's class, torch's message and the program's lines it passed through in
:data:`_RAISED`, and suppresses it; the job then reads the record. It never suppresses what
is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``) nor running out of memory
(``MemoryError`` or torch's allocation failures, as the worker recognises them): those stay
the sandbox's, so its memory limit keeps its own answer.

The program's objects are hostile: a student can write a class with a ``shape`` property,
subclass ``torch.Tensor`` and override ``size``, or assign ``torch.Tensor.size = …`` and
``nn.Module.parameters = …`` at the top level. So every read goes through what no program
can reach or change, taken when this module is imported (in the zygote, before any child
exists): the C accessors of ``torch._C.TensorBase`` and ``torch._C.StorageBase`` (immutable
types), torch's own functions, real ``type()`` checks, and a walk of a module's own
``__dict__`` for its parameters; torch-function overrides are off while reading.
"""

from __future__ import annotations

import contextlib
import types
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from torchatlas.lessons.code_questions import (
    GRADE,
    MAX_HINTS,
    MAX_MESSAGE,
    MAX_NAME,
    MAX_OPTION,
    NO_ERROR,
    PREAMBLE,
    PREDICT,
    Check,
    CodeAnswer,
    CodeQuestionError,
    Verdict,
    _render,
    plan_grading,
)
from torchatlas.lessons.facts import shape_text
from torchatlas.sandbox.codec import job_reply
from torchatlas.sandbox.worker import USER_FILENAME, _is_out_of_memory

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

# torch.tensor(data) asks, the first time in a process, for the type object of
# torch.storage.TypedStorage, importing "torch.storage" through the ``__import__`` of the
# calling frame's builtins. Called first from pasted code, that is the sandbox's import,
# which refuses the module, and torch fails an internal assert: no snippet could write
# ``torch.tensor([1.0, 2.0])``. The type object is kept once loaded, and this module is
# imported in the zygote before it forks: loaded here, every child finds it (as
# modules/jobs.py builds the profiler's type before the fork).
torch.tensor([0.0])
# Printing a tensor (``print(y)``, ``repr``, ``str``) imports torch._subclasses.
# schema_check_mode the first time: in a child that cannot open files, a PermissionError.
# Printed once here, the module is in sys.modules before the fork.
repr(torch.ones(2))

# A value an answer or a verdict shows has at most this many elements.
MAX_VALUES = 64
# Names of a snippet looked at for hints (a program has a few dozen at most).
MAX_SCANNED = 64
MAX_LINES_KEPT = 64

# ------------------------------------------------------------------ readers nobody can change
_BASE = torch._C.TensorBase
_SIZE = _BASE.size
_STRIDE = _BASE.stride
_OFFSET = _BASE.storage_offset
_CONTIGUOUS = _BASE.is_contiguous
_NUMEL = _BASE.numel
_DETACH = _BASE.detach
_TOLIST = _BASE.tolist
_TO = _BASE.to
_IS_FLOATING = _BASE.is_floating_point
_IS_COMPLEX = _BASE.is_complex
_UNTYPED_STORAGE = _BASE.untyped_storage
_DTYPE = _BASE.__dict__["dtype"].__get__
_DEVICE = _BASE.__dict__["device"].__get__
_LAYOUT = _BASE.__dict__["layout"].__get__
_GRAD = _BASE.__dict__["grad"].__get__
_REQUIRES_GRAD = _BASE.__dict__["requires_grad"].__get__
_IS_LEAF = _BASE.__dict__["is_leaf"].__get__
_STORAGE_ID = torch._C.StorageBase.__dict__["_cdata"].__get__  # the StorageImpl's address
_STORAGE_TYPE = torch._C.StorageBase
_TENSOR = torch.Tensor
_MODULE = nn.Module
_EQUAL = torch.equal
_ALLCLOSE = torch.allclose
_PROMOTE = torch.promote_types
_AS_TENSOR = torch.tensor
_ZEROS = torch.zeros
_ONES = torch.ones
_STRIDED = torch.strided
_NO_SUBCLASS_OVERRIDES = torch._C.DisableTorchFunctionSubclass
_OBJECT_GETATTRIBUTE = object.__getattribute__
_DICT_VALUES = dict.values


class _Missing(Exception):
    """A name the program did not define (or that could not be read)."""


def _is_tensor(value: Any) -> bool:
    return issubclass(type(value), _TENSOR)  # the real type: no __class__ property fools it


def _type_name(value: Any) -> str:
    return str(type(value).__name__)[:MAX_NAME]


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """Reads of the program's objects: overrides of tensor subclasses off, warnings (``.grad``
    of a non-leaf) not formatted."""
    with _NO_SUBCLASS_OVERRIDES(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------ the program's exception
_RAISED: dict[str, Any] = {}
"""What the program raised: ``type``, ``message``, ``name`` (a NameError's), ``lines``
(the program's lines it passed through, outermost first). Empty when it ran to its end."""


def _describe(exc: BaseException) -> dict[str, Any]:
    try:
        message = str(exc)[:MAX_MESSAGE]
    except Exception:  # a message that cannot be written is no message
        message = ""
    lines = []
    trace: types.TracebackType | None = exc.__traceback__
    while trace is not None and len(lines) < MAX_LINES_KEPT:
        # The frames' own records: no source file is read (the child can open none).
        if trace.tb_frame.f_code.co_filename == USER_FILENAME:
            lines.append(trace.tb_lineno)
        trace = trace.tb_next
    name = getattr(exc, "name", None) if isinstance(exc, NameError) else None
    return {
        "type": _type_name(exc),
        "message": message,
        "name": name if type(name) is str else "",
        "lines": lines,
    }


class _Recorder(contextlib.AbstractContextManager["_Recorder"]):
    """The program's top level runs under this: an ``Exception`` it raises is recorded in
    :data:`_RAISED` and suppressed (see the module's docstring for what is not)."""

    def __enter__(self) -> _Recorder:
        _RAISED.clear()  # a child is forked from a zygote whose warm-up may have filled it
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, trace: Any) -> bool:
        if exc is None or not isinstance(exc, Exception) or _is_out_of_memory(exc):
            return False
        _RAISED.update(_describe(exc))
        return True


def _recording() -> _Recorder:
    return _Recorder()


def _resolve(namespace: dict[str, Any], path: str) -> Any:
    """The object a dotted name names in the program's namespace. An attribute that the
    program's own code computes (a property) runs here, in the child, as the program did."""
    root, *rest = path.split(".")
    if root not in namespace:
        raise _Missing(path)
    value = namespace[root]
    for part in rest:
        try:
            value = getattr(value, part)
        except Exception as exc:
            if _is_out_of_memory(exc):
                raise
            raise _Missing(path) from None
    return value


# ------------------------------------------------------------------ values as text
def _number_text(value: Any) -> str:
    return _render(value) if type(value) is not complex else str(value)[:MAX_OPTION]


def _plain(value: Any, depth: int = 0) -> Any:
    """``tolist()`` output, or a program's own list of numbers, as plain lists and numbers
    (None when it holds anything else)."""
    kind = type(value)
    if kind in (bool, int, float, complex):
        return value
    if kind in (list, tuple) and depth < 8 and len(value) <= MAX_VALUES:
        items = [_plain(item, depth + 1) for item in value]
        return None if any(item is None for item in items) else items
    return None


def _render_plain(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_render_plain(item) for item in value) + "]"
    return _number_text(value)


def value_text(value: Any, name: str = "") -> str:
    """A value as an answer writes it: a tensor as its ``tolist()`` (floats to six
    significant digits), a Python number or bool, a ``torch.Size`` or tuple of ints as a
    shape, ``None``. Raises :class:`CodeQuestionError` ``value_too_long`` or ``no_value``."""
    kind = type(value)
    if value is None:
        return "None"
    if kind is torch.Size or (kind is tuple and all(type(item) is int for item in value)):
        text = shape_text(value) if len(value) <= MAX_VALUES else ""
    elif _is_tensor(value):
        if _NUMEL(value) > MAX_VALUES:
            raise CodeQuestionError("value_too_long", name=name, limit=MAX_VALUES)
        if _DEVICE(value).type != "cpu" or _LAYOUT(value) != _STRIDED:
            raise CodeQuestionError("no_value", name=name, type=str(_DEVICE(value).type))
        text = _render_plain(_TOLIST(_DETACH(value)))
    else:
        plain = _plain(value)
        if plain is None or (kind is int and abs(value) >= 10**30):
            raise CodeQuestionError("no_value", name=name, type=_type_name(value))
        text = _render_plain(plain)
    if not text or len(text) > MAX_OPTION:
        raise CodeQuestionError("value_too_long", name=name, limit=MAX_OPTION)
    return text


def _dtype_text(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _bool_text(value: bool) -> str:
    return "True" if value else "False"


def _same_storage(left: Any, right: Any) -> bool:
    """Whether two tensors (or a tensor and a storage held earlier) use one storage: the
    same StorageImpl, which also holds for empty storages (their data pointers are all 0)."""
    stores = [
        item if type(item) is not _TENSOR and issubclass(type(item), _STORAGE_TYPE)
        else _UNTYPED_STORAGE(item)
        for item in (left, right)
    ]  # fmt: skip
    return _STORAGE_ID(stores[0]) == _STORAGE_ID(stores[1])


def _tensor_property(what: str, tensor: Any, name: str) -> str:
    """One property of a real tensor, read with torch's C accessors."""
    if what == "shape":
        return shape_text(_SIZE(tensor))
    if what == "stride":
        return shape_text(_STRIDE(tensor))
    if what == "dtype":
        return _dtype_text(_DTYPE(tensor))
    if what == "storage_offset":
        return str(int(_OFFSET(tensor)))
    if what == "is_contiguous":
        return _bool_text(bool(_CONTIGUOUS(tensor)))
    if what == "requires_grad":
        return _bool_text(bool(_REQUIRES_GRAD(tensor)))
    if what == "is_leaf":
        return _bool_text(bool(_IS_LEAF(tensor)))
    if what == "grad":
        return value_text(_GRAD(tensor), name)
    return value_text(tensor, name)  # value


# ------------------------------------------------------------------ lessons.predict
def _snippet_line(raised: dict[str, Any], first_line: int) -> int | None:
    """The snippet's line that raised (the innermost of its own), counted in the snippet."""
    lines = [line - first_line + 1 for line in raised["lines"] if line >= first_line]
    return lines[-1] if lines else None


def _hints(namespace: dict[str, Any], what: str, target: Any, right: str) -> tuple[str, ...]:
    """The same property of the snippet's other tensors (and for ``.grad``: the tensor's own
    values, no gradient, zeros and ones), other than the right answer."""
    found: list[str] = []
    candidates: list[Callable[[], str]] = []
    if what == "grad" and _is_tensor(target):
        candidates.append(lambda: value_text(target))
        candidates.append(lambda: "None")
        candidates.append(lambda: value_text(_ZEROS(_SIZE(target))))
        candidates.append(lambda: value_text(_ONES(_SIZE(target))))
    for key, value in list(namespace.items())[:MAX_SCANNED]:
        if not key.startswith("_") and value is not target and _is_tensor(value):
            candidates.append(lambda value=value: _tensor_property(what, value, ""))
    for candidate in candidates:
        try:
            text = candidate()
        except Exception as exc:
            if _is_out_of_memory(exc):
                raise
            continue
        if text != right and len(text) <= MAX_OPTION and text not in found:
            found.append(text)
        if len(found) >= MAX_HINTS:
            break
    return tuple(found)


def _predict(namespace: dict[str, Any], what: str, name: str, other: str, first_line: int) -> Any:
    raised = dict(_RAISED)
    if what == "error":
        if not raised:
            return CodeAnswer("error", NO_ERROR)
        line = _snippet_line(raised, first_line)
        return CodeAnswer("error", raised["type"], (), raised["message"], line)
    if raised:
        raise CodeQuestionError(
            "snippet_raised",
            error_type=raised["type"],
            message=raised["message"],
            line=_snippet_line(raised, first_line),
        )
    try:
        value = _resolve(namespace, name)
        partner = _resolve(namespace, other) if what == "shares_storage" else None
    except _Missing as missing:
        raise CodeQuestionError("missing_name", name=str(missing)) from None
    with _reading():
        if what == "value" and not _is_tensor(value):
            return CodeAnswer("value", value_text(value, name))
        for key, item in ((name, value), (other, partner)):
            if (key == name or what == "shares_storage") and not _is_tensor(item):
                raise CodeQuestionError("not_a_tensor", name=key, type=_type_name(item))
        if what == "shares_storage":
            return CodeAnswer(what, _bool_text(_same_storage(value, partner)))
        try:
            right = _tensor_property(what, value, name)
        except CodeQuestionError:
            raise
        except Exception as exc:  # a layout without strides, a storage on no device …
            if _is_out_of_memory(exc):
                raise
            raise CodeQuestionError("no_value", name=name, type=_type_name(exc)) from None
        return CodeAnswer(what, right, _hints(namespace, what, value, right))


def predict_job(
    namespace: dict[str, Any], *, what: str, name: str = "", other: str = "", first_line: int = 2
) -> dict[str, Any]:
    """Job ``lessons.predict``: the answer to an ask about the snippet that just ran (its
    text starts at ``first_line`` of the program), or a coded refusal."""
    return job_reply(
        lambda: _predict(namespace, what, name, other, first_line), refusals=(CodeQuestionError,)
    )


# ------------------------------------------------------------------ lessons.grade
def _fail(code: str, *params: tuple[str, str], error_type: str = "", message: str = "",
          line: int | None = None) -> Verdict:  # fmt: skip
    clean = tuple((key, str(value)[:MAX_OPTION]) for key, value in params)
    return Verdict("fail", code, clean, error_type, message[:MAX_MESSAGE], line)


def _comparable(value: Any) -> torch.Tensor | None:
    """A value as a plain CPU tensor to compare (None: it has no values to compare)."""
    if _is_tensor(value):
        if _DEVICE(value).type != "cpu" or _LAYOUT(value) != _STRIDED:
            return None
        return _DETACH(value)
    plain = _plain(value)
    if plain is None:
        return None
    try:
        return _AS_TENSOR(plain)
    except (TypeError, ValueError, RuntimeError):
        return None


def _same_values(got: Any, expected: Any) -> bool:
    """Same shape, and the same values once both are in their common dtype (floats within
    a float32 rounding, NaN equal to NaN); the dtype itself is a check of its own."""
    left, right = _comparable(got), _comparable(expected)
    if left is None or right is None or tuple(_SIZE(left)) != tuple(_SIZE(right)):
        return False
    common = _PROMOTE(_DTYPE(left), _DTYPE(right))
    left, right = _TO(left, common), _TO(right, common)
    if _IS_FLOATING(left) or _IS_COMPLEX(left):
        return bool(_ALLCLOSE(left, right, rtol=1e-5, atol=1e-6, equal_nan=True))
    return bool(_EQUAL(left, right))


def _shown(key: str, value: Any) -> tuple[tuple[str, str], ...]:
    """A value as a verdict shows it: its text, or its shape when the text would be long."""
    try:
        return ((key, value_text(value)),)
    except CodeQuestionError:
        pass
    if _is_tensor(value):
        return ((f"{key}_shape", shape_text(_SIZE(value))),)
    return ((f"{key}_type", _type_name(value)),)


def _parameter_count(module: Any) -> int:
    """Elements of every parameter of ``module`` and its submodules, each tensor counted once
    (what ``sum(p.numel() for p in module.parameters())`` gives), read from the modules' own
    ``__dict__``: a program that replaced ``nn.Module.parameters`` changes nothing here."""
    seen_modules: set[int] = set()
    seen_tensors: set[int] = set()
    stack = [module]
    total = 0
    while stack and len(seen_modules) < 100_000:
        current = stack.pop()
        if id(current) in seen_modules:
            continue
        seen_modules.add(id(current))
        own = _OBJECT_GETATTRIBUTE(current, "__dict__")
        parameters, children = own.get("_parameters"), own.get("_modules")
        if type(parameters) in (dict, OrderedDict):
            for tensor in _DICT_VALUES(parameters):
                if _is_tensor(tensor) and id(tensor) not in seen_tensors:
                    seen_tensors.add(id(tensor))
                    total += int(_NUMEL(tensor))
        if type(children) in (dict, OrderedDict):
            stack.extend(
                child for child in _DICT_VALUES(children) if issubclass(type(child), _MODULE)
            )
    return total


def _check(namespace: dict[str, Any], index: int, check: Check, reference: str) -> Verdict | None:
    """One template check on the student's names: None when it holds, else its failure."""
    template, name, expected = check.template, check.name, check.expected
    where = (("check", str(index)), ("name", name))
    try:
        value = _resolve(namespace, name)
    except _Missing:
        return _fail("missing_name", *where)
    if template == "param_count":
        if not issubclass(type(value), _MODULE):
            return _fail("not_a_module", *where, ("got", _type_name(value)))
        count = _parameter_count(value)
        if count == int(expected):
            return None
        return _fail("wrong_param_count", *where, ("expected", expected), ("got", str(count)))
    ref = namespace.get(reference) if reference else None
    if template == "values_equal":
        if _is_tensor(ref) and not _is_tensor(value):
            return _fail("not_a_tensor", *where, ("got", _type_name(value)))
        if _same_values(value, ref):
            return None
        return _fail("values_differ", *where, *_shown("expected", ref), *_shown("got", value))
    if not _is_tensor(value):
        return _fail("not_a_tensor", *where, ("got", _type_name(value)))
    if template == "shares_storage":
        if not reference:  # the student's own name, read after the program
            try:
                ref = _resolve(namespace, expected)
            except _Missing:
                return _fail("missing_name", ("check", str(index)), ("name", expected))
            if not _is_tensor(ref):
                return _fail("not_a_tensor", ("check", str(index)), ("name", expected),
                             ("got", _type_name(ref)))  # fmt: skip
        if _same_storage(value, ref):
            return None
        return _fail("not_shared", *where, ("other", expected))
    if template == "grad_equals":
        grad = _GRAD(value)
        if grad is not None and _same_values(grad, ref):
            return None
        got = (("got", "None"),) if grad is None else _shown("got", grad)
        return _fail("grad_differs", *where, *_shown("expected", ref), *got)
    readers = {"shape": "shape", "strides": "stride", "dtype": "dtype"}
    try:
        got_text = _tensor_property(readers[template], value, name)
    except Exception as exc:  # a sparse tensor has no strides
        if _is_out_of_memory(exc):
            raise
        got_text = _type_name(exc)
    if got_text == expected:
        return None
    code = {"shape": "wrong_shape", "strides": "wrong_strides", "dtype": "wrong_dtype"}[template]
    return _fail(code, *where, ("expected", expected), ("got", got_text))


def _part_of(parts: list[list[Any]], line: int | None) -> tuple[str, int, int, int]:
    """(kind, check index, first line of the part, line within it) of a program line."""
    for first, last, kind, index in parts:
        if line is not None and first <= line <= last:
            return str(kind), int(index), int(first), line - first + 1
    return "student", -1, 1, line or 1


def _grade(namespace: dict[str, Any], checks: list[list[str]], parts: list[list[Any]]) -> Any:
    raised = dict(_RAISED)
    failed_block: tuple[int, Verdict] | None = None
    if raised:
        lines = raised["lines"]
        kind, index, first, line = _part_of(parts, lines[0] if lines else None)
        error_type, message = raised["type"], raised["message"]
        if kind == "setup":
            raise CodeQuestionError(
                "setup_failed", error_type=error_type, message=message, line=line
            )
        if kind == "reference":
            raise CodeQuestionError(
                "check_failed", check=index, error_type=error_type, message=message
            )
        if kind == "student":
            # The innermost of the student's own lines (a helper of the setup's that the
            # student called is not where the student can fix it).
            own = [ln for ln in lines if _part_of(parts, ln)[0] == "student"]
            student_line = own[-1] - first + 1 if own else line
            return Verdict("error", "raised", (), error_type, message, student_line)
        where = (("check", str(index)), ("line", str(line)))
        if error_type == "AssertionError":
            verdict = _fail("assertion_failed", *where, error_type=error_type, message=message)
        elif error_type == "NameError" and raised["name"]:
            verdict = _fail("missing_name", ("check", str(index)), ("name", raised["name"]))
        else:
            verdict = _fail("assertion_raised", *where, error_type=error_type, message=message)
        failed_block = (index, verdict)
    with _reading():
        for index, (template, name, expected, reference) in enumerate(checks):
            if template == "assertions":
                if failed_block is not None and failed_block[0] == index:
                    return failed_block[1]
                continue
            verdict = _check(namespace, index, Check(template, name, expected), reference)
            if verdict is not None:
                return verdict
    return Verdict("pass", "passed")


def grade_job(
    namespace: dict[str, Any], *, checks: list[list[str]], parts: list[list[Any]]
) -> dict[str, Any]:
    """Job ``lessons.grade``: the verdict on the program that just ran (``parts``: where the
    setup, the references, the student's program and each assertion block lie; ``checks``:
    template, name, expected, reference name), or a coded refusal for the teacher's part."""
    return job_reply(lambda: _grade(namespace, checks, parts), refusals=(CodeQuestionError,))


predict_job.exec_context = _recording  # type: ignore[attr-defined]
grade_job.exec_context = _recording  # type: ignore[attr-defined]

JOBS: dict[str, Callable[..., dict[str, Any]]] = {PREDICT: predict_job, GRADE: grade_job}


# ------------------------------------------------------------------ warm-up
def _warm_grade(setup: str, code: str, checks: tuple[Check, ...]) -> dict[str, Any]:
    plan = plan_grading(setup, code, checks, tag="warm")
    params = {"checks": [list(c) for c in plan.checks], "parts": [list(p) for p in plan.parts]}
    return {"source": plan.source, "job": GRADE, "params": params}


_WARM_SNIPPET = "x = torch.arange(12.)\ny = x.view(3, 4).t()\nz = y.contiguous()"
_WARM_CHECKS = (
    Check("shape", "y", "(2, 6)"),
    Check("strides", "y", "(6, 1)"),
    Check("dtype", "y", "float32"),
    Check("shares_storage", "y", "x"),
    Check("values_equal", "y", "x.view(2, 6)"),
    Check("grad_equals", "x", "2 * x"),
    Check("assertions", "", "assert y.is_contiguous(), 'y'"),
)
# The zygote runs these once before it forks, so a child finds the jobs' paths (reading,
# formatting, comparing, an exception recorded) touched. No backward(): autograd's threads
# started in the zygote would break backward in every child.
WARM_UP: list[dict[str, Any]] = [
    {"source": f"{PREAMBLE}\n{_WARM_SNIPPET}", "job": PREDICT,
     "params": {"what": "value", "name": "y", "other": "", "first_line": 2}},
    {"source": f"{PREAMBLE}\n{_WARM_SNIPPET}", "job": PREDICT,
     "params": {"what": "grad", "name": "z", "other": "", "first_line": 2}},
    {"source": f"{PREAMBLE}\ntorch.ones(2, 3).view(4)", "job": PREDICT,
     "params": {"what": "error", "name": "", "other": "", "first_line": 2}},
    _warm_grade("x = torch.arange(12.)", "y = x.view(2, 6)", _WARM_CHECKS[:6]),
    _warm_grade("x = torch.arange(12.)", "y = x.view(5, 5)", _WARM_CHECKS),
    _warm_grade("x = torch.arange(12.)", "y = x.view(2, 6)", _WARM_CHECKS[-1:]),
]  # fmt: skip
"""Requests the sandbox's zygote runs once before it forks any child."""


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register the lessons' jobs and warm-up with ``pool`` (again: a no-op); returns it. It
    leaves the pool's spare-child warm-up as it is (another room's common job)."""
    return pool.register(JOBS, WARM_UP)
