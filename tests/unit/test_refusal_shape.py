"""Issue 37's one refusal shape: what torch refused is one type (TorchRefusal) in every room's
results, bounded when built, so a reply rebuilt from the sandbox's JSON is bounded too."""

from __future__ import annotations

import json

import pytest
import torch

from torchatlas.autograd.errors import ErrorCode as AutogradCode
from torchatlas.autograd.errors import ProgramError, TorchRefused, explain
from torchatlas.errors import MAX_REFUSAL_NAME, MAX_REFUSAL_WORDS, TorchRefusal
from torchatlas.i18n import LANGUAGES, has_key
from torchatlas.sandbox.codec import decode, encode
from torchatlas.sandbox.outcomes import FAILURE_KINDS, TRANSIENT_KINDS, FailureKind, known_kind
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandboxed import JobFailure, Refusal, _failure
from torchatlas.strides.errors import ErrorCode as StridesCode
from torchatlas.strides.errors import StepError
from torchatlas.strides.explain import explain as explain_step
from torchatlas.strides.parser import parse_op


def _through_json(value: object, hint: object) -> object:
    return decode(json.loads(json.dumps(encode(value))), hint)


def test_a_step_error_crosses_the_sandbox_with_its_refusal() -> None:
    tensor = torch.arange(6.0).reshape(2, 3).t()
    op = parse_op("view(6)")
    with pytest.raises(RuntimeError) as raised:
        tensor.view(6)
    error = explain_step(raised.value, op, tensor)
    assert error.refusal == TorchRefusal(
        str(raised.value).strip().splitlines()[0], "RuntimeError", "view(6)", error.code.value
    )
    assert error.torch_message == error.refusal.words  # the readers' name for the words
    assert _through_json(error, StepError) == error


def test_a_program_error_names_the_condition_the_room_read() -> None:
    cause = RuntimeError("a leaf Variable that requires grad is being used in an in-place op.")
    error = explain(TorchRefused(AutogradCode.LEAF_INPLACE, cause, {"name": "w"}), 3)
    assert error.refusal == TorchRefusal(str(cause), "RuntimeError", "", "leaf_inplace")
    plain = explain(ValueError("no"), 4)
    assert (plain.code, plain.refusal) == (
        AutogradCode.TORCH_ERROR,
        TorchRefusal("no", "ValueError"),
    )
    assert _through_json(error, ProgramError) == error


def test_a_refusal_is_bounded_even_when_the_reply_is_not() -> None:
    """A hostile worker's reply may carry long words: the codec's own bound refuses what is
    far too long, and the refusal keeps at most its own bound of what it lets through."""
    reply = encode(StepError(StridesCode.TORCH_ERROR, "t()"))
    reply["refusal"] = {"words": "w" * (MAX_REFUSAL_WORDS * 5), "raised": "E" * 5000,
                        "call": "", "condition": ""}  # fmt: skip
    rebuilt = decode(reply, StepError)
    assert len(rebuilt.refusal.words) == MAX_REFUSAL_WORDS
    assert len(rebuilt.refusal.raised) == MAX_REFUSAL_NAME
    reply["refusal"]["words"] = "w" * 10**6
    with pytest.raises(SchemaError):
        decode(reply, StepError)


@pytest.mark.parametrize("room", ["shapes", "modules"])
def test_every_failure_kind_is_a_code_of_each_room_that_runs_pasted_source(room: str) -> None:
    """One list of failure kinds (the sandbox's), one mapping to a room's error
    (SourceError.of_failure), a text in the room's tables for each, and one notion of a
    failure of the moment."""
    import importlib

    engine = importlib.import_module(f"torchatlas.{room}")
    error_type = engine.ShapeError if room == "shapes" else engine.ModuleError
    for kind in FAILURE_KINDS:
        error = error_type.of_failure(JobFailure(kind, "Sandbox English."), 5, lambda item: item)
        assert error.kind.value == kind
        assert error.params["detail"] == "Sandbox English." and error.params["timeout"] == "5"
        assert engine.transient(error) == JobFailure(kind).transient == (kind in TRANSIENT_KINDS)
        for lang in LANGUAGES:
            assert has_key(f"{room}.errors.{kind}.title", lang), (room, kind, lang)
    unknown = error_type.of_failure(JobFailure("no_such_kind"), 5, lambda item: item)
    assert unknown.kind.value == FailureKind.JOB_ERROR


def test_a_refused_source_keeps_each_refused_place() -> None:
    from torchatlas.shapes import RefusedLine, ShapeError

    places = (Refusal(2, 4, "import", "no imports"), Refusal(2, 9, "dunder", ""))
    failure = JobFailure("refused", "", 2, 4, places)
    error = ShapeError.of_failure(
        failure, 10, lambda item: RefusedLine(item.line, item.col, item.code, item.detail)
    )
    assert (error.kind.value, error.line, error.col, error.params["lines"]) == ("refused", 2, 4, 1)
    assert [(r.line, r.col) for r in error.refusals] == [(2, 4), (2, 9)]


def test_the_sandbox_and_its_client_read_an_unknown_kind_as_a_job_error() -> None:
    assert known_kind("memory") == "memory"
    assert known_kind("rm -rf") == known_kind(7) == "job_error"
    assert _failure(type("Reply", (), {"kind": "no_such"})()).kind == "job_error"


def test_the_basics_rooms_results_carry_the_one_refusal_across_the_sandbox() -> None:
    from torchatlas.basics.broadcasting import Broadcast, broadcast
    from torchatlas.basics.einsum import EinsumPlan, einsum

    shapes = [(2, 3), (4,)]
    found = broadcast(shapes)
    with pytest.raises(RuntimeError) as raised:
        _ = torch.zeros(2, 3) + torch.zeros(4)
    assert found.refusal is not None and found.refusal.raised == "RuntimeError"
    assert found.torch_message == str(raised.value).split("\n\n")[0].strip()
    assert _through_json(found, Broadcast) == found
    plan = einsum("ij,jk->ik", [(2, 3), (4, 5)])
    assert not plan.ok and plan.refusal is not None
    assert _through_json(plan, EinsumPlan) == plan


def test_no_result_type_keeps_torchs_words_in_a_field_of_its_own() -> None:
    """Every result dataclass of the engine carries torch's refusal as a TorchRefusal
    (``refusal``), never its own ``torch_message`` string."""
    import dataclasses
    import importlib
    import pkgutil

    import torchatlas

    own = []
    for info in pkgutil.walk_packages(torchatlas.__path__, "torchatlas."):
        if ".sandbox" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and isinstance(value, type):
                names = {item.name for item in dataclasses.fields(value)}
                if "torch_message" in names:
                    own.append(f"{value.__module__}.{value.__qualname__}")
    assert not own, own


def test_what_pasted_code_raised_reaches_the_server_as_the_one_refusal_bounded() -> None:
    from torchatlas.sandbox.pool import _sandbox_error, check_reply

    hostile = {
        "ok": False,
        "error": {
            "kind": "code_error",
            "message": "Your code raised ValueError on line 2",
            "line": 2,
            "refused": {"words": "w" * (10 * MAX_REFUSAL_WORDS), "raised": "E" * 10_000},
        },
    }
    error = _sandbox_error(check_reply(hostile)["error"])
    assert error.refused is not None
    assert len(error.refused.words) <= MAX_REFUSAL_WORDS
    assert len(error.refused.raised) <= MAX_REFUSAL_NAME
    assert _failure(error).refused == error.refused
    hostile["error"]["refused"] = {"words": ["not", "text"], "raised": "ValueError"}
    with pytest.raises(SchemaError):
        check_reply(hostile)
