"""Tensor basics on live torch: dtypes and promotion, broadcasting, einsum, indexing that
views or copies, and what ``torch.save`` and HDF5 really write.

>>> promote(DTypeSpec("tensor", "int8", 100), DTypeSpec("scalar", "int", 1000)).value
'76'
>>> broadcast([(2, 3, 5, 5), (3, 1, 1)]).result
(2, 3, 5, 5)
>>> einsum("...chw,c->...hw", [(2, 3, 4, 5), (3,)]).output_shape
(2, 4, 5)
>>> index((2, 3), "x[:, [0, 2]]").is_view
False

Modules, each importing only those above it: ``limits`` and ``errors``, ``shapes``,
``promotion``, ``broadcasting``, ``einsum``, ``indexing``, ``saving``, ``creation``, ``quiz``.
Errors carry a code and parameters; their text lives in ``assets/translations/*/basics.json``.
"""

from __future__ import annotations

from torchatlas.basics.broadcasting import Broadcast, Fix, Operand, broadcast
from torchatlas.basics.creation import Attempt, Cast, Creation, Made, creation
from torchatlas.basics.einsum import EinsumPlan, OperandPlan, einsum, run_broadcast
from torchatlas.basics.errors import BasicsError, BasicsValueError, ErrorCode
from torchatlas.basics.indexing import (
    IndexKind,
    IndexResult,
    ParsedIndex,
    Part,
    index,
    parse_index_expression,
    source_tensor,
)
from torchatlas.basics.promotion import (
    DEFAULT_VALUES,
    DTYPES,
    OP_SYMBOLS,
    SCALAR_TYPES,
    TABLE_COLUMNS,
    Category,
    Derivation,
    DTypeSpec,
    Op,
    OperandKind,
    Origin,
    Outcome,
    Promotion,
    PromotionTable,
    TableCell,
    build_table,
    category,
    derive,
    own_dtype,
    parse_value,
    promote,
    promotion_table,
)
from torchatlas.basics.saving import SAVE_DTYPES, CountingReader, HdfReport, SaveReport, serialize
from torchatlas.basics.shapes import parse_shape, parse_shapes, shape_text

__all__ = [
    "DEFAULT_VALUES",
    "DTYPES",
    "OP_SYMBOLS",
    "SAVE_DTYPES",
    "SCALAR_TYPES",
    "TABLE_COLUMNS",
    "Attempt",
    "BasicsError",
    "BasicsValueError",
    "Broadcast",
    "Cast",
    "Category",
    "CountingReader",
    "Creation",
    "DTypeSpec",
    "Derivation",
    "EinsumPlan",
    "ErrorCode",
    "Fix",
    "HdfReport",
    "IndexKind",
    "IndexResult",
    "Made",
    "Op",
    "Operand",
    "OperandKind",
    "OperandPlan",
    "Origin",
    "Outcome",
    "ParsedIndex",
    "Part",
    "Promotion",
    "PromotionTable",
    "SaveReport",
    "TableCell",
    "broadcast",
    "build_table",
    "category",
    "creation",
    "derive",
    "einsum",
    "index",
    "own_dtype",
    "parse_index_expression",
    "parse_shape",
    "parse_shapes",
    "parse_value",
    "promote",
    "promotion_table",
    "run_broadcast",
    "serialize",
    "shape_text",
    "source_tensor",
]
