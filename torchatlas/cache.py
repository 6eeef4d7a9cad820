"""A small, thread-safe least-recently-used cache bounded by bytes, not by entries.

A server keeps one process for every visitor, so a cache keyed by what visitors type or share
(a link's shape and op chain, an uploaded image) must not grow with the number of distinct
inputs: ``lru_cache(maxsize=128)`` holds 128 entries whatever each one weighs, and one heavy
entry can weigh hundreds of megabytes. :class:`BoundedCache` keeps the sum of its entries' sizes
under ``max_bytes``, evicting the least recently used first; an entry larger than the whole
budget is handed back to the caller but never kept.

Sizes come from :func:`deep_size` of the entry, key and value together (or a function or
number the caller gives): the objects it holds, walked once each, plus the data buffers of
numpy arrays and torch tensors. A key counts too: it may be as large as the value.

>>> cache = BoundedCache(max_bytes=1 << 20)
>>> cache.get_or_compute("key", lambda: "value")
'value'
>>> @byte_lru_cache(max_bytes=1 << 20)
... def square(n: int) -> int:
...     return n * n
>>> square(4), square.cache.stats().hits
(16, 0)

Pure Python (no numpy, torch or streamlit import), so every room and notebook can use it.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

_MISSING = object()
# Objects every entry shares with the rest of the program: never part of an entry's weight.
_SHARED_TYPES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
)
# Immutable leaves with no references of their own. In a container holding only these, each
# item is summed without being tracked (a leaf referenced twice counts twice: an
# over-estimate, never an under-estimate), which keeps lists of numbers quick to measure.
_LEAF_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})
_FLOAT_SIZE = sys.getsizeof(0.0)
_SMALL_INT_LIMIT = 1 << 30  # ints of smaller magnitude are all one size (or smaller)
_SMALL_INT_SIZE = max(sys.getsizeof(_SMALL_INT_LIMIT - 1), sys.getsizeof(-_SMALL_INT_LIMIT + 1))


def _sizeof(value: Any) -> int:
    """``sys.getsizeof``, except that a non-ASCII string is priced with its UTF-8 copy.

    CPython caches that copy inside the string the first time C code asks for UTF-8 (JSON
    and protobuf encoders do, when a page sends the string), and ``getsizeof`` counts it from
    then on. Pricing it up front keeps a measured entry from growing after it is stored."""
    if type(value) is not str or value.isascii():
        return sys.getsizeof(value)
    bare = sys.getsizeof(value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass"))
    return max(sys.getsizeof(value), bare + len(value.encode("utf-8", "surrogatepass")) + 1)


def _leaves_size(items: Any) -> int | None:
    """The bytes of a container's items when every one is a leaf, else None. Floats and
    small ints (the bulk of listed tensor values) are priced by count, not one by one."""
    kinds = set(map(type, items))
    if not _LEAF_TYPES.issuperset(kinds):
        return None
    if kinds == {float}:
        return len(items) * _FLOAT_SIZE
    small_ints = kinds and kinds <= {int, bool}
    if small_ints and min(items) > -_SMALL_INT_LIMIT and max(items) < _SMALL_INT_LIMIT:
        return len(items) * _SMALL_INT_SIZE
    return sum(map(_sizeof, items) if str in kinds else map(sys.getsizeof, items))


def _buffer_bytes(value: Any, storages: set[tuple[int, int]]) -> int:
    """Bytes of a torch tensor's storage (counted once per storage), or 0 for anything else.

    ``sys.getsizeof`` of a tensor is only its Python wrapper; its data lives in the storage,
    which several views may share.
    """
    storage_of = getattr(value, "untyped_storage", None)
    if not callable(storage_of) or isinstance(value, type) or getattr(value, "is_meta", False):
        return 0  # a meta tensor has sizes but no data
    try:
        storage = storage_of()
        key = (int(storage.data_ptr()), int(storage.nbytes()))
    except Exception:  # a meta or sparse tensor has no readable storage: its wrapper only
        return 0
    if key in storages:
        return 0
    storages.add(key)
    return key[1]


def deep_size(value: Any) -> int:
    """Bytes held by ``value`` and everything it references, each object counted once.

    Walks containers (dict, list, tuple, set, frozenset), instance attributes (``__dict__``
    and ``__slots__``), numpy arrays' ``base`` (an owning array's ``getsizeof`` includes its
    data) and torch tensors' storages. Classes, modules and functions are shared with the
    rest of the program and are not counted. Iterative, so deep nesting cannot overflow the
    stack; linear in the number of objects reached. A container of numbers and strings only
    is summed in one pass, each item counted per reference (shared small ints included).
    """
    seen: set[int] = set()
    storages: set[tuple[int, int]] = set()
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _SHARED_TYPES):
            continue
        seen.add(id(item))
        try:
            total += _sizeof(item)
        except TypeError:  # objects that refuse __sizeof__: count a small wrapper
            total += 64
        if isinstance(item, str | bytes | bytearray | int | float | complex | bool):
            continue
        if isinstance(item, dict):
            items: Any = item.values()
            stack.extend(item.keys())  # keys are usually shared strings: tracked
        elif isinstance(item, list | tuple | set | frozenset):
            items = item
        else:
            items = None
        if items is not None:
            leaves = _leaves_size(items)
            if leaves is None:
                stack.extend(items)
            else:
                total += leaves
            continue
        total += _buffer_bytes(item, storages)
        base = getattr(item, "base", None)  # a numpy view: the array that owns the data
        if base is not None and getattr(item, "nbytes", None) is not None:
            stack.append(base)
        attributes = getattr(item, "__dict__", None)
        if isinstance(attributes, dict):
            stack.append(attributes)
        for klass in type(item).__mro__:
            for slot in getattr(klass, "__slots__", ()):
                if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                    stack.append(getattr(item, slot, None))
    return total


@dataclass(frozen=True)
class CacheStats:
    entries: int
    nbytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int
    refused: int  # entries larger than the whole budget, handed back but not kept


class _Flight:
    """One computation in progress, shared by every caller that asked for its key meanwhile."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.ok = False


class BoundedCache(Generic[K, V]):
    """A least-recently-used mapping whose entries' sizes sum to at most ``max_bytes``.

    Thread-safe: every read and write of the mapping holds one lock, and values are computed
    outside it (:meth:`get_or_compute`), so a slow computation never blocks other threads'
    hits. Two threads that miss the same key at once in :meth:`get_or_compute` may both compute
    it (the second value replaces the first); :meth:`get_or_compute_once` shares one
    computation between them. Values are shared, not copied: callers must not mutate them.
    """

    def __init__(self, max_bytes: int, *, sizeof: Callable[[Any], int] = deep_size) -> None:
        """``sizeof`` measures an entry, given as the pair ``(key, value)``."""
        if max_bytes < 0:
            raise ValueError("max_bytes must be at least 0")
        self.max_bytes = int(max_bytes)
        self._sizeof = sizeof
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()
        self._flights: dict[K, _Flight] = {}  # keys being computed by get_or_compute_once
        self._hits = self._misses = self._evictions = self._refused = 0

    # ------------------------------------------------------------------ reading
    def get(self, key: K, default: Any = None) -> Any:
        """The value for ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            entry = self._entries.get(key, _MISSING)
            if entry is _MISSING:
                self._misses += 1
                return default
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]  # type: ignore[index]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[K]:
        """A snapshot of the keys, least recently used first."""
        with self._lock:
            return iter(list(self._entries))

    @property
    def nbytes(self) -> int:
        """The sum of the kept entries' sizes (never above ``max_bytes``)."""
        with self._lock:
            return self._nbytes

    def size_of(self, key: K) -> int | None:
        """The size an entry was kept with, or None when it is not kept."""
        with self._lock:
            entry = self._entries.get(key)
            return None if entry is None else entry[1]

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                len(self._entries), self._nbytes, self.max_bytes,
                self._hits, self._misses, self._evictions, self._refused,
            )  # fmt: skip

    # ------------------------------------------------------------------ writing
    def put(self, key: K, value: V, nbytes: int | None = None) -> bool:
        """Keep ``value`` under ``key``, evicting the least recently used entries until it
        fits. ``nbytes`` defaults to the cache's ``sizeof((key, value))``. Returns False (and keeps
        nothing, dropping any older value for ``key``) when the value alone is larger than
        the whole budget."""
        size = int(self._sizeof((key, value)) if nbytes is None else nbytes)
        if size < 0:
            raise ValueError("an entry's size cannot be negative")
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]
            if size > self.max_bytes:
                self._refused += 1
                return False
            while self._entries and self._nbytes + size > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._nbytes -= evicted
                self._evictions += 1
            self._entries[key] = (value, size)
            self._nbytes += size
            return True

    def get_or_compute(
        self, key: K, compute: Callable[[], V], nbytes: Callable[[V], int] | None = None
    ) -> V:
        """The cached value for ``key``, or ``compute()`` kept under it (when it fits).

        ``compute`` runs outside the lock; an exception it raises propagates and nothing is
        kept. ``nbytes`` measures the new value (default: the cache's ``sizeof`` of the
        entry ``(key, value)``)."""
        value = self.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[no-any-return]
        value = compute()
        self.put(key, value, None if nbytes is None else nbytes(value))
        return value  # type: ignore[no-any-return]

    def get_or_compute_once(
        self,
        key: K,
        compute: Callable[[], V],
        *,
        keep: Callable[[V], bool] = lambda value: True,
        nbytes: Callable[[V], int] | None = None,
    ) -> V:
        """Like :meth:`get_or_compute`, but callers that miss the same key while it is being
        computed wait for that one computation and share its value (a class pressing the same
        button at once costs one computation). ``keep(value)`` decides whether the value is
        cached for later callers (a transient failure should not be); waiters get it either
        way. If ``compute`` raises, each waiter computes for itself."""
        value = self.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[no-any-return]
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if leader:
                flight = self._flights[key] = _Flight()
        assert flight is not None
        if not leader:
            flight.done.wait()
            if flight.ok:
                return flight.value  # type: ignore[no-any-return]
            return compute()
        try:
            value = compute()
            flight.value, flight.ok = value, True
            if keep(value):
                self.put(key, value, None if nbytes is None else nbytes(value))
            return value
        finally:
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()

    def pop(self, key: K, default: Any = None) -> Any:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return default
            self._nbytes -= entry[1]
            return entry[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._nbytes = 0


def byte_lru_cache(max_bytes: int, *, sizeof: Callable[[Any], int] = deep_size) -> Callable[[F], F]:
    """``functools.lru_cache`` with a byte budget: the arguments (hashable) are the key.

    The wrapped function gains ``.cache`` (its :class:`BoundedCache`) and ``.cache_clear()``.
    A call that raises caches nothing.
    """

    def decorate(function: F) -> F:
        cache: BoundedCache[Hashable, Any] = BoundedCache(max_bytes, sizeof=sizeof)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key: Hashable = (args, tuple(sorted(kwargs.items()))) if kwargs else args
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = function(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
