"""One small translation mechanism for every user-facing string.

Tables live in ``assets/translations/<lang>/<namespace>.json``; a key is
``<namespace>.<dotted.path>`` (``strides.title`` reads ``title`` from
``strides.json``). One file per room keeps rooms out of each other's way.
Plain Python: usable from a notebook, no Streamlit.
"""

from __future__ import annotations

import json
import string
from functools import cache
from pathlib import Path

LANGUAGES: dict[str, str] = {"en": "English", "ko": "한국어"}
DEFAULT_LANGUAGE = "en"
TRANSLATIONS_DIR = Path(__file__).resolve().parent.parent / "assets" / "translations"


def _flatten(prefix: str, node: object, out: dict[str, str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(f"{prefix}.{key}" if prefix else key, value, out)
    elif isinstance(node, str):
        out[prefix] = node
    else:
        raise TypeError(f"translation {prefix!r} must be a string or a table, got {node!r}")


@cache
def table(lang: str) -> dict[str, str]:
    """Every key of one language, flattened to ``namespace.dotted.key``."""
    out: dict[str, str] = {}
    folder = TRANSLATIONS_DIR / lang
    for path in sorted(folder.glob("*.json")):
        _flatten(path.stem, json.loads(path.read_text(encoding="utf-8")), out)
    return out


def placeholders(text: str) -> set[str]:
    """The ``{name}`` fields a translated string expects."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


def translate(key: str, lang: str = DEFAULT_LANGUAGE, /, **params: object) -> str:
    """The text for ``key`` in ``lang``, formatted with ``params``.

    Falls back to English, then to the key itself, so a missing translation
    shows up visibly instead of crashing a classroom demo (the test suite fails
    on any missing key).
    """
    text = table(lang).get(key)
    if text is None:
        text = table(DEFAULT_LANGUAGE).get(key, key)
    if not params:
        return text
    try:
        return text.format(**params)
    except (KeyError, IndexError, ValueError):
        return text


def has_key(key: str, lang: str = DEFAULT_LANGUAGE) -> bool:
    return key in table(lang)
