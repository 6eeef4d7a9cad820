"""Image classification room: photos in → torchatlas.classify → predictions, pipeline, heatmap.

The page only collects inputs and hands plain data to components. Models are cached per
process (st.cache_resource); predictions, pipelines and heatmaps per (file digest, model).

Uploads go through one budget (components.uploads): a file that is no image at a glance, or one
over the visitor's or the server's budget, is refused as it arrives and its bytes dropped. Every
other file is decoded once (images.look) into a small upright copy plus its digest, which the
session keeps (``c_kept``); the raw bytes then leave the server.
"""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st
from PIL import Image

from components import uploads as upload_budget
from components.classify import (
    colour_legend,
    heatmap_overlay,
    latency_figure,
    percent,
    render_pipeline,
    render_topk,
)
from components.i18n import t
from torchatlas import classify as engine
from torchatlas import images
from torchatlas.images import MAX_PIXELS, Decoded, ImageError
from torchatlas.runtime import torch_summary
from torchatlas.uploads import Refusal

MODEL_KEY = "c_model"  # session key and URL parameter
KEPT_KEY = "c_kept"  # file id → (name, Decoded or Refusal): what the session keeps of uploads
UNSURE_BELOW = 0.30  # a top-1 this low deserves a word of caution
THUMBNAIL_PX = 480


# --------------------------------------------------------------------------- cached engine calls


@st.cache_resource(show_spinner=False, max_entries=engine.MAX_CACHED_MODELS)
def cached_model(model: str) -> engine.LoadedModel:
    return engine.load_model(model)


# Keyed by the files' digests; the decoded images themselves (``_images``) are not hashed.
@st.cache_data(show_spinner=False, max_entries=32)
def cached_classify(
    digests: tuple[str, ...], model: str, topk: int, _images: tuple[Decoded, ...]
) -> engine.ClassifyResult:
    return engine.classify(list(_images), model=model, topk=topk)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_thumbnail(digest: str, _decoded: Decoded) -> Image.Image:
    image = _decoded.image.copy()  # shared with other sessions: never shrink it in place
    image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    return image


@st.cache_data(show_spinner=False, max_entries=16)
def cached_pipeline(
    digest: str, model: str, _decoded: Decoded
) -> tuple[list[dict], dict[str, Image.Image]]:
    steps = engine.preprocess_steps(_decoded, model)
    pictures: dict[str, Image.Image] = {}
    for step in steps:
        if step.image is not None:
            picture = step.image.copy()
            picture.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))  # a 40 MP original stays on the server
            pictures[step.key] = picture
    return [step.to_dict() for step in steps], pictures


@st.cache_data(show_spinner=False, max_entries=32)
def cached_explanation(
    digest: str, model: str, class_index: int, _decoded: Decoded
) -> engine.Explanation:
    return engine.explain(_decoded, model, class_index)


@st.cache_data(show_spinner=False, max_entries=8)
def sample(key: str) -> Decoded:
    return images.look(engine.sample_bytes(key))


# --------------------------------------------------------------------------- helpers


def error_text(code: str, params: dict) -> str:
    return t(f"classify.errors.{code}", **params)


def model_label(key: str) -> str:
    return engine.MODELS[key].title


def model_caption(key: str) -> str:
    spec = engine.MODELS[key]
    if spec.embedded:
        where = t("classify.model.embedded")
    elif engine.weights_available(key):
        where = t("classify.model.cached")
    else:
        where = t("classify.model.download", size_mb=round(spec.file_mb))
    facts = t(
        "classify.model.facts",
        params=f"{spec.num_params / 1e6:.1f}",
        top1=f"{spec.top1:.1f}",
        crop=spec.crop_size,
    )
    return f"{where} · {facts}"


def ensure_model(key: str, *, second: bool = False) -> engine.LoadedModel | None:
    """Load (downloading with a progress bar if needed); on failure explain and return None.

    ``second``: the model to compare with; its offline message cannot advise picking the
    embedded model, which is the one already on the page.
    """
    spec = engine.MODELS[key]
    try:
        if not spec.embedded and not engine.weights_available(key):
            bar = st.progress(0.0, text=t("classify.model.loading", title=spec.title))
            shown = {"step": -1}

            def on_progress(done: int, total: int) -> None:
                step = int(100 * done / total) if total else done >> 22
                if step == shown["step"]:
                    return  # redraw at most once per percent
                shown["step"] = step
                done_mb, total_mb = f"{done / 1e6:.0f}", f"{total / 1e6:.0f}"
                if total:
                    text = t(
                        "classify.model.downloading", title=spec.title, done=done_mb, total=total_mb
                    )
                    bar.progress(min(1.0, done / total), text=text)
                else:
                    bar.progress(
                        0.0,
                        text=t(
                            "classify.model.downloading_unknown", title=spec.title, done=done_mb
                        ),
                    )

            try:
                engine.download_weights(key, on_progress)
            finally:
                bar.empty()
        with st.spinner(t("classify.model.loading", title=spec.title)):
            return cached_model(key)
    except engine.ClassifyError as error:
        code = "offline_second" if second and error.code == "offline" else error.code
        st.error(error_text(code, error.params), icon=":material/cloud_off:")
    except Exception as error:  # never a traceback on the page
        st.error(t("classify.errors.unexpected", kind=type(error).__name__))
    return None


def run(files: tuple[Decoded, ...], model: str, topk: int) -> engine.ClassifyResult | None:
    try:
        with st.spinner(t("classify.results.running", count=len(files))):
            return cached_classify(tuple(f.digest for f in files), model, topk, files)
    except engine.ClassifyError as error:
        st.error(error_text(error.code, error.params))
    except Exception as error:
        st.error(t("classify.errors.unexpected", kind=type(error).__name__))
    return None


def predictions_of(outcome: engine.ImageOutcome) -> list[dict]:
    return [asdict(p) for p in outcome.predictions]


def refusal_text(refusal: Refusal) -> str:
    return upload_budget.refusal_text(refusal, error_text)


def upright_size(decoded: Decoded) -> tuple[int, int]:
    """The photo's size as it is shown (EXIF orientations 5–8 swap width and height)."""
    info = decoded.info
    turned = info.orientation in (5, 6, 7, 8)
    return (info.height, info.width) if turned else (info.width, info.height)


def take_in(session: upload_budget.SessionUploads, keys: list[str]) -> list[tuple[str, object]]:
    """Every file the upload widgets ``keys`` list, as (name, Decoded or Refusal), in order.

    A file seen for the first time is looked at once (decoded, shrunk, hashed) and its bytes
    dropped; later runs reuse what the session kept. Files the visitor removed are forgotten.
    """
    kept: dict[str, tuple[str, object]] = st.session_state.setdefault(KEPT_KEY, {})
    entries = [entry for key in keys for entry in session.entries(key)]
    for entry in entries:
        if entry.file_id in kept:
            if entry.file is not None:  # the same bytes offered again: drop them again
                session.take(entry, keep_bytes=session.held(entry))
            continue
        if entry.refusal is not None:
            kept[entry.file_id] = (entry.name, entry.refusal)
            continue
        if entry.file is None:  # bytes gone, nothing on record (the session was restarted)
            kept[entry.file_id] = (entry.name or "?", Refusal("upload_again", source="image"))
            continue
        refusal = session.admit(entry)
        if refusal is not None:
            kept[entry.file_id] = (entry.name, refusal)
            continue
        try:
            outcome: object = images.look(entry.file.getvalue())
        except ImageError as error:
            outcome = Refusal(error.code, dict(error.params), entry.name, entry.size, "image")
        keep = outcome.nbytes if isinstance(outcome, Decoded) else 0
        over = session.take(entry, keep_bytes=keep)
        kept[entry.file_id] = (entry.name, over or outcome)
    listed = [entry.file_id for entry in entries]
    session.forget(listed, list(kept))
    for file_id in set(kept) - set(listed):
        del kept[file_id]
    return [kept[file_id] for file_id in listed]


# --------------------------------------------------------------------------- page

st.title(t("app.rooms.classify.title"))
st.markdown(t("classify.intro"))

if MODEL_KEY not in st.session_state:  # a shared link (?c_model=resnet50) picks the model
    requested = st.query_params.get(MODEL_KEY, engine.DEFAULT_MODEL)
    st.session_state[MODEL_KEY] = requested if requested in engine.MODELS else engine.DEFAULT_MODEL

model_column, topk_column = st.columns([3, 1])
model = model_column.selectbox(
    t("classify.model.label"),
    options=list(engine.MODELS),
    format_func=model_label,
    key=MODEL_KEY,
    help=t("classify.model.help"),
)
model_column.caption(model_caption(model))
topk = topk_column.slider(
    t("classify.topk.label"), 1, 10, 5, key="c_topk", help=t("classify.topk.help")
)
if model != engine.DEFAULT_MODEL:
    st.query_params[MODEL_KEY] = model
elif MODEL_KEY in st.query_params:
    del st.query_params[MODEL_KEY]

st.subheader(t("classify.inputs.header"), anchor=False)
samples = st.pills(
    t("classify.inputs.samples"),
    options=list(engine.SAMPLES),
    selection_mode="multi",
    default=["cat"],
    format_func=lambda key: t(f"classify.samples.{key}"),
    key="c_samples",
    help=t("classify.inputs.samples_help"),
)
session_uploads = upload_budget.session_uploads(screen=images.screen)
limits = upload_budget.limits_mb()
st.file_uploader(
    t("classify.inputs.upload"),
    accept_multiple_files=True,
    key="c_uploads",
    max_upload_size=upload_budget.per_file_mb(),
    help=t("classify.inputs.upload_help", limit_mp=MAX_PIXELS // 1_000_000, **limits),
)
upload_keys: list[tuple[str, str | None]] = [("c_uploads", None)]
if st.toggle(
    t("classify.inputs.camera_toggle"), key="c_camera", help=t("classify.inputs.camera_toggle_help")
):
    st.camera_input(t("classify.inputs.camera"), key="c_camera_photo")
    upload_keys.append(("c_camera_photo", t("classify.inputs.camera_name")))

uploaded = take_in(session_uploads, [key for key, _ in upload_keys])
names = [name for key, name in upload_keys for _ in session_uploads.entries(key)]
for (name, outcome), shown in zip(uploaded, names, strict=True):
    if isinstance(outcome, Refusal):  # said right below the uploader, file by file
        st.error(
            t("classify.errors.file", name=shown or name, message=refusal_text(outcome)),
            icon=":material/broken_image:",
        )

items: list[tuple[str, Decoded]] = [
    (t(f"classify.samples.{key}"), sample(key)) for key in samples or []
]
items += [
    (shown or name, outcome)
    for (name, outcome), shown in zip(uploaded, names, strict=True)
    if isinstance(outcome, Decoded)
]

if not items:
    if not uploaded:
        st.info(t("classify.inputs.none"), icon=":material/photo_camera:")
    st.stop()

loaded = ensure_model(model)
if loaded is None:
    st.stop()
result = run(tuple(decoded for _, decoded in items), model, topk)
if result is None:
    st.stop()

st.subheader(t("classify.results.header"), anchor=False)
timings = result.timings
st.caption(
    t(
        "classify.results.summary",
        count=len(samples or []) + len(uploaded),  # refused files count too
        model=loaded.spec.title,
        batch=timings.batch_size,
        ms=f"{timings.total_s * 1000:.0f}",
        per_image=f"{timings.per_image_s * 1000:.1f}",
    )
)
good: list[tuple[str, Decoded, engine.ImageOutcome]] = []
for number, ((name, decoded), outcome) in enumerate(zip(items, result.images, strict=True)):
    if not outcome.ok:  # PIL images cannot fail; kept for the engine's contract
        st.error(
            t(
                "classify.errors.file",
                name=name,
                message=error_text(outcome.error_code, outcome.error_params),
            ),
            icon=":material/broken_image:",
        )
        continue
    good.append((name, decoded, outcome))
    best = outcome.predictions[0]
    with st.container(border=True):
        picture_column, chart_column = st.columns([1, 2], vertical_alignment="center")
        picture_column.image(cached_thumbnail(decoded.digest, decoded), width="stretch")
        width, height = upright_size(decoded)
        picture_column.caption(f"{name} · {t('classify.results.size', width=width, height=height)}")
        with chart_column:
            st.markdown(
                t("classify.results.top1", label=best.label, probability=percent(best.probability))
            )
            if best.probability < UNSURE_BELOW:
                st.caption(t("classify.results.unsure", probability=percent(best.probability)))
            render_topk(predictions_of(outcome), key=f"c_top_{number}")

if not good:
    st.stop()

st.subheader(t("classify.inspect.header"), anchor=False)
chosen = st.selectbox(
    t("classify.inspect.image"),
    options=range(len(good)),
    format_func=lambda index: good[index][0],
    key="c_inspect",
)
name, decoded, outcome = good[chosen if chosen is not None and chosen < len(good) else 0]
pipeline_tab, heatmap_tab, latency_tab, compare_tab = st.tabs(
    [
        t("classify.inspect.pipeline"),
        t("classify.inspect.heatmap"),
        t("classify.inspect.latency"),
        t("classify.inspect.compare"),
    ]
)

with pipeline_tab:
    source = (
        t("classify.pipeline.source_embedded")
        if loaded.spec.embedded
        else t("classify.pipeline.source_torchvision", weights=loaded.spec.weights_name)
    )
    st.markdown(t("classify.pipeline.intro", model=loaded.spec.title, source=source))
    try:
        steps, pictures = cached_pipeline(decoded.digest, model, decoded)
        render_pipeline(steps, pictures)
    except Exception as error:
        st.error(t("classify.errors.unexpected", kind=type(error).__name__))


@st.fragment
def heatmap_panel(decoded: Decoded, model: str, predictions: list[dict]) -> None:
    choices = {int(p["index"]): p for p in predictions}
    class_column, opacity_column = st.columns([2, 1])
    class_index = class_column.selectbox(
        t("classify.heatmap.class"),
        options=list(choices),
        format_func=lambda index: (
            f"{choices[index]['label']} ({percent(choices[index]['probability'])})"
        ),
        key=f"c_cam_class_{model}",
    )
    opacity = opacity_column.slider(
        t("classify.heatmap.opacity"), 0.0, 1.0, 0.6, 0.05, key="c_cam_opacity"
    )
    try:
        with st.spinner(t("classify.heatmap.computing")):
            explanation = cached_explanation(decoded.digest, model, int(class_index), decoded)
    except engine.ClassifyError as error:
        st.error(error_text(error.code, error.params))
        return
    except Exception as error:
        st.error(t("classify.errors.unexpected", kind=type(error).__name__))
        return
    rows, cols = explanation.grid
    st.caption(t("classify.heatmap.intro", layer=explanation.layer, rows=rows, cols=cols))
    seen_column, overlay_column = st.columns(2)
    seen_column.image(
        explanation.cropped, caption=t("classify.heatmap.model_view"), width="stretch"
    )
    overlay_column.image(
        heatmap_overlay(explanation.cropped, explanation.heatmap, opacity),
        caption=t(
            "classify.heatmap.overlay",
            label=explanation.label,
            probability=percent(explanation.probability),
        ),
        width="stretch",
    )
    overlay_column.html(colour_legend())
    if explanation.flat:
        st.info(t("classify.heatmap.flat"))


with heatmap_tab:
    heatmap_panel(decoded, model, predictions_of(outcome))


@st.fragment
def latency_panel(files: tuple[Decoded, ...], model: str, topk: int, first: engine.Timings) -> None:
    st.markdown(t("classify.latency.intro", threads=torch_summary().cpu_threads))
    decoding = sum(decoded.decode_s for decoded in files)
    st.caption(t("classify.latency.decoded_once", ms=f"{decoding * 1000:.1f}"))
    timings = first
    if st.button(t("classify.latency.again"), icon=":material/timer:", key="c_time_again"):
        try:
            timings = engine.classify(list(files), model=model, topk=topk).timings
        except Exception as error:
            st.error(t("classify.errors.unexpected", kind=type(error).__name__))
    else:
        st.caption(t("classify.latency.first_run"))
    st.plotly_chart(
        latency_figure(timings.wall_parts()), theme="streamlit", width="stretch", key="c_latency"
    )
    share = 100 * timings.forward_s / timings.total_s if timings.total_s else 0
    st.caption(
        t(
            "classify.latency.per_image",
            per_image=f"{timings.per_image_s * 1000:.1f}",
            batch=timings.batch_size,
            share=f"{share:.0f}",
        )
    )
    if timings.workers > 1:
        st.caption(
            t(
                "classify.latency.parallel",
                workers=timings.workers,
                work=f"{(timings.decode_s + timings.preprocess_s) * 1000:.1f}",
                wall=f"{timings.prepare_s * 1000:.1f}",
            )
        )
    st.caption(t("classify.latency.load", model=loaded.spec.title, seconds=f"{loaded.load_s:.2f}"))


with latency_tab:
    latency_panel(tuple(decoded for _, decoded in items), model, topk, timings)


@st.fragment
def compare_panel(
    name: str, decoded: Decoded, model: str, topk: int, outcome: engine.ImageOutcome
) -> None:
    st.markdown(t("classify.compare.intro"))
    other = st.selectbox(
        t("classify.compare.other"),
        options=[key for key in engine.MODELS if key != model],
        index=None,
        format_func=model_label,
        placeholder=t("classify.compare.placeholder"),
        key="c_compare",
    )
    if other is None:
        return
    st.caption(model_caption(other))
    if ensure_model(other, second=True) is None:
        return
    second = run((decoded,), other, topk)
    if second is None:
        return
    theirs = second.images[0]
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{engine.MODELS[model].title}**")
        render_topk(predictions_of(outcome), key="c_compare_left")
    with right:
        st.markdown(f"**{engine.MODELS[other].title}**")
        render_topk(predictions_of(theirs), key="c_compare_right")
    mine, their_best = outcome.predictions[0].label, theirs.predictions[0].label
    if mine == their_best:
        st.success(t("classify.compare.agree", label=mine))
    else:
        st.info(t("classify.compare.disagree", left=mine, right=their_best))


with compare_tab:
    compare_panel(name, decoded, model, topk, outcome)
