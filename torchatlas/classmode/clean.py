"""Inputs made safe before they reach the database: codes, keys, nicknames, CSV cells.

Everything here is checked without touching the database, so a malformed code or key costs
a visitor's link nothing but a string comparison.

Nicknames that look alike are one nickname in a class: :func:`fold` compares their
confusable skeletons (Unicode TR 39: NFD, each character through Unicode's confusables
prototype mapping, NFD again), case-folded, so "Ada" and "Аda" (Cyrillic А), "paypal" and
"pаypаl", "Il" and "ll" share one form. The mapping is Unicode's confusables data as the
``confusable-homoglyphs`` package ships it (a symmetric table: each source lists its
prototype, each prototype its sources; :func:`_prototypes` reads the direction back).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from importlib import resources

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
# Combining marks kept on one base character (Vietnamese "ệ" has two, Thai's vowel and tone
# marks two); more are dropped: a stack of marks draws over the names around it.
MAX_MARKS = 2
_MARKS = frozenset({"Mn", "Me"})
FOLD_CHARS = 128  # the stored form's column width
_LRM = "\u200e"  # the data file wraps right-to-left characters in left-to-right marks


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


def same_secret(given: object, secret: str) -> bool:
    """Constant-time comparison of a typed password with the server's (their digests)."""
    if not isinstance(given, str) or len(given) > 1024:
        return False
    digest = hashlib.sha256(given.encode("utf-8", "replace")).digest()
    return hmac.compare_digest(digest, hashlib.sha256(secret.encode("utf-8")).digest())


def student_id(key_hash_text: str) -> str:
    """A student's id on the teacher's roster: opaque (a digest of the stored key digest),
    so it names the student to the teacher without revealing or leading to the key."""
    return hashlib.sha256(f"roster:{key_hash_text}".encode("ascii")).hexdigest()[:16]


def bound_marks(text: str, most: int = MAX_MARKS) -> str:
    """``text`` with at most ``most`` combining marks on each base character (NFD, the rest
    dropped, NFC again)."""
    out: list[str] = []
    run = 0
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.category(ch) in _MARKS:
            run += 1
            if run > most or not out:
                continue  # a stack's extra marks, or a mark with no base to sit on
        else:
            run = 0
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def clean_nickname(raw: object, limit: int) -> str:
    """NFKC, whitespace runs → one space, invisible and control characters dropped, at most
    :data:`MAX_MARKS` combining marks per character, at most ``limit`` characters; "" when
    nothing printable is left (the store names them)."""
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
    text = bound_marks(" ".join(text.split()))
    return text[:limit].rstrip()


@functools.cache
def _prototypes() -> dict[str, str]:
    """Unicode's confusables prototype mapping (source character → prototype text).

    The package's table lists, for a source, its one prototype and, for a prototype, all its
    sources; a prototype is never a source (TR 39's mapping is idempotent). So a key with one
    entry whose entry has several is a source; a prototype of several characters is never a
    source; a pair that list only each other is ordered as the data file wrote it (its keys
    first appear as the lines of confusables.txt give them, source first)."""
    data_file = resources.files("confusable_homoglyphs").joinpath("confusables.json")
    table: dict[str, list[dict[str, str]]] = json.loads(data_file.read_text("utf-8"))
    order = {key.replace(_LRM, ""): index for index, key in enumerate(table)}
    mapping: dict[str, str] = {}
    for key, entries in table.items():
        source = key.replace(_LRM, "")
        if len(entries) != 1 or len(source) != 1:
            continue
        target = entries[0]["c"].replace(_LRM, "")
        back = table.get(entries[0]["c"], ())
        if len(back) > 1 or len(target) > 1 or order[source] < order.get(target, -1):
            mapping[source] = target
    return mapping


def skeleton(text: str) -> str:
    """TR 39's skeleton: NFD, every character through the prototype mapping, NFD again."""
    mapping = _prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(mapping.get(ch, ch) for ch in decomposed))


def fold(nickname: str) -> str:
    """The form two nicknames must not share in one class: the confusable skeleton, case-
    folded (and the skeleton of that, since a prototype may be a capital: "А" → "A"). NFKC
    first: full-width and other compatibility forms are their letters."""
    text = unicodedata.normalize("NFKC", nickname)
    return skeleton(skeleton(text).casefold()).casefold()[:FOLD_CHARS]


def with_suffix(nickname: str, number: int, limit: int) -> str:
    """``nickname`` with " <number>", cut so that the whole fits ``limit`` characters."""
    tail = f" {number}"
    return nickname[: max(0, limit - len(tail))].rstrip() + tail


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: formula starts get a leading apostrophe."""
    return "'" + text if text.lstrip(" ").startswith(_FORMULA_START) else text
