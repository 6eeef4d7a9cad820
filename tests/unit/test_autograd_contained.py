"""The contained run is the in-process run: every example, and a few tricky programs, traced
and replayed backward in a sandbox child (``autograd.run``) and rebuilt from its bounded JSON
reply, equal field by field to the same run in this process."""

from __future__ import annotations

import pytest

from tests.unit.test_autograd_oracle import TRICKY
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.jobs import RUN, ProgramReply, run_program
from torchatlas.sandboxed import run_room_job

PROGRAMS = {
    **{f"example:{key}": (example.program, None) for key, example in EXAMPLES.items()},
    **{f"tricky:{key}": TRICKY[key] for key in ("alias_leaf", "leaf_root_alone",
                                                  "inplace_on_view", "empty_reduced_over_dim")},
}  # fmt: skip


@pytest.mark.parametrize("key", sorted(PROGRAMS))
def test_the_sandbox_job_returns_the_in_process_run(key: str) -> None:
    program, root = PROGRAMS[key]
    job = run_room_job(
        RUN, {"program": program, "seed": 3, "root": root}, ProgramReply, session_id=f"tests-{key}"
    )  # one visitor per program: the sandbox limits how many jobs one visitor starts
    assert job.ok, (job.failure, job.refused)
    assert job.value.to_run() == run_program(program, 3, root)


def test_a_refusal_in_the_job_comes_back_as_the_rooms_code() -> None:
    params = {"program": "x = randn(3)\ny = x.unfold(0, 2, 1)", "seed": 0, "root": None}
    job = run_room_job(RUN, params, ProgramReply, session_id="tests-refusal")
    assert job.refused is not None and job.refused[0] == "unknown_method"
