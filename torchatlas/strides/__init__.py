"""Tensor storage & strides: run a chain of ops on a real tensor and see how each step views
its flat storage (size, stride, storage offset), which steps share memory, and why an op fails.

>>> steps = trace((2, 3), "float32", [".t()", ".contiguous()"])
>>> [(s.stride, s.storage_id, s.is_view) for s in steps]
[((3, 1), 'S0', False), ((1, 3), 'S0', True), ((2, 1), 'S1', False)]

Errors carry a code and parameters (:mod:`torchatlas.strides.errors`); their English is
``error.message``, read from the same translation table the page uses:

>>> trace((3, 4), "float32", [".t()", ".view(-1)"])[-1].error.code
<ErrorCode.VIEW_INCOMPATIBLE: 'view_incompatible'>

Modules, each importing only those above it: ``limits`` and ``dtypes`` (the room's bounds
and dtypes), ``errors`` (codes and exceptions), ``parser`` (the allow-listed op parser),
``explain`` (PyTorch's refusals explained), ``trace`` (the chain, step by step), ``writes``
(write-through), ``quiz``, ``examples``, ``link`` (the room's shared link) and ``jobs`` (the
sandbox jobs).
"""

from __future__ import annotations

from torchatlas.strides.dtypes import DTYPES, EXACT_UP_TO, START_DTYPES, start_values_exact
from torchatlas.strides.errors import (
    ErrorCode,
    OpParseError,
    ShapeInputError,
    StepError,
    StridesError,
)
from torchatlas.strides.limits import (
    FOOTPRINT_BINS,
    MAX_CHAIN_TEXT,
    MAX_ELEMENTS,
    MAX_INDEX_TEXT,
    MAX_LISTED,
    MAX_OP_TEXT,
    MAX_OPS,
    MAX_RANK,
    MAX_SHAPE_TEXT,
)
from torchatlas.strides.parser import (
    OpKind,
    ParsedOp,
    ParsedWrite,
    parse_index,
    parse_op,
    parse_write,
)
from torchatlas.strides.trace import (
    Chain,
    Step,
    StorageKind,
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
    "ErrorCode",
    "OpKind",
    "OpParseError",
    "ParsedOp",
    "ParsedWrite",
    "ShapeInputError",
    "Step",
    "StepError",
    "StorageKind",
    "StridesError",
    "chain_code",
    "parse_chain",
    "parse_index",
    "parse_op",
    "parse_shape",
    "parse_write",
    "run_chain",
    "start_values_exact",
    "storage_index",
    "trace",
]
