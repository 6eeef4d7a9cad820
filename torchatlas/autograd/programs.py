"""Checked programs by text, cached: :func:`parse` is the room's entry point.

A page, a notebook or a classroom traces the same few programs over and over, and a checked
tree is only read afterwards, so accepted programs are kept, by their text. The cache is
bounded by bytes, as its keys are whatever visitors type, and an entry is priced with the
interpreter's plans already built on its nodes (closures the generic size walk does not
follow): they are built before the entry is stored, so nothing grows after it was measured.
A refusal is never cached.
"""

from __future__ import annotations

import dataclasses

from torchatlas.autograd.parser import MAX_SOURCE, Program, check
from torchatlas.autograd.run import plan_program
from torchatlas.cache import BoundedCache, deep_size

__all__ = ["PARSED_BYTES", "parse", "parse_uncached"]

PARSED_BYTES = 8 << 20


def _entry_bytes(entry: tuple[str, Program]) -> int:
    return deep_size(entry) + entry[1].plan_bytes


PARSED: BoundedCache[str, Program] = BoundedCache(PARSED_BYTES, sizeof=_entry_bytes)


def parse(text: str) -> Program:
    """Check ``text`` against the allow list (:func:`~torchatlas.autograd.parser.check`:
    :class:`~torchatlas.autograd.errors.ProgramRefused` on the first thing outside it, nothing
    evaluated) and build its plans; the same text again is read from the cache."""
    if len(text) > MAX_SOURCE:  # refused before a long text is hashed as a key
        check(text)
    return PARSED.get_or_compute(text, lambda: _planned(check(text)))


def parse_uncached(text: str) -> Program:
    """:func:`parse` without the cache, for a process that runs one program and ends (a
    sandbox child): pricing a cache entry costs more there than the check it would save, and
    the run builds each plan as it first needs it."""
    return check(text)


def _planned(program: Program) -> Program:
    return dataclasses.replace(program, plan_bytes=plan_program(program))
