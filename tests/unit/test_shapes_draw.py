"""The shape explorer's pure builders (components/shapes/draw.py): no Streamlit needed."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from components.shapes import draw
from components.theme import DARK, LIGHT, Palette
from torchatlas.shapes import (
    Constraint,
    ErrorKind,
    LayerRow,
    RefusalCode,
    RefusedLine,
    RowKind,
    ShapeError,
    ShapeReport,
    SymbolicIssue,
    WhyMetaPoint,
)


def _report(**fields: object) -> ShapeReport:
    rows = [
        LayerRow("", "Net", RowKind.MODULE, 0, [[1, 3]], [[1, 2]], params=8, leaf=False),
        LayerRow("fc", "Linear", RowKind.MODULE, 1, [[1, 3]], [[1, 2]], params=8, line=5),
        LayerRow("", "torch.flatten", RowKind.FUNCTION, 1, [[1, 2]], [[]], line=6),
    ]
    return ShapeReport(layers=rows, outputs=[[1, 2]], model="Net()", **fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------- queue
@pytest.mark.parametrize(
    ("number", "english"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"),
     (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th")],
)  # fmt: skip
def test_ordinals(number: int, english: str) -> None:
    assert draw.ordinal(number, "en") == english
    assert draw.ordinal(number, "ko") == f"{number}번째"


def test_queue_text() -> None:
    assert draw.queue_text(3, "en").startswith("Queued: 3rd in line")
    assert draw.queue_text(3, "ko").startswith("대기 중: 줄에서 3번째")


# ---------------------------------------------------------------- listing
def test_pygments_colours_code_it_cannot_parse() -> None:
    """The standard tokenizer stopped at the first line it could not read (here a dedent
    that matches no outer level); Pygments goes on, so the lines after the student's mistake
    keep their colours."""
    source = "def f():\n    x = 1\n  y = 2\ndef g():\n    return 'a' + 1  # c\n"
    lines = draw.highlight_lines(source)
    kinds = {(text, kind) for spans in lines for text, kind in spans if kind}
    assert kinds >= {("def", "keyword"), ("g", "definition"), ("return", "keyword"),
                     ("'a'", "string"), ("1", "number"), ("# c", "comment")}  # fmt: skip


def test_builtins_and_operator_words() -> None:
    lines = draw.highlight_lines("y = len(self.x) if a and not b else None\n@property\n")
    kinds = {(text, kind) for spans in lines for text, kind in spans if kind}
    assert kinds >= {("len", "builtin"), ("self", "builtin"), ("if", "keyword"),
                     ("and", "keyword"), ("not", "keyword"), ("None", "keyword"),
                     ("@property", "definition")}  # fmt: skip


def test_highlighting_a_bom_and_odd_line_breaks_keeps_every_character() -> None:
    source = "\ufeffx = 1\u2028y = 2\x0cz\r\n"
    spans = draw.highlight_lines(source)
    assert ["".join(text for text, _ in line) for line in spans] == source.splitlines()


def _marked(html_text: str) -> set[int]:
    return {
        int(number)
        for number, style in re.findall(r'data-line="(\d+)" style="([^"]*)"', html_text)
        if "transparent" not in style
    }


def test_listing_marks_lines_and_bounds_the_caret() -> None:
    source = "a = 1\nb = (\nc = 3\n"
    lines = draw.code_lines_html(source, dark=False)
    html_text = draw.source_listing_html(
        lines, {2: "close the bracket"}, LIGHT, col=50_000, line_lengths=[5, 5, 5]
    )
    assert _marked(html_text) == {2}
    caret = re.search(r">( *)\^ close the bracket<", html_text)
    assert caret is not None and len(caret.group(1)) <= 1 + 2 + 5  # width, gap, line + 1
    window = draw.source_listing_html(lines, {}, DARK, window=(2, 3), testid="x")
    assert 'data-line="1"' not in window and 'data-line="3"' in window


def _luminance(colour: str) -> float:
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(first: str, second: str) -> float:
    light, dark = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _tinted(palette: Palette) -> str:
    """A marked line's background: the accent at MARK_ALPHA over the surface."""
    alpha = int(draw.MARK_ALPHA, 16) / 255
    accent, surface = (
        [int(c.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4)]
        for c in (palette.accent, palette.surface)
    )
    return "#" + "".join(
        f"{round(alpha * a + (1 - alpha) * s):02x}" for a, s in zip(accent, surface, strict=True)
    )


@pytest.mark.parametrize(("dark", "palette"), [(False, LIGHT), (True, DARK)])
def test_code_colours_read_on_both_themes(dark: bool, palette: Palette) -> None:
    """Every syntax colour and the note under a marked line reach the contrast body text
    needs (4.5:1) on the listing's surface, and stay above 4:1 on a marked line."""
    for kind, colour in draw.CODE_COLOURS[dark].items():
        assert _contrast(colour, palette.surface) >= 4.5, (dark, kind)
        assert _contrast(colour, _tinted(palette)) >= 4.0, (dark, kind)
    assert _contrast(draw.NOTE_COLOURS[dark], palette.surface) >= 4.5


# ---------------------------------------------------------------- errors
def test_the_sandboxs_english_is_a_detail_only_where_the_message_lacks_it() -> None:
    timeout = ShapeError(ErrorKind.TIMEOUT, params={"timeout": "10", "detail": "stopped (en)"})
    assert draw.error_detail(timeout, "ko") == "자세한 내용: stopped (en)"
    assert "stopped (en)" not in timeout.text("ko")
    forward = ShapeError(
        ErrorKind.FORWARD_ERROR,
        params={"op": "Tensor.view", "shapes": "2×3", "detail": "RuntimeError: no"},
    )
    assert draw.error_detail(forward, "en") == ""  # already in the message
    assert "RuntimeError: no" in forward.text("en")


def test_refused_lines_are_listed_once_per_reason_with_code_kept_as_code() -> None:
    """``().__class__.__base__`` is refused twice on one line for one reason: one item. The
    reason's ``__init__`` stays code in markdown (not bold), and is plain in the listing."""
    error = ShapeError(
        ErrorKind.REFUSED,
        refusals=[
            RefusedLine(7, 9, RefusalCode.DUNDER, "`.__class__` …"),
            RefusedLine(7, 9, RefusalCode.DUNDER, "`.__base__` …"),
            RefusedLine(7, 9, RefusalCode.FORBIDDEN_NAME, "`getattr` …"),
            RefusedLine(9, 1, RefusalCode.DUNDER, "`__x__` …"),
        ],
    )
    items = draw.refusals_markdown(error, "en").splitlines()
    assert len(items) == 3 and items[0].startswith("- line 7: Double-underscore")
    assert "`__init__`" in items[0]
    assert draw.error_marks(error, "en")[7].endswith(
        "needs __init__, forward and super().__init__()."
    )


def test_error_box_names_the_layer_and_its_input() -> None:
    """The error card's text (the room's coded error, shown by the kit's error card)."""
    error = ShapeError(
        ErrorKind.LINEAR_IN_FEATURES,
        params={"layer": "fc1", "expected": 400, "got": 256, "fix": "fc1 = nn.Linear(256, 120)"},
        layer="fc1",
        input_shapes=[[1, 256]],
    )
    text = error.text("en")
    assert text.startswith("**A Linear layer gets the wrong number of features**")
    assert "`fc1` expects 400" in text and "1 × 256" in text


# ---------------------------------------------------------------- symbolic, files, why meta
def test_constraints_are_one_markdown_string() -> None:
    constraints = [Constraint(f"layer{i}", f"H = {i}") for i in range(3000)]
    issue, dims, text = draw.symbolic_markdown(
        _report(symbolic=True, dim_names=[["N", "F"]], constraints=constraints), "en"
    )
    assert issue == "" and dims == "Input dimensions are named N × F."
    assert text.count("\n- ") == 3000 and "`layer2999` requires `H = 2999`" in text
    issue, _, text = draw.symbolic_markdown(
        _report(symbolic_issue=SymbolicIssue.FAILED, symbolic_detail="RuntimeError: x"), "ko"
    )
    assert (
        issue.endswith("RuntimeError: x") and text == "레이어들이 입력 크기에 거는 조건이 없습니다."
    )


def test_csv_and_json_downloads() -> None:
    report = _report()
    rows = list(csv.DictReader(io.StringIO(draw.csv_bytes(report).decode())))
    assert [row["kind"] for row in rows] == ["module", "module", "function"]
    assert json.loads(rows[1]["output_shapes"]) == [[1, 2]]
    assert ShapeReport.from_dict(json.loads(draw.json_bytes(report))) == report


def test_tables_and_figures_take_dataclasses() -> None:
    report = _report()
    frame = draw.layer_frame(report, 1, symbolic=False, lang="ko")
    assert list(frame["레이어"])[1].endswith("fc")
    assert "스칼라" in set(frame["출력 shape"])  # the flatten's scalar output, translated
    assert "Net() · torch.flatten" in draw.flow_dot(report, 1, LIGHT, "en")
    assert draw.activation_figure(report, DARK, "en").to_dict()["data"]
    points = [
        WhyMetaPoint(1, [[1, 3]], 0.001, 0.002, 12),
        WhyMetaPoint(64, [[64, 3]], 0.001, 0.02, 768),
        WhyMetaPoint(65536, [[65536, 3]], 0.001, None, 786432),
    ]
    summary, caption = draw.why_meta_summary(points, "en")
    assert "**10.0×**" in summary and caption == ""
    assert draw.why_meta_frame(points, "en")["Real (CPU)"].iloc[-1] == "too big to run"
    assert draw.why_meta_figure(points, LIGHT, "en").to_dict()["data"]
