"""What ``torch.save`` and HDF5 really write, measured on in-memory files.

``torch.save`` of a view writes the view's whole storage (the larger tensor's bytes), and
``clone()`` fixes that; ``torch.load(weights_only=True)`` of tensors saved together gives
back views that still share one storage. The same data through ``h5py``: the file's size,
the dtype each side uses, and a read of ``dset[-2:]`` whose bytes are counted through a
file-like wrapper, to show that HDF5 reads only those rows (and its metadata), not the rest.

``torch.save`` writes into an ``io.BytesIO`` (byte for byte a file named ``archive.pt``: the
zip's folder is named after the file); the HDF5 file is built by HDF5's in-memory driver
(byte for byte the file it writes to disk), then read back through the counting wrapper.
Nothing touches the file system, so the whole report runs in a sandbox child. Sizes are
bounded by :data:`~torchatlas.basics.limits.MAX_SAVE_ELEMENTS`, zero sizes counted as 1.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import h5py
import numpy as np
import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode, refused, torch_words
from torchatlas.basics.indexing import IndexKind, parse_index_expression
from torchatlas.basics.limits import MAX_SAVE_ELEMENTS
from torchatlas.basics.promotion import DTYPES
from torchatlas.basics.shapes import check_footprint, check_shape
from torchatlas.errors import RefusedByTorch, TorchRefusal

SAVE_DTYPES = tuple(name for name in DTYPES if name != "bool")
DATASET = "coords"


class CountingReader(io.RawIOBase):
    """A read-only file over bytes that counts every byte handed out (h5py reads through
    ``readinto``/``read``), so a test or a page can see how much of a file a read needed.

    ``bytes_read`` counts every byte handed out, a byte read twice twice (HDF5 reads some
    metadata more than once, so it can exceed the file); :meth:`distinct` counts each byte
    of the file once, from the byte ranges each read covered."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self._buffer = io.BytesIO(data)
        self.bytes_read = 0
        self.reads = 0
        self.spans: list[tuple[int, int]] = []  # (start, end) of each read, in order

    def distinct(
        self, first: int = 0, end: int | None = None, within: tuple[int, int] | None = None
    ) -> int:
        """Bytes of the file covered by reads number ``first`` to ``end`` (all by default),
        each counted once; only those inside ``within`` (a (start, end) range) when given."""
        spans = sorted(self.spans[first:end])
        if within is not None:
            low, high = within
            spans = [(max(a, low), min(b, high)) for a, b in spans if a < high and b > low]
        total, reached = 0, 0
        for start, end in spans:
            start = max(start, reached)
            if end > start:
                total += end - start
            reached = max(reached, end)
        return total

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._buffer.seek(offset, whence)

    def tell(self) -> int:
        return self._buffer.tell()

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def,override]
        start = self._buffer.tell()
        count = self._buffer.readinto(buffer)
        self.bytes_read += count
        self.reads += 1
        self.spans.append((start, start + count))
        return count


def saved_bytes(obj: object) -> int:
    """The size of ``torch.save(obj)``'s file."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getbuffer().nbytes


def _save_load(obj: object) -> object:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _hdf5_type_name(type_id: h5py.h5t.TypeID) -> str:
    """HDF5's name for a stored type (``H5T_IEEE_F32LE``), or its class for others."""
    kind = type_id.get_class()
    bits = type_id.get_size() * 8
    if kind in (h5py.h5t.INTEGER, h5py.h5t.FLOAT):
        order = "LE" if type_id.get_order() == h5py.h5t.ORDER_LE else "BE"
        if kind == h5py.h5t.FLOAT:
            return f"H5T_IEEE_F{bits}{order}"
        signed = type_id.get_sign() == h5py.h5t.SGN_2
        return f"H5T_STD_{'I' if signed else 'U'}{bits}{order}"
    names = {h5py.h5t.ENUM: "H5T_ENUM", h5py.h5t.COMPOUND: "H5T_COMPOUND"}
    return f"{names.get(kind, f'class {kind}')} ({bits} bits)"


TAIL = "-2:"  # the slice the page reads back: dset[-2:]


@dataclass(frozen=True)
class HdfReport(RefusedByTorch):
    """The HDF5 side, every byte count measured through :class:`CountingReader` and each
    byte of the file counted once (a re-read byte is not counted again)."""

    numpy_dtype: str | None  # the dtype h5py reads back
    hdf5_type: str | None  # the type stored in the file
    file_bytes: int = 0
    data_bytes: int = 0  # the dataset's elements
    open_bytes: int = 0  # distinct bytes read to open the file and find the dataset
    tail_bytes: int = 0  # distinct bytes read by the slice alone
    tail_shape: tuple[int, ...] = ()
    tail_rows_bytes: int = 0  # the slice's own bytes
    round_trip_equal: bool = False
    error_code: ErrorCode | None = None  # the tensor has no numpy dtype (bfloat16)
    refusal: TorchRefusal | None = None
    tail: str = TAIL  # the slice read: dset[<tail>]
    dataset_shape: tuple[int, ...] = ()
    data_offset: int | None = None  # where the data starts in the file (None: not one block)
    open_requested: int = 0  # bytes handed out while opening, re-reads included
    open_reads: int = 0
    open_data_bytes: int = 0  # of open_bytes, those inside the dataset's data
    tail_requested: int = 0  # bytes handed out for the slice, re-reads included
    tail_reads: int = 0
    tail_data_bytes: int = 0  # of tail_bytes, those inside the dataset's data

    @property
    def whole(self) -> bool:
        """The slice is the whole dataset (its shape is the dataset's)."""
        return self.tail_shape == self.dataset_shape


@dataclass(frozen=True)
class SaveReport:
    shape: tuple[int, ...]
    dtype: str
    view_expression: str
    view_shape: tuple[int, ...]
    view_is_view: bool  # the expression made a view (shares the storage)
    storage_bytes: int  # the larger tensor's storage
    view_bytes: int  # the view's own elements
    saved_full: int  # torch.save(x)
    saved_view: int  # torch.save(view): the whole storage goes with it
    saved_clone: int  # torch.save(view.clone())
    saved_together: int  # torch.save({"x": x, "view": view})
    loaded_view_storage_bytes: int  # the storage a loaded view carries
    loaded_clone_storage_bytes: int
    loaded_shares: bool  # saved together, loaded together: still one storage
    loaded_equal: bool  # the loaded view equals the view
    hdf5: HdfReport

    @property
    def code(self) -> str:
        """Runnable: every number on the page, measured the same way."""
        numel = math.prod(self.shape)
        return (
            "import io\nimport h5py\nimport torch\n\n"
            f"x = torch.arange({numel}).to(torch.{self.dtype}).reshape{_shape_args(self.shape)}\n"
            f"view = {self.view_expression}\n\n"
            "def saved_bytes(obj):\n"
            "    buffer = io.BytesIO()\n"
            "    torch.save(obj, buffer)\n"
            "    return buffer.getbuffer().nbytes\n\n"
            "saved_bytes(view), saved_bytes(view.clone())  # the whole storage, then the view's\n"
            "both = io.BytesIO()\n"
            'torch.save({"x": x, "view": view}, both)\n'
            "both.seek(0)\n"
            "loaded = torch.load(both, weights_only=True)\n"
            'shared = loaded["view"].untyped_storage().data_ptr() == '
            'loaded["x"].untyped_storage().data_ptr()\n\n'
            f'with h5py.File("{DATASET}.h5", "w") as out:\n'
            f'    out.create_dataset("{DATASET}", data=x.numpy())\n'
            f'with h5py.File("{DATASET}.h5", "r") as inp:\n'
            f'    last_two = torch.from_numpy(inp["{DATASET}"][-2:])'
        )


def _shape_args(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if len(shape) != 1 else f"({shape[0]},)"


def hdf5_image(array: np.ndarray) -> bytes:
    """The bytes of an HDF5 file holding ``array`` as the dataset :data:`DATASET`, built in
    memory."""
    with h5py.File(f"{DATASET}.h5", "w", driver="core", backing_store=False) as out:
        out.create_dataset(DATASET, data=array)
        out.flush()
        return bytes(out.id.get_file_image())


def parse_slice(text: str) -> slice:
    """``start:stop:step`` (each part a whole number or empty) as a slice; ValueError else."""
    parts = text.split(":")
    if not 2 <= len(parts) <= 3:
        raise ValueError(f"not a slice: {text!r}")
    numbers = [int(part) if part.strip() else None for part in parts]
    return slice(*numbers)


def hdf5_read(x: torch.Tensor, tail: str = TAIL) -> HdfReport:
    """x written to an HDF5 file (in memory), then read back as ``dset[<tail>]`` through a
    :class:`CountingReader`: sizes, types, and the distinct bytes each step read."""
    try:
        array = x.numpy()
    except TypeError as exc:
        return HdfReport(None, None, error_code=ErrorCode.NO_NUMPY_DTYPE,
                         refusal=refused(exc))  # fmt: skip
    # HDF5's in-memory ("core") driver with no backing store: the file image it builds is
    # byte for byte the file the default driver writes to disk (a test compares them), and
    # it needs no file system, so the job runs in a sandbox child that may open no file.
    data = hdf5_image(array)
    reader = CountingReader(data)
    with h5py.File(reader, "r") as inp:
        dataset = inp[DATASET]
        stored = _hdf5_type_name(dataset.id.get_type())
        numpy_dtype = str(dataset.dtype)
        offset = dataset.id.get_offset()  # None unless the data is one contiguous block
        opened, open_reads = reader.bytes_read, reader.reads
        read = dataset[parse_slice(tail)]
        tail_requested, tail_reads = reader.bytes_read - opened, reader.reads - open_reads
    within = None if offset is None else (offset, offset + array.nbytes)
    with h5py.File(io.BytesIO(data), "r") as inp:
        whole = inp[DATASET][...]
    return HdfReport(
        numpy_dtype=numpy_dtype,
        hdf5_type=stored,
        file_bytes=len(data),
        data_bytes=array.nbytes,
        open_bytes=reader.distinct(0, open_reads),
        tail_bytes=reader.distinct(open_reads),
        tail_shape=tuple(read.shape),
        tail_rows_bytes=read.nbytes,
        round_trip_equal=bool(np.array_equal(whole, array)),
        tail=tail,
        dataset_shape=tuple(array.shape),
        data_offset=offset,
        open_requested=opened,
        open_reads=open_reads,
        # of the data's own bytes (0 where the data is not one block: nothing to measure)
        open_data_bytes=reader.distinct(0, open_reads, within) if within else 0,
        tail_requested=tail_requested,
        tail_reads=tail_reads,
        tail_data_bytes=reader.distinct(open_reads, None, within) if within else 0,
    )


def serialize(shape: tuple[int, ...], view: str = "x[:2]", dtype: str = "float32") -> SaveReport:
    """Save ``x = arange(numel).reshape(shape)`` and ``view`` (a basic index expression on
    ``x``) every way this room compares; ``dtype`` is any of :data:`SAVE_DTYPES`."""
    shape = check_shape(shape)
    if dtype not in SAVE_DTYPES:
        raise BasicsValueError(ErrorCode.UNKNOWN_DTYPE, dtype=dtype, allowed=", ".join(SAVE_DTYPES))
    if not shape:
        raise BasicsValueError(ErrorCode.SAVE_NEEDS_RANK)
    numel = math.prod(shape)
    if numel > MAX_SAVE_ELEMENTS:
        raise BasicsValueError(ErrorCode.TOO_MANY_ELEMENTS, numel=numel, limit=MAX_SAVE_ELEMENTS)
    # a (0, 10**6, 10**6) tensor holds nothing, but HDF5 lays out (and a view may reshape)
    # its sizes: bounded with every 0 counted as 1
    check_footprint(shape, MAX_SAVE_ELEMENTS)
    parsed = parse_index_expression(view)
    if parsed.kind is not IndexKind.BASIC:
        # a mask or a list gathers a copy: there would be no view to save
        raise BasicsValueError(ErrorCode.INDEX_NOT_ALLOWED, part=parsed.subscript)
    x = torch.arange(numel).to(DTYPES[dtype]).reshape(shape)
    try:
        part = x[parsed.key(x)]
    except (IndexError, RuntimeError, ValueError, TypeError, OverflowError) as exc:
        raise BasicsValueError(ErrorCode.INDEX_TORCH, torch_message=torch_words(exc)) from None
    loaded_view = _save_load(part)
    loaded_clone = _save_load(part.clone())
    together = _save_load({"x": x, "view": part})
    assert isinstance(loaded_view, torch.Tensor) and isinstance(loaded_clone, torch.Tensor)
    assert isinstance(together, dict)
    return SaveReport(
        shape=shape,
        dtype=dtype,
        view_expression=parsed.text,
        view_shape=tuple(part.shape),
        view_is_view=part.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(),
        storage_bytes=x.untyped_storage().nbytes(),
        view_bytes=part.numel() * part.element_size(),
        saved_full=saved_bytes(x),
        saved_view=saved_bytes(part),
        saved_clone=saved_bytes(part.clone()),
        saved_together=saved_bytes({"x": x, "view": part}),
        loaded_view_storage_bytes=loaded_view.untyped_storage().nbytes(),
        loaded_clone_storage_bytes=loaded_clone.untyped_storage().nbytes(),
        loaded_shares=together["view"].untyped_storage().data_ptr()
        == together["x"].untyped_storage().data_ptr(),
        loaded_equal=bool(torch.equal(loaded_view, part)),
        hdf5=hdf5_read(x),
    )
