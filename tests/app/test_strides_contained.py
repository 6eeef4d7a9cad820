"""The strides page runs its chain as one sandbox job (issue 21): stepping through the chain
starts no job, a job that has no result is shown as the shared failure card, and a refusal
by the engine keeps the room's own words."""

from __future__ import annotations

import pytest

from components.strides import state
from tests.app.apptest import open_page, rendered_text
from torchatlas.sandboxed import JobFailure, RoomJob


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the room jobs the page starts (they still run for real)."""
    started: list[str] = []
    real = state.run_room_job

    def counting(job: str, *args: object, **kwargs: object) -> RoomJob:
        started.append(job)
        return real(job, *args, **kwargs)

    monkeypatch.setattr(state, "run_room_job", counting)
    state.ROOM_CACHE.clear()
    return started


def test_one_job_per_chain_and_none_for_stepping_through_it(jobs: list[str]) -> None:
    at = open_page("views/strides.py", strides_shape="4, 6", strides_ops=".t()\n[1:]\n.clone()")
    assert jobs == ["strides.chain"]
    for step in (0, 1, 2, 3, 1):
        at.session_state["strides_step"] = step
        at.run()
        assert not at.exception
    assert "| size | `(6, 4)` |" in rendered_text(at)  # y1 = x.t()
    at.session_state["strides_selection"] = (2, "element", 3)
    at.run()
    assert jobs == ["strides.chain"]
    at.session_state["strides_panel"] = "Code"
    at.run()
    assert "y3 = y2.clone()" in at.code[0].value
    assert jobs == ["strides.chain"]  # the code came with the steps


def test_a_job_without_a_result_shows_the_failure_card(monkeypatch: pytest.MonkeyPatch) -> None:
    state.ROOM_CACHE.clear()
    monkeypatch.setattr(
        state, "run_room_job", lambda *a, **k: RoomJob(failure=JobFailure("timeout", "slow"))
    )
    at = open_page("views/strides.py", strides_shape="3, 5", strides_ops=".T")
    assert not at.exception
    assert "This took too long" in at.error[0].value
    assert at.get("plotly_chart") == []  # nothing drawn from a result that does not exist


def test_an_untrusted_reply_is_never_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    state.ROOM_CACHE.clear()
    real = state.run_room_job

    def forged(*args: object, **kwargs: object) -> RoomJob:
        outcome = real(*args, **kwargs)
        steps = list(outcome.value.steps)
        steps[1] = type(steps[1])(steps[1].step, cells_read=[10**6] * 15)  # past the storage
        return RoomJob(type(outcome.value)(tuple(steps), outcome.value.code))

    monkeypatch.setattr(state, "run_room_job", forged)
    at = open_page("views/strides.py", strides_shape="3, 5", strides_ops=".T")
    assert not at.exception
    assert "The result could not be trusted" in at.error[0].value
    assert ("steps", (3, 5), "float32", (".T",)) not in state.ROOM_CACHE  # tried again next time


def test_the_engines_refusal_keeps_the_rooms_words(monkeypatch: pytest.MonkeyPatch) -> None:
    state.ROOM_CACHE.clear()
    refused = RoomJob(refused=("shape_too_big", {"numel": "9,999,999", "limit": "1,048,576"}))
    monkeypatch.setattr(state, "run_room_job", lambda *a, **k: refused)
    at = open_page("views/strides.py", strides_shape="3, 5", strides_ops=".T")
    assert not at.exception
    assert "9,999,999" in at.error[0].value and "1,048,576" in at.error[0].value
    forged = RoomJob(refused=("no_such_code", {}))
    monkeypatch.setattr(state, "run_room_job", lambda *a, **k: forged)
    state.ROOM_CACHE.clear()
    at = open_page("views/strides.py", strides_shape="3, 5", strides_ops=".T")
    assert "The result could not be trusted" in at.error[0].value
