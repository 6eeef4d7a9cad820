"""What every room's ``state.py`` shares: its link, its one cache, its sandbox jobs and the
ready views its panels draw.

A room's state is declared once::

    ROOM = RoomState(link.LINK, cache_bytes=32 << 20)

and then:

- the link: :meth:`RoomState.start` and :meth:`RoomState.notice` on every run, widgets keyed
  with :meth:`RoomState.key`, and :meth:`RoomState.write_link` (the one name for keeping the
  address bar in step) with the values :meth:`RoomState.link_values` gives; a room whose link
  is not simply its fields' session keys passes its own ``link_values``;
- the cache: one :class:`~torchatlas.cache.BoundedCache` per room, shared by every session
  (:meth:`RoomState.cached`, one computation per key); a room that keeps several kinds of
  things in it names each a :class:`CachePart` (:meth:`RoomState.part`), with its own weight
  function, cleared on its own;
- the sandbox: a page runs a sandbox job only through :meth:`RoomState.job`, which warms the
  shared pool, gives the job this session's visitor (its place in the fair queue) and keeps
  the outcome unless it is a failure of the moment. The job itself (its name, parameters,
  reply type and limits) is the engine's: ``ask(visitor)`` calls it. The engine never picks a
  visitor, warms the pool or caches on its own;
- the ready views: :meth:`RoomState.ready` builds what a panel shows (HTML, a figure, a
  table) once per thing shown, language and theme, and keeps it in the same cache.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from components.i18n import language
from components.kit.link_state import RoomLink
from components.sandbox import sandbox_pool
from components.theme import is_dark
from components.visitor import visitor
from torchatlas.cache import BoundedCache, CacheStats, deep_size
from torchatlas.clients import Visitor
from torchatlas.links import LinkSpec

T = TypeVar("T")
# ``who`` for a job asked by this page's session (its visitor, read when the job is asked).
SESSION: Any = object()


def keep_unless_transient(outcome: Any) -> bool:
    """Whether a job's outcome may be kept for the next visitor: anything but a failure of the
    moment (a full line, a restart), which is shared with whoever asked meanwhile only."""
    worth_keeping = getattr(outcome, "worth_keeping", None)
    return True if worth_keeping is None else bool(worth_keeping)


def _always(value: Any) -> bool:
    return True


class CachePart:
    """One named kind of entry in a room's cache (reports, traces, drawings): its keys are
    ``(name, key)`` in the room's cache, so every kind shares the room's one byte budget, yet
    a kind can be read, measured and cleared on its own (a test swapping the sandbox clears
    the reports only)."""

    def __init__(
        self, cache: BoundedCache[Any, Any], name: str, nbytes: Callable[[Any], int] | None
    ) -> None:
        self._cache = cache
        self.name = name
        self._nbytes = nbytes

    def _key(self, key: Hashable) -> tuple[str, Hashable]:
        return (self.name, key)

    def get(self, key: Hashable, default: Any = None) -> Any:
        return self._cache.get(self._key(key), default)

    def __contains__(self, key: object) -> bool:
        return (self.name, key) in self._cache

    def __len__(self) -> int:
        """How many entries of this part the room's cache keeps."""
        return sum(1 for key in self._own_keys())

    def _own_keys(self) -> list[Hashable]:
        return [key for key in self._cache if type(key) is tuple and key and key[0] == self.name]

    def put(self, key: Hashable, value: Any) -> bool:
        size = None if self._nbytes is None else self._nbytes(value)
        return self._cache.put(self._key(key), value, size)

    def get_or_compute(
        self, key: Hashable, compute: Callable[[], T], *, keep: Callable[[T], bool] = _always
    ) -> T:
        """The kept value for ``key``, or ``compute()`` (callers asking at the same moment
        share one computation), kept when ``keep`` says so."""
        return self._cache.get_or_compute_once(
            self._key(key), compute, keep=keep, nbytes=self._nbytes
        )

    def stats(self) -> CacheStats:
        """The counters of the room's one cache (every part shares its budget)."""
        return self._cache.stats()

    def clear(self) -> None:
        """Drop this part's entries only."""
        for key in self._own_keys():
            self._cache.pop(key)


class RoomState:
    """One room's link, cache, sandbox jobs and ready views (see the module's text)."""

    def __init__(
        self,
        spec: LinkSpec,
        *,
        cache_bytes: int,
        sizeof: Callable[[Any], int] = deep_size,
        link_values: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.link = RoomLink(spec)
        self.cache: BoundedCache[Any, Any] = BoundedCache(cache_bytes, sizeof=sizeof)
        self._link_values = link_values

    # ------------------------------------------------------------------ the link
    def key(self, name: str) -> str:
        """The session key behind link field ``name`` (give it to the widget that edits it)."""
        return self.link.key(name)

    def start(self) -> None:
        """Every run, before the widgets: the session's first run reads the link."""
        self.link.start()

    def notice(self) -> None:
        """Say once which parts of the link were not used."""
        self.link.notice()

    def link_values(self) -> dict[str, Any]:
        """The values the link carries now: the room's own ``link_values`` when it gave one,
        else each field's session key."""
        if self._link_values is None:
            return self.link.values()
        return dict(self._link_values())

    def write_link(self) -> None:
        """Keep the address bar in step with :meth:`link_values` (the one way a room writes
        its link; also a widget's ``on_change``)."""
        self.link.write(self.link_values())

    # ------------------------------------------------------------------ the cache
    def part(self, name: str, *, nbytes: Callable[[Any], int] | None = None) -> CachePart:
        """A named kind of entry in the room's cache; ``nbytes`` weighs its values (default:
        the cache's own measure)."""
        return CachePart(self.cache, name, nbytes)

    def cached(
        self, key: Hashable, compute: Callable[[], T], *, keep: Callable[[T], bool] = _always
    ) -> T:
        """The room's kept value for ``key``, or ``compute()`` once for every session asking
        at the same moment; kept when ``keep(value)``."""
        return self.cache.get_or_compute_once(key, compute, keep=keep)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ the sandbox
    def job(
        self,
        key: Hashable | None,
        ask: Callable[[Visitor], T],
        *,
        keep: Callable[[T], bool] = keep_unless_transient,
        cache: CachePart | None = None,
        who: Visitor | str | None = SESSION,
    ) -> T:
        """The engine's sandbox job ``ask(visitor)`` for this session, kept under ``key`` in
        the room's cache (or in ``cache``, a part of it) unless ``keep`` refuses its outcome;
        ``key`` None runs it every time (a timing asked for again). ``who``: whose place
        in the sandbox's line (default: this session's visitor; None: nobody's, as at the
        server's start-up warm-up).
        Only a job that runs warms the shared pool and reads the visitor: a kept outcome is
        answered at the cost of one cache lookup (a rerun asks for every job it shows)."""

        def run() -> T:
            sandbox_pool()  # the first job waits for the pool's start, not the page
            return ask(visitor() if who is SESSION else who)

        if key is None:
            return run()
        if cache is not None:
            return cache.get_or_compute(key, run, keep=keep)
        return self.cached(key, run, keep=keep)

    @staticmethod
    def sandbox_health() -> Any:
        """The sandbox's :class:`~torchatlas.sandbox.SandboxHealth`, or None when it is down."""
        pool = sandbox_pool()
        if pool is None:
            return None
        try:
            return pool.health()
        except Exception:  # reported as "not available"
            return None

    # ------------------------------------------------------------------ ready views
    def ready(self, key: Hashable, build: Callable[[str, bool], T]) -> T:
        """What a panel draws for ``key``, in the reader's language and theme:
        ``build(lang, dark)`` once per thing shown, then kept."""
        lang, dark = language(), is_dark()
        return self.cached(("ready", key, lang, dark), lambda: build(lang, dark))
