"""The author page's widgets: where to start from, the lesson's texts, its steps (a room in a
state, a narrative, a question of any kind in :data:`~torchatlas.lessons.kinds.KINDS`), and
saving and sharing. Every widget writes straight into the draft (``state.draft()``), which is
the lesson's TOML data, so what is exported, saved and checked is what is on screen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import streamlit as st

from components.author import draw, state
from components.i18n import language, t
from torchatlas.classmode import ClassError
from torchatlas.i18n import LANGUAGES
from torchatlas.lessons import Lesson, LessonError, load_all
from torchatlas.lessons.facts import FACTS
from torchatlas.lessons.kinds import KINDS
from torchatlas.lessons.rooms import ROOMS

MAX_TEXT = 2000
MAX_CODE = 2000
# The texts each part has in every language: (field, widget key prefix, label key).
LESSON_TEXTS = (("title", "aw_title", "author.lesson.title"),
                ("summary", "aw_summary", "author.lesson.summary"))  # fmt: skip
STEP_TEXTS = (("title", "aw_st", "author.steps.title"), ("text", "aw_sx", "author.steps.text"))
QUESTION_TEXTS = (("prompt", "aw_qp", "author.question.prompt"),
                  ("explain", "aw_qe", "author.question.explain"))  # fmt: skip


def _bound(table: dict[str, Any], field: str, value: Any) -> None:
    """Keep a widget's value in the draft (an empty text removes an optional field)."""
    if value in ("", None):
        table.pop(field, None)
    else:
        table[field] = value


def _text(
    table: dict[str, Any], field: str, key: str, label: str, *, area: bool = False, limit: int
) -> str:
    current = table.get(field, "")
    if key not in st.session_state:
        st.session_state[key] = current if isinstance(current, str) else ""
    widget = st.text_area if area else st.text_input
    value = widget(label, key=key, max_chars=limit)
    _bound(table, field, value)
    return value


def _language_texts(
    node: dict[str, Any], languages: list[str], keys: str, fields: tuple[tuple[str, str, str], ...]
) -> None:
    """Each language's texts of ``node`` (its ``{lang: {field: text}}`` tables): for each of
    ``fields`` (field, widget key prefix, label key), a box keyed ``<prefix>_<keys>_<lang>``;
    a title is one line, the others areas."""
    for lang in languages:
        texts = node.setdefault(lang, {})
        for field, prefix, label in fields:
            key = "_".join(part for part in (prefix, keys, lang) if part)
            short = field == "title"
            _text(texts, field, key, t(label, lang=LANGUAGES[lang]), area=not short,
                  limit=120 if short else MAX_TEXT)  # fmt: skip


def refusal(error: LessonError | ClassError) -> None:
    """A lesson or store refusal as one card: where (a step, a question) and what to do."""
    key, params = state.error_words(error)
    if key.startswith("author.errors.fact_"):
        key = "author.errors.fact"
    message = t(key, **params) if key in _known() else t("author.errors.generic", code=key)
    where = params.get("where")
    if isinstance(where, str) and where:
        message = t("author.errors.where", where=draw.where_words(where), message=message)
    st.error(message, icon=":material/block:")


def _known() -> set[str]:
    from torchatlas.i18n import table

    return set(table("en"))


def start_panel() -> None:
    """Where the lesson starts from: blank, a repository lesson, a saved one, a file."""
    with st.expander(t("author.start.header"), expanded=False):
        st.caption(t("author.start.replace_warning"))
        lessons = load_all()
        lang = language()
        if st.button(t("author.start.blank"), key="author_blank"):
            st.session_state[state.DRAFT] = state.blank_draft(lang)
            st.session_state.pop(state.EDITING, None)
            _forget_widgets()
            st.rerun()
        pick = st.selectbox(
            t("author.start.builtin_pick"),
            options=[lesson.id for lesson in lessons],
            format_func=lambda lesson_id: next(
                lesson.title[lang] for lesson in lessons if lesson.id == lesson_id
            ),
            key="author_builtin",
        )
        if st.button(t("author.start.builtin"), key="author_builtin_copy"):
            state.start_from_builtin(pick)
            _forget_widgets()
            st.rerun()
        code = st.text_input(t("author.start.copy_code"), max_chars=7, key="author_copy_code")
        if st.button(t("author.start.copy"), key="author_copy"):
            try:
                state.copy_saved(code)
            except (ClassError, LessonError) as error:
                refusal(error)
            else:
                _forget_widgets()
                st.rerun()
        upload = st.file_uploader(t("author.start.import"), type=["toml"], key="author_import")
        if upload is not None and st.button(t("author.start.import_button"), key="author_imp"):
            data = upload.getvalue()[: state.MAX_IMPORT_BYTES + 1]
            try:
                table = state.load_table(data.decode("utf-8", errors="replace"))
            except LessonError as error:
                refusal(error)
            else:
                st.session_state[state.DRAFT] = state.with_uids(table)
                st.session_state.pop(state.EDITING, None)
                _forget_widgets()
                st.rerun()


def _forget_widgets() -> None:
    """A new draft: the widgets read it afresh (their keys start with ``aw_``). The language
    picker is set to the new draft's languages outright: a browser still holding the old
    picker's value would send it back, and unticking a language drops its texts."""
    for key in [key for key in st.session_state if str(key).startswith("aw_")]:
        del st.session_state[key]
    table = st.session_state.get(state.DRAFT)
    if table is not None:
        st.session_state["aw_languages"] = state.languages_of(table) or [language()]


def lesson_panel(table: dict[str, Any]) -> list[str]:
    """The lesson's languages, titles, summaries and length; the languages written."""
    st.header(t("author.lesson.header"))
    written = state.languages_of(table) or [language()]
    st.session_state.setdefault("aw_languages", written)
    chosen = st.multiselect(
        t("author.lesson.languages"),
        options=list(LANGUAGES),
        format_func=lambda lang: LANGUAGES[lang],
        help=t("author.lesson.languages_help"),
        key="aw_languages",
    )
    chosen = [lang for lang in LANGUAGES if lang in chosen] or written
    for lang in LANGUAGES:
        if lang not in chosen:
            _drop_language(table, lang)
    _language_texts(table, chosen, "", LESSON_TEXTS)
    minutes = st.number_input(
        t("author.lesson.minutes"), 1, 120, int(table.get("minutes", 10)), key="aw_minutes"
    )
    table["minutes"] = int(minutes)
    return chosen


def _drop_language(node: Any, lang: str) -> None:
    """Untick a language: its texts leave the whole draft (steps and questions too)."""
    if isinstance(node, dict):
        node.pop(lang, None)
        for value in node.values():
            _drop_language(value, lang)
    elif isinstance(node, list):
        for value in node:
            _drop_language(value, lang)


def steps_panel(table: dict[str, Any], languages: list[str]) -> None:
    st.header(t("author.steps.header"))
    steps: list[dict[str, Any]] = table.setdefault("steps", [])
    for index, step in enumerate(list(steps)):
        title = step.get(languages[0], {}).get("title") or t("author.steps.untitled")
        with st.expander(t("author.steps.step", number=index + 1, title=title), expanded=True):
            _step_panel(steps, index, step, languages)
    _add_step_panel(languages)


def _step_panel(steps: list[dict], index: int, step: dict[str, Any], languages: list[str]) -> None:
    uid = step["_uid"]
    rooms = list(ROOMS)
    room = st.selectbox(
        t("author.steps.room"),
        options=rooms,
        index=rooms.index(step["room"]) if step.get("room") in rooms else 0,
        format_func=lambda key: t(f"app.rooms.{key}.title"),
        key=f"aw_room_{uid}",
    )
    if room != step.get("room"):
        step["room"] = room
        step.pop("link", None)
        step.pop("source", None)
    st.caption(draw.link_summary(step.get("link", {}), step.get("source")))
    st.text_input(
        t("author.steps.link"),
        key=f"aw_link_{uid}",
        help=t("author.steps.link_help"),
        on_change=_apply_link,
        args=(uid, languages[0]),
    )
    if st.session_state.get(f"aw_link_bad_{uid}"):
        st.warning(t("author.steps.link_bad"))
    _language_texts(step, languages, uid, STEP_TEXTS)
    _question_panel(step, uid, languages)
    up, down, remove = st.columns(3)
    if up.button(t("author.steps.up"), key=f"aw_up_{uid}", disabled=index == 0):
        steps[index - 1], steps[index] = steps[index], steps[index - 1]
        st.rerun()
    if down.button(t("author.steps.down"), key=f"aw_dn_{uid}", disabled=index == len(steps) - 1):
        steps[index + 1], steps[index] = steps[index], steps[index + 1]
        st.rerun()
    if remove.button(t("author.steps.remove"), key=f"aw_rm_{uid}", disabled=len(steps) == 1):
        steps.pop(index)
        st.rerun()


def _apply_link(uid: str, lang: str) -> None:
    """A room's address pasted into a step: its room and fields become the step's (a callback,
    so the room picker shows the new room in this very run)."""
    found = state.step_from_link(str(st.session_state.get(f"aw_link_{uid}", "")), lang)
    st.session_state[f"aw_link_bad_{uid}"] = found is None
    step = next((s for s in state.draft()["steps"] if s["_uid"] == uid), None)
    if found is None or step is None:
        return
    step["room"] = found["room"]
    step["link"] = found.get("link", {})
    step.pop("source", None)
    if "source" in found:
        step["source"] = found["source"]
    st.session_state[f"aw_room_{uid}"] = found["room"]


def _question_panel(step: dict[str, Any], uid: str, languages: list[str]) -> None:
    question = step.get("question")
    kinds = ["", *KINDS]
    current = "" if question is None else question.get("kind", "fact")
    kind = st.selectbox(
        t("author.question.kind"),
        options=kinds,
        index=kinds.index(current) if current in kinds else 0,
        format_func=lambda name: t(f"kinds.{name}.label") if name else t("author.question.none"),
        key=f"aw_kind_{uid}",
    )
    if not kind:
        step.pop("question", None)
        return
    if question is None or current != kind:
        question = {"kind": kind} if kind != "fact" else {}
        step["question"] = question
    KIND_FIELDS[kind](question, uid)
    _language_texts(question, languages, uid, QUESTION_TEXTS)


def _options(question: dict[str, Any], uid: str, label: str) -> None:
    key = f"aw_opts_{uid}"
    if key not in st.session_state:
        st.session_state[key] = "\n".join(question.get("options", []))
    lines = [line.strip() for line in st.text_area(label, key=key, max_chars=800).splitlines()]
    options = [line for line in lines if line]
    _bound(question, "options", options or None)


def _fact_fields(question: dict[str, Any], uid: str) -> None:
    facts = sorted(FACTS)
    fact = st.selectbox(
        t("author.question.fact"),
        options=facts,
        index=facts.index(question["fact"]) if question.get("fact") in facts else 0,
        key=f"aw_fact_{uid}",
    )
    question["fact"] = fact
    key = f"aw_args_{uid}"
    if key not in st.session_state:
        st.session_state[key] = json.dumps(question.get("args", {}))
    text = st.text_input(t("author.question.fact_args"), key=key, max_chars=400)
    try:
        args = json.loads(text) if text.strip() else {}
    except ValueError:
        args = None
    if isinstance(args, dict):
        _bound(question, "args", args or None)
    else:
        st.warning(t("author.errors.bad_args"))
    _options(question, uid, t("author.question.options_fact"))


def _predict_fields(question: dict[str, Any], uid: str) -> None:
    from torchatlas.lessons.code_questions import ASKS

    _text(question, "code", f"aw_code_{uid}", t("author.question.code"), area=True, limit=MAX_CODE)
    asks = list(ASKS)
    what = st.selectbox(
        t("author.question.ask"),
        options=asks,
        index=asks.index(question["ask"]) if question.get("ask") in asks else 0,
        format_func=lambda name: draw.ask_words(name),
        key=f"aw_ask_{uid}",
    )
    question["ask"] = what
    if what != "error":
        _text(question, "name", f"aw_name_{uid}", t("author.question.name"), limit=40)
    else:
        question.pop("name", None)
    if what == "shares_storage":
        _text(question, "other", f"aw_other_{uid}", t("author.question.other"), limit=40)
    else:
        question.pop("other", None)
    _options(question, uid, t("author.question.options"))


def _exercise_fields(question: dict[str, Any], uid: str) -> None:
    from torchatlas.lessons.code_questions import TEMPLATES

    _text(
        question, "setup", f"aw_setup_{uid}", t("author.question.setup"), area=True, limit=MAX_CODE
    )
    _text(
        question,
        "starter",
        f"aw_starter_{uid}",
        t("author.question.starter"),
        area=True,
        limit=MAX_CODE,
    )
    _text(
        question,
        "solution",
        f"aw_solution_{uid}",
        t("author.question.solution"),
        area=True,
        limit=MAX_CODE,
    )
    st.caption(t("author.question.checks"))
    checks = list(question.get("checks", []))
    rows: list[dict[str, str]] = []
    templates = ["", *TEMPLATES]
    for number in range(6):
        found = checks[number] if number < len(checks) else {}
        cols = st.columns([2, 1, 2])
        template = cols[0].selectbox(
            t("author.question.check_template", number=number + 1),
            options=templates,
            index=templates.index(found.get("template", "")),
            format_func=lambda name: (
                t(f"kinds.exercise.template.{name}") if name else t("author.question.check_none")
            ),
            key=f"aw_ct_{uid}_{number}",
        )
        if not template:
            continue
        name_key, expected_key = f"aw_cn_{uid}_{number}", f"aw_ce_{uid}_{number}"
        st.session_state.setdefault(name_key, found.get("name", ""))
        st.session_state.setdefault(expected_key, found.get("expected", ""))
        name = cols[1].text_input(t("author.question.check_name"), key=name_key, max_chars=40)
        expected = cols[2].text_area(
            t("author.question.check_expected"), key=expected_key, max_chars=1000, height=68
        )
        row = {"template": template, "expected": expected}
        if name:
            row["name"] = name
        rows.append(row)
    question["checks"] = rows


# Each kind's own boxes on the author page (the texts every kind has are drawn after them).
# The one place outside a kind's module that a new kind adds to: tests/app/test_author.py
# checks that every kind in KINDS has its boxes here.
KIND_FIELDS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "fact": _fact_fields,
    "predict": _predict_fields,
    "exercise": _exercise_fields,
}


def _add_step_panel(languages: list[str]) -> None:
    table = state.draft()
    full = len(table["steps"]) >= 12
    if full:
        st.caption(t("author.steps.full"))
    lessons = load_all()
    lang = language()
    options = [(lesson.id, step.number) for lesson in lessons for step in lesson.steps]
    pick = st.selectbox(
        t("author.steps.builtin_step"),
        options=options,
        format_func=lambda pair: draw.builtin_step_words(lessons, pair, lang),
        key="author_builtin_step",
    )
    left, right = st.columns(2)
    if left.button(t("author.steps.add"), key="author_add", disabled=full):
        state.add_step(state.new_step("strides", {}, languages[0]))
        st.rerun()
    if right.button(t("author.steps.add_builtin"), key="author_add_builtin", disabled=full):
        state.add_step(state.builtin_step(pick, languages))
        st.rerun()


def save_panel(table: dict[str, Any]) -> None:
    st.header(t("author.save.header"))
    editing = st.session_state.get(state.EDITING)
    if editing is not None:
        st.caption(t("author.save.editing", code=editing[0]))
    check, save = st.columns(2)
    if check.button(t("author.save.check"), key="author_check"):
        _checked(lambda on_queued: state.check(table, on_queued))
    if save.button(t("author.save.save"), type="primary", key="author_save"):
        _checked(lambda on_queued: state.save(table, on_queued)[1])
    _saved_links()
    st.download_button(
        t("author.save.export"),
        data=state.toml_of(table).encode("utf-8"),
        file_name="lesson.toml",
        mime="application/toml",
        key="author_export",
    )
    if editing is not None and st.button(t("author.save.delete"), key="author_delete"):
        try:
            state.delete_saved()
        except ClassError as error:
            refusal(error)
        else:
            st.session_state.pop(state.SAVED, None)
            st.info(t("author.save.deleted"))


def _checked(action: Callable[[Callable[[int], None]], Lesson]) -> None:
    """``action(on_queued)`` under a spinner; while one of its sandbox jobs waits in line,
    its place there (each of the lesson's code questions is one job)."""
    place = st.empty()

    def on_queued(position: int) -> None:
        if position > 0:
            place.info(t("author.save.queued", place=position), icon=":material/hourglass_top:")
        else:
            place.empty()

    with st.spinner(t("author.save.checking")):
        try:
            lesson = action(on_queued)
        except (LessonError, ClassError) as error:
            refusal(error)
            return
        finally:
            place.empty()
    st.success(
        t("author.save.checked", steps=len(lesson.steps), questions=lesson.questions),
        icon=":material/check_circle:",
    )
    for line in draw.answers_lines(lesson, language()):
        st.markdown(line)


def _saved_links() -> None:
    saved = st.session_state.get(state.SAVED)
    if saved is None:
        return
    code, key, first = saved
    st.success(t("author.save.saved_new" if first else "author.save.saved", code=code))
    lesson_id = state.lesson_id_of(code)
    st.markdown(f"{t('author.save.share_link')}: `/lessons?lesson={lesson_id}&step=1`")
    if first:
        st.warning(t("author.save.key_once"), icon=":material/key:")
        st.code(f"/author?edit={code}&key={key}", language=None)
    run, start = st.columns(2)
    run.page_link(
        "views/lessons.py",
        label=t("author.save.run"),
        icon=":material/play_arrow:",
        query_params={"lesson": lesson_id, "step": "1"},
    )
    start.page_link(
        "views/classmode.py",
        label=t("author.save.class"),
        icon=":material/groups:",
        query_params={"start": lesson_id},
    )


def add_view_to_lesson(page: str) -> None:
    """In a room's sidebar, while this session writes a lesson: the room as it is now, added
    as the lesson's next step (its link's fields, its pasted code)."""
    if state.DRAFT not in st.session_state or page not in ROOMS:
        return
    table = st.session_state[state.DRAFT]
    full = len(table.get("steps", [])) >= 12
    with st.sidebar:
        if st.button(t("author.save.add_view"), icon=":material/add_box:", disabled=full,
                     key="author_add_view"):  # fmt: skip
            languages = state.languages_of(table) or [language()]
            step = state.step_from_page(page, languages[0])
            if step is not None:
                state.add_step(step)
                st.toast(t("author.save.added_view", number=len(table["steps"])))


def page() -> None:
    st.markdown(t("author.intro"))
    opened = state.take_edit_link()
    if opened is False:
        st.warning(t("author.save.edit_link_bad"))
    elif opened:
        _forget_widgets()
    start_panel()
    table = state.draft()
    languages = lesson_panel(table)
    steps_panel(table, languages)
    save_panel(table)
