"""The kit's room state base (issue 37): one cache per room whose parts share its budget and
clear on their own, and the one sandbox call that keeps outcomes but not failures of the
moment."""

from __future__ import annotations

import pytest

from components.kit import room_state
from components.kit.room_state import RoomState
from torchatlas.links import LinkSpec
from torchatlas.sandboxed import JobFailure, RoomJob

SPEC = LinkSpec("kit_test", "kit_test_", ())


@pytest.fixture(autouse=True)
def no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs here are fakes: the shared pool is not started for them."""
    monkeypatch.setattr(room_state, "sandbox_pool", lambda: None)


def test_parts_share_the_rooms_budget_and_clear_on_their_own() -> None:
    room = RoomState(SPEC, cache_bytes=10_000)
    reports, drawings = room.part("reports"), room.part("drawings", nbytes=lambda value: 6_000)
    assert reports.get_or_compute("a", lambda: "report") == "report"
    assert drawings.get_or_compute("a", lambda: "drawing") == "drawing"
    assert "a" in reports and "a" in drawings  # the same key in two parts: two entries
    assert room.cache.size_of(("drawings", "a")) == 6_000  # the part's own weight
    assert reports.get("a") == "report"  # now the drawing is the least recently used
    drawings.get_or_compute("b", lambda: "another")  # 12,000 bytes of drawings cannot both fit
    assert "a" not in drawings and "b" in drawings and "a" in reports
    assert room.cache.nbytes <= 10_000  # one budget for every part
    assert (len(reports), len(drawings)) == (1, 1)
    reports.clear()
    assert "a" not in reports and "b" in drawings  # only the reports went
    assert (len(reports), len(drawings)) == (0, 1)


def test_a_job_is_asked_once_and_kept_unless_it_failed_for_the_moment() -> None:
    room = RoomState(SPEC, cache_bytes=1 << 20)
    asked: list[object] = []

    def ask(outcome: RoomJob[int]):
        def run(who: object) -> RoomJob[int]:
            asked.append(who)
            return outcome

        return run

    done = RoomJob(value=3)
    assert room.job(("sum", 1, 2), ask(done), who="tests") is done
    assert room.job(("sum", 1, 2), ask(RoomJob(value=4)), who="tests") is done  # kept
    assert asked == ["tests"]
    busy = RoomJob[int](failure=JobFailure("busy"))
    assert busy.failure is not None and busy.failure.transient
    room.job(("busy",), ask(busy), who=None)
    room.job(("busy",), ask(busy), who=None)  # not kept: asked again
    assert asked == ["tests", None, None]
    room.job(None, ask(done), who="again")  # no key: asked every time
    room.job(None, ask(done), who="again")
    assert asked[-2:] == ["again", "again"]
