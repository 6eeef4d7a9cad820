"""Issue 22 item 10 in the nn.Module room: a student who leaves a section and comes back finds
its inputs and its result as they were, in every section, also when the room was opened
from a link on another section.

Streamlit forgets a widget's value once a run does not draw it; the room shows one section at
a time, so each section's widgets are not drawn while another is open. These tests change
every input of every section, visit all the other sections, come back and compare.
"""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

import components.modules.state as room_state
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.i18n import translate
from torchatlas.modules import PRESETS

PAGE = "views/modules.py"
EDITED = PRESETS["with_buffer"].source.replace("nn.Linear(features, 2)", "nn.Linear(features, 5)")


def _section(at: AppTest, section: str) -> AppTest:
    at.button_group(key=room_state.SECTION).set_value(section).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _tour(at: AppTest, back_to: str) -> AppTest:
    """Visit every other section, then come back to ``back_to``."""
    for section in room_state.SECTIONS:
        if section != back_to:
            _section(at, section)
    return _section(at, back_to)


def _frames(at: AppTest) -> list[str]:
    return [frame.value.to_json() for frame in at.dataframe]


def _loss(at: AppTest) -> list[float]:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["y"]


def _refused() -> str:
    return translate("modules.quiz.plain_step.options.refused")


def test_every_section_keeps_its_inputs_and_result() -> None:
    room_state.REPORTS.clear()
    at = open_page(PAGE)
    # inspect: pasted code, a model box, the inspection
    at.selectbox(key=room_state.PRESET).set_value(room_state.t("modules.presets.with_buffer")).run()
    at.text_area(key=room_state.SOURCE).set_value(EDITED)
    at.text_input(key=room_state.MODEL).set_value("Normalised(4)")
    at.button(key="modules_inspect").click().run()
    inspected = (at.metric[0].value, _frames(at), [str(w.value) for w in at.info])
    assert inspected[0] == str(4 * 5 + 5 + 2 + 2)  # fc(4→5) and BatchNorm1d(2)
    at = _tour(at, "inspect")
    assert at.text_area(key=room_state.SOURCE).value == EDITED
    assert at.text_input(key=room_state.MODEL).value == "Normalised(4)"
    assert (at.metric[0].value, _frames(at), [str(w.value) for w in at.info]) == inspected

    # train: every control, the step and the phase, and what they drew
    _section(at, "train")
    at.selectbox(key=room_state.TRAIN_MODEL).set_value("mlp").run()
    at.select_slider(key=room_state.LR).set_value(0.3).run()
    at.select_slider(key=room_state.STEPS).set_value(40).run()
    at.toggle(key=room_state.FORGET).set_value(True).run()
    at.slider(key=room_state.STEP).set_value(7).run()
    at.button(key="modules_next").click().run()
    at.button(key="modules_next").click().run()
    trained = (_loss(at), _frames(at), rendered_text(at))
    at = _tour(at, "train")
    assert at.selectbox(key=room_state.TRAIN_MODEL).value == "mlp"
    assert at.select_slider(key=room_state.LR).value == 0.3
    assert at.select_slider(key=room_state.STEPS).value == 40
    assert at.toggle(key=room_state.FORGET).value is True
    assert at.slider(key=room_state.STEP).value == 7
    assert at.session_state[room_state.PHASE] == "backward"
    assert (_loss(at), _frames(at), rendered_text(at)) == trained

    # quiz: an answer, revealed
    _section(at, "quiz")
    radio = at.radio(key=room_state.QUIZ + "plain_step_given")
    radio.set_value(list(radio.options).index(_refused()))
    next(b for b in at.button if b.proto.form_id == room_state.QUIZ + "plain_step_form").click()
    at.run()
    revealed = [str(s.value) for s in at.success]
    assert revealed
    at = _tour(at, "quiz")
    assert at.session_state[room_state.QUIZ + "plain_step_grade"].given == _refused()
    assert [str(s.value) for s in at.success] == revealed

    # modes, saving and memory: the choice and what it showed
    _section(at, "modes")
    at.button_group(key=room_state.MODE).set_value("batchnorm").run()
    shown = (_frames(at), rendered_text(at))
    at = _tour(at, "modes")
    assert at.button_group(key=room_state.MODE).value == "batchnorm"
    assert (_frames(at), rendered_text(at)) == shown

    _section(at, "save")
    at.button_group(key=room_state.SAVE_MODEL).set_value("buffered").run()
    shown = (_frames(at), [code.value for code in at.code])
    at = _tour(at, "save")
    assert at.button_group(key=room_state.SAVE_MODEL).value == "buffered"
    assert (_frames(at), [code.value for code in at.code]) == shown

    _section(at, "memory")
    at.button(key="modules_memory_again").click().run()
    shown = _frames(at)
    at = _tour(at, "memory")
    assert _frames(at) == shown  # the same allocation, not a new one


def test_a_link_on_another_section_keeps_the_first_one() -> None:
    """Opened on the training section from a link, the inspector still has the link's model."""
    room_state.REPORTS.clear()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params.update({"nn_preset": "list_bug", "nn_section": "train", "nn_steps": "30"})
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert len(_loss(at)) == 30
    _section(at, "inspect")
    assert at.text_area(key=room_state.SOURCE).value == PRESETS["list_bug"].source
    assert "nn.ModuleList" in " ".join(str(w.value) for w in at.warning)
    _section(at, "train")
    assert len(_loss(at)) == 30 and at.select_slider(key=room_state.STEPS).value == 30
