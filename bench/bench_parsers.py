"""Benchmark of every server-side text parser against a linear baseline measured in the same run.

    python -m bench.bench_parsers [--chars 20000] [--rounds 7]

Each parser that reads what a visitor types or shares (the shape explorer's boxes and link,
the strides room's shape, chain, op, write, index and quiz answer, the source listing's
tokenizer) is fed worst cases: deep nesting, long repetition, input built against its
regular expressions. For each case:

1. ``served``: the parser as the server calls it (its length limit on) on ``--chars``
   characters. Over its limit it must refuse at once, so this is the figure a visitor can
   force.
2. ``lifted``: the same parser with its limit lifted, on ``--chars`` characters, against the
   linear baseline: the same parser on a tenth of the text, ten times (interleaved, medians).
   A linear parser gives a ratio near 1; a quadratic one near 10.

Targets: every median < 0.5 s and every ratio ≤ 3. Exits 1 when one is missed. The catalogue
(:data:`PARSERS`) is shared with tests/unit/test_parsers_linear.py.
"""

from __future__ import annotations

import argparse
import base64
import functools
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from components.shapes.draw import highlight_lines
from components.shapes.state import decode_source
from torchatlas.shapes.analysis import AnalysisError, parse_constructor, parse_dtypes, parse_shapes
from torchatlas.strides import (
    OpParseError,
    ShapeInputError,
    parse_chain,
    parse_index,
    parse_op,
    parse_shape,
    parse_write,
)
from torchatlas.strides.quiz import grade, make_question

TIME_TARGET_S = 0.5
RATIO_TARGET = 3.0
CHARS = 20_000
PARSE_ERRORS = (AnalysisError, ShapeInputError, OpParseError)


def repeat(unit: str, n: int, prefix: str = "", suffix: str = "") -> str:
    """``prefix`` + ``unit`` repeated + ``suffix``, exactly ``n`` characters long."""
    body = n - len(prefix) - len(suffix)
    return prefix + (unit * (body // len(unit) + 1))[: max(body, 0)] + suffix


def nested(opener: str, closer: str, n: int, prefix: str = "", suffix: str = "") -> str:
    depth = (n - len(prefix) - len(suffix)) // 2
    return repeat("0", n, prefix + opener * depth, closer * depth + suffix)


def zlib_bomb(n: int) -> str:
    """A link token of about ``n`` characters that inflates about a thousand times."""
    token = base64.urlsafe_b64encode(zlib.compress(b"\0" * (n * 700), 9)).decode().rstrip("=")
    return token[:n] if len(token) > n else token


@dataclass(frozen=True)
class Parser:
    """One server-side parser: how the server calls it (``parse``), the same parser with its
    length limit lifted (``core``), whether an outcome is its refusal of over-long text, and
    its worst cases (each builds a text of n characters)."""

    name: str
    parse: Callable[[str], Any]
    core: Callable[[str], Any]
    limit: int | None  # None: bounded before it, by the input that feeds it
    refused: Callable[[Any], bool]
    worst: dict[str, Callable[[int], str]] = field(default_factory=dict)


def outcome(function: Callable[[str], Any], text: str) -> Any:
    """What ``function(text)`` returns, or the parse error it raises (anything else
    propagates: a parser must never leak RecursionError, MemoryError or ValueError)."""
    try:
        return function(text)
    except PARSE_ERRORS as error:
        return error


def kind_is(code: str) -> Callable[[Any], bool]:
    def check(result: Any) -> bool:
        if isinstance(result, AnalysisError):
            return result.error.kind == code
        return isinstance(result, ShapeInputError | OpParseError) and result.code == code

    return check


@functools.cache
def _question() -> Any:
    return make_question(3, "new_stride")


def _grade(text: str, max_chars: int | None = 60) -> Any:
    return grade(_question(), text, max_chars=max_chars)


SPACED_TIMES = "1" + " " * 50 + "×"  # the shape regex scans spaces after each digit

PARSERS: tuple[Parser, ...] = (
    Parser(
        "shapes.parse_shapes",
        parse_shapes,
        functools.partial(parse_shapes, max_chars=None),
        500,
        kind_is("shapes_too_long"),
        {
            "open (": lambda n: "(" * n,
            "open [": lambda n: "[" * n,
            "1×1×…": lambda n: repeat("1×", n),
            "(1(1…": lambda n: repeat("(1", n),
            "()…[": lambda n: repeat("()", n, suffix="["),
            "(1,1,…)": lambda n: repeat("1,", n, "(", ")"),
            ";;;": lambda n: ";" * n,
            "digits": lambda n: repeat("9", n),
        },
    ),
    Parser(
        "shapes.parse_dtypes",
        parse_dtypes,
        functools.partial(parse_dtypes, max_chars=None),
        200,
        kind_is("dtypes_too_long"),
        {"separators": lambda n: repeat(", ;\t", n), "names": lambda n: repeat("long,", n)},
    ),
    Parser(
        "shapes.parse_constructor",
        parse_constructor,
        functools.partial(parse_constructor, max_chars=None),
        500,
        kind_is("model_too_long"),
        {
            "open (": lambda n: "(" * n,
            "nested [": lambda n: nested("[", "]", n, "M(", ")"),
            "unary -": lambda n: repeat("-", n, suffix="1"),
            "1+1+…": lambda n: repeat("1+", n, "M(", "1)"),
            "many args": lambda n: repeat("1,", n, "M(", ")"),
            "strings": lambda n: repeat("'a'", n, "M(", ")"),
            "nested {": lambda n: nested("{1:", "}", n, "M(", ")"),
        },
    ),
    Parser(
        "shapes.decode_source (link)",
        decode_source,
        functools.partial(decode_source, max_token_chars=None),
        6000,
        lambda result: result is None,
        {"zlib bomb": zlib_bomb, "garbage": lambda n: "!" * n, "base64": lambda n: "A" * n},
    ),
    Parser(
        "shapes.highlight_lines (listing)",
        highlight_lines,
        highlight_lines,
        None,
        lambda result: False,
        {
            "open (": lambda n: "(" * n,
            "continuations": lambda n: repeat("x = 1 \\\n", n),
            "open string": lambda n: repeat("a\n", n, '"""'),
            "newlines": lambda n: "\n" * n,
            "attributes": lambda n: repeat("a.", n),
        },
    ),
    Parser(
        "strides.parse_shape",
        parse_shape,
        functools.partial(parse_shape, max_chars=None),
        80,
        kind_is("shape_too_long"),
        {
            "1×1×…": lambda n: repeat("1×", n),
            "open (": lambda n: "(" * n,
            "spaced ×": lambda n: repeat(SPACED_TIMES, n),
            "digit then spaces": lambda n: repeat(" ", n, "1", "y"),
            "digits": lambda n: repeat("9", n),
        },
    ),
    Parser(
        "strides.parse_chain",
        parse_chain,
        functools.partial(parse_chain, max_chars=None),
        24 * 201,
        kind_is("chain_too_long"),
        {"ops": lambda n: repeat(".t()\n", n), "blank lines": lambda n: "\n" * n},
    ),
    Parser(
        "strides.parse_op",
        parse_op,
        functools.partial(parse_op, max_chars=None),
        200,
        kind_is("too_long"),
        {
            "open (": lambda n: "(" * n,
            "nested [": lambda n: nested("[", "]", n),
            "chained .t()": lambda n: repeat(".t()", n, "x"),
            "[0][0]…": lambda n: repeat("[0]", n),
            "unary -": lambda n: repeat("-", n, "select(0, ", "1)"),
            "long permute": lambda n: repeat("1,", n, "permute(", "1)"),
            "slices": lambda n: repeat("::,", n, "[", ":]"),
            "einsum": lambda n: repeat("i", n, "einsum('", "')"),
        },
    ),
    Parser(
        "strides.parse_write",
        parse_write,
        functools.partial(parse_write, max_chars=None),
        200,
        kind_is("write_too_long"),
        {
            "unary -": lambda n: repeat("-", n, "fill_(", "1)"),
            "long index": lambda n: repeat("0,", n, "[", "0] = 1"),
            "open (": lambda n: "(" * n,
            "[0][0]… =": lambda n: repeat("[0]", n, suffix=" = 1"),
        },
    ),
    Parser(
        "strides.parse_index",
        functools.partial(parse_index, size=(4, 4)),
        functools.partial(parse_index, size=(4, 4), max_chars=None),
        80,
        kind_is("index_too_long"),
        {
            "1,1,…": lambda n: repeat("1,", n),
            "brackets": lambda n: "(" * n,
            "digits": lambda n: "9" * n,
        },
    ),
    Parser(
        "strides.grade (quiz answer)",
        _grade,
        functools.partial(_grade, max_chars=None),
        60,
        kind_is("answer_too_long"),
        {
            "1,1,…": lambda n: repeat("1,", n),
            "minus": lambda n: "-" * n,
            "digits": lambda n: "9" * n,
            "spaced": lambda n: repeat("1 ", n),
        },
    ),
)


def _timed(function: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return time.perf_counter() - started


def _calls_for(function: Callable[[], Any], floor_s: float = 0.002) -> int:
    """Calls per sample so one sample lasts at least ``floor_s`` (timer noise stays small)."""
    once = max(_timed(function, 1), 1e-7)
    return max(1, min(10_000, int(floor_s / once) + 1))


@dataclass(frozen=True)
class Measure:
    parser: str
    case: str
    served_s: float  # the server's call on the full text (refused when over the limit)
    lifted_s: float  # limit lifted, full text
    baseline_s: float  # limit lifted, a tenth of the text, ten times
    refused: bool

    @property
    def ratio(self) -> float:
        return self.lifted_s / max(self.baseline_s, 1e-9)


def measure(parser: Parser, case: str, chars: int, rounds: int) -> Measure:
    build = parser.worst[case]
    full, tenth = build(chars), build(chars // 10)
    refused = parser.refused(outcome(parser.parse, full))
    served = functools.partial(outcome, parser.parse, full)
    lifted = functools.partial(outcome, parser.core, full)
    small = functools.partial(outcome, parser.core, tenth)
    lifted(), small()  # first calls pay one-off costs (imports, caches)
    calls = {
        name: _calls_for(fn) for name, fn in (("served", served), ("lifted", lifted))
    }  # fmt: skip
    samples: dict[str, list[float]] = {"served": [], "lifted": [], "baseline": []}
    for _ in range(rounds):  # interleaved: the machine is shared and noisy
        samples["served"].append(_timed(served, calls["served"]) / calls["served"])
        samples["lifted"].append(_timed(lifted, calls["lifted"]) / calls["lifted"])
        samples["baseline"].append(_timed(small, 10 * calls["lifted"]) / calls["lifted"])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return Measure(
        parser.name, case, medians["served"], medians["lifted"], medians["baseline"], refused
    )


def main() -> int:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--chars", type=int, default=CHARS)
    arguments.add_argument("--rounds", type=int, default=7)
    args = arguments.parse_args()
    ms = 1000
    failures: list[str] = []
    print(f"{args.chars:,} characters of each worst case; baseline: a tenth of it, ten times")
    print(f"{'parser':34} {'case':18} {'served':>10} {'lifted':>10} {'baseline':>10} {'ratio':>6}")
    for parser in PARSERS:
        for case in parser.worst:
            result = measure(parser, case, args.chars, args.rounds)
            note = ""
            if parser.limit is not None and args.chars > parser.limit:
                note = f"refused (limit {parser.limit:,})" if result.refused else "NOT REFUSED"
                if not result.refused:
                    failures.append(f"{parser.name} [{case}]: {args.chars:,} chars not refused")
            print(
                f"{parser.name:34} {case:18} {result.served_s * ms:8.3f}ms "
                f"{result.lifted_s * ms:8.3f}ms {result.baseline_s * ms:8.3f}ms "
                f"{result.ratio:5.2f}× {note}"
            )
            slowest = max(result.served_s, result.lifted_s)
            if slowest >= TIME_TARGET_S:
                failures.append(f"{parser.name} [{case}]: {slowest:.2f} s ≥ {TIME_TARGET_S} s")
            if result.ratio > RATIO_TARGET:
                failures.append(
                    f"{parser.name} [{case}]: {result.ratio:.1f}× its linear baseline "
                    f"(target ≤ {RATIO_TARGET}×)"
                )
    print(f"targets: every median < {TIME_TARGET_S} s, every ratio ≤ {RATIO_TARGET}×")
    for failure in failures:
        print(f"FAIL: {failure}")
    if failures:
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
