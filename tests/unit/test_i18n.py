"""Every key exists in every language, with the same placeholders, and every key the
code asks for exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from torchatlas.i18n import LANGUAGES, TRANSLATIONS_DIR, placeholders, table, translate

ROOT = Path(__file__).resolve().parents[2]


def test_every_language_has_the_same_files() -> None:
    files = {
        lang: sorted(p.name for p in (TRANSLATIONS_DIR / lang).glob("*.json")) for lang in LANGUAGES
    }
    assert len(set(map(tuple, files.values()))) == 1, files


@pytest.mark.parametrize("lang", [lang for lang in LANGUAGES if lang != "en"])
def test_keys_match_english(lang: str) -> None:
    english, other = table("en"), table(lang)
    assert sorted(set(english) - set(other)) == [], f"missing in {lang}"
    assert sorted(set(other) - set(english)) == [], f"missing in en (present in {lang})"


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_placeholders_match_english(lang: str) -> None:
    for key, text in table("en").items():
        assert placeholders(table(lang)[key]) == placeholders(text), key


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_no_empty_strings(lang: str) -> None:
    assert [k for k, v in table(lang).items() if not v.strip()] == []


def _literal_keys() -> set[str]:
    """First string argument of every ``t(...)`` / ``translate(...)`` call in the app code."""
    keys: set[str] = set()
    files = [ROOT / "app.py", *(ROOT / "views").glob("*.py"), *(ROOT / "components").rglob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"t", "translate"}
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                keys.add(node.args[0].value)
    return keys


def test_every_literal_key_used_in_code_exists() -> None:
    keys = _literal_keys()
    assert "app.home.title" in keys  # the scan itself works
    for lang in LANGUAGES:
        assert sorted(k for k in keys if k not in table(lang)) == [], lang


def test_translate_formats_and_falls_back() -> None:
    assert translate("app.sidebar.cpu_threads", "ko", threads=2) == "CPU 스레드: 2"
    assert translate("no.such.key", "ko") == "no.such.key"
    assert translate("app.home.nav", "xx") == "Home"
