"""Every room's shared link, in one place: the only module that knows all rooms' link
fields. A link from one room into another, a lesson's step and class mode's "follow me" all
go through it, so no room imports another (``.importlinter``: rooms are independent).

Each room declares its link in ``torchatlas/<room>/link.py`` as ``LINK`` (a
:class:`torchatlas.links.LinkSpec`).

>>> link_into("strides", {"s_shape": "2,3", "s_ops": (".t()",)})  # doctest: +SKIP
{'s_shape': '2,3', 's_ops': ['.t()']}
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

from torchatlas.links import LinkSpec, QueryValue

ROOM_KEYS = ("basics", "strides", "autograd", "modules", "shapes", "classify", "devices")


@functools.cache
def room_links() -> dict[str, LinkSpec]:
    """Room key → its link declaration."""
    links = {}
    for key in ROOM_KEYS:
        spec = importlib.import_module(f"torchatlas.{key}.link").LINK
        if not isinstance(spec, LinkSpec) or spec.room != key:
            raise TypeError(f"torchatlas.{key}.link.LINK is not the {key} room's LinkSpec")
        links[key] = spec
    return links


def link_of(room: str) -> LinkSpec:
    """The link declaration of ``room`` (KeyError for a key that is no room)."""
    return room_links()[room]


def link_into(room: str, values: Mapping[str, Any]) -> dict[str, QueryValue]:
    """The query that opens ``room`` with ``values`` (its own field names; others are an
    error: a link never carries what the room would not read)."""
    spec = link_of(room)
    unknown = set(values) - set(spec.names)
    if unknown:
        raise KeyError(f"{room} has no link field {sorted(unknown)}")
    return spec.to_query(values)
