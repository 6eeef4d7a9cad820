"""Torch's answer in words: every verdict sentence reads right in English and Korean for every
kind of answer (a value, "it works", an error, a named exception), and every place that shows
plain text (a chart's axis, a table, a CSV) shows no Markdown."""

from __future__ import annotations

import re

import pytest

from components.classmode import draw as class_draw
from components.lessons import draw
from torchatlas.i18n import LANGUAGES
from torchatlas.lessons import load_all

ANSWERS = ["(2, 3, 5, 5)", "float64", "True", "None", "ok", "error", "TypeError", "RuntimeError"]
KEYS = [
    ("lessons.question.right", {}),
    ("lessons.question.wrong", {}),
    ("classmode.question.right", {}),
    ("classmode.question.no_answer", {}),
    ("classmode.question.wrong", {"picked": "x"}),
]
# What one template for every kind read like: a subject said twice, a Korean ending added to a
# whole sentence ("…를 냅니다입니다").
BROKEN = re.compile(
    r"(?i)torch says torch|torch의 답은 torch|니다입니다|니다를|니다,|: torch raises"
)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize(("key", "params"), KEYS, ids=[key for key, _ in KEYS])
def test_every_verdict_reads_right_for_every_kind_of_answer(
    key: str, params: dict[str, str], answer: str, lang: str
) -> None:
    picked = {"picked": draw.option_label("ok", lang)} if params else {}
    sentence = draw.verdict_sentence(key, answer, lang, **picked)
    assert "{" not in sentence and sentence.count("`") % 2 == 0, sentence
    assert BROKEN.search(sentence) is None, sentence
    if draw.answer_kind(answer) == draw.VALUE:
        assert draw.option_label(answer, lang) in sentence, "a value is quoted as itself"
    if answer.endswith("Error"):
        assert f"`{answer}`" in sentence, "a named exception is named"


def test_the_kinds_of_answers() -> None:
    kinds = {answer: draw.answer_kind(answer) for answer in ANSWERS}
    assert kinds == {
        "(2, 3, 5, 5)": "value", "float64": "value", "True": "value", "None": "value",
        "ok": "ok", "error": "error", "TypeError": "raises", "RuntimeError": "raises",
    }  # fmt: skip


@pytest.mark.parametrize("lang", LANGUAGES)
def test_plain_text_options_and_prompts_carry_no_markdown(lang: str) -> None:
    for lesson in load_all():
        for step in lesson.steps:
            question = step.question
            if question is None:
                continue
            assert "`" not in draw.plain(question.prompt[lang])
            if not question.options:  # answered with code: no options to label
                continue
            labels = class_draw.option_labels(question.options, lang, question.answer)
            assert not any("`" in label or "**" in label for label in labels), labels
            assert labels[question.answer].startswith(class_draw.RIGHT_MARK)
            assert sum(label.startswith(class_draw.RIGHT_MARK) for label in labels) == 1
            assert "`" not in draw.plain(question.prompt[lang])
    assert class_draw.option_labels(("ok", "TypeError"), "en") == [
        "A: it works",
        "B: torch raises a TypeError",
    ]


def test_the_projectors_chart_fits_a_1080_screen_below_the_question() -> None:
    """Six options (a lesson's most) fit below the page's title, the step, the moves, the
    counts and the question on a 1080-pixel-high screen (measured in Chromium: those take
    about 470 px)."""
    assert class_draw.tally_height(6) <= 1080 - 470
    assert class_draw.tally_height(6, class_draw.BAR) <= 260, "above a room, a glance"


def test_the_summary_table_is_plain_and_leaves_an_unrevealed_question_unscored() -> None:
    frame = class_draw.summary_frame(
        [(1, "What is `x.t()`?", 3, 2, 2 / 3, True), (2, "**y**?", 2, 1, 0.5, False)], "en"
    )
    text = frame.to_string()
    assert "`" not in text and "**" not in text and "What is x.t()?" in text
    assert frame.iloc[1].tolist()[3:] == ["—", "not revealed: not scored"]
    assert frame.iloc[0].tolist()[3:] == ["2", "67 %"]


def test_the_csv_reads_the_stores_cells_back_even_when_made_safe_for_a_spreadsheet() -> None:
    store_csv = (
        "nickname,step_1,step_1_right,right_total\r\n"
        "'=Ada,'-1,1,1\r\nBo,error,0,0\r\nCy,,,0\r\nshare_right,'-1,0.500\r\n"
    )
    asked = [class_draw.Asked(1, "Which `x`?", ("-1", "error"), ("-1", "torch fails"), 0, True)]
    rows = [row.split(",") for row in class_draw.teacher_csv(store_csv, asked, "en").splitlines()]
    assert rows[1] == ["'=Ada", "'-1", "1", "1"], "still safe, and what the student saw"
    assert rows[2] == ["Bo", "torch fails", "0", "0"] and rows[3] == ["Cy", "", "", "0"]
    assert rows[4] == [""] and rows[6][1:] == ["'-1", "yes", "2", "1", "50 %"]
    assert class_draw.csv_bytes("한").startswith(b"\xef\xbb\xbf")
