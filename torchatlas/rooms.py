"""Every room's shared link, in one place: the only module that knows all rooms' link
fields. A link from one room into another, a lesson's step and class mode's "follow me" all
go through it, so no room imports another (``.importlinter``: rooms are independent).

Each room declares its link in ``torchatlas/<room>/link.py`` as ``LINK`` (a
:class:`torchatlas.links.LinkSpec`).

>>> link_into("strides", {"s_shape": "2,3", "s_ops": (".t()",)})  # doctest: +SKIP
{'s_shape': '2,3', 's_ops': ['.t()']}

It is also the registry of the rooms (:data:`ROOMS`): each room is declared here once, as
data, and navigation, the home page, the links, the sandbox's job table, the bench's class
and the tests' room lists are derived from it. ``tests/unit/test_room_registry.py`` checks
the import contracts' room lists in ``.importlinter`` against it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchatlas.links import LinkSpec, QueryValue

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Room:
    """One room, as everything outside it needs to know it. Plain data: the engine layer
    holds it, so it names the room's page parts and view by path, never by import.

    ``engine`` (default ``torchatlas.<key>``) holds ``link.py`` (its ``LINK``) and, where
    ``jobs`` is set, ``jobs.py`` (its ``register_jobs``); ``pages`` (default
    ``components.<key>``) holds its state, panels and draw modules; ``view`` (default
    ``views/<key>.py``, relative to the repository) is the page navigation runs. Its texts
    are ``app.rooms.<key>.title`` and ``.promise``, its navigation group ``section``.
    """

    key: str  # url path, link owner and translation namespace
    section: str  # translation key of the navigation section
    icon: str
    jobs: bool = False  # runs visitor-driven computation in the sandbox
    engine: str = ""
    pages: str = ""
    view: str = ""

    def __post_init__(self) -> None:
        # Defaults that follow from the key (a frozen dataclass sets them this way).
        defaults = {
            "engine": f"torchatlas.{self.key}",
            "pages": f"components.{self.key}",
            "view": f"views/{self.key}.py",
        }
        for name, default in defaults.items():
            if not getattr(self, name):
                object.__setattr__(self, name, default)

    @property
    def script(self) -> str:
        """The view's path as navigation and ``st.page_link`` take it."""
        return self.view

    @property
    def built(self) -> bool:
        """Whether its view exists: an unbuilt room is absent, never a placeholder."""
        return (ROOT / self.view).is_file()

    @property
    def link_module(self) -> str:
        return f"{self.engine}.link"

    @property
    def jobs_module(self) -> str | None:
        return f"{self.engine}.jobs" if self.jobs else None


# In navigation's and the home page's order. A new room is one more entry here.
ROOMS: tuple[Room, ...] = (
    Room("basics", "app.section.tensors", ":material/calculate:", jobs=True),
    Room("strides", "app.section.tensors", ":material/grid_on:", jobs=True),
    Room("autograd", "app.section.training", ":material/account_tree:", jobs=True),
    Room("modules", "app.section.training", ":material/widgets:", jobs=True),
    Room("shapes", "app.section.models", ":material/schema:", jobs=True),
    Room("classify", "app.section.models", ":material/image_search:"),
    Room("devices", "app.section.hardware", ":material/memory:"),
)


def rooms() -> tuple[Room, ...]:
    """The registry as it is now (read at call time, so a test can declare one more room by
    replacing :data:`ROOMS`)."""
    return ROOMS


def room_keys() -> tuple[str, ...]:
    return tuple(room.key for room in rooms())


def room_of(key: str) -> Room:
    """The room declared as ``key`` (KeyError for a key that is no room)."""
    for each in rooms():
        if each.key == key:
            return each
    raise KeyError(key)


def built_rooms() -> list[Room]:
    """The rooms whose view exists, in the registry's order."""
    return [each for each in rooms() if each.built]


def room_links() -> dict[str, LinkSpec]:
    """Room key → its link declaration."""
    return _links_of(rooms())


@functools.cache
def _links_of(declared: tuple[Room, ...]) -> dict[str, LinkSpec]:
    # Cached per registry, so a test's extra room is read without clearing anything.
    links = {}
    for each in declared:
        spec = importlib.import_module(each.link_module).LINK
        if not isinstance(spec, LinkSpec) or spec.room != each.key:
            raise TypeError(f"{each.link_module}.LINK is not the {each.key} room's LinkSpec")
        links[each.key] = spec
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
