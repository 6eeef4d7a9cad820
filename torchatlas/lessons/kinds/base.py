"""What a question kind is: the one declaration lessons, class mode, the CSV, the author page
and the load tool read about it (:data:`torchatlas.lessons.kinds.KINDS` holds them all).

A kind says how its question is read from a lesson file and written back (``parse`` /
``export``: a round trip is exact), how a student answers it (``answered_with``: picking one of
its ``options``, or writing ``code`` that torch runs in the sandbox and the kind grades), and
which TOML keys it owns. Its texts are translation keys under ``lessons.kind.<name>.*``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from torchatlas.lessons.parsing import LANGUAGES

OPTION, CODE = "option", "code"  # how a student answers
TEXT_KEYS = ("prompt", "explain")


class AnyQuestion(Protocol):
    """What every kind's question has: where a page and class mode read it alike."""

    kind: str
    prompt: dict[str, str]
    explain: dict[str, str]
    options: tuple[str, ...]  # empty for a question answered with code
    answer: int | None  # the right option's index; None for a question answered with code


@dataclass(frozen=True)
class Context:
    """How a lesson is being read. ``languages``: the ones it is written in. ``verify``: run
    what only the sandbox may run to check the lesson (a teacher's lesson on saving and on
    loading; the repository's own lessons are checked by the test suite instead). ``visitor``
    and ``pool``: whose turn in the sandbox's fair queue, and on which pool (tests).
    ``on_queued(place)``: told each sandbox job's place in line while it waits (the author
    page shows it while a save is checked)."""

    languages: tuple[str, ...] = LANGUAGES
    verify: bool = False
    visitor: Any = None
    pool: Any = None
    on_queued: Callable[[int], None] | None = None


@dataclass(frozen=True)
class QuestionKind:
    """One kind of question (see the module docstring)."""

    name: str
    answered_with: str  # OPTION or CODE
    keys: frozenset[str]  # the TOML keys of its question table, besides "kind" and languages
    parse: Callable[[dict[str, Any], str, Context], AnyQuestion]
    export: Callable[[Any], dict[str, Any]]  # its table without the language texts
