"""Who this session is, for every limit of the app: a :class:`~torchatlas.clients.Visitor`
(the client, i.e. the machine's address, and the session within it).

The client is read once per session from its connection (``components.upkeep`` reads the TCP
peer and the ``X-Forwarded-For`` header; ``torchatlas.clients`` decides what they mean with the
``ATLAS_TRUSTED_PROXIES`` setting). A session without a connection (AppTest) is its own client.

Uploads arrive on HTTP requests outside any script run, keyed by Streamlit's session id:
:func:`client_of_session` answers for them from what each session's script run recorded.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import OrderedDict

import streamlit as st

from components import upkeep
from torchatlas.clients import (
    TRUSTED_PROXIES_SETTING,
    TrustedProxies,
    Visitor,
    bad_entries,
    client_of,
)

SESSION_KEY = "sandbox_session_id"  # this session's id in every per-client limit
CLIENT_KEY = "visitor_client"  # the client this session's connection belongs to
_LOG = logging.getLogger(__name__)
_PROXIES = TrustedProxies.from_environment()
if bad_entries(os.environ.get(TRUSTED_PROXIES_SETTING)):
    _LOG.warning(
        "%s: ignoring entries that are not addresses or networks: %s",
        TRUSTED_PROXIES_SETTING,
        ", ".join(bad_entries(os.environ.get(TRUSTED_PROXIES_SETTING))),
    )
_MAX_SESSIONS = 20_000
# Streamlit session id → client, for the upload budget (bounded: the oldest entries go first).
_SESSION_CLIENTS: OrderedDict[str, str] = OrderedDict()
_LOCK = threading.Lock()


def trusted_proxies() -> TrustedProxies:
    return _PROXIES


def _read_client(session: str) -> str:
    peer = upkeep.script_run_peer()
    found = None if peer is None else client_of(peer.address, peer.forwarded_for, _PROXIES)
    return found or Visitor.alone(session).client


def visitor() -> Visitor:
    """This session as every limit counts it (read from the connection once per session)."""
    state = st.session_state
    session = state.get(SESSION_KEY)
    if session is None:  # not setdefault: its argument would draw a random id on every call
        session = state[SESSION_KEY] = uuid.uuid4().hex
    client = state.get(CLIENT_KEY)
    if client is None:
        client = state[CLIENT_KEY] = _read_client(session)
        _remember(client)
    return Visitor(client, session)


def client() -> str:
    """This session's client (its machine's address, or the session itself without one)."""
    return visitor().client


def _remember(client: str) -> None:
    run = upkeep.script_run_uploads()
    if run is None:
        return
    with _LOCK:
        _SESSION_CLIENTS[run.session_id] = client
        _SESSION_CLIENTS.move_to_end(run.session_id)
        while len(_SESSION_CLIENTS) > _MAX_SESSIONS:
            _SESSION_CLIENTS.popitem(last=False)


def client_of_session(session_id: str) -> str:
    """The client of Streamlit session ``session_id`` as its script runs recorded it; a
    session that never ran a script is its own client."""
    with _LOCK:
        found = _SESSION_CLIENTS.get(session_id)
    return found if found is not None else f"session:{session_id}"


def forget_session(session_id: str) -> None:
    with _LOCK:
        _SESSION_CLIENTS.pop(session_id, None)
