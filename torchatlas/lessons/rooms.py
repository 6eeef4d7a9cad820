"""What a lesson may ask of each room: the fields of its shared link, and the probes a test
may use to check that the room shows a step's expected value.

Each room declares its link once (``torchatlas/<room>/link.py``, found through
:func:`torchatlas.rooms.room_links`); :data:`ROOMS` is derived from those declarations, so a
step can only name a room state that the room's own shared link carries, and the loader
checks every value with the room's own rules (``spec.read``): a lesson never reaches a state a
visitor could not reach by link.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchatlas.links import LinkSpec, Source
from torchatlas.rooms import room_links


@dataclass(frozen=True)
class RoomLink:
    """A room's link as lessons and class mode use it (derived from its declaration)."""

    key: str  # the room's URL path and views/<key>.py
    fields: tuple[str, ...]  # query-parameter names its link carries (pasted source aside)
    multi: tuple[str, ...] = ()  # fields a link repeats (one value per item)
    source_field: str | None = None  # where pasted source travels (deflated, base64)
    session_prefixes: tuple[str, ...] = ()  # the room's session keys start with one of these
    spec: LinkSpec | None = None  # the room's declaration: values are read with its rules

    @property
    def script(self) -> str:
        return f"views/{self.key}.py"


def room_link(spec: LinkSpec) -> RoomLink:
    """The lessons' view of one room's declaration."""
    sources = [item.name for item in spec.fields if isinstance(item, Source)]
    if len(sources) > 1:
        raise ValueError(f"{spec.room}: a lesson step carries one pasted source at most")
    return RoomLink(
        spec.room,
        tuple(item.name for item in spec.fields if not isinstance(item, Source)),
        multi=tuple(item.name for item in spec.fields if item.multi),
        source_field=sources[0] if sources else None,
        session_prefixes=(spec.session_prefix,),
        spec=spec,
    )


ROOMS: dict[str, RoomLink] = {key: room_link(spec) for key, spec in room_links().items()}

# Probes: how a test reads a value off a rendered room (tests/app/test_lessons.py implements
# each). name → (the room it reads, whether it needs ``at``).
PROBES: dict[str, tuple[str | None, bool]] = {
    "text": (None, False),  # the value appears on the page (as a tuple, 2×3 or 2 × 3)
    "strides.numbers": ("strides", False),  # a cell of "this step in numbers"
    "autograd.variable": ("autograd", True),  # the variables table, row ``at``
    "autograd.freeze": ("autograd", False),  # the Freezing tab's trainable count (its engine)
    "basics.result_dtype": ("basics", False),  # the promotion explorer's result dtype
    "shapes.layer": ("shapes", True),  # the output shape of layer ``at``
    "shapes.error": ("shapes", False),  # the analysis fails, explained (value "error")
    "modules.metric": ("modules", True),  # the inspector's metric labelled by key ``at``
    "classify.tensor_shape": ("classify", False),  # the tensor the network receives
    "devices.accelerator": ("devices", False),  # the inventory's accelerator verdict
}
