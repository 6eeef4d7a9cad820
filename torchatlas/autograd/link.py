"""The autograd room's shared link, declared once (read, written and checked by the kit:
:mod:`torchatlas.links`, ``components/kit/link_state.py``).

- ``a_ex``: an example's key; ``a_prog``: the program's text when it is not an example (a
  non-empty ``a_prog`` is the program, whatever ``a_ex`` says; links the room writes carry
  one or the other);
- ``a_seed``: the seed the program's random tensors are drawn with;
- ``a_root``: the variable backward starts from (empty: the graph's own choice);
- ``a_step``: how many backward steps are shown (past the last: all of them).

The names are the room's URL names since its first shared link; lessons and old links use them.

>>> LINK.read({"a_ex": "mlp", "a_step": "3"}).values["a_step"]
3
"""

from __future__ import annotations

from torchatlas.autograd.examples import DEFAULT_EXAMPLE, EXAMPLES
from torchatlas.autograd.parser import MAX_SOURCE
from torchatlas.links import Choice, Int, LinkSpec, Text

MAX_SEED = 10**6
MAX_STEP = 10**4  # far above any replay's steps (a program runs at most 300 operations)
MAX_ROOT = 40  # a variable's name in a link

LINK = LinkSpec(
    "autograd",
    "autograd_",
    (
        Choice("a_ex", DEFAULT_EXAMPLE, key="autograd_example", options=tuple(EXAMPLES)),
        Text("a_prog", "", key="autograd_link_program", max_len=MAX_SOURCE),
        Int("a_seed", 0, key="autograd_seed", low=0, high=MAX_SEED),
        Text("a_root", "", key="autograd_link_root", max_len=MAX_ROOT,
             pattern=rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_ROOT - 1}}}"),
        Int("a_step", 0, key="autograd_step", low=0, high=MAX_STEP),
    ),
)  # fmt: skip
