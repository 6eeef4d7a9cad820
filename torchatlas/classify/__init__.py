"""Pretrained ImageNet classification, with every step exposed.

The curriculum's recipe, made visible: preprocess (resize, centre crop, to tensor, normalise),
``eval()``, forward, softmax, sort, map indices to ImageNet labels.

- :mod:`.images`: uploaded bytes → an upright RGB photo, with decode time and memory bounded,
  or a refusal with a code; :func:`~.images.look` decodes each content once.
- :mod:`.models`: the models offered, their weights, and the one bounded model cache.
- :mod:`.transforms`: each model's reference transforms, and every step's output.
- :mod:`.predict`: several images through one batched forward pass, with timings.
- :mod:`.gradcam`: a Grad-CAM heatmap for one class.
- :mod:`.errors`: error codes and parameters; their text is in the translation tables.

Plain Python + torch; no Streamlit.
"""

from __future__ import annotations

from torchatlas.classify.errors import ClassifyError, ErrorCode, ImageError, Variant
from torchatlas.classify.gradcam import Explanation, explain
from torchatlas.classify.images import (
    MAX_PIXELS,
    Conversion,
    Decoded,
    SourceInfo,
    load_image,
    look,
)
from torchatlas.classify.models import (
    DEFAULT_MODEL,
    IMAGENET_CATEGORIES,
    MODEL_CACHE,
    MODELS,
    LoadedModel,
    ModelSpec,
    download_weights,
    load_model,
    model_spec,
    weights_available,
    weights_path,
)
from torchatlas.classify.predict import (
    ClassifyResult,
    ImageOutcome,
    Prediction,
    Stage,
    Timings,
    classify,
    forward_only,
)
from torchatlas.classify.samples import SAMPLES, sample_bytes
from torchatlas.classify.transforms import (
    ChannelStats,
    Step,
    StepKind,
    preprocess,
    preprocess_steps,
)

__all__ = [
    "DEFAULT_MODEL",
    "IMAGENET_CATEGORIES",
    "MAX_PIXELS",
    "MODELS",
    "MODEL_CACHE",
    "SAMPLES",
    "ChannelStats",
    "ClassifyError",
    "ClassifyResult",
    "Conversion",
    "Decoded",
    "ErrorCode",
    "Explanation",
    "ImageError",
    "ImageOutcome",
    "LoadedModel",
    "ModelSpec",
    "Prediction",
    "SourceInfo",
    "Stage",
    "Step",
    "StepKind",
    "Timings",
    "Variant",
    "classify",
    "download_weights",
    "explain",
    "forward_only",
    "load_image",
    "load_model",
    "look",
    "model_spec",
    "preprocess",
    "preprocess_steps",
    "sample_bytes",
    "weights_available",
    "weights_path",
]
