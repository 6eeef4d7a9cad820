"""Exact arithmetic on the numbers torch holds, and exact decimal text for them.

Every finite float (float16 … float64, and each part of a complex) is a fraction whose
denominator is a power of two, so ``fractions.Fraction(value)`` is its value with no rounding,
and sums and products of such fractions are again such fractions: their decimal expansion
ends. So the room can compute ``a ⊕ b`` exactly (never in float64, whose own rounding would be
invisible) and print every digit of it. The digits are bounded: a float64 has at most 1074
binary places, so a sum has at most 1074 decimal places and a product at most 2148.

>>> exact_text(Fraction(0.1) + Fraction(0.2))
'0.3000000000000000166533453693773481063544750213623046875'
>>> exact_text(Fraction(2**53) + 1)
'9007199254740993'
"""

from __future__ import annotations

import math
from fractions import Fraction

MAX_EXACT_CHARS = 2600  # the longest exact text: a product of two float64 subnormals
SHORT_DIGITS = 20  # significant digits of the short form a metric shows


def fraction_of(value: object) -> Fraction | None:
    """A real number (bool, int or finite float) as an exact fraction; None for inf, nan,
    and anything else."""
    if isinstance(value, bool):
        return Fraction(int(value))
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if math.isfinite(value) else None
    return None


def parts_of(value: object) -> tuple[Fraction | None, Fraction | None]:
    """``(real, imaginary)`` exactly; the imaginary part is None for a real number. A part
    that is not finite is None in its place (and the caller says there is no exact value)."""
    if isinstance(value, complex):
        return fraction_of(value.real), fraction_of(value.imag)
    return fraction_of(value), None


def terminates(number: Fraction) -> bool:
    """Whether ``number`` has a finite decimal expansion (its denominator is 2^a·5^b)."""
    denominator = number.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    return denominator == 1


def exact_text(number: Fraction) -> str:
    """Every digit of ``number`` in plain decimal (``-0.000123``, ``9007199254740993``), or
    ``p/q`` when its expansion does not end; never longer than :data:`MAX_EXACT_CHARS`
    (beyond that: the first digits, an ellipsis, and how many digits there are)."""
    if number.denominator == 1:
        text = str(number.numerator)
    elif not terminates(number):
        text = f"{number.numerator}/{number.denominator}"
    else:
        sign = "-" if number < 0 else ""
        magnitude = abs(number)
        places = _decimal_places(magnitude.denominator)
        scale = 10**places
        digits = str((magnitude * scale).numerator).rjust(places + 1, "0")
        text = f"{sign}{digits[:-places]}.{digits[-places:]}"
    if len(text) > MAX_EXACT_CHARS:
        return f"{text[: MAX_EXACT_CHARS - 40]}… ({len(text)} characters)"
    return text


def _decimal_places(denominator: int) -> int:
    """For a denominator 2^a·5^b: max(a, b), the number of decimal places it needs."""
    twos = (denominator & -denominator).bit_length() - 1
    rest, fives = denominator >> twos, 0
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    return max(twos, fives)


def short_text(number: Fraction) -> str:
    """At most :data:`SHORT_DIGITS` significant digits, for a metric; ``exact_text`` when that
    is already short. A shortened form ends in ``…`` so it never passes for the exact one."""
    full = exact_text(number)
    if len(full) <= SHORT_DIGITS + 3:
        return full
    sign = "-" if number < 0 else ""
    magnitude = abs(number)
    exponent = _floor_log10(magnitude)
    if -6 <= exponent < SHORT_DIGITS and "/" not in full:
        # plain decimal, cut after SHORT_DIGITS significant digits
        body = full.lstrip("-")
        first = next(i for i, char in enumerate(body) if char not in "0.")
        kept, seen = [], 0
        for char in body[first:]:
            if seen == SHORT_DIGITS:
                break
            kept.append(char)
            seen += char != "."
        cut = (body[:first] + "".join(kept)).rstrip(".")
        return f"{sign}{cut}…"
    scaled = magnitude / Fraction(10) ** (exponent - SHORT_DIGITS + 1)
    mantissa = str(math.floor(scaled))[:SHORT_DIGITS]
    body = f"{mantissa[0]}.{mantissa[1:].rstrip('0') or '0'}"
    return f"{sign}{body}…e{exponent:+d}"


def _floor_log10(magnitude: Fraction) -> int:
    """floor(log10(magnitude)) for a positive fraction, exactly (no float overflow)."""
    guess = len(str(magnitude.numerator)) - len(str(magnitude.denominator))
    while Fraction(10) ** guess > magnitude:
        guess -= 1
    while Fraction(10) ** (guess + 1) <= magnitude:
        guess += 1
    return guess


def complex_text(real: Fraction, imag: Fraction | None, *, short: bool = False) -> str:
    """A real number, or a complex one as ``(re) + (im)j`` with both parts exact."""
    write = short_text if short else exact_text
    if imag is None:
        return write(real)
    sign = "-" if imag < 0 else "+"
    return f"{write(real)} {sign} {write(abs(imag))}j"
