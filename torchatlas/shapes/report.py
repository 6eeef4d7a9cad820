"""The shape explorer's data model: plain dataclasses that round-trip through JSON.

One :class:`LayerRow` per module call or functional op, in execution order, like torchinfo's
``LayerInfo``; the formatter (components/shapes.py) knows nothing of torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


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
    def from_dict(cls, data: dict[str, Any]) -> ShapeReport:
        fields = dict(data)
        fields["layers"] = [LayerRow(**row) for row in data.get("layers", [])]
        error = data.get("error")
        fields["error"] = ShapeError(**error) if error else None
        known = cls.__dataclass_fields__
        return cls(**{key: value for key, value in fields.items() if key in known})


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
    def from_dict(cls, data: dict[str, Any]) -> WhyMetaReport:
        error = data.get("error")
        return cls(
            points=[WhyMetaPoint(**point) for point in data.get("points", [])],
            error=ShapeError(**error) if error else None,
        )
