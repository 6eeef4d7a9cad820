"""Each model's own preprocessing (resize, centre crop, to tensor, normalise), step by step.

:func:`preprocess` is exactly ``spec.transforms()`` (torchvision's ``ImageClassification``
preset), computed so that a batch is normalised in one pass and comes out ``channels_last``;
:func:`preprocess_steps` shows every transform's output, for the pipeline strip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import functional as TF

from torchatlas.classify.images import Conversion, Decoded, SourceInfo, decode
from torchatlas.classify.models import DEFAULT_MODEL, ModelSpec, model_spec

ImageInput = bytes | Image.Image | Decoded  # a file's contents, a PIL image, or a file decoded


def as_rgb(item: ImageInput, spec: ModelSpec) -> tuple[Image.Image, SourceInfo | None]:
    """The upright RGB picture of ``item`` and, for a file, what it said about itself.

    A file is decoded here (raises :class:`~torchatlas.classify.errors.ImageError`); a file
    decoded before (``images.look``) is taken as it is, with no decode time.
    """
    if isinstance(item, Decoded):
        return item.image, item.info
    if isinstance(item, bytes | bytearray):
        # JPEG draft keeps >= 2× the resize target: the same picture after Resize, decoded faster
        decoded = decode(bytes(item), min_side=2 * spec.resize_size)
        return decoded.image, decoded.info
    return item.convert("RGB"), None


def _prepare(image: Image.Image, spec: ModelSpec) -> tuple[Image.Image, Image.Image, torch.Tensor]:
    """Exactly ``spec.transforms()`` (torchvision's ImageClassification), step by step."""
    resized = TF.resize(image, [spec.resize_size], interpolation=spec.interpolation, antialias=True)
    cropped = TF.center_crop(resized, [spec.crop_size])
    return resized, cropped, TF.pil_to_tensor(cropped)


def crop_pixels(image: Image.Image, spec: ModelSpec) -> np.ndarray:
    """Resize + centre crop as an H×W×3 uint8 array (PIL and NumPy only: thread-friendly)."""
    resized = TF.resize(image, [spec.resize_size], interpolation=spec.interpolation, antialias=True)
    return np.asarray(TF.center_crop(resized, [spec.crop_size]))


def normalize_batch(pixels: Sequence[np.ndarray], spec: ModelSpec) -> torch.Tensor:
    """ToTensor + Normalize for a whole batch in one pass, already channels_last.

    Stacking H×W×C arrays gives N×H×W×C memory, which *is* channels_last once viewed as
    N×C×H×W; the arithmetic is the reference's, element by element (x / 255 - mean) / std.
    """
    batch = torch.from_numpy(np.stack(pixels)).permute(0, 3, 1, 2)
    mean = torch.tensor(spec.mean, dtype=torch.float32).reshape(1, -1, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32).reshape(1, -1, 1, 1)
    return batch.to(torch.float32).div_(255).sub_(mean).div_(std)


def preprocess(image: Image.Image, model: str = DEFAULT_MODEL) -> torch.Tensor:
    """The normalised 3×crop×crop float tensor the model sees (``spec.transforms()(image)``)."""
    spec = model_spec(model)
    return normalize_batch([crop_pixels(image, spec)], spec)[0]


def centre_crop(image: Image.Image, spec: ModelSpec) -> Image.Image:
    """The crop the model sees, as a picture."""
    return _prepare(image, spec)[1]


# --------------------------------------------------------------------------- the pipeline strip


class StepKind(StrEnum):
    ORIGINAL = "original"
    RGB = "rgb"
    RESIZED = "resized"
    CROPPED = "cropped"
    TENSOR = "tensor"
    NORMALIZED = "normalized"


@dataclass(frozen=True)
class ChannelStats:
    min: float
    max: float
    mean: float
    std: float


@dataclass(frozen=True)
class Step:
    key: StepKind
    code: str  # the PyTorch/torchvision call that made it
    width: int
    height: int
    image: Image.Image | None = None  # a picture of this step (tensors: None)
    shape: tuple[int, ...] = ()
    dtype: str = ""  # a tensor's dtype, or the file's stored pixel mode (original)
    channels: tuple[ChannelStats, ...] = ()  # R, G, B
    format: str = ""  # the file's format (original)
    conversions: tuple[Conversion, ...] = ()  # what decoding changed (rgb)


def _stats(tensor: torch.Tensor) -> tuple[ChannelStats, ...]:
    flat = tensor.double().flatten(1)
    return tuple(
        ChannelStats(float(c.min()), float(c.max()), float(c.mean()), float(c.std(correction=0)))
        for c in flat
    )


def preprocess_steps(image: ImageInput, model: str = DEFAULT_MODEL) -> tuple[Step, ...]:
    """Every transform's output for ``model``'s own preprocessing, from file to model input.

    ``image``: file contents, a PIL image, or a file already decoded (``images.look``).
    """
    spec = model_spec(model)
    steps: list[Step] = []
    rgb, info = as_rgb(image, spec)
    if info is not None:
        steps.append(
            Step(
                StepKind.ORIGINAL,
                "Image.open(file)",
                info.width,
                info.height,
                shape=(info.height, info.width),
                dtype=info.mode,
                format=info.format,
            )
        )
        steps.append(
            Step(
                StepKind.RGB,
                "ImageOps.exif_transpose(img).convert('RGB')",
                rgb.width,
                rgb.height,
                image=rgb,
                conversions=info.conversions,
            )
        )
    else:
        steps.append(Step(StepKind.RGB, "img.convert('RGB')", rgb.width, rgb.height, image=rgb))
    resized, cropped, uint8 = _prepare(rgb, spec)
    interpolation = spec.interpolation.name
    steps.append(
        Step(
            StepKind.RESIZED,
            f"Resize({spec.resize_size}, InterpolationMode.{interpolation}, antialias=True)",
            resized.width,
            resized.height,
            image=resized,
        )
    )
    steps.append(
        Step(
            StepKind.CROPPED,
            f"CenterCrop({spec.crop_size})",
            cropped.width,
            cropped.height,
            image=cropped,
        )
    )
    tensor = TF.convert_image_dtype(uint8, torch.float)
    steps.append(
        Step(
            StepKind.TENSOR,
            "ToTensor()  # PILToTensor + ToDtype(float32, scale=True)",
            cropped.width,
            cropped.height,
            shape=tuple(tensor.shape),
            dtype=str(tensor.dtype).removeprefix("torch."),
            channels=_stats(tensor),
        )
    )
    normalized = TF.normalize(tensor, spec.mean, spec.std)
    mean = ", ".join(f"{m:g}" for m in spec.mean)
    std = ", ".join(f"{s:g}" for s in spec.std)
    steps.append(
        Step(
            StepKind.NORMALIZED,
            f"Normalize(mean=[{mean}], std=[{std}])",
            cropped.width,
            cropped.height,
            shape=tuple(normalized.shape),
            dtype=str(normalized.dtype).removeprefix("torch."),
            channels=_stats(normalized),
        )
    )
    return tuple(steps)
