"""Every reply from a sandbox worker is hostile input: it is checked against a bounded schema
before anything formats or renders it, and anything out of bounds becomes a clear error.

A child that has escaped the sandbox can write any bytes to its job socket, so the end-to-end
tests switch the first two layers off (test hooks) and let the pasted code write a forged,
well-formed reply on the job descriptor itself, then exit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sandbox_jobs import warm_pool
from torchatlas.presets import PRESETS
from torchatlas.sandbox import SandboxPool, protocol
from torchatlas.sandbox.pool import MAX_MESSAGE_CHARS, MAX_REFUSALS, UNTRUSTED_MESSAGE, check_reply
from torchatlas.sandbox.schema import (
    AnyJSON,
    Bool,
    Dict,
    Float,
    Int,
    List,
    Map,
    Optional,
    SchemaError,
    Str,
    validate,
)
from torchatlas.shapes import ShapeReport, WhyMetaReport, analyze_namespace, explore, parse_shapes
from torchatlas.shapes.report import MAX_DEPTH, MAX_ROWS, MAX_SIZE

# ---------------------------------------------------------------- the generic validator


@pytest.mark.parametrize(
    ("value", "spec"),
    [
        (3e8, Int(0, 10**9)),  # a float where a whole number is expected
        (3.0, Int(0, 10)),
        (True, Int(0, 10)),  # bool is an int in Python, not in the schema
        (10**4000, Int(0, 2**40)),
        (-1, Int(0, 2**40)),
        ("12", Int(0, 100)),
        (None, Int(0, 100)),
        (float("nan"), Float(0, 1)),
        (float("inf"), Float(0, 1e300)),
        (1, Bool()),
        ("x" * 101, Str(100)),
        ("other", Str(10, choices=("a", "b"))),
        ("a.b", Str(10, pattern=r"[a-z]+")),
        (list(range(11)), List(Int(0, 100), 10)),
        ([1, 2, "3"], List(Int(0, 100), 10)),
        ({"a": 1}, List(Int(0, 1), 10)),
        ({"depth": 10**8}, Dict({"depth": Int(0, 256)})),
        ({}, Dict({"depth": Int(0, 256)}, required=("depth",))),
        ({str(i): i for i in range(100)}, Dict({"a": Int(0, 1)})),  # a key flood
        ({"k": {"nested": 1}}, Map(Optional(Int(0, 9)), 10)),
        ({"x" * 100: 1}, Map(Int(0, 9), 10)),
    ],
)
def test_values_out_of_bounds_are_refused(value: Any, spec: Any) -> None:
    with pytest.raises(SchemaError):
        validate(value, spec)


def test_refusals_name_the_place_never_the_value() -> None:
    huge = "x" * 10_000_000
    data = {"rows": [{"name": "ok"}, {"name": huge}]}
    with pytest.raises(SchemaError) as caught:
        validate(data, Dict({"rows": List(Dict({"name": Str(100)}), 10)}))
    assert caught.value.path == "rows[1].name"
    assert len(str(caught.value)) < 200
    with pytest.raises(SchemaError) as caught:
        validate({"n": 7**5000}, Dict({"n": Int(0, 2**40)}))
    assert "bit" in str(caught.value) and len(str(caught.value)) < 200


def test_clipping_and_cleaning() -> None:
    assert validate("x" * 50, Str(10, clip=True)) == "x" * 9 + "…"
    assert validate(list(range(50)), List(Int(0, 99), 5, clip=True)) == [0, 1, 2, 3, 4]
    assert validate("a\ud800b", Str(10)) == "a?b"  # a lone surrogate cannot be sent to a page
    assert validate({"a": 1, "unknown": [1] * 3}, Dict({"a": Int(0, 1)})) == {"a": 1}


def test_nesting_and_item_counts_are_bounded() -> None:
    nested: Any = 0
    for _ in range(100):
        nested = [nested]
    with pytest.raises(SchemaError, match="nested"):
        validate(nested, AnyJSON(max_depth=32))
    assert validate([[[1]]], AnyJSON(max_depth=32)) == [[[1]]]
    flat = [[0] * 1000 for _ in range(1000)]
    with pytest.raises(SchemaError, match="too many"):
        validate(flat, List(List(Int(0, 1), 1000), 1000), max_nodes=100_000)


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    "body",
    [
        b'{"n": ' + b"9" * 4000 + b"}",  # converting and printing it would be slow
        b'{"n": -' + b"9" * 400 + b"}",
        b'{"n": NaN}',
        b'{"n": -Infinity}',
        b'{"n": 1.' + b"0" * 1000 + b"}",
        b"[1, 2]",  # not an object
        b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # deeper than the decoder recurses
        b"\xff\xfe",
    ],
)
def test_decoding_refuses_unbounded_numbers(body: bytes) -> None:
    with pytest.raises((ValueError, RecursionError)):
        protocol.decode(body)


def test_decoding_keeps_ordinary_numbers() -> None:
    assert protocol.decode(b'{"a": [1099511627776, -3, 2.5e-3, 1e300]}') == {
        "a": [2**40, -3, 0.0025, 1e300]
    }


# What a reply may hold: whole numbers up to the protocol's digits (past orjson's 64 bits),
# floats with long fractions, text with lone surrogates (which orjson refuses), nesting.
_WIRE_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**39), max_value=10**39)
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=40,
)


@given(st.dictionaries(st.text(max_size=8), _WIRE_VALUES, max_size=6))
@settings(max_examples=300, deadline=None)
def test_a_message_reads_back_as_python_s_json_reads_it(message: dict[str, Any]) -> None:
    """orjson writes and reads the messages, with Python's ``json`` where orjson would not
    say the same (a whole number past 64 bits, a lone surrogate): the reader's result is
    exactly Python's, type for type (``1`` is never ``1.0``)."""
    framed = protocol.encode(message)
    (size,) = protocol.HEADER.unpack(framed[: protocol.HEADER.size])
    body = framed[protocol.HEADER.size :]
    assert size == len(body)
    expected = json.loads(json.dumps(message))
    got = protocol.decode(body)
    assert got == expected and _types(got) == _types(expected)


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_types(item) for item in value]
    return type(value)


@pytest.mark.parametrize(
    "body, expected",
    [
        (b'{"n": 18446744073709551616}', 2**64),  # one past orjson's largest
        (b'{"n": -9223372036854775809}', -(2**63) - 1),
        (b'{"n": [0.0008918217499740422, 12]}', [0.0008918217499740422, 12]),  # a long fraction
        (b'{"n": "a 12345678901234567890 b"}', "a 12345678901234567890 b"),  # digits in text
        (b'{"n": "\\ud800"}', "\ud800"),  # a lone surrogate: orjson refuses it
    ],
)
def test_whole_numbers_past_64_bits_stay_exact(body: bytes, expected: Any) -> None:
    assert protocol.decode(body) == {"n": expected}
    assert type(protocol.decode(body)["n"]) is type(expected)


def test_orjson_writes_only_an_engine_s_reply_and_only_with_room_for_it(monkeypatch) -> None:
    """orjson cannot stop at a size limit and crashes a child whose allocation fails, so a
    child writes with it only a room engine's reply (bounded by the engine) and only while
    the address space has room; pasted code's results go through Python's ``json``, which
    raises MemoryError and lets the child answer "out of memory" or "too large". (The two
    writers differ on NaN, which only Python's writes as ``NaN``: that tells them apart.)"""
    from torchatlas.sandbox import worker
    from torchatlas.sandbox.codec import EngineReply

    def body(value: dict[str, Any]) -> bytes:
        return worker.reply_frame({"ok": True, "value": value})[protocol.HEADER.size :]

    assert body(EngineReply(result=float("nan"))) == b'{"ok":true,"value":{"result":null}}'
    assert body({"result": float("nan")}) == b'{"ok":true,"value":{"result":NaN}}'
    assert worker._has_room(1 << 20) and not worker._has_room(1 << 62)
    monkeypatch.setattr(worker, "_has_room", lambda size: False)
    assert body(EngineReply(result=float("nan"))) == b'{"ok":true,"value":{"result":NaN}}'


# ---------------------------------------------------------------- the envelope


def _error(**fields: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"kind": "syntax", "message": "bad", **fields}}


@pytest.mark.parametrize(
    "reply",
    [
        _error(col=3e8),
        _error(col=300_000_000),
        _error(line=10**12),
        _error(line="1"),
        _error(kind=["syntax"]),
        _error(refusals=[{"line": 1, "col": 1e9, "code": "x", "message": "m"}]),
        _error(refusals=[{"line": 1}]),
        _error(refusals={"line": 1}),
        {"ok": False},  # not ok, and no error
        {"ok": True},  # ok, and no value
        {"ok": True, "value": [1, 2]},
        {"ok": "yes", "value": {}},
        {"value": {}},
        {"ok": True, "value": {"x": float("inf")}},
        {"ok": True, "value": {"x": 2**200}},
    ],
)
def test_forged_envelopes_are_refused(reply: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        check_reply(reply)


def test_long_texts_in_an_envelope_are_clipped_not_refused() -> None:
    refusal = {"line": 1, "col": 1, "code": "import", "message": "m" * 10_000}
    clean = check_reply(_error(message="m" * 10_000_000, refusals=[refusal] * 100_000))
    assert len(clean["error"]["message"]) == MAX_MESSAGE_CHARS
    assert len(clean["error"]["refusals"]) == MAX_REFUSALS
    assert max(len(item["message"]) for item in clean["error"]["refusals"]) <= 1000


def test_a_caller_schema_checks_the_value() -> None:
    schema = Dict({"n": Int(0, 10)}, required=("n",))
    assert check_reply({"ok": True, "value": {"n": 3, "extra": 1}}, schema)["value"] == {"n": 3}
    with pytest.raises(SchemaError):
        check_reply({"ok": True, "value": {"n": 11}}, schema)


# ---------------------------------------------------------------- forged replies, end to end

FORGER = """
import os, struct

def attack():
    body = build()
    os.write(3, struct.pack("!Q", len(body)) + body)
    os._exit(0)

def build():
    return {body}
"""

FORGED_BODIES = {
    "column 3e8": 'b\'{"ok": false, "error": {"kind": "syntax", "message": "m", '
    '"line": 1, "col": 3e8}}\'',
    "4000-digit size": "b'{\"ok\": true, \"value\": {\"shape\": [' + b'9' * 4000 + b']}}'",
    "deep nesting": "b'{\"ok\": true, \"value\": {\"a\": ' + b'[' * 5000 + b']' * 5000 + b'}}'",
    "huge list": "b'{\"ok\": true, \"value\": {\"a\": [' + b'[0],' * 1500000 + b'0]}}'",
    "NaN": 'b\'{"ok": true, "value": {"t": NaN}}\'',
    "not JSON": "b'{\"ok\": tru'",
    "wrong types": 'b\'{"ok": "true", "value": "everything"}\'',
}


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with warm_pool(test_hooks=True, rate_limit=0) as sandbox:
        yield sandbox


def _forge(pool: SandboxPool, body: str, **kw: Any) -> Any:
    """Run code that has escaped the first two layers and writes ``body`` as its reply."""
    source = FORGER.replace("{body}", body)
    return pool.run_job(
        source, "sandbox.call", {"name": "attack"}, layers_off=("static", "facade"), **kw
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORGED_BODIES))
def test_a_forged_reply_is_an_untrusted_error_in_bounded_time(pool: SandboxPool, name: str) -> None:
    timeout_s = 10.0
    result = _forge(pool, FORGED_BODIES[name], timeout_s=timeout_s)
    assert not result.ok and result.value is None
    assert result.error.kind == "untrusted", result.error
    assert result.error.message == UNTRUSTED_MESSAGE
    assert result.error.line is None and result.error.col is None
    # answered, not waited out (that takes the timeout plus the exit report's grace)
    assert result.elapsed_s < timeout_s
    json.dumps(result.to_dict())
    # and the pool goes on serving
    assert pool.run_job("x = 1", "sandbox.echo", {}).ok


@pytest.mark.slow
def test_a_value_outside_the_callers_schema_is_untrusted(pool: SandboxPool) -> None:
    """The facade is on here: the job's own value (the user function's result) is forged."""
    source = "def attack():\n    x = 0\n    for _ in range(100):\n        x = [x]\n    return x\n"
    deep = pool.run_job(source, "sandbox.call", {"name": "attack"})
    assert deep.error is not None and deep.error.kind == "untrusted"
    schema = Dict({"params": Dict({"n": Int(0, 10)}, required=("n",))}, required=("params",))
    fine = pool.run_job("x = 1", "sandbox.echo", {"n": 5}, value_schema=schema)
    assert fine.ok and fine.value == {"params": {"n": 5}}
    wrong = pool.run_job("x = 1", "sandbox.echo", {"n": 11}, value_schema=schema)
    assert not wrong.ok and wrong.error.kind == "untrusted"


@pytest.mark.slow
def test_explore_turns_a_forged_report_into_a_clear_error(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's path: a forged but well-formed analysis (a row at depth 1e8, a column of
    3e8, sizes of 4000 digits) never becomes a ShapeReport."""
    from torchatlas import sandbox

    def escaped_run_job(source: str, job: str, params: dict, **kw: Any) -> Any:
        return pool.run_job(source, job, params, layers_off=("static", "facade"), **kw)

    monkeypatch.setattr(sandbox, "run_job", escaped_run_job)
    row = {"name": "x", "type": "Linear", "kind": "module", "depth": 10**8}
    forged_values = [
        {"layers": [row], "outputs": [[1, 10]]},
        {"layers": [], "error": {"kind": "syntax", "message": "m", "line": 1, "col": 3e8}},
        {"layers": [], "outputs": [[10**40 - 1] * 4]},
    ]
    for value in forged_values:
        body = repr(json.dumps({"ok": True, "value": value}).encode())
        source = FORGER.replace("{body}", body) + "\nattack()\n"
        report = explore(source, [[1, 3, 8, 8]], timeout_s=10)
        assert report.error is not None and report.error.kind == "untrusted", value
        assert report.error.message == UNTRUSTED_MESSAGE and report.error.hint
        assert report.layers == []
    # A whole number past the decoder's bound, sent raw.
    raw = 'b\'{"ok": true, "value": {"layers": [], "flops": \' + b\'9\' * 4000 + b\'}}\''
    report = explore(FORGER.replace("{body}", raw) + "\nattack()\n", [[1, 3]], timeout_s=10)
    assert report.error is not None and report.error.kind == "untrusted"


# ---------------------------------------------------------------- the shapes schema


def _honest(key: str, symbolic: bool) -> dict[str, Any]:
    """A preset's report as the worker sends it (trusted preset code, run in-process)."""
    preset = PRESETS[key]
    namespace: dict[str, Any] = {"__name__": "pasted_model"}
    exec(compile(preset.source, "<pasted model>", "exec"), namespace)
    dtypes = [part.strip() for part in preset.dtypes.split(";")]
    data = analyze_namespace(
        namespace,
        input_shapes=parse_shapes(preset.shapes),
        input_dtypes=dtypes,
        model=preset.model or None,
        symbolic=symbolic,
    )
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_honest_preset_report_passes_the_schema(key: str, symbolic: bool) -> None:
    data = _honest(key, symbolic)
    report = ShapeReport.from_dict(data)
    assert report.to_dict() == data
    assert check_reply({"ok": True, "value": data})["value"] == data


def _report(**fields: Any) -> dict[str, Any]:
    row = {
        "name": "fc",
        "type": "Linear",
        "kind": "module",
        "depth": 1,
        "input_shapes": [[1, 4]],
        "output_shapes": [[1, 2]],
        "params": 10,
        "line": 3,
    }
    data: dict[str, Any] = {"layers": [row], "outputs": [[1, 2]], "model": "Net()"}
    for key, value in fields.items():
        if key.startswith("row_"):
            row[key[4:]] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    "fields",
    [
        {"row_depth": 10**8},
        {"row_depth": MAX_DEPTH + 1},
        {"row_depth": 1.0},
        {"row_output_shapes": [[10**4000]]},
        {"row_output_shapes": [[MAX_SIZE + 1]]},
        {"row_output_shapes": [[2**40] * 8]},  # more elements than int64 holds
        {"row_output_shapes": [[1] * 1000]},
        {"row_kind": "<script>"},
        {"row_params": 2**200},
        {"row_flops": -1},
        {"row_line": 10**9},
        {"row_constraints": "N ≥ 2"},
        {"layers": [_report()["layers"][0]] * (MAX_ROWS + 1)},
        {"outputs": [[1, 2.5]]},
        {"input_shapes": [[1, 3]] * 9},
        {"elapsed_s": float("nan")},
        {"elapsed_s": 1e300},
        {"symbolic": "yes"},
        {"error": {"kind": "syntax", "message": "m", "col": 3e8}},
        {"error": {"kind": "syntax", "message": "m", "col": 300_000_000}},
        {"error": {"kind": "app.rooms", "message": "m"}},  # picks other translations
        {"error": {"kind": "syntax", "message": "m", "params": {"x": {"nested": 1}}}},
        {"error": {"message": "m"}},  # no kind
        {"constraints": [{"layer": "fc"}]},
    ],
)
def test_forged_reports_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        ShapeReport.from_dict(_report(**fields))


def test_long_texts_in_a_report_are_clipped() -> None:
    report = ShapeReport.from_dict(
        _report(
            model="M" * 100_000,
            row_name="n" * 100_000,
            symbolic_detail="s" * 100_000,
            error={
                "kind": "internal",
                "message": "e" * 10**6,
                "hint": "h" * 10**6,
                "params": {"detail": "d" * 10**6},
            },
        )
    )
    assert len(report.model) <= 1000 and len(report.layers[0].name) <= 2000
    assert len(report.symbolic_detail) <= 4000
    assert report.error is not None and len(report.error.message) <= 4000
    assert len(report.error.params["detail"]) <= 1000


def test_why_meta_reports_are_checked() -> None:
    point = {
        "batch": 1,
        "input_shapes": [[1, 3]],
        "meta_s": 0.001,
        "real_s": None,
        "input_bytes": 12,
    }
    assert WhyMetaReport.from_dict({"points": [point]}).points[0].batch == 1
    for forged in (
        {"batch": 3e8},
        {"meta_s": float("inf")},
        {"real_s": "fast"},
        {"input_bytes": 10**40},
        {"input_shapes": [[10**4000]]},
    ):
        with pytest.raises(SchemaError):
            WhyMetaReport.from_dict({"points": [{**point, **forged}]})
    with pytest.raises(SchemaError):
        WhyMetaReport.from_dict({"points": [point] * 1000})


def test_the_schema_bounds_match_the_analysis() -> None:
    from torchatlas.shapes import analysis, report

    for name in ("MAX_INPUTS", "MAX_DIMS", "MAX_SIZE", "MAX_ROWS"):
        assert getattr(report, name) == getattr(analysis, name), name


def test_explore_never_raises_for_a_forged_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchatlas import sandbox
    from torchatlas.sandbox import SandboxResult

    forged = _report(row_depth=10**8)
    monkeypatch.setattr(
        sandbox, "run_job", lambda *args, **kw: SandboxResult(True, forged, None, 0.01)
    )
    report = explore("x = 1", [[1, 4]])
    assert report.error is not None and report.error.kind == "untrusted"
    assert report.layers == [] and report.input_shapes == [[1, 4]]


def test_the_largest_report_in_bounds_renders_in_bounded_text() -> None:
    """What the page builds from a report is proportional to the report's JSON: no field can
    be multiplied into a huge string (depth → indentation, column → caret)."""
    from components.shapes import draw as view
    from components.theme import LIGHT

    row = {
        "name": "x" * 200,
        "type": "Linear",
        "kind": "module",
        "depth": MAX_DEPTH,
        "input_shapes": [[2**40, 2**20, 2]],
        "output_shapes": [[2**40, 2**20, 2]],
        "params": 2**100,
        "flops": 2**100,
        "activation_bytes": 2**100,
        "line": 50_001,
    }
    data = _report(
        layers=[row] * 300, error={"kind": "syntax", "message": "m", "line": 1, "col": 50_001}
    )
    report = ShapeReport.from_dict(data)
    size = len(json.dumps(report.to_dict()))
    frame = view.layer_frame(report, MAX_DEPTH, symbolic=False, lang="en")
    lines = view.code_lines_html("x = 1\n", dark=False)
    texts = [
        frame.to_csv(),
        view.flow_dot(report, MAX_DEPTH, LIGHT, "en"),
        view.csv_bytes(report).decode(),
        view.source_listing_html(lines, view.error_marks(report.error, "en"), LIGHT, col=50_001),
    ]
    view.activation_figure(report, LIGHT, "en").to_json()
    assert sum(map(len, texts)) < 10 * size
