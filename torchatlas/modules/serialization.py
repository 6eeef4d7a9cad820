"""What ``torch.save`` writes and what ``torch.load`` and ``load_state_dict`` accept, shown on
the room's built-in models (trusted code on the server).

Nothing here ever loads a file with ``weights_only=False``: the refusal of a file that holds a
Python object is produced by torch itself, with its own message, under its default.
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from dataclasses import dataclass, field
from enum import StrEnum

import torch
from torch import nn

from torchatlas.modules.inspector import dtype_name
from torchatlas.modules.training import build_model

MAX_FILE_BYTES = 1 << 20  # the built-in models' files are a few kilobytes; a download never more
MAX_MESSAGE_CHARS = 2000
SAVE_MODELS = ("mylinear", "mlp", "buffered")


class LoadCase(StrEnum):
    """A state dict that does not fit the model (``modules.save.cases.<value>``)."""

    MISSING = "missing"  # a key the model expects is absent
    UNEXPECTED = "unexpected"  # a key the model does not have
    MISMATCHED = "mismatched"  # a key with another shape


@dataclass(frozen=True)
class StateEntry:
    key: str
    shape: tuple[int, ...]
    dtype: str
    numel: int


@dataclass(frozen=True)
class ZipEntry:
    name: str
    size: int
    compressed: int


@dataclass(frozen=True)
class LoadAttempt:
    """``load_state_dict`` with a broken state dict, strict and not."""

    case: LoadCase
    key: str  # the key that was removed, added or reshaped
    strict_error: str  # torch's message with strict=True ("" if it loaded)
    relaxed_error: str  # torch's message with strict=False ("" if it loaded)
    missing: tuple[str, ...]  # strict=False's result
    unexpected: tuple[str, ...]
    kept_fresh: tuple[str, ...]  # keys whose values stayed the fresh model's, silently


@dataclass(frozen=True)
class SerializationReport:
    model_key: str
    entries: tuple[StateEntry, ...]
    file_bytes: bytes  # the state_dict file, for the page's download button
    zip_entries: tuple[ZipEntry, ...]
    loaded_keys: tuple[str, ...]  # torch.load(weights_only=True) of that file
    round_trip_equal: bool  # every loaded tensor equals the saved one
    refusal: str  # torch's message refusing a file that holds a Python object
    refusal_type: str
    default_refuses: bool  # torch.load with no weights_only argument refuses it too
    attempts: tuple[LoadAttempt, ...]
    elapsed_s: float = field(default=0.0, compare=False)  # timing, not a result

    @property
    def file_size(self) -> int:
        return len(self.file_bytes)


class TrainingNote:
    """A Python object saved beside the weights: unpickling it would run this module's code,
    which is why ``weights_only=True`` refuses it."""

    def __init__(self, text: str) -> None:
        self.text = text


def _save(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # torch bolds part of its refusal for terminals


def _message(exc: BaseException) -> str:
    text = _ANSI.sub("", f"{type(exc).__name__}: {exc}")
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def _attempt(model_key: str, case: LoadCase, state: dict[str, torch.Tensor]) -> LoadAttempt:
    broken = dict(state)
    first = next(iter(state))
    if case is LoadCase.MISSING:
        key = list(state)[-1]
        del broken[key]
    elif case is LoadCase.UNEXPECTED:
        key = "extra.weight"
        broken[key] = torch.zeros(2)
    else:
        key = first
        broken[key] = torch.zeros(*(size + 1 for size in state[first].shape))
    strict_error = relaxed_error = ""
    try:
        build_model(model_key, seed=1).load_state_dict(broken, strict=True)
    except RuntimeError as exc:
        strict_error = _message(exc)
    fresh = build_model(model_key, seed=1)
    fresh_values = {name: value.clone() for name, value in fresh.state_dict().items()}
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    try:
        result = fresh.load_state_dict(broken, strict=False)
        missing, unexpected = tuple(result.missing_keys), tuple(result.unexpected_keys)
    except RuntimeError as exc:  # a size mismatch is refused even when not strict
        relaxed_error = _message(exc)
    kept = tuple(
        name
        for name, value in fresh.state_dict().items()
        if name in state
        and not torch.equal(value, state[name])
        and torch.equal(value, fresh_values[name])
    )
    return LoadAttempt(case, key, strict_error, relaxed_error, missing, unexpected, kept)


def save_load(model_key: str) -> SerializationReport:
    """``state_dict()`` → ``torch.save`` → the zip inside → ``torch.load(weights_only=True)``,
    a file torch refuses, and ``load_state_dict`` with missing, unexpected and mismatched keys.
    Raises ValueError for a model that is not one of :data:`SAVE_MODELS`."""
    if model_key not in SAVE_MODELS:
        raise ValueError(f"model_key must be one of {', '.join(SAVE_MODELS)}")
    started = time.perf_counter()
    model: nn.Module = build_model(model_key, seed=0)
    state = model.state_dict()
    data = _save(state)
    if len(data) > MAX_FILE_BYTES:  # the built-in models are tiny; a guard, not a feature
        raise ValueError("the state_dict file is larger than the room offers for download")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        zip_entries = tuple(
            ZipEntry(info.filename, info.file_size, info.compress_size)
            for info in archive.infolist()
        )
    loaded = torch.load(io.BytesIO(data), weights_only=True)
    equal = set(loaded) == set(state) and all(torch.equal(loaded[k], state[k]) for k in state)
    unsafe = _save({"state_dict": state, "note": TrainingNote("trained for 100 steps")})
    refusal, refusal_type = "", ""
    try:
        torch.load(io.BytesIO(unsafe), weights_only=True)
    except Exception as exc:  # torch raises pickle.UnpicklingError with its explanation
        refusal, refusal_type = _message(exc), type(exc).__name__
    try:
        torch.load(io.BytesIO(unsafe))  # the default since torch 2.6: weights_only=True
        default_refuses = False
    except Exception:
        default_refuses = True
    entries = tuple(
        StateEntry(key, tuple(value.shape), dtype_name(value.dtype), int(value.numel()))
        for key, value in state.items()
    )
    attempts = tuple(_attempt(model_key, case, state) for case in LoadCase)
    return SerializationReport(
        model_key=model_key,
        entries=entries,
        file_bytes=data,
        zip_entries=zip_entries,
        loaded_keys=tuple(loaded),
        round_trip_equal=equal,
        refusal=refusal,
        refusal_type=refusal_type,
        default_refuses=default_refuses,
        attempts=attempts,
        elapsed_s=time.perf_counter() - started,
    )
