"""One way a student answers a question with code, the same in solo lessons and class mode:
the code box (the kit's :class:`~components.kit.code_editor.CodeEditor`), *Run and check*,
the sandbox's verdict in plain words (passed, not yet with what torch computed, or torch's
own error and its line).

Same code for the same exercise is graded once per process (:func:`graded`: a bounded cache
keyed by the exercise and the code, never by who asked); failures of the moment (a full
sandbox line) are not kept.

>>> verdict = answer_box(question, key="lesson_3")  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import streamlit as st

from components import visitor
from components.contained import failure_card
from components.i18n import t
from components.kit.code_editor import CodeEditor
from torchatlas.i18n import has_key
from torchatlas.lessons.kinds.exercise import ExerciseQuestion, grade_answer
from torchatlas.sandboxed import RoomJob

MAX_CODE = 2000  # characters a student's answer may have
CACHE_ENTRIES = 512  # graded answers kept (each a few hundred bytes)
_lock = threading.Lock()
_graded: OrderedDict[tuple[Any, ...], RoomJob[Any]] = OrderedDict()
STATUS_ICONS = {"pass": ":material/check_circle:", "fail": ":material/cancel:"}


def graded(
    question: ExerciseQuestion, code: str, on_queued: Callable[[int], None] | None = None
) -> RoomJob[Any]:
    """``code`` run after the exercise's setup and graded by its checks (in the sandbox, in
    this visitor's turn), or the same answer's earlier verdict. ``on_queued(place)`` hears
    the job's place in the sandbox's line while it waits (0: it starts)."""
    key = (question.setup, question.checks, code)
    with _lock:
        kept = _graded.get(key)
    if kept is not None:
        return kept
    outcome = grade_answer(question, code, visitor=visitor.visitor(), on_queued=on_queued)
    if outcome.worth_keeping:
        with _lock:
            _graded[key] = outcome
            while len(_graded) > CACHE_ENTRIES:
                _graded.popitem(last=False)
    return outcome


def verdict_sentence(verdict: Any) -> str:
    """What the verdict says, in the page's language: its code's sentence with its
    parameters (torch's own message included), or a general one for a code without one."""
    params = {key: value for key, value in verdict.params}
    params.setdefault("error_type", verdict.error_type)
    params.setdefault("message", verdict.message)
    params.setdefault("line", "" if verdict.line is None else verdict.line)
    key = f"kinds.exercise.verdict.{verdict.code}"
    if not has_key(key):
        return t("kinds.exercise.verdict.other", code=verdict.code)
    return t(key, **params)


def show_verdict(verdict: Any) -> None:
    """The verdict as a card: green when passed, else what torch computed or raised."""
    title = t(f"kinds.exercise.status.{verdict.status}")
    text = f"**{title}**  \n{verdict_sentence(verdict)}"
    if verdict.status == "pass":
        st.success(text, icon=STATUS_ICONS["pass"])
    elif verdict.status == "fail":
        st.warning(text, icon=STATUS_ICONS["fail"])
    else:
        st.error(text, icon=":material/error:")


def answer_box(
    question: ExerciseQuestion, *, key: str, disabled: bool = False
) -> tuple[str, Any] | None:
    """The code box and *Run and check*; after a run, ``(code, verdict)`` (None before a run
    and when the sandbox could not grade it: the failure card says why)."""
    source_key = f"{key}_code"
    if source_key not in st.session_state:
        st.session_state[source_key] = question.starter
    editor = CodeEditor(
        source_key=source_key,
        label=t("kinds.exercise.code"),
        form_key=f"{key}_form",
        run_label=t("kinds.exercise.run"),
        height=140,
        max_chars=MAX_CODE,
        run_key=f"{key}_run",
    )
    submitted, _ = editor.form()
    if not submitted or disabled:
        return None
    code = str(st.session_state.get(source_key, ""))[:MAX_CODE]
    outcome = editor.run(
        # While sixty phones send code at once, a student waits in the sandbox's fair line:
        # the editor shows their place in it, as a room's code editor does.
        lambda on_queued: graded(question, code, on_queued),
        running=t("kinds.exercise.running"),
        queued=lambda place: t("kinds.exercise.queued", place=place),
    )
    if outcome.failure is not None:
        failure_card(outcome.failure)
        return None
    return code, outcome.value
