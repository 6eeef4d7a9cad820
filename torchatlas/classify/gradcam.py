"""Grad-CAM (Selvaraju et al., 2017): where in the crop the model found evidence for a class,
written with a forward hook and ``torch.autograd.grad``."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from torch import nn

from torchatlas.classify.errors import ClassifyError, ErrorCode
from torchatlas.classify.models import DEFAULT_MODEL, load_model
from torchatlas.classify.transforms import ImageInput, as_rgb, centre_crop, preprocess


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
    image: ImageInput, model: str = DEFAULT_MODEL, class_index: int | None = None
) -> Explanation:
    """Grad-CAM for ``class_index`` (default: the top prediction).

    Weights each channel of ``spec.cam_layer``'s activation by the mean gradient of the class
    logit, sums, keeps the positive part and upsamples to the crop. Needs autograd, so it runs
    outside inference mode; the model itself is not changed (its parameters stay frozen, only
    the input asks for gradients).
    """
    loaded = load_model(model)
    spec = loaded.spec
    rgb, _ = as_rgb(image, spec)
    cropped = centre_crop(rgb, spec)
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
                raise ClassifyError(ErrorCode.BAD_CLASS, index=index, last=logits.shape[1] - 1)
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
