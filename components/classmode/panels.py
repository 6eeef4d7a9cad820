"""Class mode's widgets: the Class page (join and start, the teacher's projector view, the
student's view) and the class bar app.py draws above every page.

The projector view is read from the back of a room. While students join, the code is a tenth
of the screen high and the QR up to 420 px; once the lesson runs they shrink to a corner and a
1920×1080 screen shows the step, its moves, the counts, the question and its chart above the
fold (labels 28-30 px; the right option marked at the reveal). One button is primary at a time
(the one to press now), and moving on from an open question asks once. The teacher's bar above
a room carries the same moves, the question with a small chart, and the end.

A student's phone shows the question and its answer button right under the bar at the top of
whatever room they are in; when a step or a question opens the phone scrolls to it (once each:
:mod:`components.kit.focus`), and a step whose room shows torch's answer keeps the room closed
until the reveal. A student never reads the teacher's words (tests/app/test_classmode.py looks
at every string of every phase).

Following: a student's bar holds the fragment :func:`_poll`, which the server runs when the
class changes (:mod:`components.classmode.push`; the browser's timer only every
``push.FALLBACK_S`` seconds, or every ``state.poll_period()`` seconds where the server cannot
wake it); it reads one cached version number and draws only the step's question, if one is
open or revealed, so an idle student costs little (measured by
tests/e2e/test_classmode_poll.py). When the teacher moved, the fragment switches the student to
the teacher's room at once (where the server wakes it, the server opens the room itself: one
run, ``push.page_run``); a question opened and its reveal are drawn by the fragment itself;
the class ending reruns the page once.
"""

from __future__ import annotations

import time
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from components.classmode import draw, push, state
from components.classmode.state import Role
from components.contained import guarded
from components.i18n import language, t
from components.kit import code_answer, focus
from components.kit.follow import set_followed_place
from components.kit.predict_reveal import Sealed, predict_option, set_room_questions_shown
from components.lessons.draw import option_label, option_text, verdict_sentence
from components.theme import palette
from torchatlas.classmode import ClassState, Tally
from torchatlas.lessons import ROOMS, Lesson, Question, Step
from torchatlas.lessons.kinds import CODE, PASSED, is_right, kind_of

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


def _step_line(current: ClassState, lesson: Lesson | None, *, student: bool = False) -> str:
    """Where the class is, in one line. ``student``: a student's words (before the start, a
    student is told the lesson starts when the teacher is ready, not which button to press)."""
    if lesson is None:
        if current.room in ROOMS:
            return t("classmode.free.at", room=_room_title(current.room))
        return t("classmode.free.waiting")
    if current.step == 0:
        key = "classmode.step.waiting_start" if student else "classmode.step.not_started"
        return t(key, total=len(lesson.steps))
    step = lesson.step(current.step)
    return t(
        "classmode.step.line",
        step=current.step,
        total=len(lesson.steps),
        title=step.title[language()],
        room=_room_title(step.room),
    )


def _room_hidden(current: ClassState) -> bool:
    """The class's step keeps its room for the reveal (the lesson's ``hide = ["room"]``: the
    room shows torch's answer) and the teacher has not revealed it yet."""
    step = state.step_of(current)
    return step is not None and step.hides_room and not current.revealed


def _room_until_reveal(current: ClassState, page: str) -> None:
    """On the class's room page, while its step keeps the room for the reveal: the room's
    title and a note stand in for it and the room does not run (this stops the page's run).
    The poll runs the page again at the reveal."""
    if page != current.room or not _room_hidden(current):
        return
    with st.container(key="classmode_room_hidden"):
        st.title(_room_title(page))  # the page's one h1, as the room draws it
        st.info(t("classmode.question.room_hidden"), icon=":material/visibility_off:")
    st.stop()


# --------------------------------------------------------------------------- the class bar


def bar(page: str) -> None:
    """Above every page: reads a class link once (a teacher's own browser may bring back the
    class it drives); for a student, the class's step, question and the poll that follows
    the teacher; for a teacher on a room page, the code, live counts, the question and its
    tally, and the class's moves. Draws nothing for a visitor outside a class."""
    state.absorb_cookie(on_class_page=page == state.PAGE_PATH)
    state.absorb_link()
    state.forget_in_browser()
    who = state.role()
    # A student answers the class's questions: the room below leaves out its own quiz.
    set_room_questions_shown(who is None or who.teacher)
    if who is None:
        set_followed_place(None)
        if page != state.PAGE_PATH:
            refusal_card()
        return
    if who.teacher:
        set_followed_place(None)
        if page != state.PAGE_PATH:
            refusal_card()
            _teacher_bar(who, page)
        return
    refusal_card()
    # On the class's room page the room opens folded on the teacher's example (kit.follow).
    set_followed_place(_student_bar(who, page))


def _student_bar(who: Role, page: str) -> str | None:
    """The bar of a student; the class's place when this page is the class's room (the room
    below opens folded on the teacher's example), else None."""
    current = state.class_state(who.code)
    if current is None:
        if not state.refused_for_a_while():  # gone (expired, deleted): forget it
            state.leave()
        refusal_card()
        if state.role() is not None:  # the database is away: keep trying
            state.keep_room_closed(False)
            _follow_poll(who.code, page)
        return None
    before = state.seen_state()
    state.mark_seen(current)
    state.keep_student_link(who)
    # The teacher removed someone since this screen last looked: is it this student?
    removals = before is not None and before.removals != current.removals
    me = state.my_record(who, fresh=removals)
    if state.role() is None:  # the teacher removed them (or the class is gone): say so
        refusal_card()
        return None
    if current.ended:
        with st.container(border=True, key="classmode_bar"):
            st.info(t("classmode.student.ended"), icon=":material/flag:")
            _my_score(who, current)
            if st.button(t("classmode.student.leave"), key="classmode_leave_ended"):
                state.leave()
                st.rerun()
        return None
    if state.needs_follow(current):
        if page == current.room and state.room_fields_now(page) == current.fields():
            state.arrived(current, who)  # a reload, or the server opened the new place
        else:
            state.follow(current, who)
    lesson = state.lesson_of(current)
    lang = language()
    with st.container(border=True, key="classmode_bar"):
        name = me.nickname if me is not None else "—"
        # One element for both lines (each element costs every phone's run and a message).
        st.markdown(
            f":small[{draw.plain(t('classmode.student.bar', code=current.code, name=name))}]"
            f"  \n**{draw.plain(_step_line(current, lesson, student=True))}**"
        )
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
                st.markdown(step.narrative(lang, current.revealed))
        # A new place opens where the last page was scrolled (a phone's student may be far
        # down a room): the bar comes into view once per place; a sidebar a phone left open
        # after picking a page is closed once per page, so it does not cover the bar.
        once = f"class:{current.code}:{current.step}:{page}"
        focus.scripts(focus.scroll_to_script("classmode_bar", once),
                      focus.close_sidebar_script(once))  # fmt: skip
    # The question sits right under the bar, drawn by the poll (not inside the bar's
    # container: a fragment nested in containers costs each poll more).
    state.keep_room_closed(page == current.room and _room_hidden(current))
    _follow_poll(who.code, page)
    _room_until_reveal(current, page)
    return f"{current.code}:{current.step}" if page == current.room else None


def _my_score(who: Role, current: ClassState) -> None:
    """At the end, this student's own score: the revealed questions they got right (a
    question the teacher moved on from without revealing is not scored)."""
    lesson = state.lesson_of(current)
    revealed = state.revealed_steps(who)
    record = state.my_record(who, fresh=True)
    if lesson is None or revealed is None or record is None:
        return
    picks = dict(record.answers)
    scored = [n for n in revealed if 1 <= n <= len(lesson.steps) and lesson.step(n).question]
    if not scored:
        return
    right = sum(_answered_right(who, lesson.step(n), picks.get(n)) for n in scored)
    st.metric(
        t("classmode.student.score"),
        t("classmode.student.score_value", right=right, total=len(scored)),
    )


def _answered_right(who: Role, step: Step, picked: int | None) -> bool:
    """Whether this student's answer to ``step``'s question was right: the right option, or
    (a question answered with code) a verdict that passed."""
    question = step.question
    assert question is not None
    if kind_of(question).answered_with == CODE:
        kept = state.my_code_answer(who, step.number)
        return is_right(question, PASSED if kept is not None and kept.status == "pass" else None)
    return is_right(question, picked)


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
        # A student who scrolled down the room sees the question open, and its verdict:
        # brought into view once each (the fragment draws this at every run).
        stage = "revealed" if current.revealed else "asked"
        focus.scroll_to("classmode_question", once=f"class:{current.code}:{current.step}:{stage}")
        st.markdown(f"**{t('classmode.question.header')}** {question.prompt[lang]}")
        if kind_of(question).answered_with == CODE:
            _student_code_question(who, current, question, lang)
            return
        _student_options(who, current, question, picked, lang)


def _student_options(
    who: Role, current: ClassState, question: Question, picked: int | None, lang: str
) -> None:
    """The kit's predict-then-reveal, sealed: the pick goes to the class store and may change
    until the teacher's reveal, which the poll draws here. A pick kept redraws only the
    poll's fragment (the room below does not run again)."""

    def send(choice: int) -> bool:
        if state.answer(who, current.step, choice):
            return True
        refusal_card()
        return False

    def label(index: int) -> str:
        return option_label(question.options[index], lang)

    sealed = Sealed(
        revealed=current.revealed,
        send=t("classmode.question.send"),
        change=t("classmode.question.change"),
        sent=lambda kept: t("classmode.question.sent", answer=label(kept)),
        hint=t("classmode.question.hint"),
    )
    if predict_option(
        state.question_key(current.code, current.step),
        options=question.options,
        label=label,
        kept=picked,
        keep=send,
        verdict=lambda kept: _verdict(question, current, kept, lang),
        sealed=sealed,
    ):
        _rerun_question()


def _student_code_question(who: Role, current: ClassState, question: Any, lang: str) -> None:
    """A question answered with code: the kit's box until the reveal (each run graded in the
    sandbox and kept as this student's answer), then their verdict and the explanation. What
    they wrote and its verdict are shown only to them; the teacher sees counts."""
    if not current.revealed:
        found = code_answer.answer_box(question, key=state.question_key(current.code, current.step))
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
    """Torch's answer and whether this student's was right, worded for the answer's kind (a
    value, "it runs", an error) in the student's language, then torch's explanation."""
    right = current.correct if current.correct is not None else question.answer
    value = question.options[right]
    if picked is None:
        text = verdict_sentence("classmode.question.no_answer", value, lang)
        st.info(text, icon=":material/info:")
    elif picked == right:
        text = verdict_sentence("classmode.question.right", value, lang)
        st.success(text, icon=":material/check_circle:")
    else:
        shown = option_label(question.options[picked], lang)
        text = verdict_sentence("classmode.question.wrong", value, lang, picked=shown)
        st.error(text, icon=":material/cancel:")
    st.markdown(question.explain[lang])


def _follow_poll(code: str, page: str) -> None:
    """Poll the class every :func:`state.poll_period` seconds (this session's own period),
    or, where the server wakes the poll at each change (``push``), now and then only."""
    st.fragment(_poll, run_every=push.period(state.poll_period()))(code, page)


@guarded
def _poll(code: str, page: str) -> None:
    """Has the teacher changed anything? One cached integer read; nothing drawn unless a
    question is open or revealed. A move switches straight to the teacher's room from here
    (no whole-page run of the room being left first; where the server wakes this poll, it
    opens the room itself instead, :func:`push.page_run`). An open question, the student's own
    answer to it and, once revealed, the verdict are drawn here in place: the room below does
    not run again while sixty phones answer or see the verdict, and the phones' poll timers,
    which a whole-page run restarts, are not lined up again just before the teacher moves
    on. The class ending or going reruns the page. The reveal of a step that kept its room
    for it draws the verdict here too, and then the page runs again to open the room: asked
    for by the server where it wakes this poll (after every phone's verdict,
    ``push.page_run``), else at once from here."""
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
        if state.room_closed() and not _room_hidden(current) and not push.available():
            st.rerun(scope="app")  # revealed: the room it kept for the reveal opens
    if who is not None and current.code == code:
        _student_question(who, current, fresh=changed)
    # Woken at the class's next change; a move (or the reveal of the room kept closed here)
    # is then this page's one run, asked for by the server (push.page_run).
    student = who is not None and not who.teacher and current.code == code
    push.watch(
        state.store(),
        code,
        state.seen_version(),
        place=state.followed_place() if student else None,
        link=state.own_link(who) if student else None,
        removals=current.removals,
        kept_room=student and state.room_closed(),
    )


def _teacher_bar(who: Role, page: str) -> None:
    """Above a room, for the teacher: the code and live counts, the step, the moves (the
    question's action first), the question with its tally, and ending the class."""
    current = state.class_state(who.code)
    if current is None:
        refusal_card()
        return
    state.keep_in_browser(who)
    lesson = state.lesson_of(current)
    with st.container(border=True, key="classmode_teacher_bar"):
        head = st.container(horizontal=True, vertical_alignment="center")
        head.markdown(f"## {t('classmode.teacher.bar_code', code=current.code)}")
        with head:
            _teacher_counts(who)
        st.markdown(draw.plain(_step_line(current, lesson)))
        row = st.container(horizontal=True, key="classmode_teacher_moves")
        if row.button(
            t("classmode.teacher.to_class_page"), key="classmode_to_page", icon=":material/cast:"
        ):
            st.switch_page(state.PAGE, query_params=state.with_lang(state.join_query(who.code)))
        if current.ended:
            st.info(t("classmode.teacher.ended"), icon=":material/flag:")
            return
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
            _end_control(who, row)
            return
        _lesson_moves(who, current, lesson, row, follow=True)
        _end_control(who, row)
        step = state.step_of(current)
        if step is not None and step.question is not None:
            _tally_panel(who, lesson, draw.BAR)
        if step is not None:
            with st.expander(t("classmode.student.read_step")):
                st.markdown(step.narrative(language(), current.revealed))
    _room_until_reveal(current, page)


def _end_control(who: Role, where: Any) -> None:
    """End the class, asked once (a popover, in ``where``)."""
    with where.popover(t("classmode.teacher.end"), icon=":material/stop_circle:"):
        st.markdown(t("classmode.teacher.end_confirm"))
        if st.button(t("classmode.teacher.end_yes"), key="classmode_end", type="primary"):
            state.end(who)
            st.rerun()


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


def _lesson_moves(
    who: Role, current: ClassState, lesson: Lesson, row: Any, *, follow: bool
) -> None:
    """Previous, the question's action (open it, then reveal it), Next: one primary button at
    a time, the one to press now (Open the question before Next step). Moving on while the
    question is open and unrevealed asks once (reveal and continue, or continue without
    revealing: then the question is not scored). ``follow``: the teacher's own screen goes
    to the new step's room too (from a room page); from the Class page it stays."""
    total = len(lesson.steps)
    step = state.step_of(current)
    asks = step is not None and step.question is not None
    open_question = asks and current.asked and not current.revealed
    target = state.confirming(current) if open_question else None
    if target is None:
        state.stop_confirming()

    def move(number: int) -> None:
        state.stop_confirming()
        moved = state.move_to_step(who, lesson, number)
        if moved is None:
            refusal_card()
            return
        if follow:
            going = lesson.step(number)
            state.forget_room(going.room)
            query = state.with_lang(
                {**state.step_query(lesson, going), **state.join_query(who.code)}
            )
            st.switch_page(ROOMS[going.room].script, query_params=query)
        st.rerun()

    def request(number: int) -> None:
        if open_question:
            state.ask_to_confirm(current, number)
            st.rerun()
        move(number)

    if row.button(
        t("classmode.teacher.previous"),
        key="classmode_previous",
        disabled=current.step <= 1,
        icon=":material/arrow_back:",
    ):
        request(current.step - 1)
    if asks and not current.asked:
        pressed = row.button(
            t("classmode.teacher.ask"), key="classmode_ask", type="primary", icon=":material/quiz:"
        )
        if pressed and state.ask(who) is not None:
            st.rerun()
    elif open_question:
        pressed = row.button(
            t("classmode.teacher.reveal"),
            key="classmode_reveal",
            type="secondary" if target is not None else "primary",
            icon=":material/visibility:",
        )
        if pressed and state.reveal(who) is not None:
            state.stop_confirming()
            st.rerun()
    if row.button(
        t("classmode.teacher.start_lesson") if current.step == 0 else t("classmode.teacher.next"),
        key="classmode_next",
        disabled=current.step >= total,
        type="primary" if current.step == 0 or not asks or current.revealed else "secondary",
        icon=":material/arrow_forward:",
    ):
        request(current.step + 1)
    if target is not None:
        _confirm_move(who, target, move)
    refusal_card()


def _confirm_move(who: Role, target: int, move: Any) -> None:
    """The teacher pressed a move while the question is open: reveal it first, or move on
    without revealing (then it is not scored), or stay."""
    with st.container(border=True, key="classmode_confirm"):
        st.warning(t("classmode.teacher.confirm_open"), icon=":material/help:")
        choices = st.container(horizontal=True)
        if choices.button(
            t("classmode.teacher.reveal_and_go"),
            key="classmode_reveal_go",
            type="primary",
            icon=":material/visibility:",
        ):
            if state.reveal(who) is not None:
                move(target)
            refusal_card()
        if choices.button(
            t("classmode.teacher.go_unrevealed"),
            key="classmode_go_unrevealed",
            icon=":material/skip_next:",
        ):
            move(target)
        if choices.button(t("classmode.teacher.stay"), key="classmode_stay"):
            state.stop_confirming()
            st.rerun()


# --------------------------------------------------------------------------- the Class page


def page() -> None:
    """The Class page: the teacher's projector view, the student's view, or join and start.
    Each draws the page's one h1 where its layout wants it."""
    who = state.role()
    if who is not None and who.teacher:
        refusal_card()
        _teacher_page(who)
        return
    st.title(t("classmode.title"))
    refusal_card()
    if who is None:
        _start_or_join()
    else:
        _student_page(who)


def _start_or_join() -> None:
    """Joining first: a join link (the QR's target) shows only how to join that class (its
    code filled in, a nickname, Join), with starting a class one deliberate click below it;
    the bare Class page shows joining and starting side by side."""
    if st.session_state.get(state.JOIN_LINK_KEY) and not st.session_state.get(state.START_OPEN_KEY):
        st.markdown(t("classmode.join.intro"))
        _join_form()
        if st.button(
            t("classmode.join.teacher_instead"),
            key="classmode_show_start",
            type="tertiary",
            icon=":material/co_present:",
        ):
            st.session_state[state.START_OPEN_KEY] = True
            st.rerun()
        return
    st.markdown(t("classmode.intro"))
    join, start = st.columns(2, gap="large")
    with join:
        _join_form()
    with start:
        _start_form()


def _join_form() -> None:
    with st.container(border=True, key="classmode_join"):
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


def _start_form() -> None:
    with st.container(border=True, key="classmode_start"):
        st.header(t("classmode.start.header"), anchor=False)
        lang = language()
        options = state.lesson_options()
        # One box per language: a box keeps the labels it was first drawn with, so after a
        # switch to 한국어 its lessons were still listed in English. The pick itself is kept
        # apart (LESSON_PICK_KEY) and carried into the new language's box.
        widget = state.lesson_pick_widget(lang)
        held = st.session_state.get(state.LESSON_PICK_KEY)
        if widget not in st.session_state and held in options:
            st.session_state[widget] = held
        lesson_id = st.selectbox(
            t("classmode.start.lesson"),
            options=options,
            format_func=lambda key: (
                t("classmode.start.free") if key is None else state.lesson_title(key, lang) or key
            ),
            key=widget,
        )
        st.session_state[state.LESSON_PICK_KEY] = lesson_id
        st.caption(t("classmode.start.hint"))
        st.page_link("views/author.py", label=t("author.from_class"), icon=":material/edit_note:")
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
        st.title(t("classmode.title"))
        if st.button(t("classmode.teacher.forget"), key="classmode_forget"):
            state.leave()
            st.rerun()
        return
    state.keep_in_browser(who)
    lesson = state.lesson_of(current)
    join_url = draw.link(state.class_page_url(), **state.join_query(current.code))
    if current.ended:
        st.title(t("classmode.title"))
        st.success(t("classmode.teacher.ended"), icon=":material/flag:")
        _summary(who, lesson)
        if st.button(t("classmode.teacher.new_class"), key="classmode_new", type="primary"):
            state.leave()
            st.rerun()
        return
    if current.step >= 1:
        _projector_running(who, current, lesson, join_url)
    else:
        _projector_joining(who, current, lesson, join_url)
    _roster_panel(who)
    step = state.step_of(current)
    if step is not None:
        with st.expander(t("classmode.student.read_step"), icon=":material/menu_book:"):
            st.markdown(step.narrative(language(), current.revealed))
    with st.expander(t("classmode.teacher.summary"), icon=":material/summarize:"):
        _summary(who, lesson)
    with st.expander(t("classmode.teacher.resume"), icon=":material/key:"):
        st.caption(t("classmode.teacher.resume_hint"))
        st.code(
            draw.link(state.class_page_url(), **state.teacher_query(who.code, who.key)),
            language=None,
        )
    _end_control(who, st.container())


def _projector_joining(who: Role, current: ClassState, lesson: Lesson | None, url: str) -> None:
    """Before the lesson starts: the code, the join link and its QR fill the screen, read
    from the back of the room while everyone joins."""
    st.title(t("classmode.title"))
    left, right = st.columns([3, 2], gap="large", vertical_alignment="center")
    with left:
        st.html(draw.code_html(current.code, t("classmode.teacher.join_with"), palette()))
        st.markdown(
            f"<div data-testid='classmode-join-url' style='text-align:center;font-size:1.6rem;"
            f"word-break:break-all'>{draw.html_text(url)}</div>",
            unsafe_allow_html=True,
        )
    with right, st.container(key="classmode_qr", horizontal_alignment="center"):
        st.image(draw.qr_svg(url), width=420)
    _moves_and_tally(who, current, lesson)


def _projector_running(who: Role, current: ClassState, lesson: Lesson | None, url: str) -> None:
    """Once the lesson runs: the code, link and QR shrink to a corner (latecomers still read
    them), and the step, its moves, the question and its chart fill a 1920×1080 screen above
    the fold."""
    main, corner = st.columns([5, 2], gap="medium", vertical_alignment="top")
    with main:
        st.title(t("classmode.title"))
    with corner, st.container(key="classmode_corner", horizontal=True, gap="small"):
        with st.container(gap="small"):
            st.html(
                draw.code_html(
                    current.code, t("classmode.teacher.join_corner"), palette(), corner=True
                )
            )
            st.markdown(
                f"<div data-testid='classmode-join-url' style='font-size:0.95rem;"
                f"word-break:break-all'>{draw.html_text(url)}</div>",
                unsafe_allow_html=True,
            )
        with st.container(key="classmode_qr", width="content"):
            st.image(draw.qr_svg(url), width=150)
    with main:
        _moves_and_tally(who, current, lesson, tally=False)
    _tally_panel(who, lesson)


def _moves_and_tally(
    who: Role, current: ClassState, lesson: Lesson | None, *, tally: bool = True
) -> None:
    """The step's line, the moves (and the step's room), then (``tally``) the live tally."""
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
    if tally:
        _tally_panel(who, lesson)


@st.fragment(run_every=state.TEACHER_POLL_S)
@guarded
def _tally_panel(who: Role, lesson: Lesson | None, size: str = draw.PROJECTOR) -> None:
    """Joined and answered counts and, while a question is open or revealed, the chart (the
    right option marked at the reveal). Reads the tally every ``TEACHER_POLL_S``: answers do
    not bump the class's version. ``size``: the projector's (counts, the question as a
    heading, the chart sized to fit the screen) or the teacher's bar's (the question and a
    small chart: the bar shows the counts already)."""
    current = state.class_state(who.code)
    counts = state.tally(who)
    if current is None or counts is None:
        refusal_card()
        return
    lang = language()
    step = state.step_of(current)
    asks = step is not None and step.question is not None
    projector = size == draw.PROJECTOR
    if projector and not asks:  # free mode, or a step without a question: who is here
        st.metric(t("classmode.tally.joined"), counts.joined)
        return
    if not asks:
        return
    if projector:
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
    if projector:
        st.markdown(f"### {step.question.prompt[lang]}")
    else:  # above a room, whose title is the page's h1: no heading here
        st.markdown(f"**{t('classmode.question.header')}** {step.question.prompt[lang]}")
    if kind_of(step.question).answered_with == CODE:
        _code_tally(counts, lang)
        return
    _chart(counts, step.question.options, current.correct if current.revealed else None, size)


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
ROSTER_KEY = "classmode_roster"  # the roster's expander: True while the teacher has it open


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
    roster = st.expander(
        t("classmode.roster.header", count=len(people)),
        icon=":material/group:",
        key=ROSTER_KEY,  # stays open as the count in its label changes
        on_change="rerun",  # its rows are drawn only while it is open
    )
    with roster:
        # A hundred rows are three hundred elements: drawn while the teacher looks at them,
        # not in every poll of a projector that keeps the roster closed.
        if roster.open and not people:
            st.caption(t("classmode.roster.empty"))
        for person in people if roster.open else ():
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


def _chart(
    counts: Tally, options: tuple[str, ...], correct: int | None, size: str = draw.PROJECTOR
) -> None:
    """The answers per option as bars, in plain text labels; ``correct`` (given only once
    revealed) is marked in colour and with a check mark."""
    lang = language()
    tallied = counts.counts or tuple(0 for _ in options)
    labels = draw.option_labels(options, lang, correct)
    figure = draw.tally_figure(tallied, labels, correct, palette(), lang, size)
    st.plotly_chart(
        figure,
        theme="streamlit",
        width="stretch",
        key="classmode_tally_chart" if size == draw.PROJECTOR else "classmode_bar_chart",
        config={"displayModeBar": False, "staticPlot": True},
    )
    # The chart's numbers as text (a screen reader reads no bars): each option's letter (and
    # mark, once revealed) with its count; the options' words are the chart's own labels.
    letters = [label.split(":", 1)[0] for label in labels]
    st.caption(" · ".join(f"{letter}: {n}" for letter, n in zip(letters, tallied, strict=False)))


def _summary(who: Role, lesson: Lesson | None) -> None:
    """Every question opened: the table (plain text; an unrevealed question is not scored)
    and the CSV to download (what each student saw, the questions' text, totals apart,
    UTF-8 with a byte order mark)."""
    questions = state.summary(who)
    if questions is None:
        refusal_card()
        return
    if not questions:
        st.caption(t("classmode.summary.none"))
        return
    lang = language()
    rows, asked = [], []
    for item in questions:
        question = None
        if lesson is not None and 1 <= item.step <= len(lesson.steps):
            question = lesson.step(item.step).question
        prompt = question.prompt[lang] if question is not None else ""
        right = item.counts[item.correct] if 0 <= item.correct < len(item.counts) else 0
        rows.append((item.step, prompt, item.answered, right, item.share_correct, item.revealed))
        asked.append(
            draw.Asked(
                item.step,
                prompt,
                item.options,
                _shown_options(question, item.options, lang),
                item.correct,
                item.revealed,
            )
        )
    st.dataframe(draw.summary_frame(rows, lang), hide_index=True, width="stretch")
    csv = state.summary_csv(who)
    if csv is not None:
        st.download_button(
            t("classmode.summary.download"),
            data=draw.csv_bytes(draw.teacher_csv(csv, asked, lang)),
            file_name=f"class-{who.code}.csv",
            mime="text/csv",
            key="classmode_csv",
            icon=":material/download:",
            # The file is already in the page: a press needs no new run of the projector's
            # whole page (seconds of a busy server's time in a full class).
            on_click="ignore",
        )


def _shown_options(question: Any, options: tuple[str, ...], lang: str) -> tuple[str, ...]:
    """The options as students saw them, in plain text: an option's words (a value, "it
    works", "torch raises an error"), or a code answer's verdict."""
    if question is not None and kind_of(question).answered_with == CODE:
        return tuple(t(f"kinds.exercise.status.{status}") for status in options)
    return tuple(option_text(option, lang) for option in options)
