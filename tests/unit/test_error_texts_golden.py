"""Every error code's text, in both languages, as stored outputs (tests/golden/errors/).

An error's words are what a student reads when something goes wrong; a change to them (or an
error that loses its text, or a placeholder renamed in one language) must be a reviewed diff,
not a side effect. Each translation table's ``errors`` subtrees (``errors`` at the top of a
room's table, or deeper, like ``training.errors`` or ``uploads.errors``) are rendered one line
per code, sorted, with each placeholder the text declares filled by a ``{name}`` marker, so
the stored file shows where each value goes. One file per table and language:
``tests/golden/errors/<table>_<lang>.txt``; refresh with ``--update-golden``.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterator

import pytest

from torchatlas.i18n import LANGUAGES, TRANSLATIONS_DIR
from torchatlas.rooms import room_keys


def _errors(node: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(dotted key, text) of every string under a table's ``errors`` subtrees."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "errors":
            yield from _leaves(value, (*path, key))
        else:
            yield from _errors(value, (*path, key))


def _leaves(node: object, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    else:
        yield ".".join(path), str(node)


def render(text: str) -> str:
    """``text`` as a page shows it, with each declared placeholder left as a ``{name}``
    marker (format specs and conversions dropped, doubled braces undone)."""
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(text):
        parts.append(literal)
        if field is not None:
            parts.append("{" + field + "}")
    return "".join(parts)


def error_texts(table: str, lang: str) -> str:
    data = json.loads((TRANSLATIONS_DIR / lang / f"{table}.json").read_text(encoding="utf-8"))
    lines = [f"{table}.{key} = {render(text)}" for key, text in _errors(data)]
    return "\n".join(sorted(lines))


def _tables_with_errors() -> list[str]:
    tables = []
    for path in sorted((TRANSLATIONS_DIR / "en").glob("*.json")):
        if any(_errors(json.loads(path.read_text(encoding="utf-8")))):
            tables.append(path.stem)
    return tables


TABLES = _tables_with_errors()


def test_every_room_with_errors_is_covered() -> None:
    """The walk finds the rooms' errors (a table that moved its errors elsewhere would
    silently drop out of the golden files otherwise)."""
    expected = set(room_keys())
    assert expected <= set(TABLES), TABLES


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
@pytest.mark.parametrize("table", TABLES)
def test_error_texts_match_their_stored_output(
    table: str, lang: str, golden: Callable[[str, str], None]
) -> None:
    golden(f"errors/{table}_{lang}", error_texts(table, lang))


@pytest.mark.parametrize("table", TABLES)
def test_both_languages_have_the_same_codes_and_placeholders(table: str) -> None:
    """What the golden files cannot show side by side: every code exists in both languages
    with the same markers."""
    by_lang = {}
    for lang in LANGUAGES:
        data = json.loads((TRANSLATIONS_DIR / lang / f"{table}.json").read_text(encoding="utf-8"))
        by_lang[lang] = {
            key: sorted({f for _, f, _, _ in string.Formatter().parse(text) if f is not None})
            for key, text in _errors(data)
        }
    english = by_lang.pop("en")
    for lang, codes in by_lang.items():
        assert codes == english, f"{table}: {lang} differs from en"


def test_render_leaves_markers_where_values_go() -> None:
    assert render("{size_mb:.1f} MB over {limit}; use {{braces}}") == (
        "{size_mb} MB over {limit}; use {braces}"
    )
