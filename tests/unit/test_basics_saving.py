"""Saving: byte counts against real files, what torch.load gives back (views that still
share one storage), and HDF5 round trips with a partial read that is counted."""

from __future__ import annotations

import io
import os

import h5py
import numpy as np
import pytest
import torch

from torchatlas.basics import (
    SAVE_DTYPES,
    BasicsValueError,
    CountingReader,
    ErrorCode,
    serialize,
)


def test_saved_byte_counts_match_real_files(tmp_path) -> None:
    report = serialize((1000, 4), "x[:2]", "float32")
    x = torch.arange(4000).to(torch.float32).reshape(1000, 4)
    view = x[:2]
    for name, obj, measured in (
        ("full", x, report.saved_full),
        ("view", view, report.saved_view),
        ("clone", view.clone(), report.saved_clone),
        ("together", {"x": x, "view": view}, report.saved_together),
    ):
        # torch.save names the zip's folder after the file's stem ("archive" for a buffer):
        # a file of that name has exactly the measured size, others differ by the name's
        # length in each record
        (tmp_path / name).mkdir()
        path = tmp_path / name / "archive.pt"
        torch.save(obj, path)
        assert os.path.getsize(path) == measured, name
        other = tmp_path / name / "weights_of_the_model.pt"
        torch.save(obj, other)
        assert 0 < abs(os.path.getsize(other) - measured) < 1024


def test_a_view_saves_its_whole_storage_and_clone_fixes_it() -> None:
    report = serialize((1000, 4), "x[:2]", "float32")
    assert report.view_is_view and report.view_shape == (2, 4)
    assert report.storage_bytes == 16000 and report.view_bytes == 32
    assert report.saved_view >= report.storage_bytes  # the whole storage went in
    assert report.saved_clone < report.view_bytes + 4096  # only the view's bytes + a header
    assert report.loaded_view_storage_bytes == report.storage_bytes
    assert report.loaded_clone_storage_bytes == report.view_bytes
    assert report.loaded_shares and report.loaded_equal
    # saving both costs about one storage, not two
    assert report.saved_together < report.saved_full + report.storage_bytes // 2


def test_loading_together_shares_and_separately_does_not(tmp_path) -> None:
    x = torch.arange(12.0).reshape(3, 4)
    torch.save({"x": x, "row": x[1]}, tmp_path / "both.pt")
    loaded = torch.load(tmp_path / "both.pt", weights_only=True)
    same = loaded["row"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
    assert same == serialize((3, 4), "x[1]").loaded_shares is True


@pytest.mark.parametrize("dtype", SAVE_DTYPES)
def test_hdf5_round_trip_and_dtype_mapping(dtype: str, tmp_path) -> None:
    report = serialize((50, 3), "x[-2:]", dtype)
    x = torch.arange(150).to(getattr(torch, dtype)).reshape(50, 3)
    if dtype == "bfloat16":
        assert report.hdf5.error_code is ErrorCode.NO_NUMPY_DTYPE
        with pytest.raises(TypeError) as real:
            x.numpy()
        assert report.hdf5.torch_message == str(real.value)
        return
    path = tmp_path / "coords.h5"
    with h5py.File(path, "w") as out:
        out.create_dataset("coords", data=x.numpy())
    with h5py.File(path, "r") as inp:
        dataset = inp["coords"]
        assert report.hdf5.numpy_dtype == str(dataset.dtype) == str(x.numpy().dtype)
        back = torch.from_numpy(dataset[-2:])
        assert torch.equal(back, x[-2:])
        if dataset.id.get_type().get_class() == h5py.h5t.FLOAT:
            bits = x.element_size() * 8
            assert report.hdf5.hdf5_type == f"H5T_IEEE_F{bits}LE"
    assert report.hdf5.round_trip_equal
    assert report.hdf5.file_bytes == os.path.getsize(path)
    assert report.hdf5.tail_shape == (2, 3)


def test_partial_read_reads_only_the_last_rows() -> None:
    report = serialize((10000, 4), "x[:2]", "float32")
    hdf = report.hdf5
    assert hdf.data_bytes == 160_000
    assert hdf.tail_bytes == hdf.tail_rows_bytes == 32
    assert hdf.open_bytes + hdf.tail_bytes < hdf.data_bytes // 10


def test_counting_reader_counts_what_h5py_reads() -> None:
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as out:
        out.create_dataset("coords", data=np.zeros((5000, 4), dtype=np.float32))
    reader = CountingReader(buffer.getvalue())
    with h5py.File(reader, "r") as inp:
        before = reader.bytes_read
        inp["coords"][...]
        assert reader.bytes_read - before >= 80_000  # reading everything reads everything


def test_refusals() -> None:
    for args, code in (
        (((), "x[...]"), ErrorCode.SAVE_NEEDS_RANK),
        (((1000, 1000), "x[:2]"), ErrorCode.TOO_MANY_ELEMENTS),
        (((10, 4), "x[[0, 1]]"), ErrorCode.INDEX_NOT_ALLOWED),
        (((10, 4), "x[20]"), ErrorCode.INDEX_TORCH),
    ):
        with pytest.raises(BasicsValueError) as caught:
            serialize(*args)
        assert caught.value.code is code
    with pytest.raises(BasicsValueError):
        serialize((4,), "x[:2]", "bool")


def test_hdf5_temp_folder_is_always_removed() -> None:
    import tempfile
    from pathlib import Path

    def leftovers() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("torchatlas-basics-*")}

    before = leftovers()
    serialize((20, 3), "x[:2]", "float64")
    assert leftovers() == before


def test_the_code_shown_runs_and_measures_the_same(tmp_path, monkeypatch) -> None:
    report = serialize((300, 4), "x[1:3]", "int16")
    monkeypatch.chdir(tmp_path)  # the code writes coords.h5 where it runs
    scope: dict = {}
    exec(report.code, scope)  # the page's own generated code, in a test
    assert scope["saved_bytes"](scope["view"]) == report.saved_view
    assert scope["saved_bytes"](scope["view"].clone()) == report.saved_clone
    assert scope["shared"] is report.loaded_shares is True
    assert torch.equal(scope["last_two"], scope["x"][-2:])
    assert os.path.getsize(tmp_path / "coords.h5") == report.hdf5.file_bytes
