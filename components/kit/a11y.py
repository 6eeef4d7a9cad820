"""Accessible wrappers for the app's own hand-drawn HTML (no Streamlit: drawing builders in
``components/<room>/draw.py`` import it).

- :func:`scroll_region`: a block that may scroll (a wide table on a phone, a long listing).
  A keyboard user can only scroll what can take focus, so the block is in the tab order
  (``tabindex="0"``, WCAG 2.1.1, axe's ``scrollable-region-focusable``) and, being a stop of
  its own, says what it is (``role="region"`` with an ``aria-label``): a screen reader that
  lands on it reads that name instead of an unnamed group.
"""

from __future__ import annotations

import html


def scroll_region(body: str, label: str, style: str, *, attributes: str = "") -> str:
    """``body`` in a ``<div>`` with ``style`` (its ``overflow`` rule among them) that a
    keyboard can focus and scroll, named ``label`` for screen readers. ``attributes``: more
    attributes for the div, already escaped (``data-testid="..."``)."""
    name = html.escape(label, quote=True)
    extra = f" {attributes.strip()}" if attributes.strip() else ""
    return (
        f'<div role="region" tabindex="0" aria-label="{name}"{extra} style="{style}">{body}</div>'
    )
