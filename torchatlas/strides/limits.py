"""The room's bounds, in one place: every parser, the trace and the page read them from here.

Each input of the room has a longest text it reads (the boxes carry the same limits, but
shared links and scripts reach the parsers without them, so each parser refuses longer text
before reading it), and every tensor a chain makes has a largest element count, so that a
classroom can share one server.
"""

from __future__ import annotations

from torchatlas.shown_tensors import MAX_SHOWN_ELEMENTS

MAX_RANK = 6
MAX_OPS = 24
MAX_OP_TEXT = 200
MAX_INDEX_TEXT = 80  # a typed element index: rank ≤ 6, sizes of up to 7 digits
# A start shape (rank ≤ 6, sizes of up to 7 digits, with room for spaces and brackets) and a
# chain (MAX_OPS lines of MAX_OP_TEXT).
MAX_SHAPE_TEXT = 80
MAX_CHAIN_TEXT = MAX_OPS * (MAX_OP_TEXT + 1)
# A storage footprint (which parts of the storage a step reads) in at most this many bins.
FOOTPRINT_BINS = 96
# Any step (and the start storage) may hold at most this many elements: expand() is free, but
# a later contiguous() or clone() of it would allocate them all on a shared server.
MAX_ELEMENTS = MAX_SHOWN_ELEMENTS  # the bound the basics room's shown tensors share
# Per-element lists (storage_indices, values, storage_values) stop here; the numbers that
# describe the layout (size, stride, offset, …) are computed at any size.
MAX_LISTED = 1 << 16
