"""The shape explorer's data model: plain dataclasses that round-trip through JSON.

One :class:`LayerRow` per module call or functional op, in execution order, like torchinfo's
``LayerInfo``; the formatter (components/shapes.py) knows nothing of torch.

A report arrives as JSON from a sandbox worker that ran hostile code, so :meth:`ShapeReport.
from_dict` and :meth:`WhyMetaReport.from_dict` first check it against the bounded schemas
below (:data:`REPORT_SCHEMA`, :data:`WHY_META_SCHEMA`) and raise
:class:`~torchatlas.sandbox.schema.SchemaError` for anything outside them: every number the
page formats or repeats (sizes, depths, lines, columns, counts) is bounded, every string and
list capped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

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


def _plain(value: Any) -> Any:
    """Dataclasses → dicts; much faster than ``asdict`` (no deep copies) for 3000-row reports."""
    if hasattr(value, "__dataclass_fields__"):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, list) and value and hasattr(value[0], "__dataclass_fields__"):
        return [_plain(item) for item in value]
    return value


# A shape is a list of sizes; in symbolic mode a size may be a formula such as "(H//4) − 3".
Shape = list[int]
SymbolicShape = list[str]


@dataclass
class LayerRow:
    name: str  # dotted module path ("" for the model itself); for an op, the module that called it
    type: str  # module class ("Conv2d") or op ("torch.cat", "Tensor.view", "F.interpolate")
    kind: str  # "module" | "function"
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


@dataclass
class ShapeError:
    """Why the analysis stopped, in plain words, with a fix.

    ``kind`` is a stable code (the page translates ``shapes.errors.<kind>.*`` with ``params``);
    ``message`` and ``hint`` are the English texts, complete on their own.
    """

    kind: str
    message: str
    line: int | None = None
    col: int | None = None
    layer: str | None = None
    hint: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    input_shapes: list[Shape] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
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
    constraints: list[dict[str, str]] = field(default_factory=list)  # {"layer", "constraint"}
    symbolic_note: str = ""  # why the symbolic pass could not finish (the table is still valid)
    error: ShapeError | None = None
    elapsed_s: float = 0.0  # time inside the analysis (the sandbox adds its own round trip)

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
        fields = validate(data, REPORT_SCHEMA)
        fields["layers"] = [LayerRow(**row) for row in fields.get("layers", [])]
        error = fields.get("error")
        fields["error"] = ShapeError(**error) if error else None
        return cls(**fields)


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
_TEXT = Str(4000, clip=True)  # messages, hints, exception texts
_SHORT = Str(1000, clip=True)  # names, layers, constraints
_CODE = Str(40, pattern=r"[a-z][a-z0-9_]*")  # error kinds select translations: plain codes only
_SCALAR = OneOf(Str(1000, clip=True), Int(-MAX_COUNT, MAX_COUNT), Float(-1e300, 1e300), Bool())
_REFUSAL = Dict(
    {"line": Int(0, MAX_LINE), "col": Int(0, MAX_LINE), "code": Str(40, clip=True),
     "message": _SHORT},
    required=("line", "col", "code", "message"),
)  # fmt: skip
_CONSTRAINT = Dict({"layer": _SHORT, "constraint": _SHORT}, required=("layer", "constraint"))

LAYER_SCHEMA = Dict(
    {
        "name": Str(2000, clip=True),
        "type": Str(200, clip=True),
        "kind": Str(16, choices=("module", "function")),
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
    },
    required=("name", "type", "kind", "depth"),
)
ERROR_SCHEMA = Dict(
    {
        "kind": _CODE,
        "message": _TEXT,
        "line": _LINE,
        "col": Optional(Int(0, MAX_LINE)),
        "layer": Optional(_SHORT),
        "hint": _TEXT,
        "params": Map(Optional(_SCALAR), 32, key=Str(40, pattern=r"[A-Za-z_][A-Za-z0-9_]*")),
        "input_shapes": _SHAPES,
        "refusals": List(_REFUSAL, 200, clip=True),
    },
    required=("kind", "message"),
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
        "symbolic_note": _TEXT,
        "error": Optional(ERROR_SCHEMA),
        "elapsed_s": Float(0, MAX_SECONDS),
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


@dataclass
class WhyMetaPoint:
    batch: int
    input_shapes: list[Shape]
    meta_s: float
    real_s: float | None  # None where a real input would be too large to run here
    input_bytes: int


@dataclass
class WhyMetaReport:
    points: list[WhyMetaPoint] = field(default_factory=list)
    error: ShapeError | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> WhyMetaReport:
        """As :meth:`ShapeReport.from_dict`, against :data:`WHY_META_SCHEMA`."""
        checked = validate(data, WHY_META_SCHEMA)
        error = checked.get("error")
        return cls(
            points=[WhyMetaPoint(**point) for point in checked.get("points", [])],
            error=ShapeError(**error) if error else None,
        )
