"""Predict, then reveal, the same way in every room, lesson and class: the question, the
visitor's prediction (typed, or one of a few options), a button, then torch's answer, whether
the prediction was right, and the explanation.

- :func:`predict_reveal`: a room's own question. The prediction is kept per question in this
  session, so a rerun shows the verdict again and a changed mind cannot rewrite what was
  predicted; :func:`forget` clears it for a new question.
- :func:`predict_option`: a question whose answer is one of its options and is kept by the
  caller: a solo lesson's step (the pick is recorded, then revealed at once) or, ``sealed``,
  class mode (the pick is sent to the class store and may be changed until the teacher's
  reveal, which the caller reports). It draws no page rerun of its own: it says when a pick
  was kept, and the caller redraws what it owns (a lesson's page, a class poll's fragment).

A room draws its own questions unasked (below its explorer) only when
:func:`room_questions_shown`: a student following a class answers the class's questions, and a
second question drawn by the room below the class's would be taken for it (class mode's bar
says so, for each run, with :func:`set_room_questions_shown`).

Every option question has the same widget keys, from its one ``key``: ``<key>_given`` (the
options; :func:`components.kit.focus.readable_styles` sizes them for phones), ``<key>_reveal`` or,
sealed, ``<key>_send`` (predict_option's button), ``<key>_form`` and ``<key>_grade`` (a room's).

>>> grade = predict_reveal(  # doctest: +SKIP
...     "strides_quiz_17", prompt="What is y.stride()?",
...     grade=lambda given: grade_text(given, torch_answer, read=read_ints),
...     explain="Transposing swaps the strides; no element moves.")
>>> if predict_option("lessons_q_views_3", options=question.options, kept=picked,  # doctest: +SKIP
...                   keep=record, verdict=show_verdict):
...     st.rerun()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import streamlit as st

from components.i18n import t
from components.kit.error_card import error_card
from torchatlas.errors import CodedError
from torchatlas.quiz import MAX_ANSWER_CHARS, Grade

# Set by a part drawn above the room (class mode's bar), for a session that follows a class.
ASIDE_KEY = "atlas_room_questions_aside"


def set_room_questions_shown(shown: bool) -> None:
    """Whether the rooms below draw their own questions, from this run on (see the module)."""
    if shown:
        st.session_state.pop(ASIDE_KEY, None)
    else:
        st.session_state[ASIDE_KEY] = True


def room_questions_shown() -> bool:
    """False while this session follows a class: a room leaves out its own quiz."""
    return ASIDE_KEY not in st.session_state


def _grade_key(key: str) -> str:
    return f"{key}_grade"


def given_key(key: str) -> str:
    """The session key of question ``key``'s prediction widget (its options or its box)."""
    return f"{key}_given"


def button_key(key: str, *, sealed: bool = False) -> str:
    """The key of question ``key``'s button: Reveal, or Send / Change when sealed."""
    return f"{key}_send" if sealed else f"{key}_reveal"


def _option_radio(
    key: str,
    options: Sequence[str],
    label: Callable[[int], str],
    *,
    disabled: bool = False,
    collapsed: bool = False,
) -> int | None:
    """The options as one radio group (no option picked at first), keyed ``<key>_given``:
    the index picked, or None."""
    picked = st.radio(
        t("kit.reveal.your_prediction"),
        options=range(len(options)),
        format_func=label,
        index=None,
        key=given_key(key),
        disabled=disabled,
        label_visibility="collapsed" if collapsed else "visible",
    )
    return None if picked is None else int(picked)


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
            picked = _option_radio(key, options, lambda i: options[i])
            given = "" if picked is None else options[picked]
        else:
            given = st.text_input(
                t("kit.reveal.your_prediction"),
                key=given_key(key),
                max_chars=MAX_ANSWER_CHARS,
                placeholder=placeholder,
            )
        # No key of its own: rooms keep (and restore) their session keys by prefix, and a
        # button's value may not be assigned.
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


@dataclass(frozen=True)
class Sealed:
    """An option question whose answer goes elsewhere and whose reveal is someone else's
    (class mode: the class store keeps the pick, the teacher reveals). Until ``revealed`` the
    pick may be sent again; the words are the caller's (what "sent" means there)."""

    revealed: bool
    send: str  # the button before a first answer
    change: str  # the button once one is kept
    sent: Callable[[int], str]  # the caption naming the pick kept
    hint: str  # the caption before any pick is kept


def predict_option(
    key: str,
    *,
    options: Sequence[str],
    kept: int | None,
    keep: Callable[[int], bool],
    verdict: Callable[[int | None], None],
    label: Callable[[int], str] | None = None,
    sealed: Sealed | None = None,
    reveal: str | None = None,
    predict_first: str | None = None,
) -> bool:
    """Ask for one of ``options`` (shown as ``label(index)``, default the option itself).
    ``kept``: the pick the caller holds for this visitor (None: none yet); ``keep(index)``
    keeps a new one (True when it was kept; else the caller has said why). ``verdict(kept)``
    draws torch's answer and whether the pick was right, once it is revealed: at once after
    a first pick, or, ``sealed``, when ``sealed.revealed`` (``kept`` may then be None).
    ``reveal`` / ``predict_first``: the Reveal button's and the caption's words (the kit's by
    default). Returns True when this run kept a pick: the caller redraws its part."""
    shown = label or (lambda i: options[i])
    if sealed is not None and sealed.revealed:
        verdict(kept)
        return False
    if sealed is None and kept is not None:
        st.session_state[given_key(key)] = kept  # the first pick, shown fixed above its verdict
        _option_radio(key, options, shown, disabled=True, collapsed=True)
        verdict(kept)
        return False
    if kept is not None and given_key(key) not in st.session_state:
        st.session_state[given_key(key)] = kept  # a reload shows the pick the store holds
    choice = _option_radio(key, options, shown, collapsed=True)
    if sealed is None:
        pressed = st.button(
            reveal or t("kit.reveal.button"),
            key=button_key(key),
            disabled=choice is None,
            icon=":material/visibility:",
        )
        words = predict_first or t("kit.reveal.predict_first")
    else:
        pressed = st.button(
            sealed.send if kept is None else sealed.change,
            key=button_key(key, sealed=True),
            type="primary",
            disabled=choice is None or choice == kept,
            icon=":material/send:",
        )
        words = sealed.hint if kept is None else sealed.sent(kept)
    if pressed and choice is not None and keep(choice):
        return True
    st.caption(words)
    return False
