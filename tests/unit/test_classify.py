"""torchatlas.classify: real predictions of the embedded model on bundled photos, preprocessing
identical to the reference transforms, the torchvision loading path with locally saved weights
(never a download), the offline message, batching, Grad-CAM, BatchNorm folding, the one model
cache, and error text that comes only from the translation tables."""

from __future__ import annotations

import hashlib
import io
import threading
import urllib.error
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from torchatlas.classify import (
    DEFAULT_MODEL,
    MODELS,
    SAMPLES,
    ClassifyError,
    classify,
    explain,
    load_model,
    preprocess,
    preprocess_steps,
    sample_bytes,
)
from torchatlas.classify import models as M
from torchatlas.classify import transforms as P
from torchatlas.classify.images import load_image

CAT_CLASSES = {"tabby", "tiger cat", "Egyptian cat"}


@pytest.fixture(scope="module")
def photos() -> dict[str, bytes]:
    return {key: sample_bytes(key) for key in SAMPLES}


@pytest.fixture
def isolated_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty $TORCH_HOME, no network, and no torchvision model left in the engine cache."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def no_network(url: str, timeout: float) -> object:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(M, "_open_url", no_network)
    saved = [(key, value) for key, value in M.MODEL_CACHE.items() if MODELS[key].embedded]
    M.MODEL_CACHE.clear()
    for key, value in saved:
        M.MODEL_CACHE.put(key, value)
    yield tmp_path / "hub" / "checkpoints"
    M.MODEL_CACHE.clear()
    for key, value in saved:
        M.MODEL_CACHE.put(key, value)


def test_embedded_weights_load_strictly_and_silently(capfd: pytest.CaptureFixture) -> None:
    M.MODEL_CACHE.pop(DEFAULT_MODEL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = load_model(DEFAULT_MODEL)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    state = torch.load(M.weights_path(DEFAULT_MODEL), map_location="cpu", weights_only=True)
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
    assert sum(seconds for _, seconds in timings.wall_parts()) == pytest.approx(
        timings.prepare_s + timings.forward_s
    )
    assert [stage for stage, _ in timings.wall_parts()] == ["decode", "preprocess", "forward"]
    assert timings.per_image_s == pytest.approx(timings.total_s)


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
    result = classify([photos[key] for key in SAMPLES] * 2)
    timings = result.timings
    assert timings.workers == 2 and timings.batch_size == 10
    parts = dict(timings.wall_parts())
    assert parts["decode"] + parts["preprocess"] == pytest.approx(timings.prepare_s)
    assert [o.predictions[0].label for o in result.images[:2]] == [
        o.predictions[0].label for o in result.images[5:7]
    ]


def test_a_warm_batch_reuses_its_memory_instead_of_page_faulting(
    photos: dict[str, bytes],
) -> None:
    """With glibc's adaptive defaults a batch of 16 page-faulted ~50,000 times per call (its
    activations were unmapped after every pass); the engine keeps them for reuse. The count is
    the whole process's: under the full suite other tests' threads fault too (1,038 was seen
    with the suite around it)."""
    import resource

    from torchatlas.runtime import keep_freed_memory_for_reuse

    assert keep_freed_memory_for_reuse() is True  # glibc here; idempotent once tuned
    batch = [photos[key] for key in SAMPLES] * 3
    for _ in range(2):
        classify(batch)
    faults = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        classify(batch)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    assert min(faults) < 5_000, faults  # a tenth of the untuned figure


def test_fused_inference_module_computes_the_same_function(photos: dict[str, bytes]) -> None:
    loaded = load_model(DEFAULT_MODEL)
    assert loaded.fast is not None and loaded.inference is loaded.fast
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in loaded.fast.modules())
    batch = torch.stack([preprocess(load_image(photos[key])) for key in SAMPLES])
    batch = batch.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        reference, fused = loaded.module(batch), loaded.fast(batch)
    torch.testing.assert_close(fused, reference, rtol=0, atol=1e-3)
    assert torch.equal(fused.topk(5).indices, reference.topk(5).indices)


def test_engine_errors_take_their_text_from_the_tables_only() -> None:
    """Every code the engine raises has English and Korean text; the engine's own English is
    the table's, and no module of the engine keeps sentences of its own."""
    from torchatlas.classify.errors import ErrorCode, ImageError, Variant
    from torchatlas.i18n import table

    for lang in ("en", "ko"):
        keys = table(lang)
        assert [code for code in ErrorCode if f"classify.errors.{code}" not in keys] == []
        assert [kind for kind in Variant if f"classify.variants.{kind}" not in keys] == []
    error = ImageError(ErrorCode.SLOW_FORMAT, format="TIFF", variant=Variant.LZMA, number=34925)
    assert error.message == translate_en("classify.errors.slow_format", "TIFF", "LZMA")
    korean = error.text("ko")
    assert "TIFF" in korean and "LZMA" in korean and "stored with" not in korean
    arithmetic = ImageError(ErrorCode.SLOW_FORMAT, format="JPEG", variant="arithmetic").text("ko")
    assert "arithmetic" not in arithmetic and "산술" in arithmetic
    numbered = ImageError(ErrorCode.SLOW_FORMAT, format="TIFF", variant="compression", number=9)
    assert "compression 9" in numbered.message
    engine = Path(M.__file__).parent
    for module in engine.glob("*.py"):
        assert "_MESSAGES" not in module.read_text(), module.name


def translate_en(key: str, format: str, variant: str) -> str:
    from torchatlas.i18n import translate

    return translate(key, "en", format=format, variant=variant)


def test_errors_survive_pickling_with_their_code() -> None:
    import pickle

    from torchatlas.classify.errors import ErrorCode, ImageError

    error = pickle.loads(pickle.dumps(ImageError(ErrorCode.BOMB, limit_mp=40)))
    assert isinstance(error, ImageError) and error.code == "bomb" and "40 MP" in error.message


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
    assert (original.dtype, original.format) == ("L", "PNG")  # the greyscale photo
    assert rgb.image.mode == "RGB" and "grayscale" in rgb.conversions
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
    torch.save(state, folder / Path(M._weights_url(MODELS[model])).name)
    return state


def test_torchvision_model_loads_from_the_local_hub_without_download(
    isolated_hub: Path, photos: dict[str, bytes]
) -> None:
    state = _save_random_weights("resnet18", isolated_hub)
    assert M.weights_path("resnet18") == isolated_hub / "resnet18-f37072fd.pth"
    assert M.weights_available("resnet18")
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
    assert not M.weights_available("resnet50")
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
    monkeypatch.setattr(M, "_weights_url", lambda spec: f"https://example.invalid/x-{prefix}.pth")
    monkeypatch.setattr(M, "_open_url", lambda url, timeout: _FakeResponse(payload))
    progress: list[tuple[int, int]] = []
    path = M.download_weights(
        "resnet18", on_progress=lambda done, total: progress.append((done, total))
    )
    assert path.read_bytes() == payload and path.name == f"x-{prefix}.pth"
    assert progress[-1] == (len(payload), len(payload)) and len(progress) > 1
    assert [p.name for p in isolated_hub.iterdir()] == [path.name]  # no .part left behind

    monkeypatch.setattr(M, "_weights_url", lambda spec: "https://example.invalid/y-00000000.pth")
    with pytest.raises(ClassifyError) as caught:
        M.download_weights("resnet18")
    assert caught.value.code == "bad_checksum" and "checksum" in caught.value.message
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
    espresso = explain(composite, DEFAULT_MODEL, M.IMAGENET_CATEGORIES.index("espresso"))
    cat = explain(composite, DEFAULT_MODEL, M.IMAGENET_CATEGORIES.index("tabby"))
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
    with pytest.raises(ClassifyError) as caught:
        explain(photos["coffee"], class_index=1000)
    assert caught.value.code == "bad_class" and caught.value.params["last"] == 999


@pytest.mark.slow
def test_grad_cam_folds_vit_tokens_into_a_grid(
    isolated_hub: Path, photos: dict[str, bytes]
) -> None:
    from torchvision.models import vit_b_16

    module = vit_b_16(weights=None).eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    loaded = M.LoadedModel(MODELS["vit_b_16"], module, M.IMAGENET_CATEGORIES, 0.0)
    M.MODEL_CACHE.put("vit_b_16", loaded)
    heat = explain(photos["cat"], "vit_b_16", class_index=3)
    assert heat.grid == (14, 14) and heat.heatmap.shape == (224, 224)
    assert heat.label == M.IMAGENET_CATEGORIES[3]


def test_files_decoded_once_are_classified_explained_and_shown_without_decoding_again(
    photos: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The room decodes an upload once (images.look) and keeps a small copy: the engine takes
    that copy as it is, for predictions, the pipeline strip and Grad-CAM."""
    from torchatlas.classify import images

    kept = images.look(photos["coffee"])

    def no_second_decode(*args: object, **kwargs: object) -> None:
        raise AssertionError("decoded twice")

    monkeypatch.setattr(P, "decode", no_second_decode)  # the engine's one place that decodes
    monkeypatch.setattr(images, "decode", no_second_decode)
    outcome = classify([kept]).images[0]
    assert outcome.labels[0][0] == "espresso" and outcome.info == kept.info
    steps = preprocess_steps(kept)
    assert [step.key for step in steps][:2] == ["original", "rgb"]
    assert (steps[0].width, steps[0].height) == (kept.info.width, kept.info.height)
    assert explain(kept).label == "espresso"


def test_the_kept_copy_of_a_large_photo_predicts_like_the_file() -> None:
    """Shrinking to images.KEEP_SIDE on arrival leaves the model's view of the photo intact."""
    from torchatlas.classify import images

    big = Image.open(io.BytesIO(sample_bytes("rocket"))).convert("RGB").resize((3000, 2000))
    for fmt in ("JPEG", "PNG"):  # JPEG is drafted by libjpeg, PNG resized by PIL
        buffer = io.BytesIO()
        big.save(buffer, fmt)
        kept = images.look(buffer.getvalue())
        assert "shrunk" in kept.info.conversions and kept.image.size == (768, 512)
        from_file, from_copy = classify([buffer.getvalue(), kept], topk=3).images
        assert from_file.labels[0][0] == from_copy.labels[0][0]
        assert abs(from_file.labels[0][1] - from_copy.labels[0][1]) < 0.05


# --------------------------------------------------------------------------- BatchNorm folding


@pytest.mark.parametrize(("padding", "stride"), [((1, 1, 1, 1), 1), ((0, 1, 0, 1), 2)])
def test_folding_a_batch_norm_keeps_the_function_and_the_layout(
    padding: tuple[int, int, int, int], stride: int
) -> None:
    """conv (TF 'same' padding) → BN in eval mode equals the folded conv: symmetric padding
    moves into the conv, one-sided padding stays an explicit pad that keeps channels_last."""
    from efficientnet_lite_pytorch.utils import Conv2dStaticSamePadding

    torch.manual_seed(0)
    conv = Conv2dStaticSamePadding(8, 16, 3, stride=stride, image_size=16, bias=False)
    conv.static_padding = torch.nn.ZeroPad2d(padding)
    norm = torch.nn.BatchNorm2d(16)
    norm.running_mean.uniform_(-1, 1)
    norm.running_var.uniform_(0.5, 2)
    norm.weight.data.uniform_(0.5, 2)
    norm.bias.data.uniform_(-1, 1)
    reference = torch.nn.Sequential(conv, norm).eval()
    folded = M._fold_batch_norm(conv.eval(), norm.eval())
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    x = torch.randn(2, 8, 16, 16).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        expected, got = reference(x), folded(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    if padding[0] != padding[1]:
        assert isinstance(folded[0], M._ZeroPad)
        assert folded[0](x).is_contiguous(memory_format=torch.channels_last)


def test_folding_uses_torchs_own_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = M.fuse_conv_bn_eval

    def counting(conv: torch.nn.Module, norm: torch.nn.Module) -> torch.nn.Module:
        calls.append(1)
        return real(conv, norm)

    monkeypatch.setattr(M, "fuse_conv_bn_eval", counting)
    conv = torch.nn.Conv2d(3, 4, 3, bias=False).eval()
    M._fold_batch_norm(conv, torch.nn.BatchNorm2d(4).eval())
    assert calls == [1]


# --------------------------------------------------------------------------- the one model cache


def _fake_loaded(key: str, megabytes: int) -> M.LoadedModel:
    module = torch.nn.Linear(1, 1)
    return M.LoadedModel(MODELS[key], module, M.IMAGENET_CATEGORIES, 0.0), megabytes * 2**20


def test_model_cache_is_bounded_by_bytes_and_keeps_the_default_and_the_newest() -> None:
    cache = M.ModelCache(max_bytes=100 * 2**20, pinned=DEFAULT_MODEL)
    for key, size in ((DEFAULT_MODEL, 40), ("resnet18", 40), ("resnet50", 40)):
        loaded, nbytes = _fake_loaded(key, size)
        cache.put(key, loaded, nbytes)
    assert cache.keys() == [DEFAULT_MODEL, "resnet50"] and cache.nbytes <= cache.max_bytes
    big, nbytes = _fake_loaded("vit_b_16", 300)  # over the bound alone: kept all the same
    cache.put("vit_b_16", big, nbytes)
    assert cache.keys() == [DEFAULT_MODEL, "vit_b_16"] and cache.get("vit_b_16") is big


def test_model_cache_loads_each_model_once_under_concurrent_requests() -> None:
    cache = M.ModelCache(max_bytes=2**30, pinned=DEFAULT_MODEL)
    loads: list[str] = []
    started = threading.Barrier(8)

    def load() -> M.LoadedModel:
        loads.append("resnet18")
        return _fake_loaded("resnet18", 1)[0]

    results: list[M.LoadedModel] = []

    def ask() -> None:
        started.wait()
        results.append(cache.get_or_load("resnet18", load))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["resnet18"] and len({id(r) for r in results}) == 1

    def broken() -> M.LoadedModel:
        raise ClassifyError(M.ErrorCode.BAD_WEIGHTS, title="x", path="p", reason="r")

    with pytest.raises(ClassifyError):
        cache.get_or_load("resnet50", broken)
    assert "resnet50" not in cache  # a failed load keeps nothing


def test_the_model_cache_prices_a_loaded_model_by_its_tensors() -> None:
    loaded = load_model(DEFAULT_MODEL)
    assert M.MODEL_CACHE.get(DEFAULT_MODEL) is loaded and load_model(DEFAULT_MODEL) is loaded
    params = sum(p.numel() * p.element_size() for p in loaded.module.parameters())
    assert params < loaded.nbytes < 3 * params  # both modules, buffers included, nothing twice
    largest = max(spec.num_params * 4 for spec in MODELS.values())  # float32 parameters
    assert loaded.nbytes + largest <= M.MODEL_CACHE_BYTES  # the default and any one other fit


def test_the_room_keeps_no_second_model_cache() -> None:
    """Models are cached once, in the engine; the page's state must not wrap them again."""
    root = Path(__file__).resolve().parents[2]
    for path in [root / "views" / "classify.py", *(root / "components" / "classify").glob("*.py")]:
        assert "cache_resource" not in path.read_text(), path.name


# --------------------------------------------------------------------------- the room's builders


def test_draw_builds_figures_and_text_from_engine_dataclasses(photos: dict[str, bytes]) -> None:
    """components.classify.draw needs no Streamlit: figures, tables and text straight from the
    engine's results, in the reader's language."""
    from components.classify import draw
    from components.theme import DARK, LIGHT
    from torchatlas.i18n import translate

    result = classify([photos["coffee"]], topk=3)
    predictions = result.images[0].predictions
    figure = draw.topk_figure(predictions, LIGHT, "en")
    bars = figure.data[0]
    assert list(bars.y)[-1] == "espresso" and list(bars.marker.color)[-1] == LIGHT.accent
    frame = draw.topk_frame(predictions, "ko")
    assert translate("classify.results.class", "ko") in frame.columns and len(frame) == 3
    latency = draw.latency_figure(result.timings.wall_parts(), DARK, "ko")
    stages = ("decode", "preprocess", "forward")
    assert [bar.name for bar in latency.data] == [
        translate(f"classify.latency.{stage}", "ko") for stage in stages
    ]
    steps = preprocess_steps(photos["camera"])
    rgb = next(step for step in steps if step.key == "rgb")
    assert draw.conversions_text(rgb.conversions, "en") == translate(
        "classify.pipeline.conversions.grayscale"
    )
    tensor = next(step for step in steps if step.key == "tensor")
    assert draw.stats_frame(tensor.channels, "en").shape == (3, 5)
    caption = draw.model_caption(MODELS["resnet50"], False, "en")
    assert translate("classify.model.download", size_mb=98) in caption


def test_the_rooms_tables_are_converted_to_arrow_once_and_weighed_with_their_buffers(
    photos: dict[str, bytes],
) -> None:
    """A class reruns the room's page at once: each table is the pandas frame draw builds,
    converted to Arrow once and shared (st.dataframe then only writes its bytes), and the
    room's byte-bounded cache counts the Arrow buffers, which are not Python objects."""
    import pyarrow as pa

    from components.classify import draw, state

    state.ROOM_CACHE.clear()
    predictions = classify([photos["coffee"]], topk=3).images[0].predictions
    shown = state.topk_table(predictions, "ko")
    assert isinstance(shown, pa.Table)
    assert shown.to_pandas().equals(draw.topk_frame(predictions, "ko"))
    assert state.topk_table(predictions, "ko") is shown  # kept for the next visitor
    assert state.topk_table(predictions, "en") is not shown
    tensor = next(step for step in preprocess_steps(photos["camera"]) if step.key == "tensor")
    stats = state.stats_table(tensor.channels, "en")
    assert stats.to_pandas().equals(draw.stats_frame(tensor.channels, "en"))
    assert state._weight(stats) >= stats.nbytes > 0


def test_the_room_registers_its_own_warm_up_and_it_classifies_the_first_sample() -> None:
    """The server warms the default classifier through the room's registration (issue 23),
    not a copy in components/warm.py; the warmed result is the one a first visitor gets."""
    from components import upkeep
    from components.classify import state

    assert upkeep.registered_warm_ups()["classify"] is state.warm_default_classifier
    state.ROOM_CACHE.clear()
    state.warm_default_classifier()
    first = next(iter(state.SAMPLES))
    photo = state.Photo(first, state.sample(first))
    hits = state.ROOM_CACHE.stats().hits
    result = state.classified([photo], state.DEFAULT_MODEL, state.DEFAULT_TOPK)
    assert state.ROOM_CACHE.stats().hits == hits + 1 and result.images[0].ok
