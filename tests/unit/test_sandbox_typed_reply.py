"""The typed reader of a room job's reply is a fast path, never a second judge: from the same
bytes it returns exactly what the codec returns, or nothing (and the codec decides)."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bench.bench_autograd import fifty_op_program
from tests.unit.test_codec import Colour
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.jobs import ProgramReply, run_job, run_program
from torchatlas.sandbox import protocol
from torchatlas.sandbox.codec import Limits, encode, job_reply
from torchatlas.sandbox.pool import DecodedByCaller, _read_reply
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandbox.typed_reply import Rebuilt, result_reader, result_writer
from torchatlas.sandbox.worker import reply_frame
from torchatlas.sandboxed import _outcome


@dataclass(frozen=True)
class Inner:
    name: str
    size: int | None
    weights: tuple[float, ...]
    colour: Colour = Colour.RED


@dataclass(frozen=True)
class Checked:
    line: int
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.line < 0:
            raise ValueError("a negative line")
        object.__setattr__(self, "params", {"line": self.line, **self.params})


@dataclass(frozen=True)
class Outer:
    kind: Literal["a", "b"]
    flag: bool
    pair: tuple[int, str]
    items: tuple[Inner, ...]
    names: list[str]
    ratio: float
    checked: Checked | None = None


LIMITS = Limits(max_str=12, max_items=4, max_nodes=2_000, max_depth=8)


def _slow(body: bytes, hint: Any, limits: Limits) -> Any:
    """What the ordinary path makes of ``body``: the value, or the exception it refuses with."""
    try:
        reply = protocol.decode(body)
        return _outcome(reply["value"], hint, limits).value
    except (SchemaError, ValueError, TypeError, KeyError, RecursionError) as exc:
        return exc


def _body(result: Any) -> bytes:
    """The reply as the worker's writer frames it (orjson, or Python's json past 64 bits)."""
    return protocol.encode({"ok": True, "value": {"result": result}})[protocol.HEADER.size :]


def _same(fast: Any, slow: Any) -> bool:
    # repr tells 2 from 2.0, a tuple from a list and an enum from its text; == alone does not
    return fast == slow and repr(fast) == repr(slow)


def test_every_example_program_is_read_exactly_as_the_codec_reads_it() -> None:
    read = result_reader(ProgramReply, Limits())
    assert read is not None
    programs = [example.program for example in EXAMPLES.values()] + [fifty_op_program()]
    for program in programs:
        reply = {"ok": True, "value": run_job({}, program=program, seed=0, root=None)}
        body = reply_frame(reply)[protocol.HEADER.size :]  # as a worker sends it
        fast = read(body)
        slow = _slow(body, ProgramReply, Limits())
        assert not isinstance(slow, Exception), program
        if fast is None:  # e.g. a program whose values are not finite: the codec reads it
            assert b'"$float"' in body, program
            continue
        assert type(fast) is Rebuilt and _same(fast["result"], slow), program


def test_the_benchmark_program_takes_the_fast_path() -> None:
    run = run_program(fifty_op_program(), 0, None)
    body = _body(encode(ProgramReply.of(run.graph, run.trace)))
    assert result_reader(ProgramReply, Limits())(body) is not None


def _text(max_size: int) -> st.SearchStrategy[str]:
    """Mostly plain ASCII (the fast path's case), sometimes any text."""
    ascii_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=max_size)
    return st.one_of(*[ascii_text] * 9, st.text(max_size=max_size))


def _floats() -> st.SearchStrategy[float]:
    finite = st.floats(allow_nan=False, allow_infinity=False)
    return st.one_of(*[finite] * 9, st.floats())


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text(16)
    | st.sampled_from(["red", "blue", "a", "b", "$float", "nan", "$map"])
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text(8), inner, max_size=4),
    max_leaves=12,
)

inner = st.builds(
    Inner,
    _text(12),
    st.none() | st.integers(-99, 99) | st.integers(-(2**64), 2**64),
    st.lists(_floats(), max_size=4).map(tuple),
    st.sampled_from(Colour),
)
outer = st.builds(
    Outer,
    st.sampled_from(["a", "b"]),
    st.booleans(),
    st.tuples(st.integers(-5, 5) | st.integers(-5, 10**20), _text(3)),
    st.lists(inner, max_size=4).map(tuple),
    st.lists(_text(12), max_size=4),
    _floats(),
    st.none()
    | st.builds(
        Checked,
        st.integers(min_value=0, max_value=9),
        st.dictionaries(_text(3), st.integers(-9, 9) | _text(3) | _floats(), max_size=3),
    ),
)


def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(data, dict):
        for key, item in data.items():
            out += _paths(item, (*path, key))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            out += _paths(item, (*path, index))
    return out


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def _like(value: Any) -> st.SearchStrategy[Any]:
    """Another value of the same JSON kind (sizes and texts that may break a bound)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-(2**70), 2**70) | st.integers(-9, 9)
    if isinstance(value, float):
        return _floats()
    if isinstance(value, str):
        return _text(16) | st.sampled_from(["red", "blue", "a", "b"])
    if isinstance(value, list):
        return st.just([*value, *value[:1]])  # one item more
    return st.just(value)


def _replaced(data: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {**data, head: _replaced(data[head], rest, new)}
    return [*data[:head], _replaced(data[head], rest, new), *data[head + 1 :]]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=outer, data=st.data())
def test_a_reply_is_read_as_the_codec_reads_it_or_left_to_the_codec(
    value: Outer, data: st.DataObject
) -> None:
    read = result_reader(Outer, LIMITS)
    assert read is not None
    encoded = encode(value)
    mutations = ["none", "replace", "same kind", "unknown field", "duplicate"]
    mutation = data.draw(st.sampled_from(mutations))
    if mutation in ("replace", "same kind"):
        path = data.draw(st.sampled_from(_paths(encoded)))
        old = _at(encoded, path)
        new = data.draw(_like(old) if mutation == "same kind" else json_value)
        encoded = _replaced(encoded, path, new)
    body = _body(encoded)
    if mutation == "unknown field":
        body = body.replace(b'{"kind":', b'{"colour":1,"kind":', 1)
    elif mutation == "duplicate":  # JSON readers keep the last of a repeated key
        first = data.draw(st.sampled_from([b"true", b"false", b'"no"']))
        body = body.replace(b'{"kind":', b'{"flag":' + first + b',"kind":', 1)
    fast = read(body)
    slow = _slow(body, Outer, LIMITS)
    event(f"{mutation}: {'fast' if fast is not None else 'codec'}")
    if fast is not None:
        assert not isinstance(slow, Exception), slow
        assert _same(fast["result"], slow)


@settings(max_examples=200, deadline=None)
@given(value=outer)
def test_a_plain_reply_within_the_bounds_takes_the_fast_path(value: Outer) -> None:
    body = _body(encode(value))
    slow = _slow(body, Outer, LIMITS)
    fits = not isinstance(slow, Exception)
    plain = body.isascii() and b"\\u" not in body and b'"$float"' not in body
    fast = result_reader(Outer, LIMITS)(body)
    if fits and plain and protocol.plain_numbers(body):
        assert fast is not None and _same(fast["result"], slow)
    else:
        assert fast is None or _same(fast["result"], slow)


PLAIN = {"kind": "a", "flag": True, "pair": [1, "x"], "items": [], "names": [], "ratio": 1}
FORGED = {
    "an unknown field": {**PLAIN, "extra": 1},
    "a string past max_str": {**PLAIN, "names": ["x" * 13]},
    "a list past max_items": {**PLAIN, "names": ["x"] * 5},
    "a number that is not finite": {**PLAIN, "ratio": 1e400},
    "a __post_init__ that refuses": {**PLAIN, "checked": {"line": -1}},
    "a literal outside its values": {**PLAIN, "kind": "c"},
    "a number where a flag belongs": {**PLAIN, "flag": 1},
}


@pytest.mark.parametrize("why", sorted(FORGED))
def test_forged_replies_get_no_fast_answer_and_the_codec_refuses_them(why: str) -> None:
    body = json.dumps({"ok": True, "value": {"result": FORGED[why]}}).encode()
    assert result_reader(Outer, LIMITS)(body) is None, why
    assert isinstance(_slow(body, Outer, LIMITS), Exception), why


def test_text_and_numbers_only_the_codec_reads_exactly_go_to_the_codec() -> None:
    base = {key: value for key, value in PLAIN.items() if key != "pair"}
    read = result_reader(Outer, LIMITS)
    cases = {
        "non-ASCII text": {**base, "pair": [1, "é"]},
        "an escaped character": {**base, "pair": [1, "\x07"]},
        "a whole number of 19 digits": {**base, "pair": [10**18, "x"]},
        "a marked float": {**base, "pair": [1, "x"], "ratio": {"$float": "nan"}},
    }
    for why, result in cases.items():
        body = json.dumps({"ok": True, "value": {"result": result}}).encode()
        assert read(body) is None, why
        slow = _slow(body, Outer, LIMITS)
        if why == "a marked float":
            assert math.isnan(slow.ratio)


@dataclass(frozen=True)
class Node:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Built:
    size: int

    def __init__(self, size: int) -> None:
        object.__setattr__(self, "size", abs(size))


WITHOUT_READER = [Node, Built, int | str, float | int, dict[str, list[int]], dict[int, str]]
WITHOUT_READER += [Any, Fraction, complex, set[int], tuple, Literal[True], tuple[Any, ...]]


@pytest.mark.parametrize("hint", WITHOUT_READER)
def test_types_whose_checks_msgspec_cannot_state_exactly_have_no_reader(hint: Any) -> None:
    assert result_reader(hint, Limits()) is None


def test_the_pool_takes_a_vouched_value_and_reads_anything_else_as_json() -> None:
    value = Outer("a", True, (1, "x"), (), [], 0.5)
    body = _body(encode(value))
    schema = DecodedByCaller(result_reader(Outer, LIMITS))
    reply = _read_reply(body, schema)
    assert type(reply["value"]) is Rebuilt and reply["value"]["result"] == value
    assert _outcome(reply["value"], Outer, LIMITS).value == value
    refusal = orjson.dumps({"ok": True, "value": job_reply(lambda: 1 / 0, (ZeroDivisionError,))})
    reply = _read_reply(refusal, schema)  # not a result: the ordinary reading, a plain dict
    assert type(reply["value"]) is dict and "refused" in reply["value"]
    with pytest.raises(SchemaError):
        _read_reply(orjson.dumps({"ok": True, "value": 3}), schema)


def _codec_json(value: Any) -> Any:
    return json.loads(json.dumps(encode(value)))


def test_a_job_writes_every_example_s_result_as_the_codec_would() -> None:
    programs = [example.program for example in EXAMPLES.values()] + [fifty_op_program()]
    programs.append("x = tensor([0.0], requires_grad=True)\ny = (x.log() * 0).sum()\n")  # -inf, nan
    written = 0
    for program in programs:
        run = run_program(program, 0, None)
        value = ProgramReply.of(run.graph, run.trace)
        reply = job_reply(lambda value=value: value)
        if reply.written is None:  # only a float JSON cannot write sends it to the codec
            assert "$float" in json.dumps(encode(value)), program
            continue
        written += 1
        assert json.loads(reply.written) == _codec_json(value), program
        assert json.loads(orjson.dumps(reply)) == {"result": _codec_json(value)}
    assert written >= len(programs) - 2


@settings(max_examples=300, deadline=None)
@given(value=outer)
def test_written_json_is_the_codec_s_json_or_nothing(value: Outer) -> None:
    write = result_writer(Outer)
    assert write is not None
    data = write(value)
    codec = json.dumps(encode(value))
    if data is None:
        event("codec")
        floats_json_cannot_write = "$float" in codec
        params = value.checked.params if value.checked else {}
        assert floats_json_cannot_write or any(v is None for v in params.values())
    else:
        event("written")
        assert json.loads(data) == json.loads(codec)


def test_without_room_for_orjson_the_written_result_is_read_back_and_written_by_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchatlas.sandbox import worker

    value = Outer("a", True, (1, "x"), (Inner("w", 2, (0.5,)),), ["n"], 0.25)
    reply = {"ok": True, "value": job_reply(lambda: value)}
    assert reply["value"].written is not None
    fast = reply_frame(reply)
    monkeypatch.setattr(worker, "_has_room", lambda size: False)
    slow = reply_frame(reply)
    assert json.loads(fast[protocol.HEADER.size :]) == json.loads(slow[protocol.HEADER.size :])
    assert result_reader(Outer, Limits())(slow[protocol.HEADER.size :])["result"] == value


def _job_reply_at_the_memory_limit(headroom: int) -> None:
    """In a forked child (never returns): job_reply of a large result, with the address space
    full up to ``headroom`` bytes, as a sandbox child at its limit. Exit 0: every call gave a
    reply or MemoryError."""
    import os
    import resource

    status = 1
    try:
        value = Outer(
            "a", True, (1, "x"), (Inner("w", 2, tuple(map(float, range(200_000)))),), [], 0.5
        )
        result_writer(Outer)  # built before the limit, as the zygote builds it at warm-up
        statm = Path("/proc/self/statm").read_text()
        used = int(statm.split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (used + headroom, resource.RLIM_INFINITY))
        hog = []
        with contextlib.suppress(MemoryError):
            while True:
                hog.append(bytearray(1 << 16))
        for attempt in range(60):
            if attempt % 6 == 0 and hog:
                hog.pop()  # a little room now and then: allocations fail at different points
            with contextlib.suppress(MemoryError):
                job_reply(lambda: value)
        status = 0
    finally:
        os._exit(status)


@pytest.mark.parametrize("headroom_mb", [30, 60])
def test_writing_a_result_at_the_memory_limit_never_crashes_the_child(headroom_mb: int) -> None:
    import os

    pid = os.fork()
    if pid == 0:
        _job_reply_at_the_memory_limit(headroom_mb << 20)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"wait status {status}"
