"""The classification room's state: its session keys, its URL parameter, what it keeps of
uploads, and its cached engine calls.

Keys start with ``c_`` (the room's prefix since its first release: the e2e tests and shared
links use them). ``?c_model=resnet50`` picks the model: read once when a session opens the
room, written when the visitor changes it; other rooms' parameters are never touched.

Uploads go through one budget (``components.uploads``): a file that is no image at a glance,
or one over the visitor's or the server's budget, is refused as it arrives and its bytes
dropped. Every other file is decoded once (``images.look``) into a small upright copy plus its
digest, which the session keeps (:data:`KEPT_KEY`); the raw bytes then leave the server.

Caches: models live in the engine's own bounded cache (``torchatlas.classify.MODEL_CACHE``, one
per process, loaded once and shared by every session), never in a second one here. Results,
pictures and heatmaps are kept per file digest and model with ``st.cache_data``; every entry is
capped in size (thumbnails, a 224-pixel crop, a few numbers), so the entry counts bound the
bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from components import uploads as upload_budget
from components.classify import draw
from components.figures import frozen, picture_bytes
from components.theme import Palette
from torchatlas.cache import BoundedCache
from torchatlas.classify import images
from torchatlas.classify.errors import ImageError
from torchatlas.classify.gradcam import Explanation, explain
from torchatlas.classify.images import MAX_PIXELS, Decoded
from torchatlas.classify.models import (
    DEFAULT_MODEL,
    MODELS,
    LoadedModel,
    ModelSpec,
    ProgressCallback,
    download_weights,
    load_model,
    weights_available,
)
from torchatlas.classify.predict import ClassifyResult, Prediction, Stage, Timings, classify
from torchatlas.classify.samples import SAMPLES, sample_bytes
from torchatlas.classify.transforms import Step, preprocess_steps
from torchatlas.runtime import torch_summary
from torchatlas.uploads import Refusal

MODEL_KEY = "c_model"  # session key and URL parameter
TOPK_KEY = "c_topk"
SAMPLES_KEY = "c_samples"
UPLOADS_KEY = "c_uploads"
CAMERA_KEY = "c_camera"
CAMERA_PHOTO_KEY = "c_camera_photo"
KEPT_KEY = "c_kept"  # file id → (name, Decoded or Refusal): what the session keeps of uploads
INSPECT_KEY = "c_inspect"
INSPECT_TAB_KEY = "c_inspect_tab"
CAM_OPACITY_KEY = "c_cam_opacity"
TIME_AGAIN_KEY = "c_time_again"
COMPARE_KEY = "c_compare"
LATENCY_CHART_KEY = "c_latency"
THUMBNAIL_PX = 480
MAX_TOPK = 10
DEFAULT_TOPK = 5
DEFAULT_SAMPLES = ("cat",)
IMAGE_SOURCE = "image"  # whose error codes the upload screen's refusals carry


def cam_class_key(model: str) -> str:
    """The Grad-CAM class picker's key: one per model, since each ranks the classes anew."""
    return f"c_cam_class_{model}"


def topk_key(number: int) -> str:
    return f"c_top_{number}"


@dataclass(frozen=True)
class Settings:
    model: str
    topk: int


@dataclass(frozen=True)
class Photo:
    """One image the page classifies: its name as shown and its decoded, kept copy."""

    name: str
    decoded: Decoded


@dataclass(frozen=True)
class Upload:
    """One file an upload widget lists, and what the session kept of it."""

    name: str
    kept: Decoded | Refusal
    widget: str  # the key of the widget that lists it


# --------------------------------------------------------------------------- the model choice


def model_keys() -> list[str]:
    return list(MODELS)


def spec(model: str) -> ModelSpec:
    return MODELS[model]


def open_model_choice() -> None:
    """Set the model from a shared link (``?c_model=resnet50``) when the session has none yet."""
    if MODEL_KEY not in st.session_state:
        requested = st.query_params.get(MODEL_KEY, DEFAULT_MODEL)
        st.session_state[MODEL_KEY] = requested if requested in MODELS else DEFAULT_MODEL


def write_model_choice(model: str) -> None:
    """Keep the link shareable: the parameter names a model other than the default, or is
    absent."""
    if model != DEFAULT_MODEL:
        if st.query_params.get(MODEL_KEY) != model:
            st.query_params[MODEL_KEY] = model
    elif MODEL_KEY in st.query_params:
        del st.query_params[MODEL_KEY]


def needs_download(model: str) -> bool:
    return not MODELS[model].embedded and not weights_available(model)


def downloaded(model: str) -> bool:
    return weights_available(model)


def download(model: str, on_progress: ProgressCallback) -> None:
    download_weights(model, on_progress)


def loaded_model(model: str) -> LoadedModel:
    """The loaded model, from the engine's process-wide cache (loaded at most once)."""
    return load_model(model)


def cpu_threads() -> int:
    return torch_summary().cpu_threads


# --------------------------------------------------------------------------- cached engine calls


@st.cache_data(show_spinner=False, max_entries=8)
def sample(key: str) -> Decoded:
    return images.look(sample_bytes(key))


def sample_keys() -> list[str]:
    return list(SAMPLES)


# Keyed by the files' digests; the decoded images themselves (``_images``) are not hashed.
@st.cache_data(show_spinner=False, max_entries=32)
def _classify(
    digests: tuple[str, ...], model: str, topk: int, _images: tuple[Decoded, ...]
) -> ClassifyResult:
    return classify(list(_images), model=model, topk=topk)


def classified(photos: Sequence[Photo], model: str, topk: int) -> ClassifyResult:
    decoded = tuple(photo.decoded for photo in photos)
    return _classify(tuple(d.digest for d in decoded), model, topk, decoded)


def timed_again(photos: Sequence[Photo], model: str, topk: int) -> Timings:
    """A fresh, uncached run of the same classification, for its timings."""
    return classify([photo.decoded for photo in photos], model=model, topk=topk).timings


@st.cache_data(show_spinner=False, max_entries=64)
def _thumbnail(digest: str, _decoded: Decoded) -> bytes:
    image = _decoded.image.copy()  # shared with other sessions: never shrink it in place
    image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    return picture_bytes(image)


def thumbnail(decoded: Decoded) -> bytes:
    """The photo's thumbnail as the file ``st.image`` sends (encoded once per photo)."""
    return _thumbnail(decoded.digest, decoded)


@st.cache_data(show_spinner=False, max_entries=16)
def _pipeline(digest: str, model: str, _decoded: Decoded) -> tuple[Step, ...]:
    steps = []
    for step in preprocess_steps(_decoded, model):
        if step.image is not None:
            picture = step.image.copy()
            picture.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))  # a 40 MP original stays on the server
            step = replace(step, image=picture)
        steps.append(step)
    return tuple(steps)


def pipeline(decoded: Decoded, model: str) -> tuple[Step, ...]:
    return _pipeline(decoded.digest, model, decoded)


@st.cache_data(show_spinner=False, max_entries=16)
def _pipeline_pictures(digest: str, model: str, _decoded: Decoded) -> tuple[bytes | None, ...]:
    steps = _pipeline(digest, model, _decoded)
    return tuple(None if step.image is None else picture_bytes(step.image) for step in steps)


def pipeline_pictures(decoded: Decoded, model: str) -> tuple[bytes | None, ...]:
    """Each step's picture of :func:`pipeline` (None where a step has none), encoded once."""
    return _pipeline_pictures(decoded.digest, model, decoded)


@st.cache_data(show_spinner=False, max_entries=32)
def _explanation(digest: str, model: str, class_index: int, _decoded: Decoded) -> Explanation:
    return explain(_decoded, model, class_index)


def explanation(decoded: Decoded, model: str, class_index: int) -> Explanation:
    return _explanation(decoded.digest, model, class_index, decoded)


@st.cache_data(show_spinner=False, max_entries=32)
def _explanation_picture(digest: str, model: str, class_index: int, _decoded: Decoded) -> bytes:
    return picture_bytes(explanation(_decoded, model, class_index).cropped)


def explanation_picture(decoded: Decoded, model: str, class_index: int) -> bytes:
    """What the model saw (the explanation's crop), encoded once."""
    return _explanation_picture(decoded.digest, model, class_index, decoded)


@st.cache_data(show_spinner=False, max_entries=64)
def _overlay(digest: str, model: str, class_index: int, opacity: float, _decoded: Decoded) -> bytes:
    seen = explanation(_decoded, model, class_index)
    return picture_bytes(draw.heatmap_overlay(seen.cropped, seen.heatmap, opacity))


def overlay(decoded: Decoded, model: str, class_index: int, opacity: float) -> bytes:
    """The heatmap over the crop at ``opacity``, encoded once per photo, class and opacity."""
    return _overlay(decoded.digest, model, class_index, round(float(opacity), 2), decoded)


# Figures shared by every visitor: a class looking at the same photo sees the same charts.
FIGURES: BoundedCache[tuple[Any, ...], go.Figure] = BoundedCache(8 << 20)


def topk_figure(predictions: tuple[Prediction, ...], colours: Palette, lang: str) -> go.Figure:
    return FIGURES.get_or_compute(
        ("topk", predictions, colours, lang),
        lambda: frozen(draw.topk_figure(predictions, colours, lang)),
    )


def latency_figure(
    wall_parts: tuple[tuple[Stage, float], ...], colours: Palette, lang: str
) -> go.Figure:
    return FIGURES.get_or_compute(
        ("latency", wall_parts, colours, lang),
        lambda: frozen(draw.latency_figure(wall_parts, colours, lang)),
    )


# --------------------------------------------------------------------------- uploads


def upload_limits() -> dict[str, object]:
    """The numbers the uploader's help text states."""
    return {"limit_mp": MAX_PIXELS // 1_000_000, **upload_budget.limits_mb()}


def per_file_mb() -> int:
    return upload_budget.per_file_mb()


def session_uploads() -> upload_budget.SessionUploads:
    """This session's view of the upload budget; files that are no image are refused as they
    arrive (the screen reads their first bytes only)."""
    return upload_budget.session_uploads(screen=images.screen, source=IMAGE_SOURCE)


def take_in(session: upload_budget.SessionUploads, keys: Sequence[str]) -> list[Upload]:
    """Every file the upload widgets ``keys`` list, with what the session kept of it, in order.

    A file seen for the first time is looked at once (decoded, shrunk, hashed) and its bytes
    dropped; later runs reuse what the session kept. Files the visitor removed are forgotten.
    """
    kept: dict[str, tuple[str, Decoded | Refusal]] = st.session_state.setdefault(KEPT_KEY, {})
    listed = [(key, entry) for key in keys for entry in session.entries(key)]
    entries = [entry for _, entry in listed]
    for entry in entries:
        if entry.file_id in kept:
            if entry.file is not None:  # the same bytes offered again: drop them again
                session.take(entry, keep_bytes=session.held(entry))
            continue
        if entry.refusal is not None:
            kept[entry.file_id] = (entry.name, entry.refusal)
            continue
        if entry.file is None:  # bytes gone, nothing on record (the session was restarted)
            kept[entry.file_id] = (entry.name or "?", Refusal("upload_again", source=IMAGE_SOURCE))
            continue
        refusal = session.admit(entry)
        if refusal is not None:
            kept[entry.file_id] = (entry.name, refusal)
            continue
        outcome: Decoded | Refusal
        try:
            outcome = images.look(entry.file.getvalue())
        except ImageError as error:
            outcome = Refusal(error.code, dict(error.params), entry.name, entry.size, IMAGE_SOURCE)
        keep = outcome.nbytes if isinstance(outcome, Decoded) else 0
        over = session.take(entry, keep_bytes=keep)
        kept[entry.file_id] = (entry.name, over or outcome)
    listed_ids = [entry.file_id for entry in entries]
    session.forget(listed_ids, list(kept))
    for file_id in set(kept) - set(listed_ids):
        del kept[file_id]
    return [Upload(*kept[entry.file_id], widget=key) for key, entry in listed]
