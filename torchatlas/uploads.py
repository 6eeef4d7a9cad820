"""Budgets for uploaded bytes: per client, per session within it, and per server process.

A browser session costs nothing (every websocket connection is a new one), so the bound that
binds a person is the **client**'s (one machine's address, :mod:`torchatlas.clients`): every
session of one client draws on one budget. Within it, each session has its own smaller bound
(one tab or phone of a school's shared address cannot take the whole school's share), and all
clients together have the server's.

One :class:`UploadBudget` per process holds a ledger of what every session keeps of its uploads,
keyed by ``(session, file)``, with the client each session belongs to. An upload is charged
*before* its bytes are kept, and refused when it would take its session, its client or the
whole server over budget; the charge shrinks when the
page replaces the raw file by what it actually needs (a small decoded copy), and goes away when
the file is removed or the session ends. Sessions that end without saying so are released too:
:meth:`UploadBudget.watch` ties a session to an object that lives as long as it does (released
when that object is garbage-collected), and :meth:`UploadBudget.sweep` drops every session a
caller no longer knows.

Pure Python and thread-safe (uploads arrive on the server's event loop, pages run on script
threads); no Streamlit. ``components/uploads.py`` wires it to Streamlit's uploaded-file manager.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from torchatlas.i18n import DEFAULT_LANGUAGE, translate

MB = 1_000_000


def megabytes(nbytes: int) -> str:
    """``nbytes`` in MB for a message: one decimal below 10 MB, none above."""
    value = nbytes / MB
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


class BudgetCode(StrEnum):
    SESSION_BUDGET = "session_budget"
    CLIENT_BUDGET = "client_budget"
    SERVER_BUDGET = "server_budget"


def own_client(session: str) -> str:
    """The client of a session no one named a client for: the session itself (as
    :meth:`torchatlas.clients.Visitor.alone` names it)."""
    return f"session:{session}"


class BudgetExceeded(Exception):
    """An upload that would take a session or the server over budget, with a stable code.

    Its text is in the app's translation table (``app.uploads.errors.<code>``), shared by every
    room with an upload widget; ``str()`` is the English one, for a notebook.
    """

    def __init__(self, code: BudgetCode, **params: object) -> None:
        self.code = code
        self.params = params
        super().__init__(translate(f"app.uploads.errors.{code}", DEFAULT_LANGUAGE, **params))

    @property
    def message(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Refusal:
    """Why a file was not kept: a stable ``code`` with its ``params`` (for a translated message),
    the file's name and size. ``source`` says whose code it is: ``"budget"`` (this module's) or
    the screen that looked at the file (e.g. ``"image"``)."""

    code: str
    params: dict[str, object] = field(default_factory=dict)
    name: str = ""
    size: int = 0
    source: str = "budget"


class UploadBudget:
    """Bytes kept per session, per client and per server, charged before they are kept.

    ``per_session``: the most one session may hold at once; ``per_client``: the most all the
    sessions of one client may hold together (default: no bound beyond the server's);
    ``per_server``: the most everyone together may hold. Each charge has a key (a file id)
    within its session; charging a key again replaces its amount, and only growth is checked
    against the limits. A session belongs to the client its charges name (default: its own,
    :func:`own_client`); a charge naming another client moves what the session holds there.
    """

    def __init__(self, per_session: int, per_server: int, per_client: int | None = None) -> None:
        per_client = per_server if per_client is None else per_client
        if per_session <= 0 or per_server <= 0 or per_client <= 0:
            raise ValueError("budgets must be positive")
        self.per_session = per_session
        self.per_client = per_client
        self.per_server = per_server
        self._held: dict[str, dict[str, int]] = {}
        self._session_totals: dict[str, int] = {}
        self._client_of: dict[str, str] = {}  # session → its client, while it holds bytes
        self._client_totals: dict[str, int] = {}
        self._total = 0
        self._refusals: dict[str, dict[str, Refusal]] = {}
        self._watched: dict[str, weakref.finalize] = {}
        # Filled by garbage-collection callbacks, which may run on any thread at any moment (also
        # while this thread holds the lock): appending to a deque needs no lock.
        self._vanished: deque[str] = deque()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ charges

    def charge(self, session: str, key: str, nbytes: int, client: str | None = None) -> None:
        """Hold ``nbytes`` for ``key`` in ``session`` of ``client``, replacing what the key held
        before. ``client`` None: the client the session already belongs to, else its own.

        Raises :class:`BudgetExceeded` (``session_budget``, ``client_budget`` or
        ``server_budget``) and changes nothing when the growth does not fit.
        """
        nbytes = max(0, int(nbytes))
        with self._lock:
            self._drain()
            held = self._held.get(session, {})
            growth = nbytes - held.get(key, 0)
            used = self._session_totals.get(session, 0)
            before = self._client_of.get(session)
            client = client if client is not None else before or own_client(session)
            # A session that moves to another client takes what it holds with it.
            client_used = self._client_totals.get(client, 0) + (used if before != client else 0)
            if growth > 0:
                sizes = {"size_mb": megabytes(nbytes)}
                if used + growth > self.per_session:
                    raise BudgetExceeded(
                        BudgetCode.SESSION_BUDGET,
                        limit_mb=megabytes(self.per_session),
                        used_mb=megabytes(used),
                        **sizes,
                    )
                if client_used + growth > self.per_client:
                    raise BudgetExceeded(
                        BudgetCode.CLIENT_BUDGET,
                        limit_mb=megabytes(self.per_client),
                        used_mb=megabytes(client_used),
                        **sizes,
                    )
                if self._total + growth > self.per_server:
                    raise BudgetExceeded(
                        BudgetCode.SERVER_BUDGET,
                        limit_mb=megabytes(self.per_server),
                        used_mb=megabytes(used),
                        **sizes,
                    )
            if before is not None and before != client:
                self._add_to_client(before, -used)
            self._held.setdefault(session, {})[key] = nbytes
            self._session_totals[session] = used + growth
            self._client_of[session] = client
            self._client_totals.pop(client, None)
            self._add_to_client(client, client_used + growth)
            self._total += growth

    def release(self, session: str, key: str) -> int:
        """Forget ``key`` (its charge and any refusal); returns the bytes freed."""
        with self._lock:
            self._drain()
            return self._release(session, key)

    def release_session(self, session: str) -> int:
        """Forget everything ``session`` holds; returns the bytes freed."""
        with self._lock:
            self._drain()
            return self._release_session(session)

    def held(self, session: str, key: str) -> int:
        with self._lock:
            return self._held.get(session, {}).get(key, 0)

    def used(self, session: str | None = None) -> int:
        """Bytes held by ``session``, or by every session together when None."""
        with self._lock:
            self._drain()
            return self._total if session is None else self._session_totals.get(session, 0)

    def used_by_client(self, client: str) -> int:
        """Bytes held by every session of ``client`` together."""
        with self._lock:
            self._drain()
            return self._client_totals.get(client, 0)

    def client_of(self, session: str) -> str | None:
        """The client ``session``'s bytes are counted for; None when it holds nothing."""
        with self._lock:
            self._drain()
            return self._client_of.get(session)

    def clients(self) -> list[str]:
        """Clients whose sessions hold bytes."""
        with self._lock:
            self._drain()
            return sorted(self._client_totals)

    def sessions(self) -> list[str]:
        """Sessions with a charge or a refusal on record."""
        with self._lock:
            self._drain()
            return sorted(set(self._held) | set(self._refusals))

    # ------------------------------------------------------------------ refusals

    def refuse(self, session: str, key: str, refusal: Refusal) -> None:
        """Remember why ``key`` was not kept, so the page can say so; drops any charge."""
        with self._lock:
            self._drain()
            self._release(session, key)
            self._refusals.setdefault(session, {})[key] = refusal

    def refusal(self, session: str, key: str) -> Refusal | None:
        with self._lock:
            return self._refusals.get(session, {}).get(key)

    # ------------------------------------------------------------------ sessions that vanish

    def watch(self, session: str, owner: object) -> None:
        """Release ``session`` once ``owner`` (an object that lives exactly as long as the
        session, e.g. the server's session object) is garbage-collected."""
        with self._lock:
            known = self._watched.get(session)
            if known is not None and known.alive:
                return
            self._watched[session] = weakref.finalize(owner, self._vanished.append, session)

    def sweep(self, alive: Callable[[str], bool]) -> list[str]:
        """Release every session for which ``alive(session)`` is False; returns them."""
        with self._lock:
            self._drain()
            candidates = set(self._held) | set(self._refusals)
        gone = [session for session in sorted(candidates) if not alive(session)]
        with self._lock:
            for session in gone:
                self._release_session(session)
        return gone

    # ------------------------------------------------------------------ internals (lock held)

    def _add_to_client(self, client: str, nbytes: int) -> None:
        total = self._client_totals.get(client, 0) + nbytes
        if total:
            self._client_totals[client] = total
        else:
            self._client_totals.pop(client, None)

    def _forget_if_empty(self, session: str) -> None:
        """A session that holds no key is forgotten with its client (a key held at 0 bytes
        keeps it: the page may charge it again)."""
        if not self._held.get(session, True):
            self._held.pop(session, None)
        if session not in self._held:
            self._session_totals.pop(session, None)
            client = self._client_of.pop(session, None)
            if client is not None:
                self._add_to_client(client, 0)  # drops a client left at zero

    def _release(self, session: str, key: str) -> int:
        self._refusals.get(session, {}).pop(key, None)
        freed = self._held.get(session, {}).pop(key, 0)
        if freed:
            self._session_totals[session] -= freed
            self._add_to_client(self._client_of[session], -freed)
            self._total -= freed
        self._forget_if_empty(session)
        if not self._refusals.get(session, True):
            self._refusals.pop(session, None)
        return freed

    def _release_session(self, session: str) -> int:
        freed = sum(self._held.pop(session, {}).values())
        client = self._client_of.get(session)
        if client is not None:
            self._add_to_client(client, -freed)
        self._forget_if_empty(session)
        self._refusals.pop(session, None)
        finalizer = self._watched.pop(session, None)
        if finalizer is not None:
            finalizer.detach()
        self._total -= freed
        return freed

    def _drain(self) -> None:
        while self._vanished:
            self._release_session(self._vanished.popleft())
