"""The largest tensor a room shows element by element, for every room that links to one.

The strides room draws a tensor's storage cell by cell and follows every step of a chain;
any step (and the start storage) may hold at most :data:`MAX_SHOWN_ELEMENTS` elements:
``expand()`` is free, but a later ``contiguous()`` or ``clone()`` of it would allocate them
all on a shared server. A room that links into it (basics: "see this in the strides room")
offers the link only for a tensor within the same bound, so a link never opens on a refusal.
Rooms never import each other: both read the bound from here.
"""

from __future__ import annotations

MAX_SHOWN_ELEMENTS = 1 << 20
