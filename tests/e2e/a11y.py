"""Accessibility checks with axe-core in a real page: the helpers of the accessibility report
(``python -m tests.e2e.a11y_report``) and of any test that wants to hold a page to WCAG.

axe-core is vendored (tests/e2e/vendor/axe-core/, MPL-2.0, see its README) so the check runs
offline. :func:`axe_violations` injects it into a Playwright page that has finished its script
run and runs the WCAG 2.0/2.1 A and AA rules on the whole document. What it leaves out is
Streamlit's markup, never the app's, each piece by a narrow, named entry of :data:`EXCLUDED`:
one element type, for one rule where that is enough, with the upstream report it waits on.

>>> found = axe_violations(page)  # doctest: +SKIP
>>> [(v.rule, v.impact, len(v.targets)) for v in found]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
# WCAG 2.0 and 2.1, levels A and AA: what schools' accessibility policies ask for.
WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")


@dataclass(frozen=True)
class Exclusion:
    """Streamlit markup axe may not count: ``selector`` (the element and everything in it),
    for ``rules`` only (every rule where empty), until ``upstream`` is fixed."""

    name: str
    selector: str
    rules: tuple[str, ...]
    why: str
    upstream: str

    def __str__(self) -> str:
        return f"{self.name} ({self.selector}; {', '.join(self.rules) or 'every rule'})"


EXCLUDED: tuple[Exclusion, ...] = (
    Exclusion(
        "streamlit-sidebar-nav",
        "[data-testid='stSidebarNav']",
        ("list", "listitem"),
        "Streamlit's own page list in the sidebar (st.navigation's sections): its <ul> holds "
        "other elements between the <li>s, and each section's <li>s sit outside a list (on "
        "every page: 11 <li>s and 1 <ul>). Only these two rules: its links' names and "
        "colours are checked.",
        "https://github.com/streamlit/streamlit/issues (to be reported; none found)",
    ),
    Exclusion(
        "streamlit-code-scroll",
        ".stCode > pre",
        ("scrollable-region-focusable",),
        "st.code (and a code block in st.markdown) draws its <pre> scrolling sideways with no "
        "tabindex, so a long line cannot be scrolled from the keyboard; Streamlit has no option "
        "for it (wrap_lines=True avoids the scroll). Only this rule: its colours are checked.",
        "https://github.com/streamlit/streamlit/issues (to be reported; none found)",
    ),
)
# The impacts the report lists; axe's "moderate" and "minor" are left for later.
SEVERE = ("critical", "serious")


@cache
def axe_source() -> str:
    """The vendored axe-core, checked against the digest its README records."""
    data = AXE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != AXE_SHA256:
        raise RuntimeError(f"{AXE} is not axe-core {AXE_VERSION} (sha256 {digest})")
    return data.decode("utf-8")


@dataclass(frozen=True)
class Violation:
    """One axe rule a page breaks: every element that breaks it (axe's CSS selectors)."""

    rule: str
    impact: str
    help: str
    help_url: str
    targets: tuple[str, ...]
    summaries: tuple[str, ...] = field(default=(), compare=False)
    snippets: tuple[str, ...] = field(default=(), compare=False)  # each element's HTML


def axe_violations(
    page: Page, impacts: Iterable[str] = SEVERE, excluded: Iterable[Exclusion] = EXCLUDED
) -> list[Violation]:
    """axe-core's WCAG 2.0/2.1 A+AA violations of ``impacts`` on ``page`` as it is now
    (the caller waits for the script run first: tests/e2e/conftest.py ``wait_for_app``).
    An exclusion for every rule leaves its elements out of the run; one for some rules drops
    only those rules' findings inside it (the rest of axe still looks at them)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(content=axe_source())
    excluded = tuple(excluded)
    whole = [e.selector for e in excluded if not e.rules]
    by_rule = [[e.selector, list(e.rules)] for e in excluded if e.rules]
    result = page.evaluate(
        """async ([tags, whole, byRule]) => {
            const context = whole.length ? {exclude: whole.map(s => [s])} : document;
            const options = {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations'],
                             elementRef: true};
            const found = await axe.run(context, options);
            const kept = (rule, node) => !node.element || !byRule.some(
                ([selector, rules]) => rules.includes(rule) && node.element.closest(selector));
            return found.violations.map(v => {
                const nodes = v.nodes.filter(n => kept(v.id, n));
                return {
                    rule: v.id, impact: v.impact || '', help: v.help, help_url: v.helpUrl,
                    targets: nodes.map(
                        n => n.target.map(t => [].concat(t).join(' >>> ')).join(' ')),
                    summaries: nodes.map(n => n.failureSummary || ''),
                    snippets: nodes.map(n => (n.html || '').slice(0, 300)),
                };
            }).filter(v => v.targets.length);
        }""",
        [list(WCAG_TAGS), whole, by_rule],
    )
    wanted = set(impacts)
    return [
        Violation(
            rule=v["rule"],
            impact=v["impact"],
            help=v["help"],
            help_url=v["help_url"],
            targets=tuple(v["targets"]),
            summaries=tuple(v["summaries"]),
            snippets=tuple(v["snippets"]),
        )
        for v in result
        if v["impact"] in wanted
    ]


# Streamlit's generated class names (emotion's hashes), which say nothing to a reader.
_GENERATED_CLASS = re.compile(r"\.(?:st-emotion-cache-[\w-]+|e[a-z0-9]{6,10}\d)(?=[.\[:\s>]|$)")
_CONTRAST = re.compile(r"contrast of ([\d.]+) \(foreground color: (#\w+), background color: (#\w+)")


def readable(selector: str) -> str:
    """axe's selector without Streamlit's generated class names (``*`` where nothing else
    named the element)."""
    steps = _GENERATED_CLASS.sub("", selector).split(" > ")
    return " > ".join(step.strip() or "*" for step in steps)


def detail(violation: Violation, index: int) -> str:
    """What to look at for one element: its contrast (colour rules) or the start of its HTML."""
    summary = violation.summaries[index] if index < len(violation.summaries) else ""
    found = _CONTRAST.search(summary)
    if found:
        return f"contrast {found[1]}:1, {found[2]} on {found[3]}"
    snippet = violation.snippets[index] if index < len(violation.snippets) else ""
    return " ".join(snippet.split())[:100]


@dataclass
class RuleTally:
    """One rule over every page view: its elements, and where each selector was seen."""

    rule: str
    impact: str
    help: str
    help_url: str
    nodes: int = 0
    views: set[str] = field(default_factory=set)
    selectors: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    details: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def tally(found: Iterable[tuple[str, Violation]]) -> list[RuleTally]:
    """(view label, violation) pairs by rule: most elements first."""
    rules: dict[str, RuleTally] = {}
    for view, violation in found:
        entry = rules.setdefault(
            violation.rule,
            RuleTally(violation.rule, violation.impact, violation.help, violation.help_url),
        )
        entry.nodes += len(violation.targets)
        entry.views.add(view)
        for index, target in enumerate(violation.targets):
            entry.selectors[readable(target)].add(view)
            entry.details[readable(target)].add(detail(violation, index))
    return sorted(rules.values(), key=lambda r: (SEVERE.index(r.impact), -r.nodes, r.rule))
