"""The byte-bounded LRU cache (torchatlas.cache): sizes, eviction by bytes, threads."""

from __future__ import annotations

import random
import sys
import threading

import numpy as np
import pytest
import torch

from torchatlas.cache import BoundedCache, byte_lru_cache, deep_size

# ---------------------------------------------------------------------------- deep_size


def test_deep_size_counts_what_an_entry_holds() -> None:
    text = "x" * 10_000
    assert deep_size(text) == sys.getsizeof(text)
    assert deep_size([text]) == sys.getsizeof([text]) + sys.getsizeof(text)
    # Numbers and strings in a container are counted per reference: an over-estimate.
    assert deep_size([text, text]) >= 2 * sys.getsizeof(text)
    assert deep_size([0.5] * 1000) >= 1000 * sys.getsizeof(0.5)
    assert deep_size(list(range(1000))) >= sum(map(sys.getsizeof, range(1000)))
    assert deep_size([2**100, -(2**40), True, None]) >= sys.getsizeof(2**100)
    row = [text]
    assert deep_size([row, row]) < 2 * deep_size(row)  # one object, counted once
    nested = {"a": [[1.5] * 1000], "b": (text,)}
    assert deep_size(nested) > sys.getsizeof(text) + 1000 * 8


def test_a_string_sent_to_the_browser_does_not_outgrow_its_measure() -> None:
    # Encoding a non-ASCII string to UTF-8 (as protobuf does when a page sends it) caches a
    # copy inside the string; deep_size prices that copy from the start.
    from streamlit.proto.Markdown_pb2 import Markdown

    text = "저장소와 stride " * 500
    measured = deep_size(text)
    Markdown(body=text).SerializeToString()
    assert sys.getsizeof(text) <= measured
    assert deep_size("ascii only") == sys.getsizeof("ascii only")


def test_deep_size_counts_array_and_tensor_data() -> None:
    array = np.zeros(100_000, dtype=np.float64)
    assert deep_size(array) >= array.nbytes
    assert deep_size(array[::2]) >= array.nbytes  # a view keeps its base alive
    tensor = torch.zeros(100_000, dtype=torch.float64)
    assert deep_size(tensor) >= 800_000
    views = [tensor, tensor[1:], tensor.view(100, 1000)]
    assert 800_000 <= deep_size(views) < 2 * 800_000  # one storage behind three tensors
    assert deep_size(torch.empty(1 << 30, device="meta")) < 10_000  # no data at all


def test_deep_size_of_objects_cycles_and_deep_nesting() -> None:
    class Holder:
        def __init__(self) -> None:
            self.payload = "y" * 50_000
            self.me = self

    class Slotted:
        __slots__ = ("payload",)

        def __init__(self) -> None:
            self.payload = "z" * 50_000

    assert deep_size(Holder()) > 50_000
    assert deep_size(Slotted()) > 50_000
    deep: list = []
    for _ in range(200_000):  # far past the recursion limit: the walk is iterative
        deep = [deep]
    assert deep_size(deep) >= 200_000 * sys.getsizeof([])
    assert deep_size(deep_size) < 1_000  # functions and classes are shared, not counted


# ---------------------------------------------------------------------------- BoundedCache


def test_evicts_least_recently_used_by_bytes() -> None:
    cache: BoundedCache[str, str] = BoundedCache(100)
    assert cache.put("a", "A", nbytes=40)
    assert cache.put("b", "B", nbytes=40)
    assert cache.get("a") == "A"  # "a" is now the most recent
    assert cache.put("c", "C", nbytes=40)  # 120 > 100: the least recent ("b") goes
    assert "b" not in cache and cache.get("a") == "A" and cache.get("c") == "C"
    assert cache.nbytes == 80
    assert cache.put("d", "D", nbytes=100)  # needs the whole budget: everything else goes
    assert list(cache) == ["d"] and cache.nbytes == 100
    stats = cache.stats()
    assert stats.evictions == 3 and stats.entries == 1


def test_many_small_entries_fit_where_few_big_ones_do() -> None:
    cache: BoundedCache[int, int] = BoundedCache(1000)
    for key in range(100):
        cache.put(key, key, nbytes=10)
    assert len(cache) == 100  # an entry count would not tell these apart from big ones
    cache.put(-1, -1, nbytes=500)
    assert len(cache) == 51 and cache.nbytes == 1000


def test_an_entry_larger_than_the_budget_is_not_kept() -> None:
    cache: BoundedCache[str, str] = BoundedCache(100)
    cache.put("small", "s", nbytes=10)
    cache.put("key", "old", nbytes=10)
    assert not cache.put("key", "huge", nbytes=101)
    assert "key" not in cache  # the older value is dropped, not served stale
    assert cache.get("small") == "s" and cache.nbytes == 10  # others are untouched
    assert cache.stats().refused == 1
    assert cache.get_or_compute("big", lambda: "v" * 1000) == "v" * 1000  # handed back
    assert "big" not in cache


def test_replacing_a_key_updates_its_bytes() -> None:
    cache: BoundedCache[str, str] = BoundedCache(100)
    cache.put("k", "one", nbytes=60)
    cache.put("k", "two", nbytes=30)
    assert cache.nbytes == 30 and cache.size_of("k") == 30 and cache.get("k") == "two"
    assert cache.pop("k") == "two" and cache.nbytes == 0


def test_default_size_is_measured() -> None:
    cache: BoundedCache[str, np.ndarray] = BoundedCache(1_000_000)
    cache.put("a", np.zeros(100_000))  # 800 kB
    cache.put("b", np.zeros(50_000))  # 400 kB: "a" must go
    assert "a" not in cache and "b" in cache
    assert 400_000 <= cache.nbytes <= 1_000_000


def test_the_key_counts_too() -> None:
    cache: BoundedCache[tuple, int] = BoundedCache(1_000_000)
    cache.put(("k" * 100_000,), 1)  # a tiny value under a 100 kB key
    assert cache.nbytes >= 100_000


def test_get_or_compute_computes_once_and_caches_no_failure() -> None:
    calls: list[int] = []
    cache: BoundedCache[int, int] = BoundedCache(10_000)

    def compute() -> int:
        calls.append(1)
        return 42

    assert cache.get_or_compute(1, compute) == 42
    assert cache.get_or_compute(1, compute) == 42
    assert len(calls) == 1

    def fail() -> int:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cache.get_or_compute(2, fail)
    assert 2 not in cache


def test_random_operations_never_exceed_the_budget() -> None:
    rng = random.Random(7)
    cache: BoundedCache[int, int] = BoundedCache(5_000)
    for _ in range(20_000):
        key = rng.randrange(200)
        if rng.random() < 0.6:
            cache.put(key, key, nbytes=rng.choice([0, 1, 50, 700, 4_999, 5_000, 5_001]))
        elif rng.random() < 0.9:
            cache.get(key)
        else:
            cache.pop(key)
        assert cache.nbytes <= 5_000
    assert cache.nbytes == sum(cache.size_of(key) or 0 for key in cache)


def test_threads_share_one_cache_safely() -> None:
    cache: BoundedCache[int, bytes] = BoundedCache(200_000)
    errors: list[BaseException] = []
    peaks: list[int] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(3_000):
                key = rng.randrange(100)
                value = cache.get_or_compute(key, lambda k=key: bytes(1_000 * (k % 17 + 1)))
                assert len(value) == 1_000 * (key % 17 + 1)  # never another key's value
                if rng.random() < 0.1:
                    cache.pop(rng.randrange(100))
                peaks.append(cache.nbytes)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)
    assert not errors, errors
    assert max(peaks) <= 200_000
    assert cache.nbytes == sum(cache.size_of(key) or 0 for key in cache)
    stats = cache.stats()
    assert stats.hits + stats.misses == 8 * 3_000


def test_decorator_keys_on_arguments() -> None:
    calls: list[tuple] = []

    @byte_lru_cache(max_bytes=100_000)
    def make(n: int, *, fill: str = "a") -> str:
        calls.append((n, fill))
        return fill * n

    assert make(3) == "aaa" and make(3) == "aaa" and make(3, fill="b") == "bbb"
    assert calls == [(3, "a"), (3, "b")]
    make(200_000)  # bigger than the budget: returned, not kept
    make(200_000)
    assert calls.count((200_000, "a")) == 2
    assert make.cache.nbytes <= 100_000  # type: ignore[attr-defined]
    make.cache_clear()  # type: ignore[attr-defined]
    assert len(make.cache) == 0  # type: ignore[attr-defined]


def test_concurrent_misses_share_one_computation() -> None:
    """Thirty callers missing the same key at once: one computation, thirty equal answers."""
    cache: BoundedCache[str, list[int]] = BoundedCache(max_bytes=1 << 20)
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def compute() -> list[int]:
        calls.append(1)
        started.set()
        release.wait(10)
        return [1, 2, 3]

    results: list[list[int]] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_or_compute_once("k", compute)))
        for _ in range(30)
    ]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1
    assert len(results) == 30 and all(result is results[0] for result in results)
    assert cache.get("k") == [1, 2, 3]


def test_a_value_not_worth_keeping_is_shared_but_not_cached() -> None:
    cache: BoundedCache[str, str] = BoundedCache(max_bytes=1 << 20)
    assert cache.get_or_compute_once("k", lambda: "busy", keep=lambda v: v != "busy") == "busy"
    assert "k" not in cache
    assert cache.get_or_compute_once("k", lambda: "done", keep=lambda v: v != "busy") == "done"
    assert cache.get("k") == "done"


def test_a_failed_computation_lets_each_caller_try_again() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_bytes=1 << 20)

    def fail() -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.get_or_compute_once("k", fail)
    assert cache.get_or_compute_once("k", lambda: 7) == 7
