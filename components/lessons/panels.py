"""Lessons' widgets: the banner above a room (narrative, question, Previous / Next), the
lessons list, and the end summary."""

from __future__ import annotations

import streamlit as st

from components.i18n import language, t
from components.kit import code_answer, focus
from components.kit.predict_reveal import predict_option
from components.lessons import draw, state
from components.lessons.state import Place
from torchatlas.lessons import ROOMS, Lesson, Step
from torchatlas.lessons.kinds import CODE, NOT_PASSED, PASSED, kind_of


def banner(page: str) -> None:
    """Above the room: the step's narrative and question, progress and moves. Drawn by
    app.py on every page but the lessons list, when the URL names a lesson and a step.

    A step that hides its room until the reveal (``hide = ["room"]``: the room shows torch's
    answer) draws the room's title and a note in its place, and the room does not run
    (:func:`_room_until_reveal`) until the student has answered."""
    place = state.current()
    if place is None or page == "lessons":
        return
    if place is False:
        _broken_link()
        return
    assert isinstance(place, Place)
    if place.step is None:
        return
    lesson, step = place.lesson, place.step
    state.remember(lesson, step.number)
    changed, aside = state.follow_room(lesson, step, page)  # the step opens in its state
    lang = language()
    revealed = state.revealed(lesson, step)
    with st.container(border=True, key=state.BANNER_KEY):
        st.caption(
            f"{t('lessons.banner.lesson', title=lesson.title[lang])} · "
            f"{draw.progress_text(lesson, step.number, lang)}"
        )
        st.progress(step.number / len(lesson.steps))
        st.header(step.title[lang], anchor=False)
        if aside:
            fields = ", ".join(aside)
            st.info(t("lessons.banner.set_aside", fields=fields), icon=":material/link_off:")
        if changed:
            _changed(lesson, step)
        # The narrative's sentences that tell the answer join it at the reveal.
        st.markdown(step.narrative(lang, revealed))
        if step.room != page:
            room = t(f"app.rooms.{step.room}.title")
            st.info(t("lessons.banner.elsewhere", room=room), icon=":material/move_up:")
        if step.question is not None:
            if changed:  # torch's answer is about the step's state, not what is on screen
                st.caption(t("lessons.question.changed"))
            else:
                _question(lesson, step)
        _moves(lesson, step, page, changed)
        # A step opens with the page scrolled where the last one was left (a phone's reader
        # pressed Next at the bottom of a long banner): bring its top into view, once per
        # opening, so a rerun (an answer) never moves the page.
        opened = st.session_state.get(state.OPENED_KEY, 0)
        focus.scroll_to(state.BANNER_KEY, once=f"lesson:{lesson.id}:{step.number}:{opened}")
    if step.room == page and step.hides_room and not revealed:
        _room_until_reveal(page)


def _room_until_reveal(page: str) -> None:
    """The step's room shows torch's answer: until the student answers, the room's title and
    a note stand in for it, and the room does not run (this stops the page's run)."""
    with st.container(key=state.ROOM_HIDDEN_KEY):
        st.title(t(f"app.rooms.{page}.title"))  # the page's one h1, as the room draws it
        st.info(t("lessons.banner.room_hidden"), icon=":material/visibility_off:")
    st.stop()


def _changed(lesson: Lesson, step: Step) -> None:
    """The room no longer shows the step's state: say so, with the way back, first."""
    with st.container(border=True, key=state.CHANGED_BOX_KEY):
        st.warning(t("lessons.banner.changed"), icon=":material/tune:")
        if st.button(
            t("lessons.banner.back"),
            key=state.BACK_KEY,
            type="primary",
            icon=":material/restart_alt:",
        ):
            state.go(lesson, step.number)


def _question(lesson: Lesson, step: Step) -> None:
    question = step.question
    assert question is not None
    lang = language()
    picked = state.answers(lesson).get(step.number)
    header = t("kinds.exercise.header" if kind_of(question).answered_with == CODE
               else "lessons.question.header")  # fmt: skip
    st.markdown(f"**{header}** {question.prompt[lang]}")
    if kind_of(question).answered_with == CODE:
        _code_question(lesson, step, picked)
        return

    def keep(choice: int) -> bool:
        state.record(lesson, step.number, choice)
        return True

    def verdict(kept: int | None) -> None:
        assert kept is not None and question is not None  # solo: revealed once picked
        right, text = draw.verdict_text(lesson, step.number, kept, lang)
        (st.success if right else st.error)(
            text, icon=":material/check_circle:" if right else ":material/cancel:"
        )
        st.markdown(question.explain[lang])

    # The kit's predict-then-reveal: the first pick is recorded and revealed at once; the
    # page runs again so a room kept for the reveal opens below the banner.
    if predict_option(
        state.question_key(lesson, step.number),
        options=question.options,
        label=lambda i: draw.option_label(question.options[i], lang),
        kept=picked,
        keep=keep,
        verdict=verdict,
        reveal=t("lessons.question.reveal"),
        predict_first=t("lessons.question.predict_first"),
    ):
        st.rerun()


def _code_question(lesson: Lesson, step: Step, picked: int | None) -> None:
    """A question answered with code: the kit's code box, graded in the sandbox. The first
    verdict is what is scored (like a first prediction); the box stays open to try again,
    and the latest verdict stays on the step."""
    question = step.question
    assert question is not None
    key = state.question_key(lesson, step.number)  # one key per question, of either kind
    found = code_answer.answer_box(question, key=key)
    if found is not None:
        _code, verdict = found
        st.session_state[f"{key}_verdict"] = verdict
        if picked is None:  # the first answer: scored, and a room kept for it opens now
            state.record(lesson, step.number, PASSED if verdict.status == "pass" else NOT_PASSED)
            st.rerun()
    verdict = st.session_state.get(f"{key}_verdict")
    if verdict is not None:
        code_answer.show_verdict(verdict)
    if verdict is not None or picked is not None:
        st.markdown(question.explain[language()])


def _moves(lesson: Lesson, step: Step, page: str, changed: bool = False) -> None:
    """Previous, Back to this step (in the "changed" box instead while the room is changed),
    Next or Finish."""
    row = st.container(horizontal=True, key=state.MOVES_KEY)
    last = step.number == len(lesson.steps)
    if row.button(
        t("lessons.banner.previous"),
        key=state.PREVIOUS_KEY,
        disabled=step.number == 1,
        icon=":material/arrow_back:",
    ):
        state.go(lesson, step.number - 1)
    back_label = "lessons.banner.back" if step.room == page else "lessons.banner.open_room"
    if not changed and row.button(t(back_label), key=state.BACK_KEY, icon=":material/restart_alt:"):
        state.go(lesson, step.number)
    if last:
        if row.button(
            t("lessons.banner.finish"), key=state.FINISH_KEY, type="primary", icon=":material/flag:"
        ):
            state.go_summary(lesson)
    elif row.button(
        t("lessons.banner.next"),
        key=state.NEXT_KEY,
        type="primary",
        icon=":material/arrow_forward:",
    ):
        state.go(lesson, step.number + 1)


# --------------------------------------------------------------------------- the lessons page


def _broken_link() -> None:
    """A link to no lesson; for a teacher's lesson that does not load, which step and why."""
    st.warning(t("lessons.link_broken"), icon=":material/link_off:")
    problem = state.load_problem()
    if problem is not None:
        from components.author.panels import refusal

        refusal(problem)


def page() -> None:
    """The lessons page: a link's lesson (its overview or end summary) first, then every
    lesson with its note, steps and minutes."""
    place = state.current()
    if place is False:
        _broken_link()
    elif isinstance(place, Place):
        if place.step is not None:  # a link to a step: open it in its room
            state.go(place.lesson, place.step.number)
        if place.end:
            _summary(place.lesson)
    st.markdown(t("lessons.intro"))
    for lesson in state.lessons():
        _card(lesson)


def _card(lesson: Lesson) -> None:
    lang = language()
    answered = state.answers(lesson)
    with st.container(border=True, key=state.lesson_key("card", lesson)):
        st.header(lesson.title[lang], anchor=False)
        st.caption(
            t(
                "lessons.card.facts",
                steps=len(lesson.steps),
                minutes=lesson.minutes,
                questions=lesson.questions,
                note=t(f"lessons.notes.{lesson.note.split('.')[0]}"),
            )
        )
        st.markdown(lesson.summary[lang])
        rooms = " → ".join(
            dict.fromkeys(t(f"app.rooms.{step.room}.title") for step in lesson.steps)
        )
        st.caption(t("lessons.card.rooms", rooms=rooms))
        row = st.container(horizontal=True)
        last = state.last_opened()
        if row.button(
            t("lessons.card.start"),
            key=state.lesson_key("start", lesson),
            icon=":material/play_arrow:",
        ):
            state.go(lesson, 1)
        resumable = last is not None and last[0] == lesson.id and last[1] > 1
        if resumable and row.button(
            t("lessons.card.continue", step=last[1]),
            key=state.lesson_key("continue", lesson),
            type="primary",
        ):
            state.go(lesson, last[1])
        if answered:
            row.caption(t("lessons.card.answered", count=len(answered), total=lesson.questions))


def _summary(lesson: Lesson) -> None:
    lang = language()
    result = draw.summary(lesson, state.answers(lesson))
    # Finish switches pages with the last step's scroll position: the summary, at the top of
    # this page, is brought into view once per Finish.
    opened = st.session_state.get(state.SUMMARY_OPENED_KEY, 0)
    focus.scroll_to(state.SUMMARY_KEY, once=f"lesson:{lesson.id}:summary:{opened}")
    with st.container(border=True, key=state.SUMMARY_KEY):
        st.header(t("lessons.summary.header", title=lesson.title[lang]), anchor=False)
        st.metric(
            t("lessons.summary.score"),
            t("lessons.summary.score_value", right=result.right, total=result.asked),
        )
        if result.answered < result.asked:
            st.caption(t("lessons.summary.unanswered", count=result.asked - result.answered))
        if not result.revisit:
            st.success(t("lessons.summary.all_right"), icon=":material/celebration:")
        else:
            st.markdown(f"**{t('lessons.summary.revisit')}**")
            for number in result.revisit:
                step = lesson.step(number)
                room = t(f"app.rooms.{step.room}.title")
                label = t("lessons.summary.go", step=number, title=step.title[lang], room=room)
                if st.button(label, key=state.lesson_key("revisit", lesson, number)):
                    state.go(lesson, number)
        if st.button(t("lessons.summary.again"), key=state.lesson_key("again", lesson)):
            state.forget_answers(lesson)
            state.go(lesson, 1)


def room_of(step: Step) -> str:
    return ROOMS[step.room].script
