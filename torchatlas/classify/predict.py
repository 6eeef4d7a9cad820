"""Several images through one batched forward pass: ``eval()``, forward, softmax, sort, labels.

:func:`classify` decodes and crops the images on worker threads (PIL releases the GIL), then
normalises them as one batch and runs the model's fused inference module; a file that cannot be
read becomes an outcome with its error code, and the others still classify.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import torch

from torchatlas.classify.errors import ErrorCode, ImageError
from torchatlas.classify.images import SourceInfo
from torchatlas.classify.models import DEFAULT_MODEL, ModelSpec, load_model
from torchatlas.classify.transforms import ImageInput, as_rgb, crop_pixels, normalize_batch


@dataclass(frozen=True)
class Prediction:
    index: int
    label: str
    probability: float


@dataclass(frozen=True)
class ImageOutcome:
    """One input image: its predictions, or the reason it could not be read."""

    predictions: tuple[Prediction, ...] = ()
    error_code: ErrorCode | None = None
    error_params: dict[str, object] = field(default_factory=dict)
    width: int = 0
    height: int = 0
    info: SourceInfo | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None

    @property
    def error(self) -> ImageError | None:
        """Why the image could not be read (the room's coded error), or None."""
        return None if self.error_code is None else ImageError(self.error_code, **self.error_params)

    @property
    def error_message(self) -> str:
        """The refusal in English (from the translation table), or "" when the image was read."""
        return "" if self.error is None else self.error.message

    @property
    def labels(self) -> list[tuple[str, float]]:
        return [(p.label, p.probability) for p in self.predictions]


class Stage(StrEnum):
    """The parts of a ``classify()`` call, in the order they run."""

    DECODE = "decode"
    PREPROCESS = "preprocess"
    FORWARD = "forward"


@dataclass(frozen=True)
class Timings:
    """Seconds spent in one ``classify()`` call.

    ``decode_s`` and ``preprocess_s`` add up every image's work; with several images that work
    runs on ``workers`` threads, so its wall-clock share is ``prepare_s``.
    """

    decode_s: float
    preprocess_s: float
    prepare_s: float  # wall clock of decode + preprocess for all images
    forward_s: float  # one batched forward + softmax + top-k
    total_s: float
    batch_size: int  # images in the forward pass (refused files are not counted)
    workers: int = 1

    @property
    def per_image_s(self) -> float:
        return self.total_s / max(1, self.batch_size)

    def wall_parts(self) -> tuple[tuple[Stage, float], ...]:
        """Each stage's wall-clock seconds, in order (parallel work scaled down to wall time)."""
        work = self.decode_s + self.preprocess_s
        scale = self.prepare_s / work if work > 0 else 0.0
        return (
            (Stage.DECODE, self.decode_s * scale),
            (Stage.PREPROCESS, self.preprocess_s * scale),
            (Stage.FORWARD, self.forward_s),
        )


@dataclass(frozen=True)
class ClassifyResult:
    model: str
    images: tuple[ImageOutcome, ...]
    timings: Timings

    @property
    def predictions(self) -> list[list[tuple[str, float]] | None]:
        """Per input image ``[(label, probability), …]`` best first, or None if it was refused."""
        return [image.labels if image.ok else None for image in self.images]


# Batches go through the network in chunks of this size: on a small CPU, a few images per
# forward are the cheapest per image, because larger batches spill the activations out of the
# CPU caches (bench/bench_classify.py measures the batch against single images).
FORWARD_CHUNK = 4
_PREPARE_WORKERS = 2  # PIL decodes and resizes without the GIL: two images at once
_prepare_pool: ThreadPoolExecutor | None = None
_pool_guard = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _prepare_pool
    with _pool_guard:
        if _prepare_pool is None:
            _prepare_pool = ThreadPoolExecutor(_PREPARE_WORKERS, thread_name_prefix="classify")
        return _prepare_pool


def _prepare_item(
    item: ImageInput, spec: ModelSpec
) -> tuple[ImageOutcome, np.ndarray | None, float, float]:
    """Decode, resize and crop one input: (outcome, crop pixels, decode s, preprocess s).

    No torch here: these run on worker threads, and torch ops on extra threads start extra
    OpenMP teams that then compete with the forward pass for the same cores.
    """
    tick = time.perf_counter()
    try:
        rgb, info = as_rgb(item, spec)
    except ImageError as error:
        outcome = ImageOutcome(error_code=error.code, error_params=dict(error.params))
        return outcome, None, time.perf_counter() - tick, 0.0
    mid = time.perf_counter()
    pixels = crop_pixels(rgb, spec)
    done = time.perf_counter()
    return (
        ImageOutcome(width=rgb.width, height=rgb.height, info=info),
        pixels,
        mid - tick,
        done - mid,
    )


def classify(
    images: Sequence[ImageInput], model: str = DEFAULT_MODEL, topk: int = 5
) -> ClassifyResult:
    """Classify several images with one batched forward pass.

    ``images``: file contents (decoded here, refused per file with an error code), files
    already decoded (``images.look``: no decode time here) or PIL images. A bad file becomes an
    outcome with ``error_code``; the others still classify.
    Returns per image ``(label, probability)`` pairs (``result.predictions``) and timings.
    """
    started = time.perf_counter()
    loaded = load_model(model)
    spec = loaded.spec
    topk = max(1, min(int(topk), len(loaded.categories)))
    workers = min(_PREPARE_WORKERS, len(images)) if len(images) > 1 else 1
    prepare_started = time.perf_counter()
    if workers > 1:
        prepared = list(_pool().map(lambda item: _prepare_item(item, spec), images))
    else:
        prepared = [_prepare_item(item, spec) for item in images]
    crops = [pixels for _, pixels, _, _ in prepared if pixels is not None]
    normalize_s = 0.0
    if crops:
        tick = time.perf_counter()
        batch = normalize_batch(crops, spec)
        normalize_s = time.perf_counter() - tick
    prepare_s = time.perf_counter() - prepare_started
    tick = time.perf_counter()
    ranked: list[tuple[Prediction, ...]] = []
    if crops:
        with torch.inference_mode():
            logits = torch.cat([loaded.inference(chunk) for chunk in batch.split(FORWARD_CHUNK)])
            probabilities = logits.float().softmax(dim=1)
            values, indices = probabilities.topk(topk, dim=1)
        for row_values, row_indices in zip(values.tolist(), indices.tolist(), strict=True):
            ranked.append(
                tuple(
                    Prediction(index, loaded.categories[index], value)
                    for value, index in zip(row_values, row_indices, strict=True)
                )
            )
    forward_s = time.perf_counter() - tick
    rows = iter(ranked)
    final = tuple(
        outcome if pixels is None else _with_predictions(outcome, next(rows))
        for outcome, pixels, _, _ in prepared
    )
    timings = Timings(
        decode_s=sum(item[2] for item in prepared),
        preprocess_s=sum(item[3] for item in prepared) + normalize_s,
        prepare_s=prepare_s,
        forward_s=forward_s,
        total_s=time.perf_counter() - started,
        batch_size=len(crops),
        workers=workers,
    )
    return ClassifyResult(model, final, timings)


def _with_predictions(outcome: ImageOutcome, predictions: tuple[Prediction, ...]) -> ImageOutcome:
    return ImageOutcome(
        predictions=predictions, width=outcome.width, height=outcome.height, info=outcome.info
    )


def forward_only(batch: torch.Tensor, model: str = DEFAULT_MODEL) -> torch.Tensor:
    """Bare ``model(x)`` under inference mode (the benchmark's baseline)."""
    loaded = load_model(model)
    with torch.inference_mode():
        return loaded.inference(batch.contiguous(memory_format=torch.channels_last))
