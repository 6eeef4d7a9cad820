"""AppTest for the classification room: samples, uploads (good and hostile), the offline
message for a torchvision model, the comparison panel and Korean."""

from __future__ import annotations

import io
import json
import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from tests.app.apptest import open_page, rendered_text
from torchatlas import classify as engine
from torchatlas.classify import models
from torchatlas.i18n import translate

CAT_CLASSES = {"tabby", "tiger cat", "Egyptian cat"}


def no_failure(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def chart_labels(at, index: int = 0) -> list[str]:
    spec = json.loads(at.get("plotly_chart")[index].proto.spec)
    return list(spec["data"][0]["y"])


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def no_network(url: str, timeout: float) -> object:
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(models, "_open_url", no_network)
    saved = list(models.MODEL_CACHE.items())
    yield tmp_path / "hub" / "checkpoints"
    # models loaded from this temporary hub must not leak into later tests
    models.MODEL_CACHE.clear()
    for key, loaded in saved:
        models.MODEL_CACHE.put(key, loaded)
    from components.classify.state import ROOM_CACHE

    ROOM_CACHE.clear()  # results computed with the temporary hub's models


def test_default_page_classifies_the_cat_sample() -> None:
    at = open_page("views/classify.py")
    no_failure(at)
    assert not at.error, [e.value for e in at.error]
    text = rendered_text(at)
    assert translate("app.rooms.classify.title") in text
    top = chart_labels(at)[-1]  # horizontal bars: best class last (drawn on top)
    assert top in CAT_CLASSES
    assert f"**{top}**" in text
    assert translate("classify.pipeline.steps.normalized") in text
    assert "Normalize(mean=[0.498, 0.498, 0.498]" in "\n".join(c.value for c in at.code)
    assert translate("classify.model.embedded") in text
    assert at.selectbox(key="classify_model").value == "efficientnet_lite0"
    # the embedded model has no torchvision weights enum: name its real preprocessing
    assert translate("classify.pipeline.source_embedded") in text
    assert "weights.transforms()" not in text


def test_uploads_classify_and_bad_files_get_their_own_message() -> None:
    at = open_page("views/classify.py")
    buffer = io.BytesIO()
    Image.open(io.BytesIO(engine.sample_bytes("coffee"))).save(buffer, "PNG")
    at.pills(key="classify_samples").set_value([])
    at.file_uploader(key="classify_uploads").set_value(
        [
            ("espresso.png", buffer.getvalue(), "image/png"),
            ("notes.txt", b"this is a text file", "text/plain"),
            ("drawing.svg", b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/svg+xml"),
            ("half.jpg", engine.sample_bytes("cat")[:5000], "image/jpeg"),
        ]
    )
    at.run()
    no_failure(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 3, errors
    assert "notes.txt" in errors[0] and translate("classify.errors.not_image") in errors[0]
    assert "drawing.svg" in errors[1] and "SVG" in errors[1]
    assert "half.jpg" in errors[2] and translate("classify.errors.truncated") in errors[2]
    assert chart_labels(at)[-1] == "espresso"
    assert "espresso.png" in rendered_text(at)


def test_nothing_selected_explains_what_to_do() -> None:
    at = open_page("views/classify.py")
    at.pills(key="classify_samples").set_value([])
    at.run()
    no_failure(at)
    assert translate("classify.inputs.none") in [i.value for i in at.info]
    assert not at.get("plotly_chart")


def test_several_samples_share_one_batch_and_the_inspector_switches() -> None:
    at = open_page("views/classify.py", classify_inspect_tab=translate("classify.inspect.heatmap"))
    at.pills(key="classify_samples").set_value(["cat", "coffee", "rocket"])
    at.run()
    no_failure(at)
    assert "classified 3 of 3 file(s) in one batched forward pass" in rendered_text(at)
    assert [chart_labels(at, i)[-1] for i in range(3)][1:] == ["espresso", "missile"]
    at.selectbox(key="classify_inspect").set_value(1).run()
    no_failure(at)
    assert at.selectbox(
        key="classify_cam_class_efficientnet_lite0"
    ).value == engine.IMAGENET_CATEGORIES.index("espresso")


COMPARE_TAB = {"classify_inspect_tab": translate("classify.inspect.compare")}


def _only_error_after_picking(picker: str, model: str, **session: object) -> tuple[AppTest, str]:
    """The page after choosing ``model`` in the ``picker`` selectbox, and its one error."""
    at = open_page("views/classify.py", **session)
    at.selectbox(key=picker).set_value(model).run()
    no_failure(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    return at, errors[0]


def test_offline_torchvision_model_says_why_and_what_to_do(offline_hub: Path) -> None:
    at, error = _only_error_after_picking("classify_model", "resnet50")
    assert "ResNet-50" in error
    assert "EfficientNet-Lite0 works offline" in error
    assert translate("classify.model.download", size_mb=98) in rendered_text(at)
    assert at.query_params["c_model"] == "resnet50"


def test_compare_offline_does_not_advise_the_model_already_shown(offline_hub: Path) -> None:
    _, error = _only_error_after_picking("classify_compare", "resnet50", **COMPARE_TAB)
    assert "ResNet-50" in error
    assert "A comparison needs a second model" in error
    assert "pick it" not in error


def test_compare_with_a_locally_saved_torchvision_model(offline_hub: Path) -> None:
    from torchvision.models import resnet18

    offline_hub.mkdir(parents=True)
    import torch

    torch.save(resnet18(weights=None).state_dict(), offline_hub / "resnet18-f37072fd.pth")
    at = open_page("views/classify.py", **COMPARE_TAB)
    at.selectbox(key="classify_compare").set_value("resnet18").run()
    no_failure(at)
    assert not at.error, [e.value for e in at.error]
    text = rendered_text(at)
    assert "**ResNet-18**" in text and "**EfficientNet-Lite0**" in text
    assert len(at.get("plotly_chart")) >= 3  # cat chart, two comparison charts


def test_korean_page() -> None:
    at = open_page("views/classify.py", lang="ko")
    no_failure(at)
    text = rendered_text(at)
    assert translate("classify.intro", "ko") in text
    assert translate("classify.pipeline.steps.cropped", "ko") in text
    assert translate("classify.intro", "en") not in text


def test_first_use_downloads_with_progress_then_classifies(
    offline_hub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    import torch
    from torchvision.models import resnet18

    buffer = io.BytesIO()
    torch.save(resnet18(weights=None).state_dict(), buffer)
    payload = buffer.getvalue()
    name = f"resnet18-{hashlib.sha256(payload).hexdigest()[:8]}.pth"
    served: list[str] = []

    def serve(url: str, timeout: float) -> io.BytesIO:
        served.append(url)
        response = io.BytesIO(payload)
        response.headers = {"Content-Length": str(len(payload))}
        return response

    monkeypatch.setattr(models, "_weights_url", lambda spec: f"https://example.invalid/{name}")
    monkeypatch.setattr(models, "_open_url", serve)
    at = open_page("views/classify.py")
    at.selectbox(key="classify_model").set_value("resnet18").run()
    no_failure(at)
    assert not at.error, [e.value for e in at.error]
    assert served == [f"https://example.invalid/{name}"]
    assert (offline_hub / name).read_bytes() == payload
    assert len(chart_labels(at)) == 5  # random weights: some five classes, but real output
    assert "`ResNet18_Weights.IMAGENET1K_V1.transforms()`" in rendered_text(at)
    at.run()  # second run: the file is there, no new download
    assert len(served) == 1
    assert translate("classify.model.cached") in rendered_text(at)


def noise_png(seed: int, size: tuple[int, int] = (200, 170)) -> bytes:
    import numpy as np

    pixels = np.random.default_rng(seed).integers(0, 256, (*size[::-1], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def test_uploads_over_the_visitors_budget_are_refused_beside_the_uploader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page keeps a small decoded copy of each photo, not the file, and charges it to the
    visitor's budget: with room for one photo, the second is refused in plain words."""
    from components import uploads
    from torchatlas.classify.images import Decoded
    from torchatlas.uploads import UploadBudget

    monkeypatch.setattr(uploads, "BUDGET", UploadBudget(per_session=150_000, per_server=10**7))
    at = open_page("views/classify.py")
    at.pills(key="classify_samples").set_value([])
    at.file_uploader(key="classify_uploads").set_value(
        [("first.png", noise_png(1), "image/png"), ("second.png", noise_png(2), "image/png")]
    )
    at.run()
    no_failure(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "second.png" in errors[0], errors
    assert "over the 0.1 MB the server keeps for one visitor" in errors[0]
    assert "classified 1 of 2 file(s)" in rendered_text(at)
    kept = at.session_state["classify_kept"]
    name, decoded = next(iter(kept.values()))
    assert name == "first.png" and isinstance(decoded, Decoded) and decoded.digest
    assert uploads.BUDGET.used() == decoded.nbytes  # the copy, not the file and not the refusal

    at.run()  # a rerun decodes nothing again and says the same
    no_failure(at)
    assert [e.value for e in at.error] == errors
    assert at.session_state["classify_kept"] == kept

    at.file_uploader(key="classify_uploads").set_value([])  # the visitor removes both files
    at.run()
    no_failure(at)
    assert uploads.BUDGET.used() == 0 and not at.session_state["classify_kept"]


def test_upload_help_states_the_limits() -> None:
    at = open_page("views/classify.py")
    help_text = at.file_uploader(key="classify_uploads").proto.help
    assert "40 megapixels and 121 MB each" in help_text and "128 MB" in help_text


def _open_link(**query: str) -> AppTest:
    """The room opened from a shared link with ``query`` as its parameters."""
    from tests.app.apptest import APP, TIMEOUT_S

    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.run()
    for name, value in query.items():
        at.query_params[name] = value
    at.switch_page("views/classify.py").run()
    no_failure(at)
    return at


def test_a_shared_link_picks_the_model_and_keeps_other_parameters(offline_hub: Path) -> None:
    at = _open_link(c_model="resnet50", s_shape="2,3")
    assert at.selectbox(key="classify_model").value == "resnet50"
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "ResNet-50" in errors[0], errors
    assert at.query_params["c_model"] == "resnet50" and at.query_params["s_shape"] == "2,3"
    at.selectbox(key="classify_model").set_value("efficientnet_lite0").run()  # back to the default
    no_failure(at)
    assert "c_model" not in at.query_params and at.query_params["s_shape"] == "2,3"


def test_a_link_naming_no_model_falls_back_to_the_default() -> None:
    at = _open_link(c_model="resnet9000")
    assert at.selectbox(key="classify_model").value == "efficientnet_lite0"
    assert not at.error and "c_model" not in at.query_params


def test_engine_errors_reach_the_page_in_the_readers_language() -> None:
    """A refusal's parameters that are codes themselves (a way of storing pixels) are shown in
    Korean too, not as the engine's English."""
    from torchatlas.classify.errors import ImageError

    korean = ImageError("slow_format", format="JPEG", variant="arithmetic").text("ko")
    assert korean == translate(
        "classify.errors.slow_format", "ko", format="JPEG", variant="산술 부호화"
    )
    assert "arithmetic" not in korean


def test_only_the_open_inspector_tab_is_built() -> None:
    """The pipeline tab is open at first: the heatmap's widgets and the latency chart are not
    built until their tab is opened (a class rerunning the page builds only what it sees)."""
    at = open_page("views/classify.py")
    no_failure(at)
    assert translate("classify.pipeline.before_after") in rendered_text(at)
    assert not [s for s in at.selectbox if s.key == "classify_cam_class_efficientnet_lite0"]
    latency_tab = translate("classify.inspect.latency")
    latency = open_page("views/classify.py", classify_inspect_tab=latency_tab)
    no_failure(latency)
    assert len(latency.get("plotly_chart")) == len(at.get("plotly_chart")) + 1
    assert translate("classify.pipeline.before_after") not in rendered_text(latency)
