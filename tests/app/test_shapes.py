"""The shape explorer page under AppTest: presets, errors inline, symbolic view, URL state."""

from __future__ import annotations

import base64
import html
import json
import re
import zlib
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from components.shapes.draw import error_marks, highlight_lines
from components.shapes.state import decode_source, encode_source
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.i18n import translate
from torchatlas.presets import PRESETS
from torchatlas.shapes import ErrorKind, RefusalCode, RefusedLine, ShapeError


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
    lines = list(frame["Line"])
    assert lines[0] == "", "the model's own row has no line: an empty cell, not 'None'"
    assert "18" in lines  # conv1's call in forward
    listing = _listing(at)
    assert listing is not None, "the highlighted, numbered code is always beside the editor"
    assert 'data-line="17"' in listing and "<span" in listing  # numbered and coloured
    assert _marked_lines(listing) == set()  # nothing failed, nothing marked


def _listing(at: AppTest) -> str | None:
    found = [m.value for m in at.markdown if "shapes-source-listing" in str(m.value)]
    return found[0] if found else None


def _plain(html_text: str) -> str:
    """The text a reader sees in hand-drawn HTML."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def _marked_lines(html_text: str) -> set[int]:
    """Numbers of the lines the listing highlights (the accent left border)."""
    return {
        int(number)
        for number, style in re.findall(r'data-line="(\d+)" style="([^"]*)"', html_text)
        if "transparent" not in style
    }


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
    assert marked and "self.fc1(x)" in _plain(marked[0])
    assert "⚠" in " ".join(at.dataframe[0].value["Layer"])  # partial table, failing row marked
    listing = _listing(at)  # the listing beside the editor marks the same line, with the fix
    fc1_line = (
        PRESETS["net_broken"].source.splitlines().index("        x = F.relu(self.fc1(x))") + 1
    )
    assert _marked_lines(listing) == {fc1_line}
    assert "fc1 = nn.Linear(256, 120)" in listing


def test_forward_with_the_wrong_number_of_inputs_marks_the_def_line() -> None:
    at = open_page("views/shapes.py")
    at.text_input(key="shapes_inputs").set_value("1×3×32×32; 1×10")
    at = submit(at)
    assert not at.exception
    assert "forward(x)" in at.error[0].value
    forward_line = PRESETS["net"].source.splitlines().index("    def forward(self, x):") + 1
    assert _marked_lines(_listing(at)) == {forward_line}
    marker = [m.value for m in at.markdown if "shapes-source-marker" in str(m.value)]
    assert marker and "def</span>" in marker[0] and "def forward(self, x):" in _plain(marker[0])


def test_refused_lines_are_all_marked_with_their_reason() -> None:
    source = PRESETS["net"].source.replace(
        "        x = self.fc3(x)\n",
        "        x = self.fc3(x)\n        y = x.__class__\n        z = getattr(x, 'shape')\n",
    )
    at = open_page("views/shapes.py")
    at.text_area(key="shapes_source").set_value(source)
    at = submit(at)
    assert not at.exception
    lines = source.splitlines()
    refused = ["        y = x.__class__", "        z = getattr(x, 'shape')"]
    expected = {lines.index(line) + 1 for line in refused}
    assert _marked_lines(_listing(at)) == expected


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
    assert "m_preset" not in query  # the default preset: a link carries only what differs


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


SNIPPETS = [
    *[preset.source for preset in PRESETS.values()],
    "class Net(nn.Module):\n    def forward(self, x):\n        return self.fc(x\n",  # unclosed (
    's = """never closed\nimport torch\n',  # unclosed string
    "def f():\n  x = 1\n    y = 2\n",  # bad indentation
    "x = 1\r\ny = 'a'\r\n\tz = 2 # tab\n",
    "",
]


@pytest.mark.parametrize("source", SNIPPETS)
def test_highlighting_keeps_every_character(source: str) -> None:
    lines = highlight_lines(source)
    assert ["".join(text for text, _ in spans) for spans in lines] == (source.splitlines() or [""])


def test_highlighting_colours_python() -> None:
    lines = highlight_lines("import torch\n\n\nclass Net(nn.Module):  # hi\n    x = 'a' + 2\n")
    kinds = {(text, kind) for spans in lines for text, kind in spans if kind}
    assert kinds >= {("import", "keyword"), ("class", "keyword"), ("Net", "definition"),
                     ("# hi", "comment"), ("'a'", "string"), ("2", "number")}  # fmt: skip


def test_error_marks() -> None:
    assert error_marks(None, "en") == {}
    assert error_marks(ShapeError(ErrorKind.NO_MODULE), "en") == {}
    refused = ShapeError(
        ErrorKind.REFUSED,
        line=3,
        refusals=[
            RefusedLine(3, 1, RefusalCode.DUNDER, "`a` no"),
            RefusedLine(5, 1, RefusalCode.IMPORT, "b"),
        ],
    )
    marks = error_marks(refused, "en")
    assert set(marks) == {3, 5}  # each refused line, with the room's own reason
    assert marks[3].startswith("Double-underscore names") and "import" in marks[5]
    assert error_marks(refused, "ko")[5].startswith("여기서는")
    linear = ShapeError(ErrorKind.LINEAR_IN_FEATURES, line=9, params={
        "layer": "fc1", "expected": 400, "got": 256, "fix": "fc1 = nn.Linear(256, 120)",
    })  # fmt: skip
    assert error_marks(linear, "en") == {
        9: "Set fc1 = nn.Linear(256, 120), or change the layers before it so they output 400 "
        "features."
    }


# ---------------------------------------------------------------- bounds


def _arrive_with(**boxes: str) -> AppTest:
    """The page's first run with these box values already in the session (a script or a
    restored session: what the boxes' max_chars cannot bind)."""
    preset = PRESETS["net"]
    state = {
        "shapes_source": preset.source, "shapes_model": preset.model,
        "shapes_inputs": preset.shapes, "shapes_dtypes": preset.dtypes,
        "shapes_symbolic": False, "shapes_preset_key": "net",
    }  # fmt: skip
    state.update(boxes)
    return open_page("views/shapes.py", **state)


@pytest.mark.parametrize(
    ("box", "text", "title"),
    [
        ("shapes_inputs", "1×" * 20_000, "The shapes box is too long"),
        ("shapes_inputs", "(" * 20_000, "The shapes box is too long"),
        ("shapes_dtypes", "float32, " * 1_000, "The dtypes box is too long"),
        ("shapes_model", "Net(" + "[" * 20_000 + ")", "The model box is too long"),
        ("shapes_source", "# padding\n" * 6_000, "The code is too long"),
    ],
)
def test_over_long_boxes_are_refused_at_once(box: str, text: str, title: str) -> None:
    at = _arrive_with(**{box: text})
    assert not at.exception
    assert title in at.error[0].value
    assert f"{len(text):,}" in at.error[0].value  # the length and the limit, in the message
    error = at.session_state["shapes_result"].report.error
    assert isinstance(error.kind, ErrorKind) and error.kind.value.endswith("_too_long")


def test_boxes_carry_their_limits() -> None:
    at = open_page("views/shapes.py")
    assert at.text_area(key="shapes_source").proto.max_chars == 50_000
    assert at.text_input(key="shapes_model").proto.max_chars == 500
    assert at.text_input(key="shapes_inputs").proto.max_chars == 500
    assert at.text_input(key="shapes_dtypes").proto.max_chars == 200


def test_a_link_with_values_longer_than_the_boxes_is_damaged() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params["m_shapes"] = "1×" * 300
    at.query_params["m_model"] = "Net()"
    at.run()
    at.switch_page("views/shapes.py").run()
    assert not at.exception
    # The kit's notice names the part not used (kit.link.broken).
    assert [info.value for info in at.info] == [translate("kit.link.broken", fields="m_shapes")]
    assert at.text_input(key="shapes_inputs").value == PRESETS["net"].shapes
    assert at.text_input(key="shapes_model").value == "Net()"  # the readable part is kept


def test_source_links_are_bounded() -> None:
    bomb = base64.urlsafe_b64encode(zlib.compress(b"#" * 4_000_000, 9)).decode().rstrip("=")
    assert len(bomb) <= 6000  # a link-sized token that inflates a thousand times
    assert decode_source(bomb) is None
    assert decode_source("A" * 6001) is None  # longer than any link the page writes
    assert decode_source(encode_source("#" * 50_001)) is None  # past the editor's limit
    assert decode_source(encode_source("#" * 50_000)) == "#" * 50_000
    assert decode_source(encode_source("x = 1\n")[:-4]) is None  # cut short


# ---------------------------------------------------------------- the waiting line


def _recording_messages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every element the page sends while it runs, in order, as text: an AppTest shows only
    the final page, and a place in line is replaced by the result before the run ends."""
    from google.protobuf import text_format
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    sent: list[str] = []
    enqueue = ScriptRunContext.enqueue

    def recording(self: ScriptRunContext, msg: Any) -> None:
        sent.append(text_format.MessageToString(msg, as_utf8=True))
        enqueue(self, msg)

    monkeypatch.setattr(ScriptRunContext, "enqueue", recording)
    return sent


def test_a_waiting_analysis_shows_its_place_in_line_then_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from torchatlas import sandbox

    real_run_job = sandbox.run_job
    heard: list[int] = []

    def busy_pool(source: str, job: str, params: dict, **options: object) -> object:
        on_queued = options.pop("on_queued")
        for position in (3, 2, 1, 0):  # what the fair queue reports while the job waits
            heard.append(position)
            on_queued(position)  # type: ignore[operator]
        return real_run_job(source, job, params, **options)

    monkeypatch.setattr(sandbox, "run_job", busy_pool)
    sent = _recording_messages(monkeypatch)
    at = open_page("views/shapes.py")
    assert not at.exception
    assert heard == [3, 2, 1, 0]
    page = "\n".join(sent)
    places = [page.index(f"Queued: {place} in line") for place in ("3rd", "2nd", "1st")]
    assert places == sorted(places), "the place is updated as the line moves"
    assert page.index("Queued: 1st in line") < page.index("62 k"), "then the result"
    assert "Queued" not in rendered_text(at)  # gone once the analysis has started
    assert {metric.label: metric.value for metric in at.metric}["Parameters"] == "62 k"


def test_the_place_in_line_is_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchatlas import sandbox

    real_run_job = sandbox.run_job

    def busy_pool(source: str, job: str, params: dict, **options: object) -> object:
        on_queued = options.pop("on_queued")
        on_queued(12)  # type: ignore[operator]
        return real_run_job(source, job, params, **options)

    monkeypatch.setattr(sandbox, "run_job", busy_pool)
    sent = _recording_messages(monkeypatch)
    at = open_page("views/shapes.py", lang="ko")
    assert not at.exception
    assert any("대기 중: 줄에서 12번째입니다" in message for message in sent)


# ---------------------------------------------------------------- one element per list


def test_constraints_are_one_element(monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_page("views/shapes.py", lang="en")
    at.text_input(key="shapes_inputs").set_value("1×3×32×32")
    at.toggle(key="shapes_symbolic").set_value(True)
    at = submit(at)
    lists = [m.value for m in at.markdown if "requires" in str(m.value)]
    assert len(lists) == 1, "every constraint in one markdown element"
    assert lists[0].count("\n- ") >= 2  # several constraints, one list


def test_refused_lines_are_one_list_with_the_sandboxes_words_as_a_detail() -> None:
    source = PRESETS["net"].source.replace(
        "        x = self.fc3(x)\n",
        "        x = self.fc3(x)\n        y = x.__class__\n        z = getattr(x, 'shape')\n",
    )
    at = open_page("views/shapes.py", lang="ko")
    at.text_area(key="shapes_source").set_value(source)
    at = submit(at)
    assert not at.exception
    assert "여기서 허용되지 않는 것을 코드가 사용합니다" in at.error[0].value  # the room's title
    items = [m.value for m in at.markdown if str(m.value).startswith("- ")]
    assert len(items) == 1 and items[0].count("번째 줄") == 2  # one element, both lines
    assert "밑줄 두 개로" in items[0]  # the room's reason for `__class__`, in Korean
    details = [c.value for c in at.caption if "not allowed here" in str(c.value)]
    assert details, "the sandbox's own English survives only as a detail"


def test_sandbox_errors_read_as_the_rooms_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchatlas import sandbox
    from torchatlas.sandbox import SandboxError, SandboxResult

    def timed_out(source: str, job: str, params: dict, **options: object) -> SandboxResult:
        error = SandboxError("timeout", "The code was stopped after 10 s. (sandbox English)")
        return SandboxResult(False, None, error, 10.0)

    monkeypatch.setattr(sandbox, "run_job", timed_out)
    at = open_page("views/shapes.py", lang="ko")
    assert not at.exception
    assert "코드 실행이 너무 오래 걸렸습니다" in at.error[0].value
    assert "10초" in at.error[0].value
    assert "sandbox English" not in at.error[0].value + at.info[0].value
    assert any("sandbox English" in str(c.value) for c in at.caption)


def test_downloads_are_built_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.shapes import draw

    built: list[str] = []
    monkeypatch.setattr(draw, "csv_bytes", lambda report: built.append("csv") or b"")
    monkeypatch.setattr(draw, "json_bytes", lambda report: built.append("json") or b"")
    at = open_page("views/shapes.py")
    at.run()  # a rerun
    assert not at.exception and len(at.get("download_button")) == 2
    assert built == [], "no run builds the files; a press of the button does"
