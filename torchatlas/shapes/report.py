"""The shape explorer's data model: frozen dataclasses that cross the sandbox as JSON.

One :class:`LayerRow` per module call or functional op, in execution order, like torchinfo's
``LayerInfo``; the page's builders (components/shapes/draw.py) know nothing of torch. Kinds are
enums; errors carry a stable code (:class:`ErrorKind`) and parameters, never a sentence: their
English and Korean text lives in ``assets/translations/{en,ko}/shapes.json`` under
``shapes.errors.<kind>``, and :attr:`ShapeError.message` gives a notebook the English of the
same table.

The fields are frozen; the lists inside them are shared with whoever built the report, so
treat them as read-only too.

A report arrives as JSON from a sandbox worker that ran hostile code, so :meth:`ShapeReport.
from_dict` and :meth:`WhyMetaReport.from_dict` first check it against the bounded schemas
below (:data:`REPORT_SCHEMA`, :data:`WHY_META_SCHEMA`) and raise
:class:`~torchatlas.sandbox.schema.SchemaError` for anything outside them: every number the
page formats or repeats (sizes, depths, lines, columns, counts) is bounded, every string and
list capped, every code one of the enums' values.
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

# The same bounds as torchatlas.shapes.analysis (which imports torch; this module does not).
MAX_INPUTS = 8
MAX_DIMS = 8
MAX_SIZE = 2**40
MAX_ROWS = 3000
# What a report can honestly hold, with room to spare:
MAX_RANK = 64  # dims of a layer's tensor (inputs are limited to MAX_DIMS; a view may add more)
MAX_NUMEL = 2**63 - 1  # torch keeps element counts in int64
MAX_DEPTH = 256  # module nesting: Python's recursion limit stops a forward pass near 200
MAX_TENSORS = 4096  # tensors one call takes or returns (a torch.cat of many)
MAX_COUNT = 2**100  # params, FLOPs, bytes: far beyond any model, still exact as a float
MAX_LINE = 50_001  # the pasted source has at most 50,000 characters (policy.MAX_SOURCE_CHARS)
MAX_SECONDS = 1e6
MAX_CONSTRAINTS = 3000
MAX_WHY_POINTS = 64
MAX_REFUSALS = 200
MAX_MOVES = 64  # distinct device-move notes a report keeps (one per call site)

# A shape is a list of sizes; in symbolic mode a size may be a formula such as "(H//4) − 3".
Shape = list[int]
SymbolicShape = list[str]


class RowKind(StrEnum):
    MODULE = "module"  # a module's forward call (hooks)
    FUNCTION = "function"  # a torch function called from a model's own forward code


class _OwnErrorKind(StrEnum):
    """Why an analysis stopped. Each value selects ``shapes.errors.<value>.{title,message,hint}``
    in the translation tables; the error's ``params`` fill the placeholders."""

    # The boxes, checked on the server before any worker is asked.
    SOURCE_TOO_LONG = "source_too_long"
    SHAPES_TOO_LONG = "shapes_too_long"
    DTYPES_TOO_LONG = "dtypes_too_long"
    MODEL_TOO_LONG = "model_too_long"
    BAD_SHAPE = "bad_shape"
    TOO_MANY_INPUTS = "too_many_inputs"
    BAD_DTYPE = "bad_dtype"
    BAD_CONSTRUCTOR = "bad_constructor"
    # Finding and building the model (inside the worker).
    MODEL_NOT_FOUND = "model_not_found"
    NO_MODULE = "no_module"
    WEIGHTS_NOT_NEEDED = "weights_not_needed"
    CONSTRUCTOR_ARGS = "constructor_args"
    CONSTRUCTOR_ERROR = "constructor_error"
    NOT_A_MODULE = "not_a_module"
    INPUTS_MISMATCH = "inputs_mismatch"
    # The forward pass on meta (torchatlas.shapes.hints).
    LINEAR_IN_FEATURES = "linear_in_features"
    CONV_IN_CHANNELS = "conv_in_channels"
    NORM_FEATURES = "norm_features"
    EMBEDDING_DTYPE = "embedding_dtype"
    MATMUL_MISMATCH = "matmul_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"  # meta ran it; the real kernel refuses the dtypes
    DATA_DEPENDENT = "data_dependent"
    FORWARD_ERROR = "forward_error"
    COMPARISON_ERROR = "comparison_error"  # "why meta?" stopped
    INTERNAL = "internal"


# What the sandbox itself reports (torchatlas.sandbox.outcomes.FailureKind) joins the room's own
# codes: each kind is this room's code of the same name (SourceError.of_failure).
ErrorKind = with_failure_kinds("ErrorKind", _OwnErrorKind, __name__)


# Errors whose hint offers a fix (a constructor call, re-traced before it is offered).
FIX_KINDS = frozenset(
    {ErrorKind.LINEAR_IN_FEATURES, ErrorKind.CONV_IN_CHANNELS, ErrorKind.NORM_FEATURES}
)


class RefusalCode(StrEnum):
    """Why the sandbox's allow-list refused a line (torchatlas.sandbox.policy's codes); each
    selects ``shapes.refusals.<value>``. Codes the room does not know read as OTHER."""

    CONSTRUCT = "construct"
    IMPORT = "import"
    DUNDER = "dunder"
    FORBIDDEN_NAME = "forbidden_name"
    FORMAT = "format"
    INTERNALS = "internals"
    FORBIDDEN_ATTRIBUTE = "forbidden_attribute"
    SYNTAX = "syntax"
    EVALUATES_TEXT = "evaluates_text"
    STRING_DUNDER = "string_dunder"
    STRING_CODE = "string_code"
    TYPE = "type"
    TOO_LARGE = "too_large"
    TOO_COMPLEX = "too_complex"
    OTHER = "other"

    @classmethod
    def of(cls, code: str) -> RefusalCode:
        try:
            return cls(code)
        except ValueError:
            return cls.OTHER


class MoveKind(StrEnum):
    """How code sent tensors to a device (``shapes.devices.<value>``)."""

    MOVE = "move"  # .to(device), .cuda(), .cpu(), model.to(device)
    CREATE = "create"  # a tensor made for a device: torch.zeros(…, device="cuda")


class MovePhase(StrEnum):
    BUILD = "build"  # while the model was built (__init__)
    FORWARD = "forward"  # during the forward pass


class SymbolicIssue(StrEnum):
    """Why formulas are missing although the concrete table is complete
    (``shapes.symbolic.issues.<value>``)."""

    FAILED = "failed"  # the symbolic pass raised; ``symbolic_detail`` says what
    PATH_DIFFERS = "path_differs"  # symbols took another path: formulas for outputs only


def _plain(value: Any) -> Any:
    """Dataclasses → dicts, enums → their values; much faster than ``asdict`` (no deep copies)
    for 3000-row reports."""
    if isinstance(value, ShapeError):
        return value.to_dict()
    if hasattr(value, "__dataclass_fields__"):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, list) and value and hasattr(value[0], "__dataclass_fields__"):
        return [_plain(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    return value


@dataclass(frozen=True, slots=True)
class LayerRow:
    name: str  # dotted module path ("" for the model itself); for an op, the module that called it
    type: str  # module class ("Conv2d") or op ("torch.cat", "Tensor.view", "F.interpolate")
    kind: RowKind
    depth: int  # call depth: 0 for the model, 1 for its direct children, …
    input_shapes: list[Shape] = field(default_factory=list)
    output_shapes: list[Shape] = field(default_factory=list)
    params: int = 0  # parameters of this module and its sub-modules (0 for ops)
    trainable_params: int = 0
    flops: int = 0  # FLOPs of this call, sub-layers included
    activation_bytes: int = 0  # bytes of the tensors this call returns
    leaf: bool = True  # no rows below it: totals add leaves only, so nothing counts twice
    line: int | None = None  # line of the pasted source that made this call
    failed: bool = False  # the forward pass stopped inside this row
    symbolic_output_shapes: list[SymbolicShape] | None = None
    constraints: list[str] = field(default_factory=list)  # guards this call put on input dims
    # Parameters of this layer that an earlier row (not one of its parents) already counts:
    # a tied weight, or a layer called again. Not in ``params``, so rows never count twice.
    shared_params: int = 0
    shared_with: str | None = None  # the row that counts them (a dotted module path)


@dataclass(frozen=True)
class DeviceMove:
    """Code that sent tensors to a device: on meta they stayed on meta (shapes unchanged).
    One note per call site; ``tensors`` is how many tensors that call moved or made."""

    kind: MoveKind
    phase: MovePhase
    call: str  # "Tensor.to", "Tensor.cuda", "Module.to", "torch.zeros"…
    device: str  # where the code sent them: "cuda", "cuda:1", "cpu"
    line: int | None = None  # the line of the pasted source that asked
    layer: str = ""  # the module whose forward asked ("" while building or for the model)
    tensors: int = 1


@dataclass(frozen=True)
class RefusedLine:
    """One line the sandbox's allow-list refused; ``detail`` is the sandbox's own English
    reason (shown, if at all, only as a detail beside the translated text)."""

    line: int
    col: int
    code: RefusalCode
    detail: str = ""


@dataclass(frozen=True)
class Constraint:
    """What a layer requires of the input's named dims: ``fc1`` requires
    ``16·((H//4) − 3)·((W//4) − 3) = 400``."""

    layer: str
    constraint: str


class ShapeError(SourceError):
    """Why the analysis stopped: a stable code (:class:`ErrorKind`), the parameters its texts
    need, and where (the line and column of the pasted source, the layer and the shapes it
    received, the lines the sandbox refused).

    The room's coded error for pasted source (:class:`torchatlas.errors.SourceError`): its
    text is ``shapes.errors.<kind>.{title,message,hint}`` filled with ``params``; :meth:`text`
    with no part is the whole card (title, message, and the layer with its shapes), which the
    page shows with the kit's error card. It crosses the sandbox as JSON (:meth:`to_dict`,
    :data:`ERROR_SCHEMA`), and compares by value.
    """

    room = "shapes"
    codes = ErrorKind
    extra = ("layer", "input_shapes")
    layer: str | None
    input_shapes: list[Shape]

    def __init__(
        self,
        kind: ErrorKind | str,
        params: dict[str, Any] | None = None,
        line: int | None = None,
        col: int | None = None,
        layer: str | None = None,
        input_shapes: list[Shape] | None = None,
        refusals: list[RefusedLine] | None = None,
    ) -> None:
        super().__init__(kind, params, line, col, refusals, layer=layer,
                         input_shapes=list(input_shapes or []))  # fmt: skip

    def text(self, lang: str = DEFAULT_LANGUAGE, part: str | None = None) -> str:
        """As :meth:`SourceError.text`; the hint of an error that offers a fix reads
        ``hint_no_fix`` when no fix survived its re-trace (``fix`` is empty)."""
        if part == "hint" and self.kind in FIX_KINDS and not self.params.get("fix"):
            part = "hint_no_fix"
        return super().text(lang, part)

    def card(self, lang: str) -> str:
        """Title, message, and the layer with the shapes it received."""
        body = f"**{self.text(lang, 'title')}**\n\n{self.text(lang, 'message')}"
        if self.layer:
            scalar = translate("shapes.table.scalar", lang)
            shapes = (
                ", ".join(" × ".join(map(str, shape)) or scalar for shape in self.input_shapes)
                or "—"
            )
            body += "\n\n" + translate("shapes.errors.where", lang, layer=self.layer, shapes=shapes)
        return body


@dataclass(frozen=True)
class ShapeReport:
    layers: list[LayerRow] = field(default_factory=list)
    outputs: list[Shape] = field(default_factory=list)
    total_params: int = 0
    trainable_params: int = 0
    param_bytes: int = 0
    activation_bytes: int = 0
    flops: int = 0
    model: str = ""  # the constructor that was built, e.g. "ResNetGenerator(n_blocks=6)"
    input_shapes: list[Shape] = field(default_factory=list)
    input_dtypes: list[str] = field(default_factory=list)
    symbolic: bool = False
    dim_names: list[list[str]] = field(default_factory=list)  # per input, e.g. ["N", "C", "H", "W"]
    symbolic_inputs: list[SymbolicShape] = field(default_factory=list)
    symbolic_outputs: list[SymbolicShape] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    symbolic_issue: SymbolicIssue | None = None  # why formulas are missing (the table is valid)
    symbolic_detail: str = ""  # the exception that stopped the symbolic pass (PyTorch's text)
    error: ShapeError | None = None
    elapsed_s: float = 0.0  # time inside the analysis (the sandbox adds its own round trip)
    # Where each output tensor sits in what forward returned ("" for a bare tensor, "[0]",
    # "['logits']", ".hidden"), parallel to ``outputs``.
    output_names: list[str] = field(default_factory=list)
    device_moves: list[DeviceMove] = field(default_factory=list)
    # Parameters of lazy modules the forward pass never reached (no size, so not counted).
    unmaterialised_params: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (lists are shared with the report, not copied)."""
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> ShapeReport:
        """The report in ``data`` (JSON from a worker), checked against :data:`REPORT_SCHEMA`;
        raises :class:`~torchatlas.sandbox.schema.SchemaError` (a ValueError) when any part
        is out of bounds. Unknown keys are dropped."""
        checked = validate(data, REPORT_SCHEMA)
        kinds = _ROW_KINDS
        checked["layers"] = [
            LayerRow(**{**row, "kind": kinds[row["kind"]]}) for row in checked.get("layers", [])
        ]
        checked["constraints"] = [Constraint(**item) for item in checked.get("constraints", [])]
        issue = checked.get("symbolic_issue")
        checked["symbolic_issue"] = SymbolicIssue(issue) if issue else None
        checked["error"] = _error_from(checked.get("error"))
        checked["device_moves"] = [
            DeviceMove(
                **{**move, "kind": MoveKind(move["kind"]), "phase": MovePhase(move["phase"])}
            )
            for move in checked.get("device_moves", [])
        ]
        return cls(**checked)


_ROW_KINDS = {kind.value: kind for kind in RowKind}


def _error_from(data: dict[str, Any] | None) -> ShapeError | None:
    """A checked error dict (see :data:`ERROR_SCHEMA`) as a :class:`ShapeError`."""
    if not data:
        return None
    refusals = [
        RefusedLine(item["line"], item["col"], RefusalCode.of(item["code"]), item.get("detail", ""))
        for item in data.get("refusals", [])
    ]
    return ShapeError(**{**data, "kind": ErrorKind(data["kind"]), "refusals": refusals})


# ---------------------------------------------------------------------------- schemas
def _numel_fits(shape: list[int]) -> bool:
    numel = 1
    for size in shape:
        numel *= size
        if numel > MAX_NUMEL:
            return False
    return True


_SIZE = Int(0, MAX_SIZE)
_SHAPE = Where(List(_SIZE, MAX_RANK), _numel_fits, "a shape with more elements than int64 holds")
_SHAPES = List(_SHAPE, MAX_TENSORS)
_INPUT_SHAPES = List(Where(List(Int(1, MAX_SIZE), MAX_DIMS), _numel_fits, "too many elements"),
                     MAX_INPUTS)  # fmt: skip
_FORMULA = Str(300, clip=True)  # a size as a formula of named dims, "((H − 4)//2)"
_SYMBOLIC_SHAPE = List(OneOf(_FORMULA, _SIZE), MAX_RANK)
_COUNT = Int(0, MAX_COUNT)
_LINE = Optional(Int(0, MAX_LINE))
_TEXT = Str(4000, clip=True)  # exception texts
_SHORT = Str(1000, clip=True)  # names, layers, constraints
_SCALAR = OneOf(Str(1000, clip=True), Int(-MAX_COUNT, MAX_COUNT), Float(-1e300, 1e300), Bool())
_REFUSAL = Dict(
    {"line": Int(0, MAX_LINE), "col": Int(0, MAX_LINE), "code": Str(40, clip=True),
     "detail": _SHORT},
    required=("line", "col", "code"),
)  # fmt: skip
_CONSTRAINT = Dict({"layer": _SHORT, "constraint": _SHORT}, required=("layer", "constraint"))

LAYER_SCHEMA = Dict(
    {
        "name": Str(2000, clip=True),
        "type": Str(200, clip=True),
        "kind": Str(16, choices=[kind.value for kind in RowKind]),
        "depth": Int(0, MAX_DEPTH),
        "input_shapes": _SHAPES,
        "output_shapes": _SHAPES,
        "params": _COUNT,
        "trainable_params": _COUNT,
        "flops": _COUNT,
        "activation_bytes": _COUNT,
        "leaf": Bool(),
        "line": _LINE,
        "failed": Bool(),
        "symbolic_output_shapes": Optional(List(_SYMBOLIC_SHAPE, MAX_TENSORS)),
        "constraints": List(_SHORT, 256),
        "shared_params": _COUNT,
        "shared_with": Optional(Str(2000, clip=True)),
    },
    required=("name", "type", "kind", "depth"),
)
MOVE_SCHEMA = Dict(
    {
        "kind": Str(16, choices=[kind.value for kind in MoveKind]),
        "phase": Str(16, choices=[phase.value for phase in MovePhase]),
        "call": Str(200, clip=True),
        "device": Str(64, clip=True),
        "line": _LINE,
        "layer": Str(2000, clip=True),
        "tensors": Int(1, MAX_COUNT),
    },
    required=("kind", "phase", "call", "device"),
)
ERROR_SCHEMA = Dict(
    {
        # The kind selects translations: one of ours, never another room's key.
        "kind": Str(40, choices=[kind.value for kind in ErrorKind]),
        "params": Map(Optional(_SCALAR), 32, key=Str(40, pattern=r"[A-Za-z_][A-Za-z0-9_]*")),
        "line": _LINE,
        "col": Optional(Int(0, MAX_LINE)),
        "layer": Optional(_SHORT),
        "input_shapes": _SHAPES,
        "refusals": List(_REFUSAL, MAX_REFUSALS, clip=True),
    },
    required=("kind",),
)
REPORT_SCHEMA = Dict(
    {
        "layers": List(LAYER_SCHEMA, MAX_ROWS),
        "outputs": _SHAPES,
        "total_params": _COUNT,
        "trainable_params": _COUNT,
        "param_bytes": _COUNT,
        "activation_bytes": _COUNT,
        "flops": _COUNT,
        "model": _SHORT,
        "input_shapes": _INPUT_SHAPES,
        "input_dtypes": List(Str(32), MAX_INPUTS),
        "symbolic": Bool(),
        "dim_names": List(List(Str(16), MAX_DIMS), MAX_INPUTS),
        "symbolic_inputs": List(_SYMBOLIC_SHAPE, MAX_INPUTS),
        "symbolic_outputs": List(_SYMBOLIC_SHAPE, MAX_TENSORS),
        "constraints": List(_CONSTRAINT, MAX_CONSTRAINTS),
        "symbolic_issue": Optional(Str(32, choices=[issue.value for issue in SymbolicIssue])),
        "symbolic_detail": _TEXT,
        "error": Optional(ERROR_SCHEMA),
        "elapsed_s": Float(0, MAX_SECONDS),
        "output_names": List(Str(300, clip=True), MAX_TENSORS),
        "device_moves": List(MOVE_SCHEMA, MAX_MOVES),
        "unmaterialised_params": _COUNT,
    }
)
WHY_META_SCHEMA = Dict(
    {
        "points": List(
            Dict(
                {
                    "batch": Int(1, MAX_SIZE),
                    "input_shapes": _INPUT_SHAPES,
                    "meta_s": Float(0, MAX_SECONDS),
                    "real_s": Optional(Float(0, MAX_SECONDS)),
                    "input_bytes": _COUNT,
                },
                required=("batch", "input_shapes", "meta_s", "real_s", "input_bytes"),
            ),
            MAX_WHY_POINTS,
        ),
        "error": Optional(ERROR_SCHEMA),
    }
)


@dataclass(frozen=True)
class WhyMetaPoint:
    batch: int
    input_shapes: list[Shape]
    meta_s: float
    real_s: float | None  # None where a real input would be too large to run here
    input_bytes: int


@dataclass(frozen=True)
class WhyMetaReport:
    points: list[WhyMetaPoint] = field(default_factory=list)
    error: ShapeError | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> WhyMetaReport:
        """As :meth:`ShapeReport.from_dict`, against :data:`WHY_META_SCHEMA`."""
        checked = validate(data, WHY_META_SCHEMA)
        return cls(
            points=[WhyMetaPoint(**point) for point in checked.get("points", [])],
            error=_error_from(checked.get("error")),
        )
