"""The shape explorer page under AppTest: presets, errors inline, symbolic view, URL state."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from components.shapes import decode_source, encode_source
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.presets import PRESETS


def submit(at: AppTest) -> AppTest:
    at.button(key="FormSubmitter:shapes_form-" + _run_label(at)).click()
    return at.run()


def _run_label(at: AppTest) -> str:
    return next(b.label for b in at.button if b.key and b.key.startswith("FormSubmitter:"))


def test_default_preset_is_analysed_on_arrival() -> None:
    at = open_page("views/shapes.py")
    assert not at.exception
    text = rendered_text(at)
    assert "Shape" in at.title[0].value
    assert at.text_area(key="shapes_source").value == PRESETS["net"].source
    metrics = {metric.label: metric.value for metric in at.metric}
    assert metrics["Parameters"] == "62 k"
    assert metrics["FLOPs"] == "1.33 G"  # 1024 images of 3×32×32
    assert "1024 × 10" in text
    frame = at.dataframe[0].value
    assert "conv1" in " ".join(frame["Layer"])
    assert "1024 × 6 × 28 × 28" in set(frame["Output shape"])
    assert at.get("plotly_chart")
    assert at.get("graphviz_chart")


def test_broken_model_shows_the_fix_on_the_offending_line() -> None:
    at = open_page("views/shapes.py")
    at.selectbox(key="shapes_preset").select_index(list(PRESETS).index("net_broken")).run()
    assert at.text_input(key="shapes_inputs").value == "1×1×28×28"
    at = submit(at)
    assert not at.exception
    assert at.error, "the failure must be explained"
    error = at.error[0].value
    assert "fc1" in error and "400" in error and "256" in error
    hint = at.info[0].value
    assert "fc1 = nn.Linear(256, 120)" in hint
    marked = [m.value for m in at.markdown if "shapes-source-marker" in str(m.value)]
    assert marked and "self.fc1(x)" in marked[0]
    assert "⚠" in " ".join(at.dataframe[0].value["Layer"])  # partial table, failing row marked


def test_symbolic_view_shows_formulas_and_constraints() -> None:
    at = open_page("views/shapes.py")
    at.text_input(key="shapes_inputs").set_value("1×3×32×32")
    at.toggle(key="shapes_symbolic").set_value(True)
    at = submit(at)
    assert not at.exception
    text = rendered_text(at)
    assert "16·((H//4) − 3)·((W//4) − 3) = 400" in text
    frame = at.dataframe[0].value
    assert "N × 6 × H − 4 × W − 4" in set(frame["Output formula"])


def test_bad_shape_text_is_explained() -> None:
    at = open_page("views/shapes.py")
    at.text_input(key="shapes_inputs").set_value("1×three×32")
    at = submit(at)
    assert not at.exception
    assert "input shape cannot be read" in at.error[0].value
    assert "1×3×224×224" in at.info[0].value


def test_korean() -> None:
    at = open_page("views/shapes.py", lang="ko")
    assert not at.exception
    assert "meta 디바이스" in rendered_text(at)
    assert {metric.label for metric in at.metric} >= {"파라미터", "활성값 메모리"}
    at.selectbox(key="shapes_preset").select_index(list(PRESETS).index("net_broken")).run()
    at = submit(at)
    assert "Linear 레이어에 들어오는 특성 수가 맞지 않습니다" in at.error[0].value
    assert "nn.Linear(256, 120)" in at.info[0].value


def test_state_goes_into_the_url() -> None:
    at = open_page("views/shapes.py")
    edited = PRESETS["net"].source.replace("nn.Linear(84, 10)", "nn.Linear(84, 7)")
    at.text_area(key="shapes_source").set_value(edited)
    at.text_input(key="shapes_inputs").set_value("2×3×32×32")
    at = submit(at)
    assert "2 × 7" in rendered_text(at)
    query = {
        key: value if isinstance(value, str) else value[0] for key, value in at.query_params.items()
    }
    assert decode_source(query["m_src"]) == edited
    assert query["m_shapes"] == "2×3×32×32"
    assert query["m_preset"] == "net"


def test_a_shared_link_restores_the_editor() -> None:
    source = PRESETS["net"].source.replace("nn.Linear(84, 10)", "nn.Linear(84, 5)")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params["m_src"] = encode_source(source)
    at.query_params["m_shapes"] = "3×3×32×32"
    at.run()
    at.switch_page("views/shapes.py").run()
    assert not at.exception
    assert at.text_area(key="shapes_source").value == source
    assert "3 × 5" in rendered_text(at)


def test_downloads() -> None:
    at = open_page("views/shapes.py")
    buttons = at.get("download_button")
    assert len(buttons) == 2


def test_source_link_encoding_round_trips_and_rejects_garbage() -> None:
    text = "import torch\n# 한국어 주석\n" * 50
    token = encode_source(text)
    assert decode_source(token) == text
    assert len(token) < len(text) / 4
    assert decode_source("not-a-valid-token!!") is None
    assert json.dumps(token)  # URL-safe ASCII
