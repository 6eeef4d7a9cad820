"""Inputs made safe before they reach the database: codes, keys, nicknames, CSV cells.

Everything here is checked without touching the database, so a malformed code or key costs
a visitor's link nothing but a string comparison.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import unicodedata

from torchatlas.classmode.errors import ClassError, ErrorCode

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I look-alikes
CODE_LENGTH = 6
MAX_KEY_CHARS = 64  # token_urlsafe(24) is 32 characters, token_urlsafe(18) 24
MAX_RAW_NICKNAME = 200  # characters typed before cleaning; more is refused, not cut
_KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")
# Dropped from nicknames: controls, format characters (bidi overrides, zero-width joiners),
# surrogates, private-use and unassigned code points.
_DROPPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
# A spreadsheet reads a cell starting with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def code_or_none(code: object) -> str | None:
    """The class code in canonical form (upper case), or None when it cannot be one."""
    if not isinstance(code, str) or len(code) != CODE_LENGTH or not code.isascii():
        return None
    code = code.upper()
    return code if all(ch in ALPHABET for ch in code) else None


def check_code(code: object) -> str:
    found = code_or_none(code)
    if found is None:
        raise ClassError(ErrorCode.NO_SUCH_CLASS)
    return found


def key_ok(key: object) -> bool:
    """Could ``key`` be a key we handed out (URL-safe base64, bounded)?"""
    return isinstance(key, str) and len(key) <= MAX_KEY_CHARS and _KEY.fullmatch(key) is not None


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def same_key(key: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented key with the stored hash."""
    return hmac.compare_digest(key_hash(key).encode("ascii"), stored_hash.encode("ascii"))


def client_hash(client: object) -> str:
    """What the rate limit counts by: a digest, so addresses are not stored as written."""
    text = client if isinstance(client, str) else repr(type(client))
    return hashlib.sha256(text[:512].encode("utf-8", "replace")).hexdigest()


def clean_nickname(raw: object, limit: int) -> str:
    """NFKC, whitespace runs → one space, invisible and control characters dropped, at most
    ``limit`` characters; "" when nothing printable is left (the store names them)."""
    if raw is None:
        return ""
    if not isinstance(raw, str) or len(raw) > MAX_RAW_NICKNAME:
        raise ClassError(ErrorCode.BAD_NICKNAME, limit=limit)
    text = unicodedata.normalize("NFKC", raw)
    text = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in _DROPPED
    )
    text = " ".join(text.split())
    return text[:limit].rstrip()


def fold(nickname: str) -> str:
    """The form two nicknames must not share in one class (case-insensitive)."""
    return unicodedata.normalize("NFKC", nickname.casefold())


def with_suffix(nickname: str, number: int, limit: int) -> str:
    """``nickname`` with " <number>", cut so that the whole fits ``limit`` characters."""
    tail = f" {number}"
    return nickname[: max(0, limit - len(tail))].rstrip() + tail


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: formula starts get a leading apostrophe."""
    return "'" + text if text.lstrip(" ").startswith(_FORMULA_START) else text
