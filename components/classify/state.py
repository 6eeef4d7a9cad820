"""The classification room's state: its link, its session keys, what it keeps of uploads,
its cached engine calls and pictures, and its start-up warm-up.

Keys start with ``classify_``. The link (``torchatlas/classify/link.py``: ``?c_model=resnet50``,
``c_topk``) is read once when a session opens the room and written when the visitor changes
it; other rooms' parameters are never touched.

Uploads go through one budget (``components.uploads``): a file that is no image at a glance,
or one over the visitor's or the server's budget, is refused as it arrives and its bytes
dropped. Every other file is decoded once (``images.look``) into a small upright copy plus its
digest, which the session keeps (:data:`KEPT_KEY`); the raw bytes then leave the server.

Caches: models live in the engine's own bounded cache (``torchatlas.classify.MODEL_CACHE``, one
per process, loaded once and shared by every session), never in a second one here. Results,
pictures, heatmaps and figures are kept per file digest and model in :data:`ROOM_CACHE`,
bounded by bytes (a picture weighs its pixels), shared by every visitor: a class looking at
the same photo pays for it once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st
from PIL import Image

from components import uploads as upload_budget
from components.classify import draw
from components.figures import frozen, picture_bytes, table
from components.kit.follow import folded as follow_folded
from components.kit.room_state import RoomState
from components.theme import Palette
from components.upkeep import warm_up
from components.widgets import keep_values as keep_widget_values
from torchatlas.cache import deep_size
from torchatlas.classify import images
from torchatlas.classify import link as classify_link
from torchatlas.classify.errors import ClassifyError, ErrorCode, ImageError
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
from torchatlas.classify.transforms import ChannelStats, Step, preprocess_steps
from torchatlas.runtime import torch_summary
from torchatlas.uploads import Refusal

T = TypeVar("T")
# One byte-bounded cache for the room's results and pictures, shared by every visitor. Keys
# carry the file's digest (the decoded pictures themselves are not hashed).
CACHE_BYTES = 96 << 20


def _picture_bytes(value: Any, depth: int = 0) -> int:
    """The pixel bytes of the PIL images ``value`` holds (a shallow walk of tuples and
    dataclasses): :func:`~torchatlas.cache.deep_size` sees an image's Python object only."""
    if isinstance(value, Image.Image):
        return value.width * value.height * len(value.getbands())
    if depth > 3:
        return 0
    if isinstance(value, tuple | list):
        return sum(_picture_bytes(item, depth + 1) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(
            _picture_bytes(getattr(value, item.name), depth + 1)
            for item in dataclasses.fields(value)
        )
    return 0


def _weight(entry: Any) -> int:
    arrow = entry.nbytes if isinstance(entry, pa.Table) else 0  # buffers outside Python
    return deep_size(entry) + _picture_bytes(entry) + arrow


ROOM = RoomState(classify_link.LINK, cache_bytes=CACHE_BYTES, sizeof=_weight)
LINK = ROOM.link
ROOM_CACHE = ROOM.cache
MODEL_KEY = LINK.key("c_model")
TOPK_KEY = LINK.key("c_topk")
SAMPLES_KEY = "classify_samples"
UPLOADS_KEY = "classify_uploads"
CAMERA_KEY = "classify_camera"
CAMERA_PHOTO_KEY = "classify_camera_photo"
KEPT_KEY = "classify_kept"  # file id → (name, Decoded or Refusal): what the session keeps
INSPECT_KEY = "classify_inspect"
INSPECT_TAB_KEY = "classify_inspect_tab"
CAM_OPACITY_KEY = "classify_cam_opacity"
TIME_AGAIN_KEY = "classify_time_again"
COMPARE_KEY = "classify_compare"
COMPARE_LEFT_KEY = "classify_compare_left"
COMPARE_RIGHT_KEY = "classify_compare_right"
LATENCY_CHART_KEY = "classify_latency"
THUMBNAIL_PX = 480
MAX_TOPK = classify_link.MAX_TOPK
DEFAULT_TOPK = classify_link.DEFAULT_TOPK
DEFAULT_SAMPLES = ("cat",)
IMAGE_SOURCE = "image"  # whose error codes the upload screen's refusals carry


def cam_class_key(model: str) -> str:
    """The Grad-CAM class picker's key: one per model, since each ranks the classes anew."""
    return f"classify_cam_class_{model}"


UNFOLD_KEY = "classify_unfold"  # a following student's "change the values yourself" button
# The room's widgets a folded run does not draw (kit.follow), re-owned so they keep their values.
_FOLDED_WIDGETS = (MODEL_KEY, TOPK_KEY, SAMPLES_KEY, INSPECT_KEY, INSPECT_TAB_KEY, CAMERA_KEY)


FOLDED_RUN_KEY = "classify_folded_run"  # this run's answer to fold_this_run()


def fold_this_run() -> bool:
    """Decide, first thing in a run, whether it draws the room folded: a student following a
    class sees the teacher's example (kit.follow), unless they have photos of their own here
    (the uploader a folded room does not draw would drop them). :func:`folded` then gives
    the same answer for the rest of the run, whatever the photos do meanwhile."""
    fold = follow_folded() and not st.session_state.get(KEPT_KEY)
    st.session_state[FOLDED_RUN_KEY] = fold
    return fold


def folded() -> bool:
    """This run's answer of :func:`fold_this_run`."""
    return bool(st.session_state.get(FOLDED_RUN_KEY, False))


def keep_folded_values() -> None:
    """In a folded run, before anything else: the widgets it does not draw keep their values
    for the run that unfolds the room (Streamlit forgets the value of a widget not drawn)."""
    keep_widget_values(_FOLDED_WIDGETS)


def current_settings() -> Settings:
    """The model and top-k as the widgets hold them (the link's, on a first run), for a run
    that does not draw them; out-of-range values fall back to the defaults."""
    model = st.session_state.get(MODEL_KEY)
    topk = st.session_state.get(TOPK_KEY)
    return Settings(
        model if model in MODELS else DEFAULT_MODEL,
        topk if isinstance(topk, int) and 1 <= topk <= MAX_TOPK else DEFAULT_TOPK,
    )


def current_samples() -> list[str]:
    """The sample photos the pills hold (the defaults on a first run), for a run that does
    not draw them."""
    chosen = st.session_state.get(SAMPLES_KEY, DEFAULT_SAMPLES)
    return [key for key in chosen or () if key in SAMPLES]


def topk_key(number: int) -> str:
    return f"classify_top_{number}"


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


def start() -> None:
    """Every run, before the widgets: on the session's first run, the link's model and top-k
    become the widgets' values."""
    LINK.start()


notice = ROOM.notice
write_link = ROOM.write_link  # the widgets' session keys are the link


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
_cached = ROOM.cached  # once for every visitor asking for a key at the same time, then kept


def sample(key: str) -> Decoded:
    return _cached(("sample", key), lambda: images.look(sample_bytes(key)))


def sample_keys() -> list[str]:
    return list(SAMPLES)


def classified(photos: Sequence[Photo], model: str, topk: int) -> ClassifyResult:
    decoded = [photo.decoded for photo in photos]
    key = ("classify", tuple(d.digest for d in decoded), model, topk)
    return _cached(key, lambda: classify(decoded, model=model, topk=topk))


def timed_again(photos: Sequence[Photo], model: str, topk: int) -> Timings:
    """A fresh, uncached run of the same classification, for its timings."""
    return classify([photo.decoded for photo in photos], model=model, topk=topk).timings


def _shrunk(image: Image.Image) -> Image.Image:
    picture = image.copy()  # shared with other sessions: never shrink it in place
    picture.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    return picture


def thumbnail(decoded: Decoded) -> bytes:
    """The photo's thumbnail as the file ``st.image`` sends (encoded once per photo)."""
    return _cached(("thumbnail", decoded.digest), lambda: picture_bytes(_shrunk(decoded.image)))


def pipeline(decoded: Decoded, model: str) -> tuple[Step, ...]:
    """Each preprocessing step, its picture shrunk (a 40 MP original stays on the server)."""

    def compute() -> tuple[Step, ...]:
        return tuple(
            step if step.image is None else replace(step, image=_shrunk(step.image))
            for step in preprocess_steps(decoded, model)
        )

    return _cached(("pipeline", decoded.digest, model), compute)


def pipeline_pictures(decoded: Decoded, model: str) -> tuple[bytes | None, ...]:
    """Each step's picture of :func:`pipeline` (None where a step has none), encoded once."""

    def compute() -> tuple[bytes | None, ...]:
        steps = pipeline(decoded, model)
        return tuple(None if step.image is None else picture_bytes(step.image) for step in steps)

    return _cached(("pipeline_pictures", decoded.digest, model), compute)


def explanation(decoded: Decoded, model: str, class_index: int) -> Explanation:
    return _cached(
        ("explanation", decoded.digest, model, class_index),
        lambda: explain(decoded, model, class_index),
    )


def explanation_picture(decoded: Decoded, model: str, class_index: int) -> bytes:
    """What the model saw (the explanation's crop), encoded once."""
    return _cached(
        ("explanation_picture", decoded.digest, model, class_index),
        lambda: picture_bytes(explanation(decoded, model, class_index).cropped),
    )


def overlay(decoded: Decoded, model: str, class_index: int, opacity: float) -> bytes:
    """The heatmap over the crop at ``opacity``, encoded once per photo, class and opacity."""
    opacity = round(float(opacity), 2)

    def compute() -> bytes:
        seen = explanation(decoded, model, class_index)
        return picture_bytes(draw.heatmap_overlay(seen.cropped, seen.heatmap, opacity))

    return _cached(("overlay", decoded.digest, model, class_index, opacity), compute)


# Figures shared by every visitor: a class looking at the same photo sees the same charts.
def topk_figure(predictions: tuple[Prediction, ...], colours: Palette, lang: str) -> go.Figure:
    return _cached(
        ("topk_figure", predictions, colours, lang),
        lambda: frozen(draw.topk_figure(predictions, colours, lang)),
    )


def topk_table(predictions: tuple[Prediction, ...], lang: str) -> pa.Table:
    return _cached(
        ("topk_table", predictions, lang), lambda: table(draw.topk_frame(predictions, lang))
    )


def stats_table(channels: tuple[ChannelStats, ...], lang: str) -> pa.Table:
    return _cached(("stats_table", channels, lang), lambda: table(draw.stats_frame(channels, lang)))


def latency_figure(
    wall_parts: tuple[tuple[Stage, float], ...], colours: Palette, lang: str
) -> go.Figure:
    return _cached(
        ("latency_figure", wall_parts, colours, lang),
        lambda: frozen(draw.latency_figure(wall_parts, colours, lang)),
    )


# --------------------------------------------------------------------------- errors


def image_error(code: str, params: dict) -> ImageError:
    """A refused file's code and parameters (an upload screen's, or a result's) as the room's
    coded error."""
    return ImageError(code, **params)


def unexpected(error: Exception) -> ClassifyError:
    """An exception torch or Pillow should not have raised, named by its kind (never a
    traceback on the page)."""
    return ClassifyError(ErrorCode.UNEXPECTED, kind=type(error).__name__)


# --------------------------------------------------------------------------- warm-up


@warm_up("classify")
def warm_default_classifier() -> None:
    """Load the default model and classify the first sample once, so the first visitor's
    classification does not wait for the load (the result lands in :data:`ROOM_CACHE`)."""
    first = next(iter(SAMPLES))
    classified([Photo(first, sample(first))], DEFAULT_MODEL, DEFAULT_TOPK)


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
