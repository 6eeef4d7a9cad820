"""torchatlas.classify: real predictions of the embedded model on bundled photos, preprocessing
identical to the reference transforms, the torchvision loading path with locally saved weights
(never a download), the offline message, batching and Grad-CAM."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from torchatlas import classify as C
from torchatlas.classify import (
    DEFAULT_MODEL,
    MODELS,
    ClassifyError,
    classify,
    explain,
    load_model,
    preprocess,
    preprocess_steps,
    sample_bytes,
)
from torchatlas.images import load_image

CAT_CLASSES = {"tabby", "tiger cat", "Egyptian cat"}


@pytest.fixture(scope="module")
def photos() -> dict[str, bytes]:
    return {key: sample_bytes(key) for key in C.SAMPLES}


@pytest.fixture
def isolated_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty $TORCH_HOME, no network, and no torchvision model left in the engine cache."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def no_network(url: str, timeout: float) -> object:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(C, "_open_url", no_network)
    saved = {key: value for key, value in C._models.items() if MODELS[key].embedded}
    C._models.clear()
    C._models.update(saved)
    yield tmp_path / "hub" / "checkpoints"
    C._models.clear()
    C._models.update(saved)


def test_embedded_weights_load_strictly_and_silently(capfd: pytest.CaptureFixture) -> None:
    C._models.pop(DEFAULT_MODEL, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_model(DEFAULT_MODEL)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    state = torch.load(C.weights_path(DEFAULT_MODEL), map_location="cpu", weights_only=True)
    model_state = loaded.module.state_dict()
    assert list(state) == list(model_state)  # every key, in order: nothing missing or extra
    for name, tensor in state.items():
        assert torch.equal(model_state[name], tensor), name
    assert not loaded.module.training
    assert not any(p.requires_grad for p in loaded.module.parameters())
    assert len(loaded.categories) == 1000 and loaded.categories[281] == "tabby"


def test_default_model_names_real_photos_correctly(photos: dict[str, bytes]) -> None:
    result = classify([photos["cat"], photos["coffee"], photos["rocket"], photos["camera"]])
    cat, coffee, rocket, camera = (outcome.predictions for outcome in result.images)
    assert cat[0].label in CAT_CLASSES and sum(p.probability for p in cat[:3]) > 0.8
    assert coffee[0].label == "espresso" and coffee[0].probability > 0.8
    assert rocket[0].label == "missile"
    assert camera[0].label == "tripod"
    for predictions in (cat, coffee, rocket, camera):
        probabilities = [p.probability for p in predictions]
        assert probabilities == sorted(probabilities, reverse=True) and len(probabilities) == 5


def test_result_api_lists_labels_and_timings(photos: dict[str, bytes]) -> None:
    result = classify([photos["coffee"]], topk=3)
    (labels,) = result.predictions
    assert labels[0][0] == "espresso" and len(labels) == 3
    timings = result.timings
    assert timings.batch_size == 1 and timings.forward_s > 0 and timings.decode_s > 0
    assert timings.total_s >= timings.prepare_s + timings.forward_s
    assert timings.prepare_s >= timings.decode_s + timings.preprocess_s  # one image: no threads
    assert sum(timings.wall_parts().values()) == pytest.approx(
        timings.prepare_s + timings.forward_s
    )
    assert result.to_dict()["timings"]["per_image_s"] == pytest.approx(timings.total_s)


def test_bad_files_are_reported_and_the_others_still_classify(photos: dict[str, bytes]) -> None:
    result = classify([photos["coffee"], b"not an image at all", b"", photos["cat"]])
    good, garbage, empty, cat = result.images
    assert good.ok and good.predictions[0].label == "espresso"
    assert (garbage.error_code, empty.error_code) == ("not_image", "empty")
    assert garbage.error_message and not garbage.predictions
    assert cat.ok and cat.predictions[0].label in CAT_CLASSES
    assert result.predictions[1] is None
    assert result.timings.batch_size == 2  # only readable images go through the network


def test_only_bad_files_still_returns_a_result() -> None:
    result = classify([b"", b"<svg></svg>"])
    assert [o.error_code for o in result.images] == ["empty", "svg"]


def test_batching_does_not_change_the_answer(photos: dict[str, bytes]) -> None:
    together = classify([photos["cat"], photos["rocket"]], topk=10)
    alone = [classify([photos[key]], topk=10) for key in ("cat", "rocket")]
    for joint, single in zip(together.images, (r.images[0] for r in alone), strict=True):
        assert [p.index for p in joint.predictions[:3]] == [p.index for p in single.predictions[:3]]
        assert joint.predictions[0].probability == pytest.approx(
            single.predictions[0].probability, abs=1e-4
        )


def test_several_images_prepare_in_parallel_and_add_up(photos: dict[str, bytes]) -> None:
    result = classify([photos[key] for key in C.SAMPLES] * 2)
    timings = result.timings
    assert timings.workers == 2 and timings.batch_size == 10
    parts = timings.wall_parts()
    assert parts["decode"] + parts["preprocess"] == pytest.approx(timings.prepare_s)
    assert [o.predictions[0].label for o in result.images[:2]] == [
        o.predictions[0].label for o in result.images[5:7]
    ]


def test_a_warm_batch_reuses_its_memory_instead_of_page_faulting(
    photos: dict[str, bytes],
) -> None:
    """With glibc's adaptive defaults a batch of 16 page-faulted ~50,000 times per call (its
    activations were unmapped after every pass); the engine keeps them for reuse."""
    import resource

    from torchatlas.runtime import keep_freed_memory_for_reuse

    assert keep_freed_memory_for_reuse() is True  # glibc here; idempotent once tuned
    batch = [photos[key] for key in C.SAMPLES] * 3
    for _ in range(2):
        classify(batch)
    faults = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        classify(batch)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert min(faults) < 1_000, faults


def test_fused_inference_module_computes_the_same_function(photos: dict[str, bytes]) -> None:
    loaded = load_model(DEFAULT_MODEL)
    assert loaded.fast is not None and loaded.inference is loaded.fast
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in loaded.fast.modules())
    batch = torch.stack([preprocess(load_image(photos[key])) for key in C.SAMPLES])
    batch = batch.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        reference, fused = loaded.module(batch), loaded.fast(batch)
    torch.testing.assert_close(fused, reference, rtol=0, atol=1e-3)
    assert torch.equal(fused.topk(5).indices, reference.topk(5).indices)


def test_engine_messages_match_the_english_table() -> None:
    from torchatlas.i18n import table
    from torchatlas.images import _MESSAGES as IMAGE_MESSAGES

    english = table("en")
    for code, text in {**IMAGE_MESSAGES, **C._MESSAGES}.items():
        assert english[f"classify.errors.{code}"] == text, code


def test_pil_images_are_accepted(photos: dict[str, bytes]) -> None:
    result = classify([load_image(photos["coffee"]).convert("L")])
    assert result.images[0].predictions[0].label in {"espresso", "cup", "coffee mug"}


@pytest.mark.parametrize("model", list(MODELS))
def test_preprocessing_equals_the_reference_transforms(
    model: str, photos: dict[str, bytes]
) -> None:
    spec = MODELS[model]
    image = load_image(photos["rocket"])
    ours = preprocess(image, model)
    assert torch.equal(ours, spec.transforms()(image))
    # the curriculum's Compose on a PIL image gives the same numbers
    classic = T.Compose(
        [
            T.Resize(spec.resize_size, interpolation=T.InterpolationMode(spec.interpolation)),
            T.CenterCrop(spec.crop_size),
            T.ToTensor(),
            T.Normalize(spec.mean, spec.std),
        ]
    )(image)
    torch.testing.assert_close(ours, classic, rtol=0, atol=1e-6)
    if spec.weights_name:
        from torchvision.models import get_weight

        assert torch.equal(ours, get_weight(spec.weights_name).transforms()(image))


def test_preprocess_steps_show_each_transform(photos: dict[str, bytes]) -> None:
    steps = preprocess_steps(photos["camera"], DEFAULT_MODEL)
    assert [s.key for s in steps] == [
        "original",
        "rgb",
        "resized",
        "cropped",
        "tensor",
        "normalized",
    ]
    original, rgb, resized, cropped, tensor, normalized = steps
    assert (original.dtype, original.note) == ("L", "PNG")  # the greyscale photo
    assert rgb.image.mode == "RGB" and "grayscale" in rgb.note
    assert min(resized.image.size) == 256 and cropped.image.size == (224, 224)
    assert tensor.shape == (3, 224, 224) and tensor.dtype == "float32"
    assert all(0 <= c.min <= c.mean <= c.max <= 1 for c in tensor.channels)
    expected = preprocess(load_image(photos["camera"]), DEFAULT_MODEL).double()
    for channel, stats in enumerate(normalized.channels):
        assert stats.mean == pytest.approx(float(expected[channel].mean()), abs=1e-9)
        assert stats.min == pytest.approx(float(expected[channel].min()), abs=1e-9)
        assert stats.max == pytest.approx(float(expected[channel].max()), abs=1e-9)
        # normalising is (x - mean) / std, channel by channel
        raw = tensor.channels[channel]
        assert stats.mean == pytest.approx((raw.mean - 0.498) / 0.502, abs=1e-5)
    assert "0.498" in normalized.code and "CenterCrop(224)" in cropped.code


def test_unknown_model_is_a_plain_error() -> None:
    with pytest.raises(ClassifyError) as caught:
        classify([b""], model="resnet9000")
    assert caught.value.code == "unknown_model" and "efficientnet_lite0" in caught.value.message


def _save_random_weights(model: str, folder: Path) -> dict[str, torch.Tensor]:
    from torchvision.models import get_model_builder

    torch.manual_seed(0)
    state = get_model_builder(model)(weights=None).state_dict()
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(state, folder / Path(C._weights_url(MODELS[model])).name)
    return state


def test_torchvision_model_loads_from_the_local_hub_without_download(
    isolated_hub: Path, photos: dict[str, bytes]
) -> None:
    state = _save_random_weights("resnet18", isolated_hub)
    assert C.weights_path("resnet18") == isolated_hub / "resnet18-f37072fd.pth"
    assert C.weights_available("resnet18")
    loaded = load_model("resnet18")  # _open_url raises: any download attempt would fail
    for name, tensor in loaded.module.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    assert not loaded.module.training
    result = classify([photos["cat"], photos["coffee"]], model="resnet18", topk=3)
    assert all(len(o.predictions) == 3 for o in result.images)
    assert result.images[0].predictions[0].label in loaded.categories
    heat = explain(photos["cat"], "resnet18")
    assert heat.grid == (7, 7) and heat.heatmap.shape == (224, 224)


def test_offline_download_gives_a_plain_message(isolated_hub: Path) -> None:
    assert not C.weights_available("resnet50")
    with pytest.raises(ClassifyError) as caught:
        load_model("resnet50")
    error = caught.value
    assert error.code == "offline"
    assert (
        "cannot download" in error.message and "EfficientNet-Lite0 works offline" in error.message
    )
    assert "Name or service not known" in error.message
    assert not isolated_hub.exists() or not any(isolated_hub.iterdir())  # nothing half-written


class _FakeResponse(io.BytesIO):
    def __init__(self, payload: bytes) -> None:
        super().__init__(payload)
        self.headers = {"Content-Length": str(len(payload))}


def test_download_reports_progress_and_checks_the_hash(
    isolated_hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchvision.models import get_model_builder

    buffer = io.BytesIO()
    torch.save(get_model_builder("resnet18")(weights=None).state_dict(), buffer)
    payload = buffer.getvalue()
    prefix = hashlib.sha256(payload).hexdigest()[:8]
    monkeypatch.setattr(C, "_weights_url", lambda spec: f"https://example.invalid/x-{prefix}.pth")
    monkeypatch.setattr(C, "_open_url", lambda url, timeout: _FakeResponse(payload))
    progress: list[tuple[int, int]] = []
    path = C.download_weights(
        "resnet18", on_progress=lambda done, total: progress.append((done, total))
    )
    assert path.read_bytes() == payload and path.name == f"x-{prefix}.pth"
    assert progress[-1] == (len(payload), len(payload)) and len(progress) > 1
    assert [p.name for p in isolated_hub.iterdir()] == [path.name]  # no .part left behind

    monkeypatch.setattr(C, "_weights_url", lambda spec: "https://example.invalid/y-00000000.pth")
    with pytest.raises(ClassifyError) as caught:
        C.download_weights("resnet18")
    assert caught.value.code == "download_failed" and "checksum" in caught.value.message
    assert not (isolated_hub / "y-00000000.pth").exists()


def test_damaged_weights_file_is_removed_with_a_message(isolated_hub: Path) -> None:
    isolated_hub.mkdir(parents=True)
    broken = isolated_hub / "resnet18-f37072fd.pth"
    broken.write_bytes(b"PK\x03\x04 this is not a checkpoint")
    with pytest.raises(ClassifyError) as caught:
        load_model("resnet18")
    assert caught.value.code == "bad_weights" and not broken.exists()


def _side_by_side(left: bytes, right: bytes) -> Image.Image:
    size = (224, 224)
    canvas = Image.new("RGB", (448, 224))
    canvas.paste(load_image(left).resize(size), (0, 0))
    canvas.paste(load_image(right).resize(size), (224, 0))
    return canvas.resize((512, 256))  # Resize(256) keeps it whole; CenterCrop cuts 16 px each side


def test_grad_cam_looks_at_the_right_half(photos: dict[str, bytes]) -> None:
    composite = _side_by_side(photos["cat"], photos["coffee"])
    espresso = explain(composite, DEFAULT_MODEL, C.IMAGENET_CATEGORIES.index("espresso"))
    cat = explain(composite, DEFAULT_MODEL, C.IMAGENET_CATEGORIES.index("tabby"))
    assert espresso.label == "espresso" and cat.label == "tabby"
    for heat in (espresso, cat):
        assert heat.heatmap.shape == (224, 224) and heat.heatmap.dtype == np.float32
        assert heat.heatmap.min() >= 0 and heat.heatmap.max() == pytest.approx(1.0)
        assert heat.cropped.size == (224, 224) and heat.grid == (7, 7)
    left, right = slice(0, 112), slice(112, 224)
    assert espresso.heatmap[:, right].sum() > 2 * espresso.heatmap[:, left].sum()
    assert cat.heatmap[:, left].sum() > 2 * cat.heatmap[:, right].sum()


def test_grad_cam_defaults_to_the_top_class_and_checks_the_index(photos: dict[str, bytes]) -> None:
    heat = explain(photos["coffee"])
    assert heat.label == "espresso" and heat.probability > 0.8
    with pytest.raises(ClassifyError):
        explain(photos["coffee"], class_index=1000)


@pytest.mark.slow
def test_grad_cam_folds_vit_tokens_into_a_grid(
    isolated_hub: Path, photos: dict[str, bytes]
) -> None:
    from torchvision.models import vit_b_16

    module = vit_b_16(weights=None).eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    C._models["vit_b_16"] = C.LoadedModel(MODELS["vit_b_16"], module, C.IMAGENET_CATEGORIES, 0.0)
    heat = explain(photos["cat"], "vit_b_16", class_index=3)
    assert heat.grid == (14, 14) and heat.heatmap.shape == (224, 224)
    assert heat.label == C.IMAGENET_CATEGORIES[3]


def test_files_decoded_once_are_classified_explained_and_shown_without_decoding_again(
    photos: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The room decodes an upload once (images.look) and keeps a small copy: the engine takes
    that copy as it is, for predictions, the pipeline strip and Grad-CAM."""
    from torchatlas import images

    kept = images.look(photos["coffee"])

    def no_second_decode(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded twice")

    monkeypatch.setattr(C, "decode", no_second_decode)
    outcome = classify([kept]).images[0]
    assert outcome.labels[0][0] == "espresso" and outcome.info == kept.info
    steps = preprocess_steps(kept)
    assert [step.key for step in steps][:2] == ["original", "rgb"]
    assert (steps[0].width, steps[0].height) == (kept.info.width, kept.info.height)
    assert explain(kept).label == "espresso"


def test_the_kept_copy_of_a_large_photo_predicts_like_the_file() -> None:
    """Shrinking to images.KEEP_SIDE on arrival leaves the model's view of the photo intact."""
    from torchatlas import images

    big = Image.open(io.BytesIO(sample_bytes("rocket"))).convert("RGB").resize((3000, 2000))
    for fmt in ("JPEG", "PNG"):  # JPEG is drafted by libjpeg, PNG resized by PIL
        buffer = io.BytesIO()
        big.save(buffer, fmt)
        kept = images.look(buffer.getvalue())
        assert "shrunk" in kept.info.conversions and kept.image.size == (768, 512)
        from_file, from_copy = classify([buffer.getvalue(), kept], topk=3).images
        assert from_file.labels[0][0] == from_copy.labels[0][0]
        assert abs(from_file.labels[0][1] - from_copy.labels[0][1]) < 0.05
