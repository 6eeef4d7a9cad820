"""Class mode's widgets: the Class page (start, join, the teacher's projector view, the
student's view) and the class bar app.py draws above every page.

The projector view is read from the back of a room: the code is a tenth of the screen high,
the QR is up to 420 px, the tally's labels are 28-34 px. A student's phone shows the
question and its answer button in the bar at the top of whatever room they are in, so
answering needs no scrolling.

Polling: a student's bar runs :func:`_poll` every ``state.poll_period()`` seconds; it reads one
cached version number and draws only the step's question, if one is open or revealed, so an
idle student costs one small fragment run (measured by tests/e2e/test_classmode_poll.py). When
the teacher moved, the poll switches the student to the teacher's room at once; a question
opened and its reveal are drawn by the poll itself; the class ending reruns the page once.
"""

from __future__ import annotations

import time
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from components.classmode import draw, state
from components.classmode.state import Role
from components.contained import guarded
from components.i18n import language, t
from components.kit import code_answer
from components.lessons.draw import option_label
from components.theme import palette
from torchatlas.classmode import ClassState, Tally
from torchatlas.lessons import ROOMS, Lesson, Question
from torchatlas.lessons.kinds import CODE, kind_of

# --------------------------------------------------------------------------- shared bits


def refusal_card() -> None:
    """A refusal kept by ``state`` (a link, a button): the cause and the fix, once."""
    refusal = state.take_refusal()
    if refusal is None:
        return
    code, params = refusal
    st.error(
        f"**{t('classmode.errors.title')}**  \n{t(f'classmode.errors.{code}', **params)}",
        icon=":material/block:",
    )


def _room_title(room: str) -> str:
    return t(f"app.rooms.{room}.title") if room in ROOMS else room


def _step_line(current: ClassState, lesson: Lesson | None) -> str:
    if lesson is None:
        if current.room in ROOMS:
            return t("classmode.free.at", room=_room_title(current.room))
        return t("classmode.free.waiting")
    if current.step == 0:
        return t("classmode.step.not_started", total=len(lesson.steps))
    step = lesson.step(current.step)
    return t(
        "classmode.step.line",
        step=current.step,
        total=len(lesson.steps),
        title=step.title[language()],
        room=_room_title(step.room),
    )


# --------------------------------------------------------------------------- the class bar


def bar(page: str) -> None:
    """Above every page: reads a class link once; for a student, the class's step, question
    and the poll that follows the teacher; for a teacher on a room page, the code, live
    counts and the class's moves. Draws nothing for a visitor outside a class."""
    state.absorb_link()
    who = state.role()
    if who is None:
        if page != state.PAGE_PATH:
            refusal_card()
        return
    if who.teacher:
        if page != state.PAGE_PATH:
            refusal_card()
            _teacher_bar(who, page)
        return
    refusal_card()
    _student_bar(who, page)


def _student_bar(who: Role, page: str) -> None:
    current = state.class_state(who.code)
    if current is None:
        if not state.refused_for_a_while():  # gone (expired, deleted): forget it
            state.leave()
        refusal_card()
        if state.role() is not None:  # the database is away: keep trying
            _follow_poll(who.code)
        return
    before = state.seen_state()
    state.mark_seen(current)
    state.keep_student_link(who)
    # The teacher removed someone since this screen last looked: is it this student?
    removals = before is not None and before.removals != current.removals
    me = state.my_record(who, fresh=removals)
    if state.role() is None:  # the teacher removed them (or the class is gone): say so
        refusal_card()
        return
    if current.ended:
        with st.container(border=True, key="classmode_bar"):
            st.info(t("classmode.student.ended"), icon=":material/flag:")
            if st.button(t("classmode.student.leave"), key="classmode_leave_ended"):
                state.leave()
                st.rerun()
        return
    if state.needs_follow(current):
        first = state.PLACE_KEY not in st.session_state
        if first and page == current.room and state.room_fields_now(page) == current.fields():
            state.remember_place(current)  # a reload of the class's own page: already there
        else:
            state.follow(current, who)
    lesson = state.lesson_of(current)
    with st.container(border=True, key="classmode_bar"):
        name = draw.plain(me.nickname) if me is not None else "—"
        st.caption(t("classmode.student.bar", code=current.code, name=name))
        st.markdown(f"**{draw.plain(_step_line(current, lesson))}**")
        if current.room in ROOMS:
            # Shown in the class's room too: a room writes its own fields into the address
            # bar as the student explores, so "back" means the teacher's state, not the page.
            away = page != current.room
            if st.button(
                t("classmode.student.back"),
                key="classmode_back",
                type="primary" if away else "secondary",
                icon=":material/undo:",
            ):
                state.follow(current, who)
        step = state.step_of(current)
        if step is not None:
            with st.expander(t("classmode.student.read_step")):
                st.markdown(step.text[language()])
    # The question sits right under the bar, drawn by the poll (not inside the bar's
    # container: a fragment nested in containers costs each poll more).
    _follow_poll(who.code)


def _student_question(who: Role, current: ClassState, *, fresh: bool = False) -> None:
    """The step's question once the teacher opened it: the options and Send until the reveal,
    then the right answer with torch's explanation and whether this student's was right."""
    step = state.step_of(current)
    if step is None or step.question is None or not current.asked:
        return
    question = step.question
    lang = language()
    picked = state.my_answer(who, current.step, fresh=fresh)
    with st.container(key="classmode_question"):
        code_kind = kind_of(question).answered_with == CODE
        header = t("kinds.exercise.header" if code_kind else "classmode.question.header")
        st.markdown(f"**{header}** {question.prompt[lang]}")
        if code_kind:
            _student_code_question(who, current, question, lang)
            return
        if current.revealed:
            _verdict(question, current, picked, lang)
            return
        key = f"{state.PICK_KEY}_{current.code}_{current.step}"
        if picked is not None and key not in st.session_state:
            st.session_state[key] = picked
        choice = st.radio(
            t("classmode.question.options"),
            options=list(range(len(question.options))),
            format_func=lambda i: option_label(question.options[i], lang),
            index=None,
            key=key,
            label_visibility="collapsed",
        )
        label = "classmode.question.send" if picked is None else "classmode.question.change"
        if st.button(
            t(label),
            key=f"classmode_send_{current.step}",
            type="primary",
            disabled=choice is None or choice == picked,
            icon=":material/send:",
        ):
            if state.answer(who, current.step, int(choice)):
                _rerun_question()
            refusal_card()
        if picked is not None:
            st.caption(
                t("classmode.question.sent", answer=option_label(question.options[picked], lang))
            )
        else:
            st.caption(t("classmode.question.hint"))


def _student_code_question(who: Role, current: ClassState, question: Any, lang: str) -> None:
    """A question answered with code: the kit's box until the reveal (each run graded in the
    sandbox and kept as this student's answer), then their verdict and the explanation. What
    they wrote and its verdict are shown only to them; the teacher sees counts."""
    if not current.revealed:
        found = code_answer.answer_box(
            question, key=f"classmode_code_{current.code}_{current.step}"
        )
        if found is not None:
            source, verdict = found
            if not state.answer_code(who, source, verdict):
                refusal_card()
    kept = state.my_code_answer(who, current.step)
    if kept is not None:
        code_answer.show_verdict(kept)
        if not current.revealed:
            st.caption(t("kinds.exercise.submitted"))
    elif current.revealed:
        st.info(t("classmode.question.no_code_answer"), icon=":material/info:")
    if current.revealed:
        st.markdown(question.explain[lang])


def _rerun_question() -> None:
    """Draw the question again with the answer just sent: only the poll's fragment when this
    run is one of its own (a phone's press), the page when the press came in a whole-page run
    (Streamlit allows the fragment scope only in the fragment's own runs)."""
    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:
        st.rerun()


def _verdict(question: Question, current: ClassState, picked: int | None, lang: str) -> None:
    right = current.correct if current.correct is not None else question.answer
    answer_text = option_label(question.options[right], lang)
    if picked is None:
        st.info(t("classmode.question.no_answer", answer=answer_text), icon=":material/info:")
    elif picked == right:
        st.success(
            t("classmode.question.right", answer=answer_text), icon=":material/check_circle:"
        )
    else:
        st.error(
            t(
                "classmode.question.wrong",
                answer=answer_text,
                picked=option_label(question.options[picked], lang),
            ),
            icon=":material/cancel:",
        )
    st.markdown(question.explain[lang])


def _follow_poll(code: str) -> None:
    """Poll the class every :func:`state.poll_period` seconds (this session's own period)."""
    st.fragment(_poll, run_every=state.poll_period())(code)


@guarded
def _poll(code: str) -> None:
    """Has the teacher changed anything? One cached integer read; nothing drawn unless a
    question is open or revealed. A move switches straight to the teacher's room from here
    (no whole-page run of the room being left first). An open question, the student's own
    answer to it and, once revealed, the verdict are drawn here in place: the room below does
    not run again while sixty phones answer or see the verdict, and the phones' poll timers,
    which a whole-page run restarts, are not lined up again just before the teacher moves
    on. The class ending or going reruns the page."""
    version = state.version(code)
    if version is None and state.refused_for_a_while():
        state.take_refusal()  # the database is away: ask again at the next poll
        return
    who = state.role()
    current = state.seen_state()
    changed = version is None or version > state.seen_version() or current is None
    if changed:
        before = current
        current = state.class_state(code) if version is not None else None
        student = who is not None and not who.teacher
        if (
            student
            and current is not None
            and before is not None
            and current.removals != before.removals
            and state.my_record(who, fresh=True) is None
            and state.role() is None
        ):
            st.rerun(scope="app")  # this student was removed: the page says so
        if current is None or not student or current.ended or state.needs_follow(current):
            if current is not None and student and not current.ended:
                state.mark_seen(current)
                state.follow(current, who)
            st.rerun(scope="app")
        state.mark_seen(current)
    if who is not None and current.code == code:
        _student_question(who, current, fresh=changed)


def _teacher_bar(who: Role, page: str) -> None:
    current = state.class_state(who.code)
    if current is None:
        refusal_card()
        return
    lesson = state.lesson_of(current)
    with st.container(border=True, key="classmode_teacher_bar"):
        head = st.container(horizontal=True, vertical_alignment="center")
        head.markdown(f"## {t('classmode.teacher.bar_code', code=current.code)}")
        with head:
            _teacher_counts(who)
        st.markdown(draw.plain(_step_line(current, lesson)))
        if current.ended:
            st.info(t("classmode.teacher.ended"), icon=":material/flag:")
            return
        step = state.step_of(current)
        if step is not None:
            with st.expander(t("classmode.student.read_step")):
                st.markdown(step.text[language()])
        row = st.container(horizontal=True, key="classmode_teacher_moves")
        if row.button(
            t("classmode.teacher.to_class_page"), key="classmode_to_page", icon=":material/cast:"
        ):
            st.switch_page(state.PAGE, query_params=state.with_lang(state.join_query(who.code)))
        if lesson is None:
            if page in ROOMS and row.button(
                t("classmode.teacher.bring_here"),
                key="classmode_bring",
                type="primary",
                icon=":material/group_add:",
            ):
                if state.bring_here(who, current, page) is not None:
                    st.toast(t("classmode.teacher.brought"), icon=":material/check:")
                    st.rerun()
                refusal_card()
            return
        _lesson_moves(who, current, lesson, row, follow=True)


@st.fragment(run_every=state.TEACHER_POLL_S)
@guarded
def _teacher_counts(who: Role) -> None:
    counts = state.tally(who)
    if counts is None:
        refusal_card()
        return
    st.markdown(
        t("classmode.teacher.counts", joined=counts.joined, answered=counts.answered),
    )


def _lesson_moves(who: Role, current: ClassState, lesson: Lesson, row, *, follow: bool) -> None:
    """Previous / next step, open the question, reveal. ``follow``: the teacher's own screen
    goes to the new step's room too (from a room page); from the Class page it stays."""
    total = len(lesson.steps)

    def move(number: int) -> None:
        moved = state.move_to_step(who, lesson, number)
        if moved is None:
            refusal_card()
            return
        if follow:
            step = lesson.step(number)
            state.forget_room(step.room)
            query = state.with_lang(
                {**state.step_query(lesson, step), **state.join_query(who.code)}
            )
            st.switch_page(ROOMS[step.room].script, query_params=query)
        st.rerun()

    if row.button(
        t("classmode.teacher.previous"),
        key="classmode_previous",
        disabled=current.step <= 1,
        icon=":material/arrow_back:",
    ):
        move(current.step - 1)
    if row.button(
        t("classmode.teacher.start_lesson") if current.step == 0 else t("classmode.teacher.next"),
        key="classmode_next",
        disabled=current.step >= total,
        type="primary" if not current.asked or current.revealed else "secondary",
        icon=":material/arrow_forward:",
    ):
        move(current.step + 1)
    step = state.step_of(current)
    if step is None or step.question is None:
        return
    if not current.asked:
        pressed = row.button(
            t("classmode.teacher.ask"), key="classmode_ask", type="primary", icon=":material/quiz:"
        )
        if pressed and state.ask(who) is not None:
            st.rerun()
    elif not current.revealed:
        pressed = row.button(
            t("classmode.teacher.reveal"),
            key="classmode_reveal",
            type="primary",
            icon=":material/visibility:",
        )
        if pressed and state.reveal(who) is not None:
            st.rerun()
    refusal_card()


# --------------------------------------------------------------------------- the Class page


def page() -> None:
    """The Class page: the teacher's projector view, the student's view, or start and join."""
    refusal_card()
    who = state.role()
    if who is None:
        _start_or_join()
    elif who.teacher:
        _teacher_page(who)
    else:
        _student_page(who)


def _start_or_join() -> None:
    st.markdown(t("classmode.intro"))
    start, join = st.columns(2, gap="large")
    with start.container(border=True, key="classmode_start"):
        st.header(t("classmode.start.header"), anchor=False)
        lang = language()
        lesson_id = st.selectbox(
            t("classmode.start.lesson"),
            options=state.lesson_options(),
            format_func=lambda key: (
                t("classmode.start.free") if key is None else state.lesson_title(key, lang) or key
            ),
            key=state.LESSON_PICK_KEY,
        )
        st.caption(t("classmode.start.hint"))
        secret = None
        if state.start_secret_required():  # the server's ATLAS_START_SECRET
            secret = st.text_input(
                t("classmode.start.secret"),
                type="password",
                key=state.START_SECRET_KEY,
                max_chars=200,
                help=t("classmode.start.secret_hint"),
            )
        if st.button(
            t("classmode.start.button"),
            key="classmode_start_button",
            type="primary",
            icon=":material/co_present:",
        ):
            if state.start(lesson_id, secret):
                st.rerun()
            refusal_card()
    with join.container(border=True, key="classmode_join"):
        st.header(t("classmode.join.header"), anchor=False)
        code = st.text_input(
            t("classmode.join.code"),
            key=state.JOIN_CODE_KEY,
            max_chars=state.MAX_CODE_CHARS,
            placeholder="ABC234",
        )
        nickname = st.text_input(
            t("classmode.join.nickname"), key=state.JOIN_NAME_KEY, max_chars=40
        )
        st.caption(t("classmode.join.hint"))
        if st.button(
            t("classmode.join.button"),
            key="classmode_join_button",
            type="primary",
            icon=":material/login:",
        ):
            if state.join(code, nickname):
                st.rerun()
            refusal_card()


def _student_page(who: Role) -> None:
    current = state.class_state(who.code)
    if current is None:
        return
    if not current.ended and current.room not in ROOMS:
        st.info(t("classmode.student.waiting"), icon=":material/hourglass_top:")
    link = draw.link(state.class_page_url(), **state.student_query(who.code, who.key))
    with st.expander(t("classmode.student.your_link"), icon=":material/link:"):
        st.caption(t("classmode.student.your_link_hint"))
        st.code(link, language=None)
    if st.button(t("classmode.student.leave"), key="classmode_leave"):
        state.leave()
        st.rerun()


def _teacher_page(who: Role) -> None:
    current = state.class_state(who.code)
    if current is None:
        if st.button(t("classmode.teacher.forget"), key="classmode_forget"):
            state.leave()
            st.rerun()
        return
    lesson = state.lesson_of(current)
    colours = palette()
    join_url = draw.link(state.class_page_url(), **state.join_query(current.code))
    if current.ended:
        st.success(t("classmode.teacher.ended"), icon=":material/flag:")
        _summary(who, lesson)
        if st.button(t("classmode.teacher.new_class"), key="classmode_new", type="primary"):
            state.leave()
            st.rerun()
        return
    left, right = st.columns([3, 2], gap="large", vertical_alignment="center")
    with left:
        st.html(draw.code_html(current.code, t("classmode.teacher.join_with"), colours))
        st.markdown(
            f"<div data-testid='classmode-join-url' style='text-align:center;font-size:1.6rem;"
            f"word-break:break-all'>{draw.html_text(join_url)}</div>",
            unsafe_allow_html=True,
        )
    with right, st.container(key="classmode_qr", horizontal_alignment="center"):
        st.image(draw.qr_svg(join_url), width=420)
    st.markdown(f"## {draw.plain(_step_line(current, lesson))}")
    row = st.container(horizontal=True, key="classmode_page_moves")
    if lesson is not None:
        _lesson_moves(who, current, lesson, row, follow=False)
        step = state.step_of(current)
        if step is not None and row.button(
            t("classmode.teacher.open_room", room=_room_title(step.room)),
            key="classmode_open_room",
            icon=":material/open_in_new:",
        ):
            state.forget_room(step.room)
            query = state.with_lang(
                {**state.step_query(lesson, step), **state.join_query(who.code)}
            )
            st.switch_page(ROOMS[step.room].script, query_params=query)
    else:
        st.markdown(t("classmode.free.how"))
    _tally_panel(who, lesson)
    _roster_panel(who)
    with st.expander(t("classmode.teacher.summary"), icon=":material/summarize:"):
        _summary(who, lesson)
    with st.expander(t("classmode.teacher.resume"), icon=":material/key:"):
        st.caption(t("classmode.teacher.resume_hint"))
        st.code(
            draw.link(state.class_page_url(), **state.teacher_query(who.code, who.key)),
            language=None,
        )
    with st.popover(t("classmode.teacher.end"), icon=":material/stop_circle:"):
        st.markdown(t("classmode.teacher.end_confirm"))
        if st.button(t("classmode.teacher.end_yes"), key="classmode_end", type="primary"):
            state.end(who)
            st.rerun()


@st.fragment(run_every=state.TEACHER_POLL_S)
@guarded
def _tally_panel(who: Role, lesson: Lesson | None) -> None:
    """Joined and answered counts and, while a question is open or revealed, the chart. Reads
    the tally every ``TEACHER_POLL_S``: answers do not bump the class's version."""
    current = state.class_state(who.code)
    counts = state.tally(who)
    if current is None or counts is None:
        refusal_card()
        return
    lang = language()
    step = state.step_of(current)
    asks = step is not None and step.question is not None
    if not asks:  # free mode, or a step without a question: only who is here
        st.metric(t("classmode.tally.joined"), counts.joined)
        return
    cells = st.columns(3)
    cells[0].metric(t("classmode.tally.joined"), counts.joined)
    cells[1].metric(t("classmode.tally.answered"), counts.answered)
    cells[2].metric(
        t("classmode.tally.share"),
        draw.share_text(counts.share_correct, lang)
        if current.revealed
        else t("classmode.tally.at_reveal"),
    )
    if not current.asked:
        st.caption(t("classmode.tally.not_asked"))
        return
    assert step is not None and step.question is not None
    st.markdown(f"### {step.question.prompt[lang]}")
    if kind_of(step.question).answered_with == CODE:
        _code_tally(counts, lang)
        return
    _chart(counts, step.question.options, current.correct if current.revealed else None)


def _code_tally(counts: Tally, lang: str) -> None:
    """A code question's tally: passed, not yet and errors, and the commonest errors (torch's
    exception classes), never a student's code."""
    tallied = counts.counts or (0, 0, 0)
    passed, failed, errors = tallied
    st.markdown(
        t(
            "kinds.exercise.tally.counts",
            passed=passed,
            failed=failed,
            errors=errors,
            answered=counts.answered,
            joined=counts.joined,
        )
    )
    labels = tuple(t(f"kinds.exercise.tally.{name}") for name in ("passed", "failed", "error"))
    st.plotly_chart(
        draw.tally_figure(tallied, labels, 0, palette(), lang),
        theme="streamlit",
        width="stretch",
        key="classmode_code_chart",
        config={"displayModeBar": False, "staticPlot": True},
    )
    if counts.errors:
        st.markdown(f"**{t('kinds.exercise.tally.common')}**")
        for error_type, number in counts.errors:
            st.markdown(
                f"- {t('kinds.exercise.tally.error_row', error_type=error_type, count=number)}"
            )


REMOVED_NOTE_KEY = "classmode_removed_note"  # the nickname just removed, for a toast


def _remove(who: Role, student_id: str, nickname: str) -> None:
    """The Remove button's callback (runs before the roster is read again)."""
    if state.remove(who, student_id):
        st.session_state[REMOVED_NOTE_KEY] = nickname


def _joined_text(joined: float) -> str:
    minutes = int(max(0.0, time.time() - joined) // 60)
    if minutes < 1:
        return t("classmode.roster.joined_now")
    return t("classmode.roster.joined_ago", minutes=minutes)


@st.fragment(run_every=state.ROSTER_POLL_S)
@guarded
def _roster_panel(who: Role) -> None:
    """The teacher decides who is in: the lock (no new joins while it is on) and the roster,
    each student with when they joined and a Remove button. Buttons act in callbacks, so the
    roster drawn after a press is the one after the change."""
    current = state.class_state(who.code)
    people = state.roster(who)
    if current is None or people is None:
        refusal_card()
        return
    note = st.session_state.pop(REMOVED_NOTE_KEY, None)
    if note is not None:
        st.toast(t("classmode.roster.removed", name=draw.plain(note)), icon=":material/check:")
    row = st.container(horizontal=True, vertical_alignment="center", key="classmode_lock_row")
    if current.locked:
        row.markdown(t("classmode.roster.locked"))
    else:
        row.markdown(t("classmode.roster.open"))
    row.button(
        t("classmode.roster.unlock") if current.locked else t("classmode.roster.lock"),
        key="classmode_lock",
        icon=":material/lock_open:" if current.locked else ":material/lock:",
        on_click=state.lock,
        args=(who, not current.locked),
    )
    with st.expander(
        t("classmode.roster.header", count=len(people)),
        icon=":material/group:",
        key="classmode_roster",  # stays open as the count in its label changes
    ):
        if not people:
            st.caption(t("classmode.roster.empty"))
        for person in people:
            line = st.container(
                horizontal=True,
                vertical_alignment="center",
                key=f"classmode_student_{person.student_id}",
            )
            line.markdown(f"**{draw.plain(person.nickname)}** · {_joined_text(person.joined)}")
            line.button(
                t("classmode.roster.remove"),
                key=f"classmode_remove_{person.student_id}",
                icon=":material/person_remove:",
                on_click=_remove,
                args=(who, person.student_id, person.nickname),
            )
    refusal_card()


def _chart(counts: Tally, options: tuple[str, ...], correct: int | None) -> None:
    lang = language()
    tallied = counts.counts or tuple(0 for _ in options)
    figure = draw.tally_figure(tallied, draw.option_labels(options, lang), correct, palette(), lang)
    st.plotly_chart(
        figure,
        theme="streamlit",
        width="stretch",
        key="classmode_tally_chart",
        config={"displayModeBar": False, "staticPlot": True},
    )


def _summary(who: Role, lesson: Lesson | None) -> None:
    questions = state.summary(who)
    if questions is None:
        refusal_card()
        return
    if not questions:
        st.caption(t("classmode.summary.none"))
        return
    lang = language()
    rows = []
    for item in questions:
        prompt = ""
        if lesson is not None and 1 <= item.step <= len(lesson.steps):
            question = lesson.step(item.step).question
            prompt = question.prompt[lang] if question is not None else ""
        right = item.counts[item.correct] if 0 <= item.correct < len(item.counts) else 0
        rows.append((item.step, prompt, item.answered, right, item.share_correct))
    st.dataframe(draw.summary_frame(rows, lang), hide_index=True, width="stretch")
    csv = state.summary_csv(who)
    if csv is not None:
        st.download_button(
            t("classmode.summary.download"),
            data=csv.encode("utf-8"),
            file_name=f"class-{who.code}.csv",
            mime="text/csv",
            key="classmode_csv",
            icon=":material/download:",
        )
