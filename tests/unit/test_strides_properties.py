"""Property tests: random shapes and op chains, every step checked against what torch itself
reports (sizes, strides, offsets, contiguity, each element's storage cell from its data
pointer, and storage identity for view-or-copy)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchatlas.strides import FOOTPRINT_BINS, run_chain, trace

Op = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


@st.composite
def op_for(draw: st.DrawFn, tensor: torch.Tensor) -> Op:
    """One op that is valid for ``tensor`` (as text and as the same call in torch)."""
    rank, size = tensor.dim(), tuple(tensor.shape)
    choices = ["unsqueeze", "contiguous", "clone", "flatten", "reshape"]
    if rank >= 1:
        choices += ["slice", "select", "narrow", "flip", "index_list", "unfold", "chunk"]
    if rank >= 2:
        choices += ["transpose", "permute", "diagonal", "t_or_mT", "movedim"]
    if 1 in size:
        choices += ["expand", "squeeze"]
    kind = draw(st.sampled_from(choices))
    dim = draw(st.integers(0, max(rank - 1, 0)))
    n = size[dim] if rank else 1
    if kind == "unsqueeze":
        d = draw(st.integers(-rank - 1, rank))
        return f".unsqueeze({d})", lambda x: x.unsqueeze(d)
    if kind in ("contiguous", "clone"):
        return f".{kind}()", lambda x: getattr(x, kind)()
    if kind == "flatten":
        return ".flatten()", lambda x: x.flatten()
    if kind == "reshape":
        return ".reshape(-1)", lambda x: x.reshape(-1)
    if kind == "slice":
        start = draw(st.integers(0, n - 1))
        step = draw(st.integers(1, 3))
        index = ", ".join([":"] * dim + [f"{start}::{step}"])
        key = (slice(None),) * dim + (slice(start, None, step),)
        return f"[{index}]", lambda x: x[key]
    if kind == "select":
        i = draw(st.integers(-n, n - 1))
        return f".select({dim}, {i})", lambda x: x.select(dim, i)
    if kind == "narrow":
        start = draw(st.integers(0, n - 1))
        length = draw(st.integers(1, n - start))
        return f".narrow({dim}, {start}, {length})", lambda x: x.narrow(dim, start, length)
    if kind == "flip":
        return f".flip({dim})", lambda x: x.flip(dim)
    if kind == "index_list":
        picks = draw(st.lists(st.integers(0, size[0] - 1), min_size=1, max_size=3))
        return f"[{picks}]", lambda x: x[picks]
    if kind == "unfold":
        width = draw(st.integers(1, n))
        step = draw(st.integers(1, 2))
        return f".unfold({dim}, {width}, {step})", lambda x: x.unfold(dim, width, step)
    if kind == "chunk":
        chunks = draw(st.integers(1, 3))
        pieces = len(tensor.chunk(chunks, dim))
        pick = draw(st.integers(0, pieces - 1))
        return f".chunk({chunks}, {dim})[{pick}]", lambda x: x.chunk(chunks, dim)[pick]
    if kind == "transpose":
        other = draw(st.integers(0, rank - 1))
        return f".transpose({dim}, {other})", lambda x: x.transpose(dim, other)
    if kind == "permute":
        order = draw(st.permutations(range(rank)))
        return f".permute{tuple(order)}", lambda x: x.permute(*order)
    if kind == "diagonal":
        offset = draw(st.integers(-1, 1))
        return f".diagonal({offset})", lambda x: x.diagonal(offset)
    if kind == "t_or_mT":
        return (".t()", lambda x: x.t()) if rank == 2 else (".mT", lambda x: x.mT)
    if kind == "movedim":
        other = draw(st.integers(-rank, rank - 1))
        return f".movedim({dim}, {other})", lambda x: x.movedim(dim, other)
    if kind == "expand":
        target = [draw(st.integers(1, 3)) if s == 1 else -1 for s in size]
        return f".expand({', '.join(map(str, target))})", lambda x: x.expand(*target)
    one = size.index(1)
    return f".squeeze({one})", lambda x: x.squeeze(one)


@st.composite
def chains(draw: st.DrawFn) -> tuple[tuple[int, ...], list[Op]]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=5)))
    tensor = torch.arange(torch.Size(shape).numel()).float().reshape(shape)
    ops: list[Op] = []
    for _ in range(draw(st.integers(1, 5))):
        text, apply = draw(op_for(tensor))
        result = apply(tensor)
        if result.numel() == 0 or result.numel() > 4096 or result.dim() > 6:
            break
        ops.append((text, apply))
        tensor = result
    return shape, ops


def element_cells(tensor: torch.Tensor) -> list[int]:
    """Every element's storage cell, read from its data pointer (row-major)."""
    base, size = tensor.untyped_storage().data_ptr(), tensor.element_size()
    if tensor.dim() == 0:
        return [(tensor.data_ptr() - base) // size]
    cells = []
    for index in torch.cartesian_prod(*[torch.arange(n) for n in tensor.shape]).reshape(
        -1, tensor.dim()
    ):
        cells.append((tensor[tuple(index.tolist())].data_ptr() - base) // size)
    return cells


def flat(nested: object) -> list:
    if not isinstance(nested, list):
        return [nested]
    return [item for part in nested for item in flat(part)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains())
def test_every_step_matches_torch(case: tuple[tuple[int, ...], list[Op]]) -> None:
    shape, ops = case
    steps = trace(shape, "float32", [text for text, _ in ops])
    tensors = [torch.arange(torch.Size(shape).numel()).float().reshape(shape)]
    for _, apply in ops:
        tensors.append(apply(tensors[-1]))
    assert len(steps) == len(tensors)
    pointers: dict[int, str] = {}
    for step, tensor, previous in zip(steps, tensors, [None, *tensors[:-1]], strict=True):
        assert step.error is None, step.error
        assert step.size == tuple(tensor.shape)
        assert step.stride == tuple(tensor.stride())
        assert step.storage_offset == tensor.storage_offset()
        assert step.is_contiguous == tensor.is_contiguous()
        assert step.values == tensor.tolist()
        assert flat(step.storage_indices) == element_cells(tensor)
        cells = tensor.untyped_storage().nbytes() // tensor.element_size()
        bins = min(cells, FOOTPRINT_BINS)
        footprint = [False] * bins  # the storage in bins: which ones the step reads
        for cell in element_cells(tensor):
            footprint[cell * bins // cells] = True
        assert list(step.footprint) == footprint
        pointer = tensor.untyped_storage().data_ptr()
        if previous is not None:
            shares = pointer == previous.untyped_storage().data_ptr()
            assert step.is_view == shares, step.op
        # the same storage id exactly when the same storage
        assert pointers.setdefault(pointer, step.storage_id) == step.storage_id
    assert len(set(pointers.values())) == len(pointers)


@settings(max_examples=60, deadline=None)
@given(chains())
def test_engine_tensors_are_the_steps_it_reports(case: tuple[tuple[int, ...], list[Op]]) -> None:
    shape, ops = case
    chain = run_chain(shape, "float32", [text for text, _ in ops])
    for step, tensor in zip(chain.steps, chain.tensors, strict=True):
        assert step.size == tuple(tensor.shape) and step.stride == tuple(tensor.stride())
        assert step.storage_nbytes == tensor.untyped_storage().nbytes()
