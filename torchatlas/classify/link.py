"""The classification room's shared link: the model and how many classes each photo lists.

Photos never travel in a link (an upload stays with the visitor who made it); a teacher shares
the model to look through (``?c_model=resnet50``) and the length of the top-k list. ``c_model``
is the name the room's links have used since its first release.
"""

from __future__ import annotations

from torchatlas.classify.models import DEFAULT_MODEL, MODELS
from torchatlas.links import Choice, Int, LinkSpec

MAX_TOPK = 10
DEFAULT_TOPK = 5

LINK = LinkSpec(
    "classify",
    "classify_",
    (
        Choice("c_model", DEFAULT_MODEL, key="classify_model", options=tuple(MODELS)),
        Int("c_topk", DEFAULT_TOPK, key="classify_topk", low=1, high=MAX_TOPK),
    ),
)
