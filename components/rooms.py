"""The rooms of Torch Atlas: one registry for navigation and the home page.

A room appears only once its page file exists, so an unbuilt room is simply
absent, never a placeholder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Room:
    key: str  # url path and translation namespace
    icon: str
    section: str  # translation key of the navigation section

    @property
    def script(self) -> str:
        return f"views/{self.key}.py"

    @property
    def built(self) -> bool:
        return (ROOT / self.script).is_file()


ROOMS: tuple[Room, ...] = (
    Room("basics", ":material/calculate:", "app.section.tensors"),
    Room("strides", ":material/grid_on:", "app.section.tensors"),
    Room("autograd", ":material/account_tree:", "app.section.training"),
    Room("modules", ":material/widgets:", "app.section.training"),
    Room("shapes", ":material/schema:", "app.section.models"),
    Room("classify", ":material/image_search:", "app.section.models"),
    Room("devices", ":material/memory:", "app.section.hardware"),
)


def built_rooms() -> list[Room]:
    return [room for room in ROOMS if room.built]
