"""Lessons are data, checked not trusted: every lesson loads in both languages, follows a
curriculum note, names only its rooms' link fields, and every question's right option is the
one torch computes (checked here again against plain torch, independently of the loader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from components.lessons.draw import summary
from torchatlas.i18n import LANGUAGES, table
from torchatlas.lessons import (
    FACTS,
    LESSONS_DIR,
    ROOMS,
    FactError,
    LessonError,
    evaluate,
    load_all,
    parse_lesson,
)
from torchatlas.lessons.facts import parse_op
from torchatlas.rooms import link_of

ROOT = Path(__file__).resolve().parents[2]
LESSONS = load_all()
# One lesson per curriculum note (the shapes recipe's English and Korean texts are one note).
CURRICULUM = {
    "shapes_meta": "001_60daab456014f7ad.txt",
    "linear_layer": "002_1a5038bad819cf4d.txt",
    "basics_autograd": "003_d04217508171965e.txt",
    "dlwp_tensors": "004_bcd02c13960bdf42.txt",
}
HANGUL = re.compile("[\uac00-\ud7a3]")


def test_the_four_notes_have_a_lesson_each_and_a_fifth_exists() -> None:
    by_id = {lesson.id: lesson for lesson in LESSONS}
    for lesson_id, note in CURRICULUM.items():
        assert by_id[lesson_id].note == note
        assert 6 <= len(by_id[lesson_id].steps) <= 12, lesson_id
    assert len(by_id) >= 5, "the fifth, short lesson proves a lesson is one file"
    assert [x.id for x in LESSONS][:4] == list(CURRICULUM), "listed in the curriculum's order"
    for lesson in LESSONS:  # every note named has its words in the page's tables
        assert f"lessons.notes.{lesson.note.removesuffix('.txt')}" in table("en")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_both_languages_have_the_same_steps_and_questions(lesson) -> None:
    for lang in LANGUAGES:
        assert lesson.title[lang] and lesson.summary[lang]
        for step in lesson.steps:
            assert step.title[lang] and step.text[lang], (step.number, lang)
            if step.question is not None:
                assert step.question.prompt[lang] and step.question.explain[lang]
    for step in lesson.steps:  # the Korean is Korean, not a copy of the English
        assert HANGUL.search(step.text["ko"]) and step.text["ko"] != step.text["en"]
        if step.question is not None:
            assert HANGUL.search(step.question.prompt["ko"])


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_every_step_names_only_its_rooms_link_fields_and_shows_something(lesson) -> None:
    for step in lesson.steps:
        assert set(step.fields()) <= set(ROOMS[step.room].fields), step.number
        assert step.expect, f"step {step.number} declares what its room must show"
        assert (ROOT / ROOMS[step.room].script).is_file()


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_link_fields_are_the_rooms_own(room: str) -> None:
    """The lessons' fields are the room's own declaration (torchatlas/<room>/link.py), and
    the room's page reads that declaration: a renamed link field cannot leave a lesson
    pointing at a name the room no longer reads (the session prefixes are checked on the
    rendered rooms, tests/app/test_lessons.py)."""
    spec = link_of(room)
    derived = ROOMS[room]
    assert derived.spec is spec and derived.session_prefixes == (spec.session_prefix,)
    assert {*derived.fields, *filter(None, [derived.source_field])} == set(spec.names)
    state = (ROOT / "components" / room / "state.py").read_text()
    assert re.search(rf"from torchatlas\.{room}(\.link import LINK| import link)", state), room


def test_a_step_value_the_room_would_not_read_is_the_lessons_error() -> None:
    """Values are checked with the room's own link rules, not only the names (issue 23): a
    digit that is not ASCII, a section the room does not have."""
    lesson = (ROOT / "assets" / "lessons" / "broadcasting.toml").read_text()
    assert parse_lesson(lesson, "broadcasting").steps
    good = 'link = { b_sec = "broadcasting", b_shapes = "(2, 3, 5, 5) (3, 1, 1)" }'
    assert good in lesson
    for field, bad in (
        ("b_shapes", 'link = { b_sec = "broadcasting", b_shapes = "(2, ②) (2,)" }'),
        ("b_sec", 'link = { b_sec = "nowhere", b_shapes = "(2, 3, 5, 5) (3, 1, 1)" }'),
    ):
        with pytest.raises(LessonError) as caught:
            parse_lesson(lesson.replace(good, bad, 1), "broadcasting")
        assert caught.value.code == "bad_link_value" and caught.value.params["field"] == field


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_every_answer_is_torchs_answer_now(lesson) -> None:
    """The loader picked the option equal to the fact; asked again, torch agrees, and it is
    the only option that does."""
    for step in lesson.steps:
        question = step.question
        if question is None or question.kind != "fact":  # other kinds: test_lesson_kinds.py
            continue
        value = evaluate(question.fact, {k: _thawed(v) for k, v in question.args})
        assert question.options[question.answer] == value
        assert question.options.count(value) == 1
        for expectation in step.expect:
            fresh = evaluate(expectation.fact, {k: _thawed(v) for k, v in expectation.args})
            assert fresh == expectation.value


def _thawed(value):
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


# --------------------------------------------------------------------------- facts vs torch
# Each fact a lesson uses, beside the plain torch that answers it (written out here).


def test_chain_facts_match_plain_torch() -> None:
    a = torch.tensor(list(range(9)))
    c = a.view(3, 3)[1:, 1:]
    args = {"shape": [9], "ops": [".view(3, 3)", "[1:, 1:]"]}
    assert evaluate("tensor_size", args) == str(tuple(c.size()))
    assert evaluate("tensor_stride", args) == str(c.stride())
    assert evaluate("tensor_offset", args) == str(c.storage_offset())
    assert evaluate("tensor_contiguous", args) == str(c.is_contiguous())
    assert evaluate("tensor_values", args) == str(c.reshape(-1).tolist())
    assert evaluate("shares_storage", args) == "True"
    t = torch.ones(3, 4, 5).transpose(0, 2)
    got = evaluate("tensor_stride", {"shape": [3, 4, 5], "ops": [".transpose(0, 2)"]})
    assert got == str(t.stride())
    assert evaluate("tensor_size", {"shape": [3, 2], "ops": [".t()", ".view(-1)"]}) == "error"
    expanded = torch.zeros(3).unsqueeze(0).expand(4, 3)
    got = evaluate("tensor_stride", {"shape": [3], "ops": [".unsqueeze(0)", ".expand(4, 3)"]})
    assert got == str(expanded.stride())


def test_dtype_facts_match_plain_torch() -> None:
    pair = torch.rand(5, dtype=torch.double) * torch.rand(5).to(torch.short)
    assert evaluate("result_dtype", {"left": "float64", "right": "int16"}) == "float64"
    assert str(pair.dtype) == "torch.float64"
    a = torch.tensor(list(range(9)))
    assert evaluate("unary_dtype", {"op": "cos", "dtype": "int64"}) == str(
        torch.cos(a).dtype
    ).removeprefix("torch.")
    with pytest.raises(RuntimeError):
        a.clone().cos_()
    assert evaluate("inplace_unary", {"op": "cos", "dtype": "int64"}) == "error"
    assert evaluate("inplace_unary", {"op": "cos", "dtype": "float32"}) == "ok"


def test_autograd_facts_match_plain_torch() -> None:
    x, y = torch.randn(5, 5), torch.randn(5, 5)
    z = torch.randn(5, 5, requires_grad=True)
    a = x + y
    b = a + z
    assert evaluate("requires_grad", {"scenario": "propagation", "name": "a"}) == str(
        a.requires_grad
    )
    assert evaluate("requires_grad", {"scenario": "propagation", "name": "b"}) == str(
        b.requires_grad
    )
    w = torch.ones(3, requires_grad=True)
    for _ in range(2):
        (w * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    got = evaluate("grad_after_backward", {"scenario": "accumulate", "name": "w"})
    assert got == str(w.grad.tolist())
    assert evaluate("backward_outcome", {"scenario": "inplace_trap"}) == "error"


def test_model_facts_match_plain_torch() -> None:
    from torchvision.models import resnet18

    model = resnet18()
    for p in model.parameters():
        p.requires_grad = False
    model.fc = torch.nn.Linear(512, 100)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert evaluate("trainable_after_freeze", {"out_features": 100}) == str(trainable)
    conv = torch.nn.Conv2d(3, 5, 2)
    args = {"in_channels": 3, "out_channels": 5, "kernel": 2, "shape": [2, 3, 10, 10]}
    assert evaluate("conv_output_shape", args) == str(tuple(conv(torch.rand(2, 3, 10, 10)).shape))
    layer = torch.nn.Linear(2, 2)
    assert evaluate("to_returns_same", {"kind": "module"}) == str(layer.to(torch.float64) is layer)
    assert evaluate("sgd_update", {"weight": 1.0, "grad": 0.5, "lr": 0.1}) == "0.95"
    assert evaluate("parameter_count", {"kind": "plain"}) == "0"
    assert evaluate("parameter_count", {"kind": "nn_linear"}) == str(
        sum(p.numel() for p in torch.nn.Linear(3, 2).parameters())
    )


def test_every_registered_fact_runs_on_some_lesson_or_is_documented() -> None:
    used = {
        item.fact
        for lesson in LESSONS
        for step in lesson.steps
        for item in (*step.expect, *[q for q in [step.question] if q and q.kind == "fact"])
    }
    assert used <= set(FACTS)


# --------------------------------------------------------------------------- refusals


def _lesson(steps: str, *, ko: bool = True) -> str:
    korean = '[ko]\ntitle = "제목"\nsummary = "요약"\n' if ko else ""
    return f'note = "n.txt"\nminutes = 3\n[en]\ntitle = "T"\nsummary = "S"\n{korean}{steps}'


STEP = """
[[steps]]
room = "strides"
link = {{ s_shape = "9", s_ops = [".view(3, 3)"] }}
expect = [
  {{ probe = "strides.numbers", fact = "tensor_stride", args = {{ shape = [9], ops = [{op}] }} }},
]
[steps.en]
title = "t"
text = "x"
[steps.ko]
title = "제"
text = "내용"
[steps.question]
fact = "tensor_stride"
args = {{ shape = [9], ops = [{op}] }}
options = [{options}]
[steps.question.en]
prompt = "p"
explain = "e"
[steps.question.ko]
prompt = "질문"
explain = "설명"
"""


GOOD = STEP.format(op='".view(3, 3)"', options='"(1, 3)", "(3, 1)"')


def test_a_good_file_loads_and_its_answer_is_computed() -> None:
    lesson = parse_lesson(_lesson(GOOD), "ok")
    assert lesson.step(1).question.value == "(3, 1)"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (STEP.format(op='".view(3, 3)"', options='"(1, 3)", "(2, 1)"'), "answer_not_an_option"),
        (STEP.format(op="\"__import__('os')\"", options='"(1, 3)", "(3, 1)"'), "fact_bad_op"),
        (STEP.format(op='".view(3, 3)", ".numpy()"', options='"(1, 3)", "(3, 1)"'), "fact_bad_op"),
        (STEP.format(op='".view(3, 3)"', options='"(3, 1)", "(3, 1)"'), "bad_options"),
        (GOOD.replace("s_shape", "s_secret"), "not_a_link_field"),
        (GOOD.replace('fact = "tensor_stride"\nargs', 'fact = "eval"\nargs'), "fact_unknown_fact"),
        (GOOD.replace('probe = "strides.numbers"', 'probe = "shapes.layer"'), "bad_probe"),
        (GOOD.replace('room = "strides"', 'room = "kitchen"'), "unknown_room"),
        (GOOD.replace("[steps.ko]\ntitle", "[steps.ko]\nheadline"), "unknown_keys"),
        (GOOD.replace('room = "strides"', 'room = "strides"\nhide = ["tally"]'), "bad_hide"),
        (GOOD.replace('room = "strides"', 'room = "strides"\nhide = "room"'), "bad_hide"),
        # what the narrative says at the reveal: in every language, or in none
        (GOOD.replace('text = "x"', 'text = "x"\nafter = "y"'), "missing_text"),
        (GOOD.replace('text = "내용"', 'text = "내용"\nafter = "답"'), "unknown_keys"),
    ],
)
def test_a_bad_file_is_refused_with_a_code(text: str, code: str) -> None:
    with pytest.raises(LessonError) as refused:
        parse_lesson(_lesson(text), "bad")
    assert refused.value.code == code


def test_a_step_keeps_its_room_and_the_answers_sentences_for_the_reveal() -> None:
    text = GOOD.replace('room = "strides"', 'room = "strides"\nhide = ["room"]')
    text = text.replace('text = "x"', 'text = "x"\nafter = "y"')
    text = text.replace('text = "내용"', 'text = "내용"\nafter = "답"')
    step = parse_lesson(_lesson(text), "ok").step(1)
    assert step.hides_room and step.after == {"en": "y", "ko": "답"}
    assert step.narrative("en", False) == "x" and step.narrative("en", True) == "x\n\ny"
    no_question = text[: text.index("[steps.question]")]
    with pytest.raises(LessonError) as refused:
        parse_lesson(_lesson(no_question), "bad")
    assert refused.value.code == "hide_without_question"


def test_a_missing_language_and_too_many_steps_are_refused() -> None:
    step = GOOD
    with pytest.raises(LessonError) as refused:
        parse_lesson(_lesson(step, ko=False), "x")
    assert refused.value.code == "missing_language"
    with pytest.raises(LessonError) as refused:
        parse_lesson(_lesson(step * 13), "x")
    assert refused.value.code == "bad_steps"


@pytest.mark.parametrize(
    "op",
    ["__class__", ".__class__()", ".view(n)", ".numpy()", "[x > 1]", ".view(2**70)", "; 1"],
)
def test_ops_are_parsed_never_evaluated(op: str) -> None:
    with pytest.raises(FactError):
        parse_op(op)


def test_every_lesson_file_is_in_the_folder_the_app_reads() -> None:
    assert sorted(p.stem for p in LESSONS_DIR.glob("*.toml")) == sorted(x.id for x in LESSONS)
    assert all(x.order < 100 for x in LESSONS)


# --------------------------------------------------------------------------- summary


def test_summary_scores_first_answers_and_lists_steps_to_revisit() -> None:
    lesson = next(x for x in LESSONS if x.id == "broadcasting")
    answers = {1: lesson.step(1).question.answer, 2: (lesson.step(2).question.answer + 1) % 4}
    result = summary(lesson, answers)
    assert (result.right, result.asked, result.answered) == (1, 3, 2)
    assert result.revisit == (2, 3)  # step 2 wrong, step 3 unanswered
