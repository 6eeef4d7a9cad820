"""One upload budget for every upload widget in the app (``torchatlas.uploads`` on Streamlit).

Streamlit keeps every uploaded file's bytes in its ``MemoryUploadedFileManager`` until the
widget changes or the session ends, and its per-file ``maxUploadSize`` is the only limit. Here:

- :func:`install` hooks that manager (once per process, through components/upkeep.py, which
  owns every use of Streamlit's internals) so that every upload is charged to its session's,
  its client's and the server's budget *before* it is stored: a file over budget, or one the
  session's screen refuses at a glance (not an image, for the classification room), is stored
  as an empty stub with its refusal on record, and its bytes go with the request.
- :class:`SessionUploads` (from :func:`session_uploads`) lets a page list a widget's files,
  including those whose bytes were already dropped, and :meth:`SessionUploads.take` a file once
  the page has what it needs from it: the raw bytes leave Streamlit's manager and the
  ``UploadedFile`` object, and only what the page keeps is charged.
- Removing a file (×), a session's end (Streamlit's own cleanup), a session that vanishes
  without one (its object is collected, or it is no longer known to the runtime) all release it.

The client (one machine's address, ``components.visitor``) is what a person cannot multiply:
opening more tabs or sessions adds no budget. Uploads arrive on HTTP requests, outside any
script run, so the hook asks :func:`components.visitor.client_of_session`, which knows each
session whose script has said who it is (:func:`session_uploads` does, before any uploader is
drawn). A session no script run has named (a crafted request, or one the map forgot) counts
for :data:`UNNAMED_CLIENT`: all such sessions share one client's budget, never one each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import streamlit as st

from components import upkeep, visitor
from components.i18n import t
from components.upkeep import DeletedFile, UploadedFile
from torchatlas.uploads import (
    MB,
    BudgetExceeded,
    Refusal,
    UploadBudget,
    megabytes,
    own_client,
)

# Raw bytes are held only while in flight: once a page has looked at a file it holds a small
# decoded copy instead. So the budgets bound what arrives at once.
#
# What all visitors together may hold, so that uploads cannot take the app's memory: about a
# fifth of a large Community Cloud app (2.7 GB), which torch and a model already half fill.
PER_SERVER_BYTES = 512 * MB
# What one client (one machine's address: a laptop, or a whole school behind one NAT) may hold
# at once: half the server's. A class of 30 phones behind one address, each sending a photo at
# the same moment (a phone photo is 2-8 MB), fits with room to spare (30 × 8 MB = 240 MB); one
# laptop, however many sessions it opens, leaves the other half to everyone else.
PER_CLIENT_BYTES = PER_SERVER_BYTES // 2
# What one session (a tab, a phone) may hold within its client's: one file at the per-file limit
# (server.maxUploadSize, 121 MB) with room for the copies it keeps, so one phone of a school
# cannot take the whole school's share.
PER_SESSION_BYTES = PER_CLIENT_BYTES // 2
BUDGET = UploadBudget(PER_SESSION_BYTES, PER_SERVER_BYTES, per_client=PER_CLIENT_BYTES)
# The client of every session no script run has named (see the module's docstring).
UNNAMED_CLIENT = "unnamed"


class Screen(Protocol):
    """A cheap first look at a file's bytes: an error with ``code`` and ``params``, or None."""

    def __call__(self, data: bytes) -> Any: ...


@dataclass(frozen=True)
class Entry:
    """One file a widget lists: its bytes (``file``) while the server still has them, and its
    refusal if it was not kept."""

    file_id: str
    name: str
    size: int
    file: UploadedFile | None
    refusal: Refusal | None


_screens: dict[str, tuple[str, Screen]] = {}  # session → (source name, screen)


def per_file_mb() -> int:
    """Streamlit's per-file limit (``server.maxUploadSize``, in MB)."""
    return int(st.get_option("server.maxUploadSize"))


def client_of(session_id: str) -> str:
    """The client Streamlit session ``session_id``'s uploads count for: the one its script
    run recorded, or :data:`UNNAMED_CLIENT` when none did."""
    found = visitor.client_of_session(session_id)
    return UNNAMED_CLIENT if found == own_client(session_id) else found


def _alive(session_id: str) -> bool:
    """Whether the server still knows the session (connected, or kept for a reconnect)."""
    return upkeep.session_known(session_id)


def sweep(manager: object | None = None) -> None:
    """Release the budget and Streamlit's stored files of sessions that vanished without ending
    (Streamlit drops a disconnected session after a while without cleaning up its uploads).

    Runs where uploads arrive (the server's event loop, which owns the session registry), so
    memory is reclaimed before more is taken.
    """
    gone = set(BUDGET.sweep(_alive))
    gone |= {session for session in upkeep.stored_upload_sessions(manager) if not _alive(session)}
    for session in gone:
        _screens.pop(session, None)
        visitor.forget_session(session)
        remove_session = getattr(manager, "remove_session_files", None)
        if remove_session is not None:
            remove_session(session)


def _admit(manager: object) -> Callable[[str, Any], bool]:
    """What the upload manager asks before it stores a file: sweep, screen, then charge."""

    def admit(session_id: str, file: Any) -> bool:
        sweep(manager)
        refusal = None
        source, screen = _screens.get(session_id, ("", None))
        problem = screen(file.data) if screen is not None else None
        if problem is not None:
            refusal = Refusal(problem.code, dict(problem.params), file.name, 0, source)
        else:
            try:
                BUDGET.charge(session_id, file.file_id, len(file.data), client_of(session_id))
            except BudgetExceeded as error:
                refusal = Refusal(error.code, error.params, file.name, len(file.data))
        if refusal is None:
            return True
        BUDGET.refuse(session_id, file.file_id, refusal)
        return False

    return admit


def _session_removed(session_id: str) -> None:
    BUDGET.release_session(session_id)
    _screens.pop(session_id, None)
    visitor.forget_session(session_id)


def install(manager: object) -> bool:
    """Charge every upload that ``manager`` stores to :data:`BUDGET` first; idempotent.

    Returns False (and changes nothing) for a manager without ``add_file``/``remove_file``:
    pages then still charge files when they first see them.
    """
    return upkeep.hook_upload_manager(
        manager,
        owner=BUDGET,
        admit=_admit(manager),
        removed=lambda session_id, file_id: BUDGET.release(session_id, file_id),
        session_removed=_session_removed,
    )


class SessionUploads:
    """The current session's view of the budget, for one page run."""

    def __init__(self, session_id: str, manager: object | None) -> None:
        self.session_id = session_id
        self.manager = manager

    def entries(self, key: str) -> list[Entry]:
        """Every file the widget with ``key`` lists, in order, with or without its bytes.

        Reads the widget's value from ``st.session_state`` (call it after the widget): unlike the
        widget's return value, that keeps files whose bytes are gone, so a page can show what it
        kept of them.
        """
        value = st.session_state.get(key)
        items = value if isinstance(value, list) else [] if value is None else [value]
        entries = []
        for item in items:
            if not isinstance(item, UploadedFile | DeletedFile):
                continue
            refusal = BUDGET.refusal(self.session_id, item.file_id)
            if isinstance(item, UploadedFile) and refusal is None:
                entries.append(Entry(item.file_id, item.name, item.size, item, None))
                continue
            entry = Entry(item.file_id, refusal.name if refusal else "", 0, None, refusal)
            if isinstance(item, UploadedFile) and item.size:  # refused, yet stored (no hook)
                self.take(replace(entry, file=item), keep_bytes=0)
                BUDGET.refuse(self.session_id, item.file_id, refusal)
            entries.append(entry)
        return entries

    def admit(self, entry: Entry) -> Refusal | None:
        """Charge a file's raw bytes if nothing did yet (a manager without the hook); a refusal
        when that does not fit (the file is then dropped like any other)."""
        try:
            nbytes = max(entry.size, self.held(entry))
            BUDGET.charge(self.session_id, entry.file_id, nbytes, client_of(self.session_id))
        except BudgetExceeded as error:
            refusal = Refusal(error.code, error.params, entry.name, entry.size)
            self.take(entry, keep_bytes=0)
            BUDGET.refuse(self.session_id, entry.file_id, refusal)
            return refusal
        return None

    def held(self, entry: Entry) -> int:
        return BUDGET.held(self.session_id, entry.file_id)

    def take(self, entry: Entry, keep_bytes: int) -> Refusal | None:
        """The page has what it needs from ``entry``: drop the raw bytes from Streamlit's manager
        and from the ``UploadedFile`` (which shares them), and charge ``keep_bytes`` instead.

        Returns a refusal when even what the page keeps does not fit (it should then drop it).
        """
        upkeep.remove_stored_file(self.manager, self.session_id, entry.file_id)
        if entry.file is not None:
            # A BytesIO over the upload's bytes, which Streamlit keeps in the session state until
            # the next rerun. Emptied (not closed: it stays readable, as b""), it lets them go;
            # on a shared buffer this costs nothing.
            entry.file.seek(0)
            entry.file.truncate(0)
        try:
            BUDGET.charge(self.session_id, entry.file_id, keep_bytes, client_of(self.session_id))
        except BudgetExceeded as error:
            BUDGET.release(self.session_id, entry.file_id)
            return Refusal(error.code, error.params, entry.name, entry.size)
        return None

    def forget(self, keep: Iterable[str], known: Iterable[str]) -> None:
        """Release the charges of ``known`` file ids that are no longer in ``keep`` (the visitor
        removed them from the widget)."""
        keep = set(keep)
        for file_id in known:
            if file_id not in keep:
                BUDGET.release(self.session_id, file_id)


def screen_uploads(session_id: str, screen: Screen, source: str = "image") -> None:
    """From now on, every file ``session_id`` uploads is first shown to ``screen`` (where it
    arrives, before it is stored); ``source`` names the screen's error codes."""
    _screens[session_id] = (source, screen)


def session_uploads(screen: Screen | None = None, source: str = "image") -> SessionUploads:
    """Install the budget on this server's upload manager and return this session's view.

    ``screen``: this session's first look at every file it uploads from now on (run where the
    upload arrives, so it must be cheap: a few leading bytes); ``source`` names its error codes.
    """
    run = upkeep.script_run_uploads()
    if run is None:  # bare mode (no script run): nothing to hold
        return SessionUploads("", None)
    # Who this session is, recorded for the upload hook before any uploader is drawn: its
    # uploads count for its client, however many sessions that client opens.
    visitor.visitor()
    install(run.manager)  # from now on every upload sweeps first, on the server's event loop
    if screen is not None:
        screen_uploads(run.session_id, screen, source)
    if run.session is not None:  # the server's session object (not AppTest's stand-in)
        BUDGET.watch(run.session_id, run.session)
    return SessionUploads(run.session_id, run.manager)


def refusal_text(refusal: Refusal, errors: Callable[[str, dict], str]) -> str:
    """The translated reason: the budget's own messages, or ``errors(code, params)`` for the
    screen's codes (the page knows its table)."""
    if refusal.source == "budget":
        return t(f"app.uploads.errors.{refusal.code}", **refusal.params)
    return errors(refusal.code, refusal.params)


def limits_mb() -> dict[str, str]:
    """The limits for an uploader's help text: per file, per visitor."""
    return {"limit_mb": str(per_file_mb()), "session_mb": megabytes(BUDGET.per_session)}
