"""Rooms that draw only their open tab keep the other tabs' inputs: a student who leaves a tab
and comes back finds it as they left it (Streamlit forgets the value of a widget a run does not
draw; components/widgets.py keeps them)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.apptest import open_page, rendered_text
from torchatlas.i18n import translate


def _tour(at: AppTest, key: str, away: str, back: str) -> AppTest:
    at.session_state[key] = away
    at.run()
    assert not at.exception
    at.session_state[key] = back
    at.run()
    assert not at.exception
    return at


def test_autograd_freezing_toggles_survive_another_tab() -> None:
    freeze, details = translate("autograd.tabs.freeze"), translate("autograd.tabs.details")
    at = open_page("views/autograd.py", autograd_panel=freeze)
    at.toggle(key="autograd_train_layer4").set_value(True).run()
    trainable = {m.label: m.value for m in at.metric}
    _tour(at, "autograd_panel", details, freeze)
    assert at.toggle(key="autograd_train_layer4").value is True
    assert {m.label: m.value for m in at.metric} == trainable


def test_strides_write_and_quiz_inputs_survive_another_tab() -> None:
    write, code, quiz = (translate(f"strides.tabs.{tab}") for tab in ("write", "code", "quiz"))
    at = open_page("views/strides.py", strides_panel=write)
    at.text_input(key="strides_write_text").set_value("fill_(7)")
    at.button[[b.label for b in at.button].index(translate("strides.write.apply"))].click().run()
    assert not at.exception
    written = rendered_text(at)
    _tour(at, "strides_panel", code, write)
    assert at.text_input(key="strides_write_text").value == "fill_(7)"
    assert rendered_text(at) == written  # the write's result is shown again
    _tour(at, "strides_panel", quiz, quiz)
    # the quiz is the kit's predict-then-reveal: a prediction counts once revealed, and the
    # revealed prediction and its verdict are what must survive the tour
    answers = [w for w in at.text_input if str(w.key).startswith("strides_quiz_")]
    answers += [w for w in at.radio if str(w.key).startswith("strides_quiz_")]
    assert answers, "the quiz tab shows an answer box"
    box = answers[0]
    box.set_value(0 if box in at.radio else "(2, 3)")
    form = str(box.key).removesuffix("_given") + "_form"
    next(b for b in at.button if b.proto.form_id == form).click().run()
    verdict = [m.value for m in (*at.success, *at.error)]
    assert verdict, "the prediction was graded"
    _tour(at, "strides_panel", code, quiz)
    assert [m.value for m in (*at.success, *at.error)] == verdict
