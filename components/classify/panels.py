"""The classification room's widgets and output, in page order: settings, photos, predictions,
and the inspector (pipeline, Grad-CAM, latency, a second model).

Engine results come in as ``torchatlas.classify`` dataclasses through ``state``; ``draw``
builds the figures, tables and text.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from components import uploads as upload_budget
from components.classify import draw, state
from components.i18n import language, t
from components.kit.error_card import error_card, error_text
from components.kit.follow import unfold_button
from components.theme import palette
from torchatlas.classify import (  # types only
    ClassifyError,
    ClassifyResult,
    ImageOutcome,
    LoadedModel,
    Prediction,
    Step,
    StepKind,
    Timings,
)
from torchatlas.uploads import Refusal

UNSURE_BELOW = 0.30  # a top-1 this low deserves a word of caution


@dataclass(frozen=True)
class Photos:
    """What the page classifies (samples and readable uploads), and how many files were picked."""

    items: tuple[state.Photo, ...]
    picked: int  # samples + uploaded files, refused ones included


@dataclass(frozen=True)
class Predicted:
    """The predictions on the page: the model, the result, and the images that were read."""

    loaded: LoadedModel
    result: ClassifyResult
    good: tuple[tuple[state.Photo, ImageOutcome], ...]


def _file_error(name: str, message: str) -> None:
    """A file that could not be used: its name, then why (the room's coded error's text)."""
    st.error(t("classify.errors.file", name=name, message=message), icon=":material/broken_image:")


def _unexpected(error: Exception) -> None:
    """Never a traceback on the page: name the kind of failure and what to try."""
    error_card(state.unexpected(error))


def _model_label(key: str) -> str:
    return state.spec(key).title


def _model_caption(key: str) -> str:
    return draw.model_caption(state.spec(key), state.downloaded(key), language())


# --------------------------------------------------------------------------- settings


def intro() -> None:
    """The room's first lines; reads the link on a session's first run (before any widget)
    and says which parts of it were not used. For a student following a class (kit.follow),
    the button that unfolds the settings, the photos' inputs and the inspector's other tabs
    instead of the intro: the room opens on the teacher's example, its predictions and its
    pipeline."""
    state.start()
    if state.fold_this_run():
        state.keep_folded_values()
        state.notice()
        unfold_button(state.UNFOLD_KEY)
        return
    st.markdown(t("classify.intro"))
    state.notice()


def settings() -> state.Settings:
    """The model and how many classes to list (both in the link)."""
    if state.folded():
        state.write_link()
        return state.current_settings()
    model_column, topk_column = st.columns([3, 1])
    model = model_column.selectbox(
        t("classify.model.label"),
        options=state.model_keys(),
        format_func=_model_label,
        key=state.MODEL_KEY,
        help=t("classify.model.help"),
    )
    model_column.caption(_model_caption(model))
    topk = topk_column.slider(
        t("classify.topk.label"),
        1,
        state.MAX_TOPK,
        key=state.TOPK_KEY,  # its value comes from the link (state.start)
        help=t("classify.topk.help"),
    )
    state.write_link()
    return state.Settings(model, topk)


# --------------------------------------------------------------------------- photos


def _refusal_text(refusal: Refusal) -> str:
    return upload_budget.refusal_text(
        refusal, lambda code, params: error_text(state.image_error(code, params))
    )


def _sample_photos(keys: list[str]) -> list[state.Photo]:
    """The sample photos ``keys`` name, each under its translated name."""
    return [state.Photo(t(f"classify.samples.{key}"), state.sample(key)) for key in keys]


def photos() -> Photos | None:
    """Samples, uploads and the camera; each refused file is explained right below the
    uploader. None when there is nothing to classify (the page says what to do). Folded:
    the samples picked, without the inputs."""
    if state.folded():
        items = tuple(_sample_photos(state.current_samples()))
        if not items:
            st.info(t("classify.inputs.none"), icon=":material/photo_camera:")
            return None
        return Photos(items, len(items))
    st.header(t("classify.inputs.header"), anchor=False)
    samples = st.pills(
        t("classify.inputs.samples"),
        options=state.sample_keys(),
        selection_mode="multi",
        default=list(state.DEFAULT_SAMPLES),
        format_func=lambda key: t(f"classify.samples.{key}"),
        key=state.SAMPLES_KEY,
        help=t("classify.inputs.samples_help"),
    )
    session = state.session_uploads()
    st.file_uploader(
        t("classify.inputs.upload"),
        accept_multiple_files=True,
        key=state.UPLOADS_KEY,
        max_upload_size=state.per_file_mb(),
        help=t("classify.inputs.upload_help", **state.upload_limits()),
    )
    widgets = [state.UPLOADS_KEY]
    if st.toggle(
        t("classify.inputs.camera_toggle"),
        key=state.CAMERA_KEY,
        help=t("classify.inputs.camera_toggle_help"),
    ):
        st.camera_input(t("classify.inputs.camera"), key=state.CAMERA_PHOTO_KEY)
        widgets.append(state.CAMERA_PHOTO_KEY)

    uploads = state.take_in(session, widgets)
    # the camera's photo is called "Camera photo", whatever name the browser gave it
    camera_name = t("classify.inputs.camera_name")
    shown = [
        (camera_name if upload.widget == state.CAMERA_PHOTO_KEY else upload.name, upload.kept)
        for upload in uploads
    ]
    for name, kept in shown:
        if isinstance(kept, Refusal):
            _file_error(name, _refusal_text(kept))

    items = _sample_photos(samples or [])
    items += [state.Photo(name, kept) for name, kept in shown if not isinstance(kept, Refusal)]
    if not items:
        if not uploads:
            st.info(t("classify.inputs.none"), icon=":material/photo_camera:")
        return None
    return Photos(tuple(items), len(samples or []) + len(uploads))


# --------------------------------------------------------------------------- predictions


def _download_with_progress(key: str) -> None:
    title = state.spec(key).title
    bar = st.progress(0.0, text=t("classify.model.loading", title=title))
    shown = {"step": -1}

    def on_progress(done: int, total: int) -> None:
        step = int(100 * done / total) if total else done >> 22
        if step == shown["step"]:
            return  # redraw at most once per percent
        shown["step"] = step
        done_mb, total_mb = f"{done / 1e6:.0f}", f"{total / 1e6:.0f}"
        if total:
            text = t("classify.model.downloading", title=title, done=done_mb, total=total_mb)
            bar.progress(min(1.0, done / total), text=text)
        else:
            text = t("classify.model.downloading_unknown", title=title, done=done_mb)
            bar.progress(0.0, text=text)

    try:
        state.download(key, on_progress)
    finally:
        bar.empty()


def _ensure_model(key: str, *, second: bool = False) -> LoadedModel | None:
    """Load (downloading with a progress bar if needed); on failure explain and return None.

    ``second``: the model to compare with; its offline message cannot advise picking the
    embedded model, which is the one already on the page.
    """
    try:
        if state.needs_download(key):
            _download_with_progress(key)
        with st.spinner(t("classify.model.loading", title=state.spec(key).title)):
            return state.loaded_model(key)
    except ClassifyError as error:
        if second and error.code == "offline":
            error = ClassifyError("offline_second", **error.params)
        error_card(error)
    except Exception as error:
        _unexpected(error)
    return None


def _run(items: tuple[state.Photo, ...], model: str, topk: int) -> ClassifyResult | None:
    try:
        with st.spinner(t("classify.results.running", count=len(items))):
            return state.classified(items, model, topk)
    except ClassifyError as error:
        error_card(error)
    except Exception as error:
        _unexpected(error)
    return None


def _topk(predictions: tuple[Prediction, ...], key: str) -> None:
    lang = language()
    chart_tab, table_tab = st.tabs([t("classify.results.chart"), t("classify.results.table")])
    with chart_tab:
        st.plotly_chart(
            state.topk_figure(predictions, palette(), lang),
            theme="streamlit",
            width="stretch",
            key=f"{key}_chart",
            alt=draw.topk_text(predictions, lang),  # the Table tab beside it has the numbers too
        )
    with table_tab:
        st.dataframe(
            state.topk_table(predictions, lang),
            hide_index=True,
            width="stretch",
            column_config={
                t("classify.results.probability"): st.column_config.ProgressColumn(
                    t("classify.results.probability"), format="percent", min_value=0, max_value=1
                )
            },
            key=f"{key}_table",
        )


def predictions(found: Photos, chosen: state.Settings) -> Predicted | None:
    """One batched forward pass over every photo, then a card per photo. None when nothing
    could be classified (the reason is on the page)."""
    loaded = _ensure_model(chosen.model)
    if loaded is None:
        return None
    result = _run(found.items, chosen.model, chosen.topk)
    if result is None:
        return None

    st.header(t("classify.results.header"), anchor=False)
    timings = result.timings
    st.caption(
        t(
            "classify.results.summary",
            count=found.picked,  # refused files count too
            model=loaded.spec.title,
            batch=timings.batch_size,
            ms=f"{timings.total_s * 1000:.0f}",
            per_image=f"{timings.per_image_s * 1000:.1f}",
        )
    )
    good: list[tuple[state.Photo, ImageOutcome]] = []
    for number, (photo, outcome) in enumerate(zip(found.items, result.images, strict=True)):
        if outcome.error is not None:  # kept images cannot fail; kept for the engine's contract
            _file_error(photo.name, error_text(outcome.error))
            continue
        good.append((photo, outcome))
        best = outcome.predictions[0]
        with st.container(border=True):
            picture_column, chart_column = st.columns([1, 2], vertical_alignment="center")
            probability = draw.percent(best.probability)
            picture_column.image(
                state.thumbnail(photo.decoded),
                width="stretch",
                # What the picture shows, for a reader who cannot see it: its name and verdict.
                alt=t("classify.a11y.photo", name=photo.name, label=best.label,
                      probability=probability),
            )  # fmt: skip
            width, height = draw.upright_size(photo.decoded)
            size = t("classify.results.size", width=width, height=height)
            picture_column.caption(f"{photo.name} · {size}")
            with chart_column:
                st.markdown(t("classify.results.top1", label=best.label, probability=probability))
                if best.probability < UNSURE_BELOW:
                    st.caption(t("classify.results.unsure", probability=probability))
                _topk(outcome.predictions, key=state.topk_key(number))
    if not good:
        return None
    return Predicted(loaded, result, tuple(good))


# --------------------------------------------------------------------------- the inspector


def inspector(found: Photos, chosen: state.Settings, shown: Predicted) -> None:
    """One image, looked at closer: its pipeline, Grad-CAM, the latency, a second model.
    Folded: the first image's pipeline."""
    st.header(t("classify.inspect.header"), anchor=False)
    good = shown.good
    if state.folded():
        _pipeline(good[0][0], shown.loaded)
        return
    picked = st.selectbox(
        t("classify.inspect.image"),
        options=range(len(good)),
        format_func=lambda index: good[index][0].name,
        key=state.INSPECT_KEY,
    )
    photo, outcome = good[picked if picked is not None and picked < len(good) else 0]
    labels = [
        t("classify.inspect.pipeline"),
        t("classify.inspect.heatmap"),
        t("classify.inspect.latency"),
        t("classify.inspect.compare"),
    ]
    # Only the open tab runs (on_change="rerun" + .open): a class rerunning the page at once
    # does not each build three tabs nobody is looking at.
    pipeline_tab, heatmap_tab, latency_tab, compare_tab = st.tabs(
        labels, key=state.INSPECT_TAB_KEY, on_change="rerun", default=labels[0]
    )
    if pipeline_tab.open:
        with pipeline_tab:
            _pipeline(photo, shown.loaded)
    if heatmap_tab.open:
        with heatmap_tab:
            _heatmap(photo, chosen.model, outcome.predictions)
    if latency_tab.open:
        with latency_tab:
            _latency(found.items, chosen, shown.result.timings, shown.loaded)
    if compare_tab.open:
        with compare_tab:
            _compare(photo, chosen, outcome)


def _pipeline(photo: state.Photo, loaded: LoadedModel) -> None:
    spec = loaded.spec
    source = (
        t("classify.pipeline.source_embedded")
        if spec.embedded
        else t("classify.pipeline.source_torchvision", weights=spec.weights_name)
    )
    st.markdown(t("classify.pipeline.intro", model=spec.title, source=source))
    try:
        steps = state.pipeline(photo.decoded, spec.key)
        pictures = state.pipeline_pictures(photo.decoded, spec.key)
    except Exception as error:
        _unexpected(error)
        return
    _pipeline_cards(steps, pictures, photo.name)


def _pipeline_cards(steps: tuple[Step, ...], pictures: tuple[bytes | None, ...], name: str) -> None:
    """One card per transform: pictures first, then the tensors with their statistics.
    ``pictures``: each step's picture, encoded (None where a step has none); ``name``: the
    photo's, for the pictures' text alternatives."""
    lang = language()
    original = next((s for s in steps if s.key == StepKind.ORIGINAL), None)
    picture_of = {id(step): picture for step, picture in zip(steps, pictures, strict=True)}
    picture_steps = [s for s in steps if s.image is not None]
    tensor_steps = [s for s in steps if s.image is None and s.key != StepKind.ORIGINAL]
    columns = st.columns(len(picture_steps) + (1 if original else 0))
    first = 0
    if original:
        with columns[0].container(border=True):
            st.markdown(f"**1 · {t('classify.pipeline.steps.original')}**")
            st.caption(
                t(
                    "classify.pipeline.original_detail",
                    format=original.format,
                    mode=original.dtype,
                    width=original.width,
                    height=original.height,
                )
            )
            st.code(original.code, language="python", wrap_lines=True)
        first = 1
    for offset, step in enumerate(picture_steps):
        with columns[first + offset].container(border=True):
            number, title = first + offset + 1, t(f"classify.pipeline.steps.{step.key}")
            st.markdown(f"**{number} · {title}**")
            alt = t("classify.a11y.step", name=name, number=number, step=title,
                    width=step.width, height=step.height)  # fmt: skip
            st.image(picture_of[id(step)] or step.image, width="stretch", alt=alt)
            size = t("classify.pipeline.size", width=step.width, height=step.height)
            detail = draw.conversions_text(step.conversions, lang) if step.key == "rgb" else ""
            st.caption(f"{size}  \n{detail}" if detail else size)
            st.code(step.code, language="python", wrap_lines=True)
    first_tensor = first + len(picture_steps) + 1
    tensor_columns = st.columns(len(tensor_steps))
    for offset, step in enumerate(tensor_steps):
        with tensor_columns[offset].container(border=True):
            st.markdown(f"**{first_tensor + offset} · {t(f'classify.pipeline.steps.{step.key}')}**")
            shape = "×".join(str(n) for n in step.shape)
            st.caption(t("classify.pipeline.shape", shape=shape, dtype=step.dtype))
            st.code(step.code, language="python", wrap_lines=True)
            st.dataframe(state.stats_table(step.channels, lang), hide_index=True, width="stretch")
    st.caption(t("classify.pipeline.before_after"))


@st.fragment
def _heatmap(photo: state.Photo, model: str, ranked: tuple[Prediction, ...]) -> None:
    choices = {p.index: p for p in ranked}
    class_column, opacity_column = st.columns([2, 1])
    class_index = class_column.selectbox(
        t("classify.heatmap.class"),
        options=list(choices),
        format_func=lambda index: (
            f"{choices[index].label} ({draw.percent(choices[index].probability)})"
        ),
        key=state.cam_class_key(model),
    )
    opacity = opacity_column.slider(
        t("classify.heatmap.opacity"), 0.0, 1.0, 0.6, 0.05, key=state.CAM_OPACITY_KEY
    )
    try:
        with st.spinner(t("classify.heatmap.computing")):
            explanation = state.explanation(photo.decoded, model, int(class_index))
    except ClassifyError as error:
        error_card(error)
        return
    except Exception as error:
        _unexpected(error)
        return
    rows, cols = explanation.grid
    st.caption(t("classify.heatmap.intro", layer=explanation.layer, rows=rows, cols=cols))
    seen_column, overlay_column = st.columns(2)
    seen_column.image(
        state.explanation_picture(photo.decoded, model, int(class_index)),
        caption=t("classify.heatmap.model_view"),
        width="stretch",
        alt=t("classify.a11y.model_view", name=photo.name),
    )
    overlay_column.image(
        state.overlay(photo.decoded, model, int(class_index), opacity),
        caption=t(
            "classify.heatmap.overlay",
            label=explanation.label,
            probability=draw.percent(explanation.probability),
        ),
        width="stretch",
        alt=t(
            "classify.a11y.overlay",
            name=photo.name,
            label=explanation.label,
            probability=draw.percent(explanation.probability),
        ),
    )
    overlay_column.html(draw.colour_legend(palette()))
    if explanation.flat:
        st.info(t("classify.heatmap.flat"))


@st.fragment
def _latency(
    items: tuple[state.Photo, ...], chosen: state.Settings, first: Timings, loaded: LoadedModel
) -> None:
    st.markdown(t("classify.latency.intro", threads=state.cpu_threads()))
    decoding = sum(photo.decoded.decode_s for photo in items)
    st.caption(t("classify.latency.decoded_once", ms=f"{decoding * 1000:.1f}"))
    timings = first
    if st.button(t("classify.latency.again"), icon=":material/timer:", key=state.TIME_AGAIN_KEY):
        try:
            timings = state.timed_again(items, chosen.model, chosen.topk)
        except Exception as error:
            _unexpected(error)
    else:
        st.caption(t("classify.latency.first_run"))
    wall_parts, lang = tuple(timings.wall_parts()), language()
    numbers = draw.latency_text(wall_parts, lang)
    st.plotly_chart(
        state.latency_figure(wall_parts, palette(), lang),
        theme="streamlit",
        width="stretch",
        key=state.LATENCY_CHART_KEY,
        alt=numbers,
    )
    st.caption(numbers)  # the chart's numbers as text, for everyone
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


@st.fragment
def _compare(photo: state.Photo, chosen: state.Settings, outcome: ImageOutcome) -> None:
    st.markdown(t("classify.compare.intro"))
    other = st.selectbox(
        t("classify.compare.other"),
        options=[key for key in state.model_keys() if key != chosen.model],
        index=None,
        format_func=_model_label,
        placeholder=t("classify.compare.placeholder"),
        key=state.COMPARE_KEY,
    )
    if other is None:
        return
    st.caption(_model_caption(other))
    if _ensure_model(other, second=True) is None:
        return
    second = _run((photo,), other, chosen.topk)
    if second is None:
        return
    theirs = second.images[0]
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{state.spec(chosen.model).title}**")
        _topk(outcome.predictions, key=state.COMPARE_LEFT_KEY)
    with right:
        st.markdown(f"**{state.spec(other).title}**")
        _topk(theirs.predictions, key=state.COMPARE_RIGHT_KEY)
    mine, their_best = outcome.predictions[0].label, theirs.predictions[0].label
    if mine == their_best:
        st.success(t("classify.compare.agree", label=mine))
    else:
        st.info(t("classify.compare.disagree", left=mine, right=their_best))
