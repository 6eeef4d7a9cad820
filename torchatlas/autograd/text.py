"""A bounded formatter for values a visitor's program built.

``repr()`` of a Python structure is done in C with the GIL held and costs the size of its
*unfolded* text: a list that nests shared references (``a = [a, a, a, a]`` a few times) is a
few hundred bytes to build and gigabytes to print, and every other session of the server waits
meanwhile. So the engine never calls ``repr()`` or ``str()`` on a value a program built: it
calls :func:`bounded_text`, which walks at most ``limit`` characters' worth of the value and
says "…" for the rest. Whole numbers past a few dozen digits are described by their size
(Python refuses to print ints of more than 4,300 digits at all).

>>> a = [1, 2]
>>> for _ in range(40):
...     a = [a, a, a, a]
>>> bounded_text(a, 20)
'[[[[[[[[[[[[[[[[[[[…'
"""

from __future__ import annotations

from typing import Any

__all__ = ["bounded_text"]

MAX_INT_DIGITS = 30


def _scalar(value: Any) -> str | None:
    """The text of a value that is not a container (None for a list or tuple)."""
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_DIGITS * 3:  # ~30 decimal digits
            return f"<{value.bit_length()}-bit int>"
        return str(value)
    if isinstance(value, float):
        return repr(value)  # at most ~24 characters
    if isinstance(value, list | tuple):
        return None
    shape = getattr(value, "shape", None)
    kind = type(value).__name__
    if isinstance(shape, tuple) or type(shape).__name__ == "Size":
        dims = "×".join(str(int(d)) for d in tuple(shape)[:8])
        return f"{kind}({dims or '()'})"
    if isinstance(value, str):
        return "'" + value[:40] + ("…'" if len(value) > 40 else "'")
    return kind


def bounded_text(value: Any, limit: int = 80) -> str:
    """At most ``limit`` characters describing ``value``; lists and tuples are walked
    iteratively and only as far as the characters allow, so shared and deep structures cost
    ``O(limit)``."""
    out: list[str] = []
    used = 0
    # a stack of pending pieces: a value to format, or a literal string (brackets, commas)
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack and used <= limit:
        literal, item = stack.pop()
        if literal:
            piece = item
        else:
            piece = _scalar(item)
            if piece is None:  # a list or tuple: open it, queue its items in reverse
                is_list = isinstance(item, list)
                close = "]" if is_list else (",)" if len(item) == 1 else ")")
                stack.append((True, close))
                # only as many items as could still show (each takes at least 1 character)
                shown = item[: max(0, limit - used)]
                if len(shown) < len(item):
                    stack.append((True, "…"))
                for position in range(len(shown) - 1, -1, -1):
                    stack.append((False, shown[position]))
                    if position:
                        stack.append((True, ", "))
                piece = "[" if is_list else "("
        out.append(piece)
        used += len(piece)
    text = "".join(out)
    if stack or len(text) > limit:
        return text[: max(0, limit - 1)] + "…"
    return text
