"""The strides room's shared link, declared once (read, written and checked by the kit:
:mod:`torchatlas.links`, ``components/kit/link_state.py``).

- ``s_shape``: the start shape as typed (``3,4``); ``s_dtype``: the start dtype;
- ``s_ops``: the op chain, one value per line of the chain box (``s_ops=`` alone: no ops);
- ``s_seed``: the quiz question's seed;
- ``s_step``: the step shown (past the chain's last step, or left out: the last step).

The names are the room's URL names since its first shared link; lessons, the basics room's
links (through :func:`torchatlas.rooms.link_into`) and old links use them.

>>> LINK.read({"s_shape": "3,1", "s_ops": [".expand(3, 4)", ".t()"]}).values["s_ops"]
('.expand(3, 4)', '.t()')
"""

from __future__ import annotations

from torchatlas.links import Choice, Int, LinkSpec, Text, Texts
from torchatlas.strides.dtypes import START_DTYPES
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.limits import MAX_OP_TEXT, MAX_OPS, MAX_SHAPE_TEXT

DEFAULT = EXAMPLES["transpose_contiguous"]  # what the room shows without a link
MAX_SEED = 999_999_999
LAST_STEP = MAX_OPS  # the link's "last step": no chain has a step past it

LINK = LinkSpec(
    "strides",
    "strides_",
    (
        Text("s_shape", ", ".join(map(str, DEFAULT.shape)), key="strides_shape",
             max_len=MAX_SHAPE_TEXT),
        Choice("s_dtype", DEFAULT.dtype, key="strides_dtype", options=tuple(START_DTYPES)),
        Texts("s_ops", DEFAULT.ops, key="strides_ops", max_items=MAX_OPS, max_len=MAX_OP_TEXT),
        Int("s_seed", 1, key="strides_seed", low=0, high=MAX_SEED),
        Int("s_step", LAST_STEP, key="strides_link_step", low=0, high=LAST_STEP),
    ),
)  # fmt: skip
