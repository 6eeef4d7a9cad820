"""The rooms of Torch Atlas, for navigation and the home page: the registry itself lives in
the engine layer (:mod:`torchatlas.rooms`, plain data), so the engine, the bench and the
tests read the same one. A room appears only once its page file exists, so an unbuilt room
is simply absent, never a placeholder.
"""

from __future__ import annotations

from torchatlas.rooms import ROOMS, Room, built_rooms, rooms

__all__ = ["ROOMS", "Room", "built_rooms", "rooms"]
