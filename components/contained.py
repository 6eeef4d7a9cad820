"""What every room shares around visitor-driven computation: one card for a job that has no
result, one guard that turns any unexpected exception into an explained card, and strict
parsing of numbers read from links.

A room's ``state.py`` runs its engine through :func:`torchatlas.sandboxed.run_room_job` with
the page's :func:`components.visitor.visitor` (its client and session: its place in the
sandbox's fair queue); its panels show a failure with :func:`failure_card`; ``app.py`` runs
every page inside :func:`page_guard` and fragments use :func:`guarded`.

>>> link_int("12", low=0, high=99)  # doctest: +SKIP
12
>>> link_int("²", low=0, high=99) is None  # doctest: +SKIP
True
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import streamlit as st

from components.i18n import t
from torchatlas.links import strict_int
from torchatlas.sandboxed import JobFailure

LOG = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
# The last few unexpected errors (kind and first words only: no frames are kept), for the test
# suite, which fails any page run that needed this wall.
RECENT_UNEXPECTED: collections.deque[str] = collections.deque(maxlen=16)


def link_int(text: object, *, low: int, high: int) -> int | None:
    """A whole number from a link or a box (:func:`torchatlas.links.strict_int`: ASCII
    digits only, at most 18 of them, within ``[low, high]``); None for anything else."""
    return strict_int(text, low=low, high=high)


def failure_text(failure: JobFailure) -> tuple[str, str]:
    """The title and the cause-and-fix sentence for a job without a result, translated."""
    kind = failure.kind
    return t(f"app.contained.{kind}.title"), t(f"app.contained.{kind}.fix")


def failure_card(failure: JobFailure) -> None:
    """Show why a computation has no result, and what to do, as one error card."""
    title, fix = failure_text(failure)
    st.error(f"**{title}**  \n{fix}", icon=":material/block:")


def _unexpected_card(exc: BaseException) -> None:
    LOG.error("unexpected error while drawing a page", exc_info=exc)
    RECENT_UNEXPECTED.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    st.error(
        f"**{t('app.unexpected.title')}**  \n{t('app.unexpected.fix')}", icon=":material/report:"
    )


@contextlib.contextmanager
def page_guard() -> Iterator[None]:
    """Run a page: an exception nothing else caught becomes an explained card (what happened,
    that the visitor's inputs are safe in the link, how to report it), never Streamlit's error
    screen or a traceback. Streamlit's own rerun and stop signals pass through (they are not
    ``Exception``)."""
    try:
        yield
    except Exception as exc:  # the last wall: the page stays up, the server log has the cause
        _unexpected_card(exc)


def guarded(function: F) -> F:
    """:func:`page_guard` for a fragment, which Streamlit may rerun on its own."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        with page_guard():
            return function(*args, **kwargs)
        return None

    return run  # type: ignore[return-value]
