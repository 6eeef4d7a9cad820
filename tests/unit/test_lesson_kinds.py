"""Question kinds as one registry (torchatlas.lessons.kinds), lessons in the languages they
are written in, and the export to TOML: every repository lesson exported and read back is the
same lesson, and so is a teacher's lesson of every kind."""

from __future__ import annotations

import pytest

from torchatlas.i18n import LANGUAGES, has_key
from torchatlas.lessons import LessonError, load_all, parse_lesson
from torchatlas.lessons.export import export_lesson, lesson_table
from torchatlas.lessons.kinds import CODE, KINDS, OPTION, PASSED, is_right
from torchatlas.lessons.kinds.exercise import ExerciseQuestion

ONE_STEP = """
note = "teacher"
minutes = 5

[{lang}]
title = "Views"
summary = "A view shares storage."

[[steps]]
room = "strides"
link = {{ s_shape = "2, 3" }}

[steps.{lang}]
title = "A view"
text = "Look at the strides."
{question}
"""

EXERCISE = """
[steps.question]
kind = "exercise"
setup = "x = torch.arange(12.)"
solution = "y = x.view(2, 6)"
checks = [
  {{ template = "shape", name = "y", expected = "(2, 6)" }},
  {{ template = "shares_storage", name = "y", expected = "x" }},
]

[steps.question.{lang}]
prompt = "Make y, a (2, 6) view of x."
explain = "view reuses x's storage."
"""


@pytest.mark.parametrize("lesson", load_all(), ids=lambda lesson: lesson.id)
def test_every_repository_lesson_round_trips_through_its_export(lesson) -> None:
    text = export_lesson(lesson)
    assert parse_lesson(text, lesson.id) == lesson
    assert lesson_table(parse_lesson(text, lesson.id)) == lesson_table(lesson)


def test_every_kind_is_declared_with_its_texts_in_every_language() -> None:
    assert set(KINDS) == {"fact", "predict", "exercise"}
    for name, kind in KINDS.items():
        assert kind.name == name and kind.answered_with in (OPTION, CODE)
        assert "kind" not in kind.keys
        for lang in LANGUAGES:
            assert has_key(f"kinds.{name}.label", lang), (name, lang)


def test_a_lesson_in_one_language_reads_it_everywhere_and_exports_only_it() -> None:
    text = ONE_STEP.format(lang="ko", question="")
    with pytest.raises(LessonError) as refused:
        parse_lesson(text, "mine")  # a repository lesson needs every language
    assert refused.value.code == "missing_language"
    lesson = parse_lesson(text, "mine", all_languages=False)
    assert lesson.languages == ("ko",)
    assert lesson.title == {"en": "Views", "ko": "Views"}
    exported = export_lesson(lesson)
    assert "[ko]" in exported and "[en]" not in exported
    assert parse_lesson(exported, "mine", all_languages=False) == lesson


def test_an_exercise_reads_and_exports_exactly_without_running_anything() -> None:
    text = ONE_STEP.format(lang="en", question=EXERCISE.format(lang="en"))
    lesson = parse_lesson(text, "mine", all_languages=False)
    question = lesson.step(1).question
    assert isinstance(question, ExerciseQuestion)
    assert question.options == () and question.answer is None
    assert [check.template for check in question.checks] == ["shape", "shares_storage"]
    assert parse_lesson(export_lesson(lesson), "mine", all_languages=False) == lesson
    assert is_right(question, PASSED) and not is_right(question, 0)


@pytest.mark.parametrize(
    ("question", "code"),
    [
        ('[steps.question]\nkind = "quiz"\n[steps.question.en]\nprompt = "a"\nexplain = "b"\n',
         "unknown_kind"),
        (EXERCISE.format(lang="en").replace('kind = "exercise"', 'kind = "exercise"\nfact = "x"'),
         "unknown_keys"),
        (EXERCISE.format(lang="en").replace('name = "y", expected = "(2, 6)"', 'name = "1y"'),
         "bad_name"),
        (EXERCISE.format(lang="en").replace("template = \"shape\"", "template = \"size\""),
         "unknown_check"),
        (EXERCISE.format(lang="en").replace('solution = "y = x.view(2, 6)"\n', ""),
         "missing_text"),
    ],
)  # fmt: skip
def test_a_question_outside_its_kind_is_refused_with_a_code(question: str, code: str) -> None:
    text = ONE_STEP.format(lang="en", question=question)
    with pytest.raises(LessonError) as refused:
        parse_lesson(text, "mine", all_languages=False)
    assert refused.value.code == code
    assert "steps[1].question" in refused.value.params["where"]


def test_every_repository_exercise_is_solved_by_its_solution_in_the_sandbox() -> None:
    """The repository's lessons load without running code; here every exercise's solution
    runs in the sandbox and passes its checks, and its starter does not."""
    from torchatlas.lessons.kinds import Context
    from torchatlas.lessons.kinds.exercise import grade_answer
    from torchatlas.lessons.loader import LESSONS_DIR

    exercises = 0
    for lesson in load_all():
        text = (LESSONS_DIR / f"{lesson.id}.toml").read_text(encoding="utf-8")
        assert parse_lesson(text, lesson.id, context=Context(verify=True)) == lesson
        for step in lesson.steps:
            if isinstance(step.question, ExerciseQuestion):
                exercises += 1
                starter = grade_answer(step.question, step.question.starter or "pass")
                assert starter.value is not None and starter.value.status != "pass", step.number
    assert exercises >= 2  # the book's chapter-3 exercises
