"""The author page's state: the lesson being written (a draft in the session, in the very
shape of its TOML file), which saved lesson it is (code and author key), and the calls that
check, save, load, copy, import and export it.

The draft is the data :func:`torchatlas.lessons.export.lesson_table` writes: saving turns it
into TOML, reads it back with the loader (torch answers its code questions and grades its
exercises' solutions in the sandbox, in this visitor's turn of the fair queue) and only then
stores it. So what a class later runs is exactly what the teacher saw checked.

The editing link (``?edit=CODE&key=KEY``) opens a saved lesson for editing on another device;
the key is the author's secret, so the page moves it from the address bar into the session at
once.
"""

from __future__ import annotations

import copy
import tomllib
import uuid
from collections.abc import Callable
from typing import Any

import streamlit as st

from components import visitor
from torchatlas.classmode import ClassError
from torchatlas.classmode.authored import (
    ID_PREFIX,
    AuthoredLesson,
    AuthorPass,
    LessonStore,
    code_or_none,
    parse_authored,
)
from torchatlas.lessons import Lesson, LessonError, load_all
from torchatlas.lessons.export import export_lesson, lesson_table
from torchatlas.lessons.rooms import ROOMS
from torchatlas.links import decode_source

DRAFT = "author_draft"  # the lesson being written: its TOML table, steps with a "_uid" each
EDITING = "author_editing"  # (code, author key) of the saved lesson being edited
AUTHOR_KEY = "author_key"  # the author's key this session: new lessons are theirs too
SAVED = "author_saved"  # (code, author key, first save?) to show after a save
CHECKED = "author_checked"  # the last check's lesson (or its error), for the preview
MAX_IMPORT_BYTES = 64 * 1024
MAX_SOURCE, MAX_SOURCE_TOKEN = 4000, 16_000  # a step's pasted code, and its link form
PAGE = "views/author.py"
EDIT_KEYS = ("edit", "key")  # the editing link's fields


@st.cache_resource(show_spinner=False)
def lesson_store() -> LessonStore:
    """The teachers' lessons, in the class database (one store per process)."""
    return LessonStore()


def blank_draft(lang: str) -> dict[str, Any]:
    """A new lesson: one language, one step in the first room, nothing asked."""
    return {
        "note": "teacher",
        "order": 100,
        "minutes": 10,
        lang: {"title": "", "summary": ""},
        "steps": [new_step("strides", {}, lang)],
    }


def new_step(room: str, link: dict[str, Any], lang: str, source: str | None = None) -> dict:
    step: dict[str, Any] = {"_uid": uuid.uuid4().hex, "room": room}
    if link:
        step["link"] = link
    if source is not None:
        step["source"] = source
    step[lang] = {"title": "", "text": ""}
    return step


def draft() -> dict[str, Any]:
    """The draft, started blank in the page's language."""
    from components.i18n import language

    if DRAFT not in st.session_state:
        st.session_state[DRAFT] = blank_draft(language())
    return st.session_state[DRAFT]


def languages_of(table: dict[str, Any]) -> list[str]:
    from torchatlas.i18n import LANGUAGES

    return [lang for lang in LANGUAGES if lang in table]


def with_uids(table: dict[str, Any]) -> dict[str, Any]:
    """A lesson table as a draft: each step gets an id of its own for its widgets."""
    out = copy.deepcopy(table)
    for step in out.get("steps", []):
        step["_uid"] = uuid.uuid4().hex
    return out


def toml_of(table: dict[str, Any]) -> str:
    """The draft's TOML text (the widgets' ids left out)."""
    import tomli_w

    clean = copy.deepcopy(table)
    for step in clean.get("steps", []):
        step.pop("_uid", None)
    return tomli_w.dumps(clean, multiline_strings=True)


def check(table: dict[str, Any], on_queued: Callable[[int], None] | None = None) -> Lesson:
    """The draft read as the loader reads a saved lesson (code run in the sandbox); raises
    :class:`LessonError` naming the step and the cause. ``on_queued(place)``: each sandbox
    job's place in line while it waits."""
    return parse_authored(toml_of(table), "DRAFT00", visitor=visitor.visitor(), on_queued=on_queued)


def load_table(text: str) -> dict[str, Any]:
    """An imported TOML file's data (bounded; not yet checked)."""
    if len(text.encode("utf-8")) > MAX_IMPORT_BYTES:
        raise LessonError("file_too_big", id="import")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LessonError("not_toml", id="import", detail=str(error)[:200]) from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise LessonError("bad_steps", id="import", limit=12)
    return data


def start_from_builtin(lesson_id: str) -> None:
    """Copy a repository lesson into the draft (a new lesson: saving gives it its own code)."""
    found = next((lesson for lesson in load_all() if lesson.id == lesson_id), None)
    if found is not None:
        st.session_state[DRAFT] = with_uids(lesson_table(found))
        st.session_state.pop(EDITING, None)


def copy_saved(code: str) -> None:
    """Copy a teacher's saved lesson (anyone's, by its code) into the draft, as a new lesson."""
    stored = lesson_store().get(code)
    st.session_state[DRAFT] = with_uids(load_table(stored.toml))
    st.session_state.pop(EDITING, None)


def open_for_editing(code: str, key: str) -> bool:
    """The editing link: the saved lesson in the draft, and its key in the session."""
    store = lesson_store()
    found = code_or_none(code)
    if found is None or not store.is_author(found, key):
        return False
    st.session_state[DRAFT] = with_uids(load_table(store.get(found).toml))
    st.session_state[EDITING] = (found, key)
    st.session_state[AUTHOR_KEY] = key
    return True


def take_edit_link() -> bool | None:
    """Open ``?edit=CODE&key=KEY`` once and drop both from the address bar (the key is the
    author's secret). None when the address names no lesson to edit."""
    code, key = (st.query_params.get(name) for name in EDIT_KEYS)
    if code is None and key is None:
        return None
    for name in EDIT_KEYS:
        st.query_params.pop(name, None)
    return open_for_editing(str(code or ""), str(key or ""))


def save(
    table: dict[str, Any], on_queued: Callable[[int], None] | None = None
) -> tuple[AuthorPass | AuthoredLesson, Lesson]:
    """Check the draft (sandbox) and store it: an update of the lesson being edited, else a
    new lesson. Raises :class:`LessonError` or :class:`ClassError`."""
    lesson = check(table, on_queued)
    text = export_lesson(lesson)
    store = lesson_store()
    editing = st.session_state.get(EDITING)
    if editing is not None:
        saved: AuthorPass | AuthoredLesson = store.update(editing[0], editing[1], text)
        st.session_state[SAVED] = (editing[0], editing[1], False)
        return saved, lesson
    passed = store.create(
        text, client=visitor.client(), author_key=st.session_state.get(AUTHOR_KEY)
    )
    st.session_state[EDITING] = (passed.code, passed.author_key)
    st.session_state[AUTHOR_KEY] = passed.author_key
    st.session_state[SAVED] = (passed.code, passed.author_key, True)
    return passed, lesson


def delete_saved() -> None:
    editing = st.session_state.get(EDITING)
    if editing is None:
        return
    lesson_store().delete(editing[0], editing[1])
    st.session_state.pop(EDITING, None)


def lesson_id_of(code: str) -> str:
    return ID_PREFIX + code.lower()


def step_from_link(url: str, lang: str) -> dict[str, Any] | None:
    """A step from a room's address as a teacher copied it from the browser: the room from
    its path, its own link fields from the query (a pasted-code field decoded to its code).
    None when the address names no room."""
    from urllib.parse import parse_qs, urlsplit

    if len(url) > 16_000:
        return None
    parts = urlsplit(url.strip())
    room = parts.path.rstrip("/").rsplit("/", 1)[-1]
    if room not in ROOMS:
        return None
    spec = ROOMS[room]
    query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=64)
    link: dict[str, Any] = {}
    source = None
    for key, values in query.items():
        if key == spec.source_field and values:
            source = decode_source(values[-1], MAX_SOURCE, MAX_SOURCE_TOKEN)
        elif key in spec.fields:
            link[key] = list(values) if key in spec.multi else values[-1]
    return new_step(room, link, lang, source)


def step_from_page(room: str, lang: str) -> dict[str, Any] | None:
    """The room the teacher is looking at, as its link shows it now (the sidebar's "Add this
    view to my lesson")."""
    if room not in ROOMS:
        return None
    spec = ROOMS[room]
    link: dict[str, Any] = {}
    source = None
    for key in st.query_params:
        values = st.query_params.get_all(key)
        if key == spec.source_field and values:
            source = decode_source(values[-1], MAX_SOURCE, MAX_SOURCE_TOKEN)
        elif key in spec.fields and values:
            link[key] = list(values) if key in spec.multi else values[-1]
    return new_step(room, link, lang, source)


def add_step(step: dict[str, Any]) -> None:
    table = draft()
    if len(table["steps"]) < 12:
        table["steps"].append(step)


def error_words(error: LessonError | ClassError) -> tuple[str, dict[str, Any]]:
    """A refusal's translation key and parameters (the page says them in plain words)."""
    if isinstance(error, ClassError):
        return f"classmode.errors.{error.code.value}", dict(error.params)
    return f"author.errors.{error.code}", dict(error.params)


def builtin_step(pair: tuple[str, int], languages: list[str]) -> dict[str, Any]:
    """A repository lesson's step as a draft step, in the draft's languages."""
    from torchatlas.lessons.export import step_table

    lesson_id, number = pair
    found = next(lesson for lesson in load_all() if lesson.id == lesson_id)
    table = step_table(found.step(number), tuple(languages))
    table["_uid"] = uuid.uuid4().hex
    return table
