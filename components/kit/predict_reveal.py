"""Predict, then reveal, the same way in every room: the question, the visitor's prediction
(typed, or one of a few options), a Reveal button, then torch's answer, whether the
prediction was right, and the explanation. The prediction is kept per question, so a rerun
shows the verdict again and a changed mind cannot rewrite what was predicted;
:func:`forget` clears it for a new question.

>>> grade = predict_reveal(  # doctest: +SKIP
...     "strides_quiz_17", prompt="What is y.stride()?",
...     grade=lambda given: grade_text(given, torch_answer, read=read_ints),
...     explain="Transposing swaps the strides; no element moves.")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from components.i18n import t
from components.kit.error_card import error_card
from torchatlas.errors import CodedError
from torchatlas.quiz import MAX_ANSWER_CHARS, Grade


def _grade_key(key: str) -> str:
    return f"{key}_grade"


def revealed(key: str) -> Grade | None:
    """The grade of question ``key`` once revealed in this session, else None."""
    return st.session_state.get(_grade_key(key))


def forget(key: str) -> None:
    """Clear question ``key``'s prediction and verdict (a new question under the same key)."""
    for name in (_grade_key(key), f"{key}_given", f"{key}_form"):
        st.session_state.pop(name, None)


def verdict(grade: Grade, explain: str | Callable[[Grade], None] | None = None) -> None:
    """Torch's answer and whether the prediction was right, then the explanation."""
    if grade.correct:
        st.success(t("kit.reveal.right", expected=grade.expected), icon=":material/check_circle:")
    else:
        given = grade.given or t("kit.reveal.nothing")
        st.error(
            t("kit.reveal.wrong", given=given, expected=grade.expected), icon=":material/cancel:"
        )
    if callable(explain):
        explain(grade)
    elif explain:
        st.markdown(explain)


def predict_reveal(
    key: str,
    *,
    prompt: str,
    grade: Callable[[str], Grade],
    options: Sequence[str] = (),
    explain: str | Callable[[Grade], None] | None = None,
    placeholder: str = "",
) -> Grade | None:
    """Ask ``prompt``; on Reveal, ``grade(prediction)`` (the room computes torch's answer
    there; a :class:`~torchatlas.errors.CodedError` it raises is shown as an error card and
    the visitor may try again). Returns the grade once revealed, else None. ``key`` names
    the question in this session (e.g. the room's prefix and the question's seed)."""
    st.markdown(prompt)
    done = revealed(key)
    if done is not None:
        verdict(done, explain)
        return done
    with st.form(f"{key}_form", border=False, enter_to_submit=True):
        if options:
            picked = st.radio(
                t("kit.reveal.your_prediction"),
                options=range(len(options)),
                format_func=lambda i: options[i],
                index=None,
                key=f"{key}_given",
            )
            given = "" if picked is None else options[picked]
        else:
            given = st.text_input(
                t("kit.reveal.your_prediction"),
                key=f"{key}_given",
                max_chars=MAX_ANSWER_CHARS,
                placeholder=placeholder,
            )
        submitted = st.form_submit_button(t("kit.reveal.button"), icon=":material/visibility:")
    if not submitted:
        st.caption(t("kit.reveal.predict_first"))
        return None
    if not given.strip():
        st.warning(t("kit.reveal.empty"), icon=":material/edit:")
        return None
    try:
        result = grade(given)
    except CodedError as error:
        error_card(error)
        return None
    st.session_state[_grade_key(key)] = result
    verdict(result, explain)
    return result
