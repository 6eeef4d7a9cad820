"""Every server-side parser: linear in its input, bounded, and refusing over-long text at once.

The worst cases (deep nesting, long repetition, input aimed at each regular expression) are
the benchmark's catalogue, bench/bench_parsers.py, which also prints how each parser scales
against a linear baseline. Here each case runs once on 20,000 characters: as the server calls
the parser (it must refuse at once with its own error) and with the limit lifted (it must
still finish quickly and raise nothing but its own parse error).
"""

from __future__ import annotations

import time

import pytest

from bench.bench_parsers import CHARS, PARSERS, Parser, outcome
from torchatlas.i18n import LANGUAGES, translate
from torchatlas.shapes.analysis import AnalysisError, parse_constructor, parse_dtypes, parse_shapes
from torchatlas.strides import (
    MAX_CHAIN_TEXT,
    MAX_OP_TEXT,
    MAX_OPS,
    OpParseError,
    parse_chain,
    parse_op,
    parse_shape,
    parse_write,
)

# Generous: every case takes milliseconds; the quadratic parse_shapes took seconds. Measured
# in CPU time of this thread's process, so a busy machine does not count against a parser.
BOUND_S = 0.5
CASES = [(parser, case) for parser in PARSERS for case in parser.worst]


def _timed(parser: Parser, text: str, lifted: bool) -> tuple[object, float]:
    """The outcome, and the better of two runs' CPU time: a parser's first call also builds
    what it keeps (Pygments compiles its lexer's patterns once: 0.2 s of 0.04), which is not
    the parse's own cost."""
    times = []
    for _ in range(2):
        started = time.process_time()
        result = outcome(parser.core if lifted else parser.parse, text)
        times.append(time.process_time() - started)
    return result, min(times)


@pytest.mark.parametrize(
    ("parser", "case"), CASES, ids=[f"{parser.name}:{case}" for parser, case in CASES]
)
def test_worst_case_is_quick_and_refused_when_too_long(parser: Parser, case: str) -> None:
    text = parser.worst[case](CHARS)
    served, served_s = _timed(parser, text, lifted=False)
    _, lifted_s = _timed(parser, text, lifted=True)  # raises if anything but a parse error
    assert served_s < BOUND_S, f"{parser.name} took {served_s:.2f} s on {case}"
    assert lifted_s < BOUND_S, f"{parser.name} (no limit) took {lifted_s:.2f} s on {case}"
    if parser.limit is not None and len(text) > parser.limit:
        assert parser.refused(served), f"{parser.name} read {len(text):,} characters: {served!r}"


LIMITED = [parser for parser in PARSERS if parser.limit is not None]


@pytest.mark.parametrize("parser", LIMITED, ids=[parser.name for parser in LIMITED])
def test_the_limit_is_exact(parser: Parser) -> None:
    assert parser.limit is not None
    build = next(iter(parser.worst.values()))
    assert parser.refused(outcome(parser.parse, build(parser.limit + 1)))
    if "decode_source" not in parser.name:  # there, any unreadable token is refused alike
        assert not parser.refused(outcome(parser.parse, build(parser.limit)))


def _refusal(parser: Parser) -> AnalysisError | OpParseError | Exception:
    result = outcome(parser.parse, "1" * (CHARS + 1))
    assert isinstance(result, Exception), parser.name
    return result


@pytest.mark.parametrize(
    "parser",
    [parser for parser in LIMITED if "decode_source" not in parser.name],
    ids=lambda parser: parser.name,
)
def test_refusals_are_translated_with_the_limit(parser: Parser) -> None:
    error = _refusal(parser)
    for lang in LANGUAGES:
        if isinstance(error, AnalysisError):
            params = {key: str(value) for key, value in error.error.params.items()}
            keys = [f"shapes.errors.{error.error.kind}.{part}" for part in ("title", "message")]
        else:
            params = dict(error.params)  # type: ignore[attr-defined]
            params.setdefault("text", "…")
            keys = [f"strides.errors.{error.code}"]  # type: ignore[attr-defined]
        for key in keys:
            text = translate(key, lang, **params)
            assert text != key and "{" not in text, (lang, key, text)
        message = translate(keys[-1], lang, **params)
        assert f"{parser.limit:,}" in message or str(parser.limit) in message


def test_limits_fit_honest_use() -> None:
    eight_inputs = "; ".join(["1024 × 3 × 65536 × 65536"] * 8)
    assert len(parse_shapes(eight_inputs)) == 8
    assert parse_shapes("(1, 3, 224, 224), (1, 10)") == [[1, 3, 224, 224], [1, 10]]
    assert parse_dtypes("torch.float32, long, float16, bfloat16, int32, bool, double, half") == [
        "torch.float32", "long", "float16", "bfloat16", "int32", "bool", "double", "half",
    ]  # fmt: skip
    call = "ResNetGenerator(3, 3, ngf=64, n_blocks=9, padding_type='reflect', use_dropout=False)"
    assert parse_constructor(call)[0] == "ResNetGenerator"
    assert parse_shape("(1048576,)") == (1048576,)
    assert parse_shape("1, 2, 2, 2, 2, 2") == (1, 2, 2, 2, 2, 2)
    longest_chain = "\n".join(["." + "t" * (MAX_OP_TEXT - 1)] * MAX_OPS)
    assert len(longest_chain) <= MAX_CHAIN_TEXT
    assert len(parse_chain(longest_chain)) == MAX_OPS
    parse_op(".as_strided((2, 2, 2, 2, 2, 2), (32, 16, 8, 4, 2, 1), 0)")
    parse_write("[0, 1, 2, 3, 4, 5] = 123456.75")


def test_deep_nesting_within_the_limits_is_read_or_refused_never_a_crash() -> None:
    # Python's parser stops at 200 nested brackets (SyntaxError); past the limits, deeper
    # input makes it raise RecursionError or MemoryError, which the catalogue's lifted runs
    # above would let through if a parser leaked them.
    with pytest.raises(AnalysisError) as raised:
        parse_constructor("M(" + "[" * 240 + "]" * 240 + ")")
    assert raised.value.error.kind == "bad_constructor"
    with pytest.raises(AnalysisError):
        parse_constructor("M(" + "-" * 490 + "1)")
    for text in ("[" * 100 + "]" * 100, "x" + ".t()" * 49, "(" * 199):
        with pytest.raises(OpParseError):
            parse_op(text)
    assert parse_write("fill_(" + "-" * 190 + "1)").value == 1
