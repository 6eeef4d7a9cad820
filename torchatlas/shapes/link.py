"""The shape explorer's shared link, declared once (read, written and checked by the kit:
:mod:`torchatlas.links`, ``components/kit/link_state.py``).

- ``m_preset``: the example loaded (one of :data:`torchatlas.presets.PRESETS`);
- ``m_src``: pasted code that differs from the preset's (deflated, base64);
- ``m_model``, ``m_shapes``, ``m_dtypes``: the model, shapes and dtypes boxes as typed;
- ``m_sym``: formulas on (1) or off.

The code and the three boxes default to None: "the preset's own" (each preset has its code
and boxes; ``m_model=`` with nothing after it is an empty model box, which builds the last
``nn.Module`` class the code defines). The names are the room's URL names since its first
shared link; lessons and old links use them.

>>> LINK.read({"m_preset": "resnet18", "m_shapes": "2×3×64×64"}).values["m_shapes"]
'2×3×64×64'
"""

from __future__ import annotations

from torchatlas.links import Choice, Flag, LinkSpec, Source, Text
from torchatlas.modelcode import MAX_MODEL_CHARS
from torchatlas.presets import DEFAULT_PRESET, PRESETS
from torchatlas.sandbox.policy import MAX_SOURCE_CHARS
from torchatlas.shapes.analysis import MAX_DTYPES_CHARS, MAX_SHAPES_CHARS

# The longest code token the page writes into a link (a longer source is left out of it and
# the link names the preset only); browsers and proxies accept URLs far longer.
MAX_LINK_SOURCE_CHARS = 6000

LINK = LinkSpec(
    "shapes",
    "shapes_",
    (
        Choice("m_preset", DEFAULT_PRESET, key="shapes_preset_key", options=tuple(PRESETS)),
        Source("m_src", None, key="shapes_source", max_chars=MAX_SOURCE_CHARS,
               max_token_chars=MAX_LINK_SOURCE_CHARS),
        Text("m_model", None, key="shapes_model", max_len=MAX_MODEL_CHARS),
        Text("m_shapes", None, key="shapes_inputs", max_len=MAX_SHAPES_CHARS),
        Text("m_dtypes", None, key="shapes_dtypes", max_len=MAX_DTYPES_CHARS),
        Flag("m_sym", False, key="shapes_symbolic"),
    ),
)  # fmt: skip
