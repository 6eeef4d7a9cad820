"""A room's shared link in the page: read on a session's first run, written when it changes.

A room declares its link once (:class:`torchatlas.links.LinkSpec`, in
``torchatlas/<room>/link.py``); :class:`RoomLink` does the rest the same way in every room:

- :meth:`RoomLink.start` (every run, before the widgets): on the session's first run, each
  field's session key is set from the link (or the default), unless a test or an earlier run
  already set it; fields the link carried but could not be used are remembered for the notice.
- :meth:`RoomLink.notice` shows, once, which parts of a link were not used.
- :meth:`RoomLink.write` puts the current values in the address bar: only the room's own
  names, fields at their default left out; ``lang`` and other rooms' names are never touched.
- :meth:`RoomLink.forget` drops the room's session keys, so its next run reads the link like a
  first visit (lessons and class mode open a room in a given state this way).
- :func:`on_write` lets a part of the page that sits above every room (a lesson's banner)
  follow what the room writes: its listener is called after each :meth:`RoomLink.write`;
  :attr:`RoomLink.started` and :meth:`RoomLink.left_to_room` tell it whether the room has
  read its link yet and what a None in the link stands for.

>>> LINK = RoomLink(torchatlas.strides.link.LINK)  # doctest: +SKIP
>>> LINK.start(); LINK.notice()  # doctest: +SKIP
>>> shape = st.text_input("Shape", key=LINK.key("s_shape"))  # doctest: +SKIP
>>> LINK.write()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

from components.i18n import t
from torchatlas.links import LinkRead, LinkSpec, QueryValue

# Called after every room's write with its declaration and the query it wrote (its own names
# only), by name: a module that is imported again replaces its listener.
WriteListener = Callable[[LinkSpec, dict[str, QueryValue]], None]
_LISTENERS: dict[str, WriteListener] = {}


def on_write(listener: WriteListener) -> None:
    """Call ``listener(spec, written)`` after each :meth:`RoomLink.write` of any room, in the
    same run (also a fragment's): a banner above the room can tell whether the room still
    shows what the banner is about. ``written``: the room's own fields as the link holds
    them. A listener may stop the run (``st.rerun``)."""
    _LISTENERS[f"{listener.__module__}.{listener.__qualname__}"] = listener


def current_query() -> dict[str, list[str]]:
    """The address bar's query, every name with all its values."""
    query = st.query_params
    return {name: query.get_all(name) for name in query}


class RoomLink:
    """The page side of one room's :class:`~torchatlas.links.LinkSpec`."""

    def __init__(self, spec: LinkSpec) -> None:
        self.spec = spec
        self._started_key = f"{spec.session_prefix}link_started"
        self._broken_key = f"{spec.session_prefix}link_broken"
        self._left_key = f"{spec.session_prefix}link_left"

    def key(self, name: str) -> str:
        """The session key behind field ``name`` (give it to the widget that edits it)."""
        return self.spec.session_key(name)

    def start(self, query: Mapping[str, QueryValue | list[str]] | None = None) -> LinkRead | None:
        """On the session's first run in this room: every field's session key from the link
        (``query``, default: the address bar), keys already set kept. Later runs: nothing.
        Returns what was read (None when it was not the first run)."""
        state = st.session_state
        if state.get(self._started_key):
            return None
        read = self.spec.read(current_query() if query is None else query)
        for name, value in read.values.items():
            state.setdefault(self.key(name), value)
        if read.broken:
            state[self._broken_key] = read.broken
        state[self._started_key] = True
        return read

    @property
    def started(self) -> bool:
        """Whether this session's first run in the room has read the link already (a later
        change of the address bar is not read again)."""
        return bool(st.session_state.get(self._started_key))

    def fill_unset(self, values: Mapping[str, Any]) -> None:
        """Give each named field whose value is None (the link left it to the room, e.g. "the
        preset's own code") the value in ``values``."""
        state = st.session_state
        state[self._left_key] = dict(values)
        for name, value in values.items():
            if state.get(self.key(name)) is None:
                state[self.key(name)] = value

    def left_to_room(self) -> dict[str, Any]:
        """What the room gave the fields a link may leave to it (the last :meth:`fill_unset`):
        a None in the room's link means that value."""
        return dict(st.session_state.get(self._left_key) or {})

    def values(self) -> dict[str, Any]:
        """Every field's current value (its session key, or the default)."""
        state = st.session_state
        return {
            item.name: state.get(self.key(item.name), item.default) for item in self.spec.fields
        }

    def take_broken(self) -> tuple[str, ...]:
        """The fields of this session's link that could not be used (told once)."""
        return tuple(st.session_state.pop(self._broken_key, ()) or ())

    def notice(self) -> None:
        """Say once, in plain words, which parts of the link were not used."""
        broken = self.take_broken()
        if broken:
            st.info(t("kit.link.broken", fields=", ".join(broken)), icon=":material/link_off:")

    def query(self, values: Mapping[str, Any] | None = None) -> dict[str, QueryValue]:
        """The room's own link fields for ``values`` (default: the current ones); a value
        a field cannot carry is written as its default."""
        values = self.values() if values is None else values
        checked = {
            name: value
            for name, value in values.items()
            if name in self.spec.names and self.spec.field(name).valid(value)
        }
        return self.spec.to_query(checked)

    def write(self, values: Mapping[str, Any] | None = None) -> None:
        """Keep the address bar in step with ``values`` (default: the current ones): only
        this room's names change, and only when they differ (each change is a browser
        history entry)."""
        wanted = self.query(values)
        query = st.query_params
        now = {name: query.get_all(name) for name in query}
        new = {name: given for name, given in now.items() if name not in self.spec.names}
        for name in self.spec.names:
            if name in wanted:
                value = wanted[name]
                new[name] = list(value) if isinstance(value, list) else [value]
        if new != now:
            # One message to the browser for the whole change (each assignment to
            # st.query_params is one, in every run of every phone of a class).
            query.from_dict(new)
        for listener in tuple(_LISTENERS.values()):
            listener(self.spec, dict(wanted))

    def forget(self) -> None:
        """Drop every session key of the room, so its next run reads the link afresh."""
        prefix = self.spec.session_prefix
        for key in [key for key in st.session_state if str(key).startswith(prefix)]:
            del st.session_state[key]
