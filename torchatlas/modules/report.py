"""The module inspector's data model: frozen dataclasses that cross the sandbox as JSON.

A :class:`ModuleReport` says, for the model a visitor pasted, what ``named_modules()`` walks
(:class:`ModuleRow`), and for every tensor the model holds (:class:`TensorRow`) whether it is a
parameter, a buffer or a plain attribute, and what ``parameters()``, ``state_dict()``, ``.to()``
and an optimiser do with it. :class:`Finding` rows name a likely mistake and its fix.

Kinds are enums; errors and findings carry a stable code and parameters, never a sentence:
their English and Korean text lives in ``assets/translations/{en,ko}/modules.json``.

A report arrives from a sandbox worker that ran hostile code, so :meth:`ModuleReport.from_dict`
first checks it against :data:`REPORT_SCHEMA` (bounded numbers, strings, lists, codes) and
raises :class:`~torchatlas.sandbox.schema.SchemaError` for anything outside it. This module
does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum, StrEnum
from typing import Any

from torchatlas.errors import SourceError
from torchatlas.i18n import DEFAULT_LANGUAGE, translate
from torchatlas.sandbox.outcomes import with_failure_kinds
from torchatlas.sandbox.schema import (
    Bool,
    Dict,
    Float,
    Int,
    List,
    Map,
    OneOf,
    Optional,
    Str,
    Where,
    validate,
)

MAX_MODULES = 2000  # rows of the module tree a report keeps (deeper models are clipped)
MAX_TENSORS = 4000  # tensor rows a report keeps
MAX_FINDINGS = 200
MAX_LIST_ITEMS = 64  # items of one Python list, tuple or dict that are looked at
MAX_NEST_DEPTH = 8  # levels of Python containers inside containers that are opened
MAX_CONTAINER_ITEMS = 20_000  # container items one walk opens in all (nesting multiplies)
MAX_STATE_KEYS = 4000
MAX_RANK = 64
MAX_SIZE = 2**62
MAX_NUMEL = 2**63 - 1
MAX_COUNT = 2**100
MAX_DEPTH = 256
MAX_LINE = 50_001
MAX_REFUSALS = 200


class TensorKind(StrEnum):
    """How a tensor is attached to its module (``modules.kinds.<value>``)."""

    PARAMETER = "parameter"  # registered in ``_parameters`` (an ``nn.Parameter``)
    BUFFER = "buffer"  # registered with ``register_buffer``
    PLAIN = "plain"  # an ordinary attribute: the module does not know it holds a tensor


class Container(StrEnum):
    """Where a tensor attribute sits: on the module itself, or inside a Python container."""

    NONE = ""
    LIST = "list"
    TUPLE = "tuple"
    DICT = "dict"


class FindingCode(StrEnum):
    """A finding's code selects ``modules.findings.<value>.{title,message}``."""

    PLAIN_TENSOR = "plain_tensor"  # a tensor attribute that looks like a weight
    TENSOR_LIST = "tensor_list"  # tensors in a Python list: use nn.ParameterList
    MODULE_LIST = "module_list"  # modules in a Python list: use nn.ModuleList
    NO_PARAMETERS = "no_parameters"  # the optimiser refuses an empty parameter list
    SHARED_PARAMETER = "shared_parameter"  # one tensor under several names, counted once
    FROZEN_PARAMETER = "frozen_parameter"  # requires_grad=False: the optimiser skips it
    NON_PERSISTENT_BUFFER = "non_persistent_buffer"  # a buffer state_dict() leaves out
    LIST_ALIASES = "list_aliases"  # a Python container of things torch registered elsewhere
    LAZY_PARAMETER = "lazy_parameter"  # uninitialised until the first forward
    NESTED_CONTAINER = "nested_container"  # tensors/modules in containers inside containers


class Severity(StrEnum):
    WARNING = "warning"  # the model will not train or save as its author expects
    INFO = "info"  # how torch counts it; nothing to fix


class _OwnErrorKind(StrEnum):
    """Why an inspection stopped: ``modules.errors.<value>.{title,message,hint}``."""

    # The boxes, checked on the server before any worker is asked.
    SOURCE_TOO_LONG = "source_too_long"
    MODEL_TOO_LONG = "model_too_long"
    BAD_CONSTRUCTOR = "bad_constructor"
    # Finding and building the model (inside the worker, with the shape explorer's rules).
    MODEL_NOT_FOUND = "model_not_found"
    NO_MODULE = "no_module"
    WEIGHTS_NOT_NEEDED = "weights_not_needed"
    CONSTRUCTOR_ARGS = "constructor_args"
    CONSTRUCTOR_ERROR = "constructor_error"
    NOT_A_MODULE = "not_a_module"
    INSPECT_ERROR = "inspect_error"  # the model built, but walking it raised
    INTERNAL = "internal"


# What the sandbox itself reports (torchatlas.sandbox.outcomes.FailureKind) joins the room's own
# codes: each kind is this room's code of the same name (SourceError.of_failure).
ErrorKind = with_failure_kinds("ErrorKind", _OwnErrorKind, __name__)


def _plain(value: Any) -> Any:
    """Dataclasses → dicts, enums → their values (JSON for the trip out of the worker)."""
    if isinstance(value, ModuleError):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, Enum):
        return value.value
    return value


@dataclass(frozen=True)
class ModuleRow:
    """One entry of ``named_modules()``: its path ("" is the model), class and counts."""

    path: str
    class_name: str
    depth: int
    own_params: int = 0  # elements of the parameters registered on this module itself
    total_params: int = 0  # elements of ``parameters()`` of this module (shared ones once)
    buffers: int = 0  # elements of its buffers, sub-modules included
    plain_tensors: int = 0  # plain tensor attributes on this module itself
    shared_with: str = ""  # the first path of the same module object, when it is reached again


@dataclass(frozen=True)
class TensorRow:
    """One tensor the model holds, and what torch's machinery does with it."""

    name: str  # where it is reached: "fc.weight", "W", "weights[0]"
    owner: str  # the module path that holds it ("" for the model)
    attribute: str  # the attribute on that module ("weight", "W", "weights")
    kind: TensorKind
    shape: list[int]
    dtype: str  # "float32"
    requires_grad: bool
    in_parameters: bool  # the same object appears in ``model.parameters()``
    in_state_dict: bool  # the same object appears in ``model.state_dict(keep_vars=True)``
    # What torch's own ``model.to(...)`` does to the tensor this name reaches, asked of torch
    # on a converted copy (None: torch's conversion could not be run on this model):
    to_device: bool | None  # ``model.to(device)`` moves it
    to_dtype: bool | None  # ``model.to(torch.float64)`` converts it (floating point only)
    seen_by_optimizer: bool  # in the param groups of an optimiser built from parameters()
    container: Container = Container.NONE
    shared_with: str = ""  # torch's first name of the same tensor when it is reached again
    numel: int = 0  # 0 for a lazy tensor: torch cannot count it before the first forward
    lazy: bool = False  # an uninitialised parameter of a lazy module (no shape yet)
    in_buffers: bool = False  # the same object appears in ``model.buffers()``

    @property
    def shape_text(self) -> str:
        if self.lazy:
            return "?"
        return "×".join(str(size) for size in self.shape) or "()"


@dataclass(frozen=True)
class Finding:
    """A likely mistake (or a fact of torch's counting) and, where one exists, its fix."""

    code: FindingCode
    severity: Severity
    params: dict[str, Any] = field(default_factory=dict)
    fix: str = ""  # code that fixes it (not translated: it is Python)

    def text(self, part: str, lang: str = DEFAULT_LANGUAGE) -> str:
        return translate(f"modules.findings.{self.code.value}.{part}", lang, **self.params)


@dataclass(frozen=True)
class RefusedLine:
    """One line the sandbox's allow-list refused; ``detail`` is the sandbox's English reason."""

    line: int
    col: int
    code: str
    detail: str = ""


class ModuleError(SourceError):
    """Why the inspection stopped: a stable code (:class:`ErrorKind`), the parameters its
    texts need, and where (the line and column of the pasted source, the refused lines).

    The room's coded error for pasted source (:class:`torchatlas.errors.SourceError`): its
    text is ``modules.errors.<kind>.{title,message,hint}``; :meth:`text` with no part is the
    card (title and message), which the page shows with the kit's error card. It crosses the
    sandbox as JSON (:meth:`to_dict`, :data:`ERROR_SCHEMA`), and compares by value.
    """

    room = "modules"
    codes = ErrorKind


@dataclass(frozen=True)
class ModuleReport:
    """Everything :func:`torchatlas.modules.inspect_module` found in one model."""

    model: str = ""  # the constructor that was built, e.g. "MyLinear(3, 2)"
    modules: list[ModuleRow] = field(default_factory=list)
    tensors: list[TensorRow] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    total_params: int = 0  # elements of parameters(): a shared tensor counts once, as in torch
    trainable_params: int = 0
    buffer_elements: int = 0
    plain_elements: int = 0
    parameter_count: int = 0  # len(list(parameters()))
    lazy_parameters: int = 0  # of those, uninitialised (lazy): left out of the totals
    state_dict_keys: list[str] = field(default_factory=list)
    optimizer_tensors: int = 0  # tensors in the optimiser's param groups
    optimizer_error: str = ""  # torch's own message when the optimiser refused to be built
    truncated: bool = False  # the model had more rows than a report keeps
    error: ModuleError | None = None
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def rows(self, kind: TensorKind) -> list[TensorRow]:
        return [row for row in self.tensors if row.kind is kind]

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> ModuleReport:
        """The report in ``data`` (JSON from a worker), checked against :data:`REPORT_SCHEMA`;
        raises :class:`~torchatlas.sandbox.schema.SchemaError` (a ValueError) when any part is
        out of bounds. Unknown keys are dropped."""
        checked = validate(data, REPORT_SCHEMA)
        checked["modules"] = [ModuleRow(**row) for row in checked.get("modules", [])]
        checked["tensors"] = [
            TensorRow(
                **{
                    **row,
                    "kind": TensorKind(row["kind"]),
                    "container": Container(row.get("container", "")),
                }
            )
            for row in checked.get("tensors", [])
        ]
        checked["findings"] = [
            Finding(
                **{**row, "code": FindingCode(row["code"]), "severity": Severity(row["severity"])}
            )
            for row in checked.get("findings", [])
        ]
        checked["error"] = error_from(checked.get("error"))
        return cls(**checked)


def error_from(data: dict[str, Any] | None) -> ModuleError | None:
    """A checked error dict (see :data:`ERROR_SCHEMA`) as a :class:`ModuleError`."""
    if not data:
        return None
    refusals = [
        RefusedLine(item["line"], item["col"], item["code"], item.get("detail", ""))
        for item in data.get("refusals", [])
    ]
    return ModuleError(**{**data, "kind": ErrorKind(data["kind"]), "refusals": refusals})


# ---------------------------------------------------------------------------- schemas
def _numel_fits(shape: list[int]) -> bool:
    numel = 1
    for size in shape:
        numel *= size
        if numel > MAX_NUMEL:
            return False
    return True


_SHAPE = Where(List(Int(0, MAX_SIZE), MAX_RANK), _numel_fits, "more elements than int64 holds")
_COUNT = Int(0, MAX_COUNT)
_NAME = Str(2000, clip=True)
_SHORT = Str(1000, clip=True)
_TEXT = Str(4000, clip=True)
_LINE = Optional(Int(0, MAX_LINE))
_PARAM_KEY = Str(40, pattern=r"[A-Za-z_][A-Za-z0-9_]*")
_SCALAR = OneOf(_SHORT, Int(-MAX_COUNT, MAX_COUNT), Float(-1e300, 1e300), Bool())

MODULE_SCHEMA = Dict(
    {
        "path": _NAME,
        "class_name": Str(200, clip=True),
        "depth": Int(0, MAX_DEPTH),
        "own_params": _COUNT,
        "total_params": _COUNT,
        "buffers": _COUNT,
        "plain_tensors": Int(0, MAX_TENSORS),
        "shared_with": _NAME,
    },
    required=("path", "class_name", "depth"),
)
TENSOR_SCHEMA = Dict(
    {
        "name": _NAME,
        "owner": _NAME,
        "attribute": Str(200, clip=True),
        "kind": Str(16, choices=[kind.value for kind in TensorKind]),
        "shape": _SHAPE,
        "dtype": Str(40, pattern=r"[a-z0-9_]+"),
        "requires_grad": Bool(),
        "in_parameters": Bool(),
        "in_state_dict": Bool(),
        "to_device": Optional(Bool()),
        "to_dtype": Optional(Bool()),
        "seen_by_optimizer": Bool(),
        "container": Str(8, choices=[kind.value for kind in Container]),
        "shared_with": _NAME,
        "numel": Int(0, MAX_NUMEL),
        "lazy": Bool(),
        "in_buffers": Bool(),
    },
    required=(
        "name",
        "owner",
        "attribute",
        "kind",
        "shape",
        "dtype",
        "requires_grad",
        "in_parameters",
        "in_state_dict",
        "to_device",
        "to_dtype",
        "seen_by_optimizer",
    ),
)
FINDING_SCHEMA = Dict(
    {
        "code": Str(40, choices=[code.value for code in FindingCode]),
        "severity": Str(16, choices=[level.value for level in Severity]),
        "params": Map(_SCALAR, 16, key=_PARAM_KEY),
        "fix": _TEXT,
    },
    required=("code", "severity"),
)
_REFUSAL = Dict(
    {
        "line": Int(0, MAX_LINE),
        "col": Int(0, MAX_LINE),
        "code": Str(40, clip=True),
        "detail": _SHORT,
    },
    required=("line", "col", "code"),
)
ERROR_SCHEMA = Dict(
    {
        # The kind selects translations: one of ours, never another room's key.
        "kind": Str(40, choices=[kind.value for kind in ErrorKind]),
        "params": Map(Optional(_SCALAR), 32, key=_PARAM_KEY),
        "line": _LINE,
        "col": _LINE,
        "refusals": List(_REFUSAL, MAX_REFUSALS, clip=True),
    },
    required=("kind",),
)
REPORT_SCHEMA = Dict(
    {
        "model": _SHORT,
        "modules": List(MODULE_SCHEMA, MAX_MODULES),
        "tensors": List(TENSOR_SCHEMA, MAX_TENSORS),
        "findings": List(FINDING_SCHEMA, MAX_FINDINGS),
        "total_params": _COUNT,
        "trainable_params": _COUNT,
        "buffer_elements": _COUNT,
        "plain_elements": _COUNT,
        "parameter_count": Int(0, 10**9),
        "lazy_parameters": Int(0, 10**9),
        "state_dict_keys": List(_NAME, MAX_STATE_KEYS),
        "optimizer_tensors": Int(0, 10**9),
        "optimizer_error": _TEXT,
        "truncated": Bool(),
        "error": Optional(ERROR_SCHEMA),
        "elapsed_s": Float(0, 1e6),
    }
)
