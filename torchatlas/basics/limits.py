"""The room's bounds in one place: every parser reads its longest text from here, and every
tensor the engine makes has a largest element count, so a classroom can share one server."""

from __future__ import annotations

MAX_SHAPE_TEXT = 60
MAX_SHAPES_TEXT = 200
MAX_RANK = 6
MAX_SHAPES = 4
MAX_DIM = 10**6  # one dimension; meta tensors make even this free
MAX_REAL_ELEMENTS = 4096  # tensors the engine fills with numbers (indexing, saving)
MAX_SAVE_ELEMENTS = 1 << 16  # saving: large enough that a view's file shows the storage
MAX_EINSUM_TEXT = 80
MAX_EINSUM_OPERANDS = 4
MAX_EINSUM_RUN = 1 << 16  # product of all letter sizes up to which einsum runs on numbers
MAX_INDEX_TEXT = 120
MAX_INDEX_NODES = 80
MAX_VALUE_TEXT = 40
MAX_GATHERED = 1 << 20  # an advanced index's result, bounded before it is made
MAX_DRAWN = 512  # cells a picture shows
