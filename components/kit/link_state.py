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

>>> LINK = RoomLink(torchatlas.strides.link.LINK)  # doctest: +SKIP
>>> LINK.start(); LINK.notice()  # doctest: +SKIP
>>> shape = st.text_input("Shape", key=LINK.key("s_shape"))  # doctest: +SKIP
>>> LINK.write()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from components.i18n import t
from torchatlas.links import LinkRead, LinkSpec, QueryValue


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

    def fill_unset(self, values: Mapping[str, Any]) -> None:
        """Give each named field whose value is None (the link left it to the room, e.g. "the
        preset's own code") the value in ``values``."""
        state = st.session_state
        for name, value in values.items():
            if state.get(self.key(name)) is None:
                state[self.key(name)] = value

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
        for name in self.spec.names:
            if name not in wanted:
                if name in query:
                    del query[name]
                continue
            value = wanted[name]
            if isinstance(value, list):
                if query.get_all(name) != value:
                    query[name] = value
            elif query.get_all(name) != [value]:
                query[name] = value

    def forget(self) -> None:
        """Drop every session key of the room, so its next run reads the link afresh."""
        prefix = self.spec.session_prefix
        for key in [key for key in st.session_state if str(key).startswith(prefix)]:
            del st.session_state[key]
