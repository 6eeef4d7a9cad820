"""The basics room's sandbox jobs: each runs in a confined child (no files, a memory limit, a
CPU deadline) and its reply, rebuilt through the bounded codec, is the very dataclass the
engine computes in-process; the engine's refusals come back as its codes.

The saving job is the one that needs care in a child that may open no file: ``torch.save``
writes to a ``BytesIO`` and HDF5 builds its file with the in-memory ``core`` driver."""

from __future__ import annotations

import pytest

from torchatlas.basics import DTypeSpec, broadcast, einsum, index, promote, serialize
from torchatlas.basics.jobs import JOBS, REPLY_LIMITS, RETURNS, WARM_UP
from torchatlas.basics.saving import DATASET, hdf5_image
from torchatlas.sandboxed import run_room_job, shared_pool


@pytest.fixture(scope="module")
def pool():
    found = shared_pool()
    found.warm_up()
    assert found.health().seccomp, found.health()
    return found


def _run(pool, job: str, params: dict):
    return run_room_job(job, params, RETURNS[job], timeout_s=5, limits=REPLY_LIMITS, pool=pool)


CASES = [
    (
        "basics.promote",
        {"left": "float64", "left_value": "5e-324", "right_kind": "tensor", "right": "float64",
         "right_value": "7e-323", "op": "mul"},
        lambda: promote(DTypeSpec("tensor", "float64", 5e-324),
                        DTypeSpec("tensor", "float64", 7e-323), "mul"),
    ),
    (
        "basics.promote",
        {"left": "complex64", "left_value": "0.1+0.2j", "right_kind": "scalar", "right": "complex",
         "right_value": "3j", "op": "mul"},
        lambda: promote(DTypeSpec("tensor", "complex64", 0.1 + 0.2j),
                        DTypeSpec("scalar", "complex", 3j), "mul"),
    ),
    (
        "basics.promote",
        {"left": "int64", "left_value": "1", "right_kind": "scalar", "right": "int",
         "right_value": str(2**64), "op": "add"},
        lambda: promote(DTypeSpec("tensor", "int64", 1), DTypeSpec("scalar", "int", 2**64)),
    ),
    ("basics.broadcast", {"shapes": [[2, 3, 5, 5], [3]]}, lambda: broadcast([(2, 3, 5, 5), (3,)])),
    ("basics.einsum", {"equation": "...chw,c->...hw", "shapes": [[2, 3, 5, 5], [3]]},
     lambda: einsum("...chw,c->...hw", [(2, 3, 5, 5), (3,)])),
    ("basics.index", {"shape": [16, 16], "expression": "x[x % 3 == 0]"},
     lambda: index((16, 16), "x[x % 3 == 0]")),
    ("basics.save", {"shape": [1000, 4], "view": "x[:2]", "dtype": "float32"},
     lambda: serialize((1000, 4), "x[:2]", "float32")),
    ("basics.save", {"shape": [5, 3], "view": "x[1:]", "dtype": "bfloat16"},
     lambda: serialize((5, 3), "x[1:]", "bfloat16")),
]  # fmt: skip


@pytest.mark.parametrize(("job", "params", "local"), CASES)
def test_job_reply_is_the_engines_result(pool, job: str, params: dict, local) -> None:
    outcome = _run(pool, job, params)
    assert outcome.ok, (outcome.failure, outcome.refused)
    assert outcome.value == local()


@pytest.mark.parametrize(
    ("job", "params", "code"),
    [
        ("basics.promote", {"left": "int8", "left_value": "9" * 30, "right_kind": "scalar",
                            "right": "int", "right_value": "1", "op": "add"}, "int_too_large"),
        ("basics.index", {"shape": [3, 4], "expression": f"x[{2**70}]"}, "index_int_range"),
        ("basics.index", {"shape": [900, 900, 0], "expression": "x[None]"}, "too_large_footprint"),
        ("basics.save", {"shape": [0, 10**6], "view": "x[:1]", "dtype": "int8"},
         "too_large_footprint"),
        ("basics.einsum", {"equation": "ij", "shapes": [[2, 3]] * 5}, "einsum_operands"),
        ("basics.broadcast", {"shapes": [[-1]]}, "shape_negative"),
        ("basics.broadcast", {"shapes": [[10**6] * 6, [2]]}, "shape_torch"),
    ],
)  # fmt: skip
def test_engine_refusals_come_back_coded(pool, job: str, params: dict, code: str) -> None:
    """The child re-reads every parameter: what the server would have refused is refused
    there too, in the room's codes (a job is sound whatever the server sends)."""
    outcome = _run(pool, job, params)
    assert outcome.failure is None
    assert outcome.refused is not None and outcome.refused[0] == code


def test_warm_up_names_only_registered_jobs_and_never_backward() -> None:
    assert {request["job"] for request in WARM_UP} <= set(JOBS)
    assert all("backward" not in str(request) for request in WARM_UP)


def test_in_memory_hdf5_image_is_the_file_on_disk(tmp_path) -> None:
    """The core driver's image is byte for byte the file the default driver writes (the
    report's file sizes are real files' sizes)."""
    import h5py
    import numpy as np

    for array in (np.arange(4000, dtype=np.float32).reshape(1000, 4), np.arange(7, dtype=np.int8)):
        path = tmp_path / f"{array.dtype}.h5"
        with h5py.File(path, "w") as out:
            out.create_dataset(DATASET, data=array)
        assert hdf5_image(array) == path.read_bytes()
