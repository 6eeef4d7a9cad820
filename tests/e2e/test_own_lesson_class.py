"""A teacher's own lesson in a real class, in Chromium: the teacher writes a three-step lesson
on the author page, in English and Korean (a fact question on a room's link pasted into a
step, a question on the teacher's own code, a code exercise on a room's view added from the
room's sidebar), saves it; the exported file is :data:`LESSON`, and imported back it exports
the same; a class starts with it;
three phones (one in Korean) join, answer the two option questions and the exercise with code
that passes, fails and raises; the projector shows the code tally (never a student's code);
the reveal reaches every phone; the CSV holds each student's verdict. Screenshot: the
projector's tally of code answers.

Waits are Playwright ``expect()`` on what the page shows, never sleeps."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.e2e.conftest import assert_no_error, save_screenshot, wait_for_app
from tests.e2e.test_classmode import (
    FOLLOW_TIMEOUT_MS,
    PHONE,
    PROJECTOR,
    Class,
    expect_tally,
    move_and_follow,
    people,  # noqa: F401  (the fixture)
    press,
)
from torchatlas.i18n import translate
from torchatlas.lessons import parse_lesson

LESSON = """note = "teacher"
minutes = 10

[en]
title = "Strides, three ways"
summary = "A fact, your own code, then write it."

[ko]
title = "stride 세 가지"
summary = "사실, 내 코드, 그리고 직접 쓰기."

[[steps]]
room = "strides"
link = { s_shape = "9", s_dtype = "int64", s_ops = [".view(3, 3)"] }

[steps.en]
title = "A view"
text = "Look at the strides."

[steps.ko]
title = "view"
text = "stride를 보세요."

[steps.question]
fact = "tensor_stride"
args = { shape = [9], ops = [".view(3, 3)"] }
options = ["(1, 3)", "(3, 1)", "(9, 1)"]

[steps.question.en]
prompt = "What is the stride of a (3, 3) view of 9 numbers?"
explain = "Rows are 3 apart."

[steps.question.ko]
prompt = "숫자 9개의 (3, 3) view의 stride는?"
explain = "행은 3칸씩 떨어져 있습니다."

[[steps]]
room = "strides"
link = { s_shape = "3, 4" }

[steps.en]
title = "A transpose"
text = "Predict it from the code."

[steps.ko]
title = "전치"
text = "코드로 예측하세요."

[steps.question]
kind = "predict"
code = "x = torch.arange(12).view(3, 4)\\ny = x.t()"
ask = "stride"
name = "y"
options = ["(4, 1)", "(1, 4)", "(3, 1)"]

[steps.question.en]
prompt = "What is y.stride()?"
explain = "A transpose swaps the strides."

[steps.question.ko]
prompt = "y.stride()는?"
explain = "전치는 stride를 맞바꿉니다."

[[steps]]
room = "strides"

[steps.en]
title = "Your turn"
text = "Write a view."

[steps.ko]
title = "직접 해 보기"
text = "view를 쓰세요."

[steps.question]
kind = "exercise"
setup = "x = torch.arange(12.)"
solution = "y = x.view(2, 6)"
checks = [
  { template = "shape", name = "y", expected = "(2, 6)" },
  { template = "shares_storage", name = "y", expected = "x" },
]

[steps.question.en]
prompt = "Make y, a (2, 6) view of x."
explain = "view copies nothing."

[steps.question.ko]
prompt = "x의 (2, 6) view인 y를 만드세요."
explain = "view는 아무것도 복사하지 않습니다."
"""


def _fill(page: Page, key: str, text: str) -> None:
    """Type into the box keyed ``key`` and commit it (Tab: a Streamlit box sends its value
    when it loses focus)."""
    box = page.locator(f".st-key-{key} textarea, .st-key-{key} input").first
    box.fill(text)
    box.press("Tab")
    wait_for_app(page)


def _choose(page: Page, key: str, option: str) -> None:
    """Pick ``option`` in the select box keyed ``key``, typed to filter a long list (only the
    options in view are drawn)."""
    page.locator(f".st-key-{key}").get_by_role("combobox").click()
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_app(page)


def _uids(page: Page) -> list[str]:
    """The draft's steps' widget ids, in order (each step's room picker is ``aw_room_<id>``)."""
    classes = page.locator("[class*='st-key-aw_room_']").evaluate_all(
        "(boxes) => boxes.map(box => box.className)"
    )
    return [re.search(r"st-key-aw_room_(\w+)", name).group(1) for name in classes]


def _texts(page: Page, keys: str, texts: dict[str, tuple[str, str]]) -> None:
    """Both languages' texts: ``texts[prefix] = (English, Korean)``."""
    for prefix, (english, korean) in texts.items():
        _fill(page, f"{prefix}_{keys}_en", english)
        _fill(page, f"{prefix}_{keys}_ko", korean)


def _add_room_view(page: Page) -> None:
    """The strides room as it opens, added as the lesson's next step from the room's sidebar,
    then back to the author page (sidebar links: the same session keeps the draft)."""
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_role("link", name=translate("app.rooms.strides.title", "en")).click()
    wait_for_app(page)
    page.locator(".st-key-author_add_view button").click()
    expect(page.get_by_text(translate("author.save.added_view", "en", number=3))).to_be_visible()
    sidebar.get_by_role("link", name=translate("author.nav", "en")).click()
    wait_for_app(page)


def _write_and_save(page: Page) -> str:
    """Write :data:`LESSON` on the author page, step by step, and save it; the lesson's code."""
    page.locator(".st-key-aw_languages").get_by_role("combobox").click()
    page.get_by_role("option", name="한국어", exact=True).click()
    wait_for_app(page)
    _fill(page, "aw_title_en", "Strides, three ways")
    _fill(page, "aw_title_ko", "stride 세 가지")
    _fill(page, "aw_summary_en", "A fact, your own code, then write it.")
    _fill(page, "aw_summary_ko", "사실, 내 코드, 그리고 직접 쓰기.")
    page.locator(".st-key-author_add button").click()  # step 2, after the blank step 1
    wait_for_app(page)
    _add_room_view(page)  # step 3
    first, second, third = _uids(page)
    link = {"s_shape": "9", "s_dtype": "int64", "s_ops": ".view(3, 3)"}
    _fill(page, f"aw_link_{first}", f"http://localhost/strides?{urlencode(link)}")
    _fill(page, f"aw_link_{second}", f"http://localhost/strides?{urlencode({'s_shape': '3, 4'})}")

    _texts(
        page,
        first,
        {"aw_st": ("A view", "view"), "aw_sx": ("Look at the strides.", "stride를 보세요.")},
    )
    _choose(page, f"aw_kind_{first}", translate("kinds.fact.label", "en"))
    _choose(page, f"aw_fact_{first}", "tensor_stride")
    _fill(page, f"aw_args_{first}", '{"shape": [9], "ops": [".view(3, 3)"]}')
    _fill(page, f"aw_opts_{first}", "(1, 3)\n(3, 1)\n(9, 1)")
    _texts(
        page,
        first,
        {
            "aw_qp": (
                "What is the stride of a (3, 3) view of 9 numbers?",
                "숫자 9개의 (3, 3) view의 stride는?",
            ),
            "aw_qe": ("Rows are 3 apart.", "행은 3칸씩 떨어져 있습니다."),
        },
    )

    _texts(
        page,
        second,
        {
            "aw_st": ("A transpose", "전치"),
            "aw_sx": ("Predict it from the code.", "코드로 예측하세요."),
        },
    )
    _choose(page, f"aw_kind_{second}", translate("kinds.predict.label", "en"))
    _fill(page, f"aw_code_{second}", "x = torch.arange(12).view(3, 4)\ny = x.t()")
    _choose(page, f"aw_ask_{second}", translate("kinds.predict.ask.stride", "en", name="x"))
    _fill(page, f"aw_name_{second}", "y")
    _fill(page, f"aw_opts_{second}", "(4, 1)\n(1, 4)\n(3, 1)")
    _texts(
        page,
        second,
        {
            "aw_qp": ("What is y.stride()?", "y.stride()는?"),
            "aw_qe": ("A transpose swaps the strides.", "전치는 stride를 맞바꿉니다."),
        },
    )

    _texts(
        page,
        third,
        {"aw_st": ("Your turn", "직접 해 보기"), "aw_sx": ("Write a view.", "view를 쓰세요.")},
    )
    _choose(page, f"aw_kind_{third}", translate("kinds.exercise.label", "en"))
    _fill(page, f"aw_setup_{third}", "x = torch.arange(12.)")
    _fill(page, f"aw_solution_{third}", "y = x.view(2, 6)")
    for number, (template, name, expected) in enumerate(
        (("shape", "y", "(2, 6)"), ("shares_storage", "y", "x"))
    ):
        label = translate(f"kinds.exercise.template.{template}", "en")
        _choose(page, f"aw_ct_{third}_{number}", label)
        _fill(page, f"aw_cn_{third}_{number}", name)
        _fill(page, f"aw_ce_{third}_{number}", expected)
    _texts(
        page,
        third,
        {
            "aw_qp": ("Make y, a (2, 6) view of x.", "x의 (2, 6) view인 y를 만드세요."),
            "aw_qe": ("view copies nothing.", "view는 아무것도 복사하지 않습니다."),
        },
    )
    page.locator(".st-key-author_save button").click()
    wait_for_app(page)
    saved = page.get_by_text(re.compile(r"Saved\. Lesson code: [A-Z2-9]{7}"))
    expect(saved).to_be_visible(timeout=90_000)
    return re.search(r"[A-Z2-9]{7}", saved.inner_text()).group(0)


def _join(page: Page, code: str, nickname: str) -> None:
    page.locator(".st-key-classmode_join_code input").fill(code)
    page.locator(".st-key-classmode_join_name input").fill(nickname)
    page.locator(".st-key-classmode_join_name input").press("Tab")
    page.locator(".st-key-classmode_join_button button").click()
    expect(page.locator(".st-key-classmode_bar")).to_be_visible(timeout=60_000)
    wait_for_app(page)


def _pick(page: Page, option: str) -> None:
    question = page.locator(".st-key-classmode_question")
    expect(question.get_by_test_id("stRadio")).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    question.get_by_test_id("stRadio").get_by_text(option, exact=True).click()
    wait_for_app(page)
    question.get_by_role("button").first.click()
    wait_for_app(page)


def _code(page: Page, code: str, step: int, source: str, status: str, lang: str) -> None:
    key = f"classmode_q_{code}_{step}"
    box = page.locator(f".st-key-{key}_code textarea")
    expect(box).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    box.fill(source)
    page.locator(f".st-key-{key}_run button").click()
    wait_for_app(page)
    title = translate(f"kinds.exercise.status.{status}", lang)
    expect(page.locator(".st-key-classmode_question").get_by_text(title).first).to_be_visible(
        timeout=60_000
    )


def _export(page: Page) -> str:
    with page.expect_download() as download:
        page.locator(".st-key-author_export button").click()
    return download.value.path().read_text(encoding="utf-8")


def _import(page: Page, file: Path) -> None:
    page.get_by_text(translate("author.start.header", "en")).click()
    page.locator(".st-key-author_import input[type='file']").set_input_files(str(file))
    wait_for_app(page)
    page.locator(".st-key-author_imp button").click()
    wait_for_app(page)


def test_a_teachers_own_lesson_runs_a_class(app_server: str, tmp_path: Path, people: Class) -> None:  # noqa: F811
    author = people.open(f"{app_server}/author", {"width": 1400, "height": 1000})
    code = _write_and_save(author)
    exported = _export(author)
    written = parse_lesson(exported, "mine", all_languages=False)
    assert written == parse_lesson(LESSON, "mine", all_languages=False)
    file = tmp_path / "strides.toml"
    file.write_text(exported, encoding="utf-8")
    _import(author, file)  # the exported file, imported: the same lesson
    assert parse_lesson(_export(author), "mine", all_languages=False) == written

    teacher = people.open(f"{app_server}/class?start=u_{code.lower()}", PROJECTOR)
    teacher.get_by_role("button", name="Start the class").click()
    code_box = teacher.get_by_test_id("classmode-code")
    expect(code_box).to_be_visible(timeout=60_000)
    wait_for_app(teacher)
    class_code = re.sub(r"\W", "", code_box.inner_text())
    phones = [
        people.open(f"{app_server}/class?class={class_code}", PHONE),
        people.open(f"{app_server}/class?class={class_code}", PHONE),
        people.open(f"{app_server}/class?class={class_code}&lang=ko", PHONE, lang="ko"),
    ]
    for phone, name in zip(phones, ("Ada", "Bo", "Cy"), strict=True):
        _join(phone, class_code, name)
    expect_tally(teacher, joined=3)

    move_and_follow(teacher, "Start the lesson", phones, "strides")
    press(teacher, "Open the question")
    for phone in phones:
        _pick(phone, "(3, 1)")
    expect_tally(teacher, joined=3, answered=3)
    press(teacher, "Reveal the answer")
    move_and_follow(teacher, "Next step", phones, "strides")
    press(teacher, "Open the question")
    for phone in phones:  # torch's answer to the teacher's code, among the options
        _pick(phone, "(1, 4)")
    expect_tally(teacher, joined=3, answered=3)
    press(teacher, "Reveal the answer")
    move_and_follow(teacher, "Next step", phones, "strides")
    press(teacher, "Open the question")
    _code(phones[0], class_code, 3, "y = x.view(2, 6)", "pass", "en")
    _code(phones[1], class_code, 3, "y = x.clone().view(2, 6)", "fail", "en")
    _code(phones[2], class_code, 3, "y = x.view(5, 5)", "error", "ko")
    tally = translate("kinds.exercise.tally.counts", "en", passed=1, failed=1, errors=1,
                      answered=3, joined=3)  # fmt: skip
    expect(teacher.get_by_text(tally)).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    expect(teacher.get_by_text("RuntimeError: 1")).to_be_visible()
    assert "x.view(5, 5)" not in teacher.content()  # counts, never a student's code
    assert_no_error(teacher)
    save_screenshot(teacher, "own_lesson_code_tally", max_height=PROJECTOR["height"])
    press(teacher, "Reveal the answer")
    for phone, lang in zip(phones, ("en", "en", "ko"), strict=True):
        explain = {"en": "view copies nothing.", "ko": "view는 아무것도 복사하지 않습니다."}
        expect(phone.get_by_text(explain[lang])).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
        assert_no_error(phone)
    # Open the summary once the projector's page is idle, and see the CSV button before the
    # download's own 30 s start: under a full suite's load the download once never started
    # (not seen alone, nor beside two busy cores).
    wait_for_app(teacher)
    teacher.get_by_text(translate("classmode.teacher.summary", "en")).click()
    csv_button = teacher.locator(".st-key-classmode_csv button")
    expect(csv_button).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    # Twice now, in a full suite's run, a press started no download at all (the cause is not
    # known yet); a teacher would press again, and so does this test, at most three times.
    csv_file = None
    for _ in range(3):
        try:
            with teacher.expect_download(timeout=20_000) as download:
                csv_button.click()
        except PlaywrightTimeoutError:
            continue
        csv_file = download.value.path()
        break
    assert csv_file is not None, "three presses of the CSV button downloaded nothing"
    csv = csv_file.read_text(encoding="utf-8-sig")
    rows = {line.split(",")[0]: line for line in csv.splitlines() if line}
    status = {key: translate(f"kinds.exercise.status.{key}", "en") for key in ("pass", "error")}
    assert status["pass"] in rows["Ada"] and status["error"] in rows["Cy"], csv
