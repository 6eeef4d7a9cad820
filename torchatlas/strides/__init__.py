"""Tensor storage & strides: run a chain of ops on a real tensor and see how each step views
its flat storage (size, stride, storage offset), which steps share memory, and why an op fails.

>>> steps = trace((2, 3), "float32", [".t()", ".contiguous()"])
>>> [(s.stride, s.storage_id, s.is_view) for s in steps]
[((3, 1), 'S0', False), ((1, 3), 'S0', True), ((2, 1), 'S1', False)]
"""

from __future__ import annotations

from torchatlas.strides.parser import (
    DTYPES,
    MAX_INDEX_TEXT,
    MAX_OP_TEXT,
    OpParseError,
    ParsedOp,
    ParsedWrite,
    parse_index,
    parse_op,
    parse_write,
)
from torchatlas.strides.trace import (
    EXACT_UP_TO,
    FOOTPRINT_BINS,
    MAX_CHAIN_TEXT,
    MAX_ELEMENTS,
    MAX_LISTED,
    MAX_OPS,
    MAX_RANK,
    MAX_SHAPE_TEXT,
    START_DTYPES,
    Chain,
    ShapeInputError,
    Step,
    StepError,
    chain_code,
    parse_chain,
    parse_shape,
    run_chain,
    storage_index,
    trace,
)

__all__ = [
    "DTYPES",
    "EXACT_UP_TO",
    "FOOTPRINT_BINS",
    "MAX_CHAIN_TEXT",
    "MAX_ELEMENTS",
    "MAX_INDEX_TEXT",
    "MAX_LISTED",
    "MAX_OPS",
    "MAX_OP_TEXT",
    "MAX_RANK",
    "MAX_SHAPE_TEXT",
    "START_DTYPES",
    "Chain",
    "OpParseError",
    "ParsedOp",
    "ParsedWrite",
    "ShapeInputError",
    "Step",
    "StepError",
    "chain_code",
    "parse_chain",
    "parse_index",
    "parse_op",
    "parse_shape",
    "parse_write",
    "run_chain",
    "storage_index",
    "trace",
]
