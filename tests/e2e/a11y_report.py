"""The accessibility report: axe-core (WCAG 2.0/2.1 A and AA) on every page of the app, in
English and Korean, on a desktop (1280×900) and a phone (390×844), in the light and the dark
theme; prints the critical and serious violations per rule with their counts and the elements
(CSS selectors) that break them. A report, not a test: it fails nothing.

    python -m tests.e2e.a11y_report                       # every page view (88; ~7 min here)
    python -m tests.e2e.a11y_report --pages home strides --langs en --themes dark
    python -m tests.e2e.a11y_report --json /tmp/a11y.json  # every finding, for a diff later
    python -m tests.e2e.a11y_report --no-exclusions       # Streamlit's own markup counted too

The server is the e2e layer's (``streamlit run app.py`` on a free port, tests/e2e/conftest.py
``running_app``), the browser Debian's Chromium as there; a theme is chosen the way the e2e
tests choose it, by the browser's colour scheme. Only Streamlit's own markup is left out, each
piece by a named entry of tests/e2e/a11y.py ``EXCLUDED``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from components.rooms import ROOMS
from tests.e2e.a11y import (
    AXE_VERSION,
    EXCLUDED,
    SEVERE,
    Exclusion,
    Violation,
    axe_violations,
    tally,
)
from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, ROOT, running_app, wait_for_app


def app_url_paths(app: Path = ROOT / "components" / "navigation.py") -> set[str]:
    """The url paths the navigation names literally (``url_path="..."``); the rooms'
    come from components/rooms.py. What keeps :data:`PAGES` complete."""
    tree = ast.parse(app.read_text(encoding="utf-8"))
    return {
        node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword)
        and node.arg == "url_path"
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


# Page name -> url path: the navigation's own pages (home is its default page, at "", the others
# at their url paths; checked against components/navigation.py by tests/e2e/test_a11y.py), then
# every room.
PAGES: dict[str, str] = {
    "home": "",
    **{path: path for path in sorted(app_url_paths())},
    **{room.key: room.key for room in ROOMS},
}
DEVICES = {"desktop": (1280, 900), "phone": (390, 844)}
LANGS = ("en", "ko")
THEMES = ("light", "dark")
SELECTORS_SHOWN = 12  # per rule; --json keeps them all


def view_label(page: str, lang: str, device: str, theme: str) -> str:
    return f"{page}/{lang}/{device}/{theme}"


def measure(
    url: str,
    pages: list[str],
    langs: list[str],
    devices: list[str],
    themes: list[str],
    excluded: tuple[Exclusion, ...] = EXCLUDED,
) -> tuple[list[tuple[str, Violation]], list[str], dict[str, str]]:
    """Open every view and run axe on it: (findings, views measured, views that failed)."""
    from playwright.sync_api import sync_playwright

    found: list[tuple[str, Violation]] = []
    measured: list[str] = []
    failed: dict[str, str] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            for lang in langs:
                for device in devices:
                    width, height = DEVICES[device]
                    for theme in themes:
                        context = browser.new_context(
                            viewport={"width": width, "height": height},
                            color_scheme="dark" if theme == "dark" else "light",
                            locale="ko-KR" if lang == "ko" else "en-US",
                        )
                        try:
                            page = context.new_page()
                            for name in pages:
                                label = view_label(name, lang, device, theme)
                                started = time.monotonic()
                                query = "?lang=ko" if lang == "ko" else ""
                                try:
                                    page.goto(f"{url}/{PAGES[name]}{query}")
                                    wait_for_app(page)
                                    violations = axe_violations(page, excluded=excluded)
                                except Exception as error:  # a page that never settles
                                    failed[label] = f"{type(error).__name__}: {error}"[:300]
                                    print(f"  {label}: FAILED {failed[label]}", file=sys.stderr)
                                    continue
                                measured.append(label)
                                found += [(label, v) for v in violations]
                                nodes = sum(len(v.targets) for v in violations)
                                print(
                                    f"  {label}: {len(violations)} rules, {nodes} elements "
                                    f"({time.monotonic() - started:.1f} s)",
                                    file=sys.stderr,
                                )
                        finally:
                            context.close()
        finally:
            browser.close()
    return found, measured, failed


def where(views: set[str]) -> str:
    """``basics (en/ko, desktop/phone, light/dark)``-style summary of view labels."""
    parts: dict[str, list[set[str]]] = defaultdict(lambda: [set(), set(), set()])
    for view in views:
        page, lang, device, theme = view.split("/")
        for index, value in enumerate((lang, device, theme)):
            parts[page][index].add(value)
    return "; ".join(
        f"{page} ({', '.join('/'.join(sorted(values)) for values in axes)})"
        for page, axes in sorted(parts.items())
    )


def report(
    found: list[tuple[str, Violation]],
    measured: list[str],
    failed: dict[str, str],
    excluded: tuple[Exclusion, ...] = EXCLUDED,
) -> str:
    lines = [
        f"axe-core {AXE_VERSION}, WCAG 2.0/2.1 A+AA, impacts {'+'.join(SEVERE)}; "
        f"{len(measured)} page views measured, {len(failed)} failed; excluded: "
        f"{'; '.join(map(str, excluded)) or 'nothing'}",
        "",
    ]
    rules = tally(found)
    if not rules:
        lines.append("no critical or serious violations")
    for rule in rules:
        lines.append(
            f"{rule.rule} ({rule.impact}): {rule.nodes} elements on {len(rule.views)} of "
            f"{len(measured)} views - {rule.help}"
        )
        lines.append(f"  pages: {where(rule.views)}")
        ordered = sorted(rule.selectors.items(), key=lambda item: (-len(item[1]), item[0]))
        for selector, views in ordered[:SELECTORS_SHOWN]:
            lines.append(f"  {len(views):3d} views  {selector}")
            notes = sorted(rule.details[selector])
            more = " ..." if len(notes) > 3 else ""
            lines.append(f"             {'; '.join(notes[:3])}{more}")
        if len(ordered) > SELECTORS_SHOWN:
            lines.append(f"  ... {len(ordered) - SELECTORS_SHOWN} more selectors (see --json)")
        lines.append("")
    lines.append("per rule (elements / views):")
    lines += [f"  {r.rule:32s} {r.impact:9s} {r.nodes:5d} / {len(r.views)}" for r in rules]
    for label, error in sorted(failed.items()):
        lines.append(f"FAILED {label}: {error}")
    return "\n".join(lines)


def load(path: Path) -> tuple[list[tuple[str, Violation]], list[str], dict[str, str]]:
    """A saved ``--json`` run, as :func:`measure` returned it."""
    document = json.loads(path.read_text(encoding="utf-8"))
    found = [
        (f["view"], Violation(f["rule"], f["impact"], f["help"], f.get("help_url", ""),
                              tuple(f["targets"]), tuple(f["summaries"]),
                              tuple(f.get("snippets", ()))))
        for f in document["findings"]
    ]  # fmt: skip
    return found, document["measured"], document["failed"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="+", choices=list(PAGES), default=list(PAGES))
    parser.add_argument("--langs", nargs="+", choices=LANGS, default=list(LANGS))
    parser.add_argument("--devices", nargs="+", choices=list(DEVICES), default=list(DEVICES))
    parser.add_argument("--themes", nargs="+", choices=THEMES, default=list(THEMES))
    parser.add_argument("--url", help="an app already running (default: start one)")
    parser.add_argument("--json", type=Path, help="write every finding here")
    parser.add_argument(
        "--no-exclusions",
        action="store_true",
        help="count Streamlit's markup too (what tests/e2e/a11y.py EXCLUDED leaves out)",
    )
    parser.add_argument("--from-json", type=Path, help="print the report of a saved --json run")
    args = parser.parse_args(argv)

    if args.from_json:
        print(report(*load(args.from_json)))
        return 0
    started = time.monotonic()
    excluded = () if args.no_exclusions else EXCLUDED
    selection = (args.pages, args.langs, args.devices, args.themes, excluded)
    if args.url:
        found, measured, failed = measure(args.url.rstrip("/"), *selection)
    else:
        with tempfile.TemporaryDirectory(prefix="a11y-") as folder:
            log = Path(folder) / "server.log"
            with running_app(log) as url:
                print(f"server {url} (log {log})", file=sys.stderr)
                found, measured, failed = measure(url, *selection)
    print(report(found, measured, failed, excluded))
    print(f"\n{len(measured)} views in {time.monotonic() - started:.0f} s", file=sys.stderr)
    if args.json:
        findings = [
            {"view": view, "rule": v.rule, "impact": v.impact, "help": v.help,
             "help_url": v.help_url, "targets": list(v.targets),
             "summaries": list(v.summaries), "snippets": list(v.snippets)}
            for view, v in found
        ]  # fmt: skip
        document = {"axe": AXE_VERSION, "measured": measured, "failed": failed}
        document["findings"] = findings
        args.json.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
