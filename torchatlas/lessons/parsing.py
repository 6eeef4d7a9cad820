"""What every part of a lesson file is read with: the coded error, the per-language texts and
the small checks the loader and each question kind share (:mod:`torchatlas.lessons.kinds`).

A lesson is written in one or more languages (:data:`~torchatlas.i18n.LANGUAGES`): the
built-in lessons in all of them, a teacher's own in the ones they wrote. Every text of a
lesson is then given in each of its languages, and a page in a language the lesson lacks
shows the first one it has (:func:`texts` fills those in; an export writes only the written
ones).
"""

from __future__ import annotations

from typing import Any

from torchatlas.i18n import LANGUAGES as LANGUAGE_NAMES

LANGUAGES: tuple[str, ...] = tuple(LANGUAGE_NAMES)  # the app's, in its order

MAX_TEXT = 2000  # characters in one narrative
MAX_TITLE = 120
MAX_OPTIONS = 6


class LessonError(ValueError):
    """A lesson the app will not use: ``code`` and ``params`` (no English)."""

    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(f"{code} {params}")
        self.code = code
        self.params = params


def texts(
    node: Any,
    where: str,
    keys: tuple[str, ...],
    limits: dict[str, int],
    languages: tuple[str, ...] = LANGUAGES,
    optional: tuple[str, ...] = (),
) -> dict[str, dict[str, str]]:
    """``{key: {lang: text}}`` for each key, present and non-empty in each of ``languages``;
    a language of the app the lesson was not written in gets the first written one's text.
    An ``optional`` key may be left out, but then in every language (a text one language has
    and another lacks is a lesson in two shapes): it is ``{}`` when absent."""
    out: dict[str, dict[str, str]] = {key: {} for key in (*keys, *optional)}
    first = node.get(languages[0]) if languages else None
    given = tuple(k for k in optional if isinstance(first, dict) and k in first)
    for lang in languages:
        table = node.get(lang)
        if not isinstance(table, dict):
            raise LessonError("missing_language", where=where, lang=lang)
        extra = sorted(set(table) - set(keys) - set(given))
        if extra:
            raise LessonError("unknown_keys", where=f"{where}.{lang}", keys=extra)
        for key in (*keys, *given):
            text = table.get(key)
            if not isinstance(text, str) or not text.strip():
                raise LessonError("missing_text", where=f"{where}.{lang}", key=key)
            if len(text) > limits.get(key, MAX_TEXT):
                raise LessonError("text_too_long", where=f"{where}.{lang}", key=key)
            out[key][lang] = text.strip()
    unwritten = [lang for lang in LANGUAGES if lang not in languages]
    if unwritten:
        extra_tables = sorted(lang for lang in unwritten if lang in node)
        if extra_tables:  # a language the lesson says it is not written in
            raise LessonError("unknown_keys", where=where, keys=extra_tables)
        for key in (*keys, *given):
            for lang in unwritten:
                out[key][lang] = out[key][languages[0]]
    return out


def only(node: dict, where: str, allowed: set[str]) -> None:
    """Refuse any key of ``node`` but ``allowed`` and the language tables."""
    extra = sorted(set(node) - allowed - set(LANGUAGES))
    if extra:
        raise LessonError("unknown_keys", where=where, keys=extra)


def frozen(value: Any) -> Any:
    """Lists as tuples, so args are hashable and immutable; lists again when evaluated."""
    return tuple(frozen(v) for v in value) if isinstance(value, list) else value


def thawed(value: Any) -> Any:
    return [thawed(v) for v in value] if isinstance(value, tuple) else value


def args_of(node: Any, where: str) -> tuple[tuple[str, Any], ...]:
    if node is None:
        return ()
    if not isinstance(node, dict):
        raise LessonError("bad_args", where=where)
    return tuple(sorted((str(k), frozen(v)) for k, v in node.items()))


def bounded_text(node: dict, key: str, where: str, limit: int, *, required: bool = True) -> str:
    """``node[key]`` as a string of at most ``limit`` characters ("" when absent and not
    ``required``)."""
    value = node.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise LessonError("missing_text", where=where, key=key)
    if len(value) > limit:
        raise LessonError("text_too_long", where=where, key=key)
    return value


def options_of(node: dict, where: str) -> tuple[str, ...]:
    """A question's options: 2 to :data:`MAX_OPTIONS` distinct, short, non-empty strings."""
    options = node.get("options")
    if (
        not isinstance(options, list)
        or not 2 <= len(options) <= MAX_OPTIONS
        or not all(isinstance(o, str) and 0 < len(o) <= MAX_TITLE for o in options)
        or len(set(options)) != len(options)
    ):
        raise LessonError("bad_options", where=where)
    return tuple(options)
