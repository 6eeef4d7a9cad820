"""The nn.Module page under AppTest: the two MyLinear presets show the difference, a training
run draws its curve and the step control moves the numbers, the quiz reveals torch's answer,
Korean, and a shared link restores the room."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

import components.modules.state as room_state
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.i18n import translate
from torchatlas.links import encode_source
from torchatlas.modules import PRESETS
from torchatlas.modules.link import LINK

PAGE = "views/modules.py"


def _decode(token: str) -> str:
    return LINK.field("nn_src").parse(token)


@pytest.fixture(autouse=True)
def fresh_reports() -> None:
    room_state.REPORTS.clear()


def _query(at: AppTest) -> dict[str, str]:
    return {k: v if isinstance(v, str) else v[0] for k, v in at.query_params.items()}


def _frame(at: AppTest, column: str):
    """The first table with a column named ``column`` (its translated header)."""
    return next(frame.value for frame in at.dataframe if column in frame.value.columns)


def _step_table(at: AppTest):
    return _frame(at, translate("modules.training.columns.tensor"))


def _tensors(at: AppTest):
    """The tensor table (the inspector's first dataframe with a 'kind' column)."""
    for frame in at.dataframe:
        value = frame.value
        if translate("modules.table.kind") in value.columns and "name" in value.columns:
            return value
    raise AssertionError("no tensor table")


def _loss_spec(at: AppTest) -> dict:
    charts = at.get("plotly_chart")
    assert charts, "no loss curve"
    return json.loads(charts[0].proto.spec)


def test_the_two_mylinear_presets_show_the_difference() -> None:
    at = open_page(PAGE)
    assert not at.exception
    assert at.title[0].value == translate("app.rooms.modules.title")
    table = _tensors(at)
    assert list(table["name"]) == ["W", "b"]
    assert set(table[translate("modules.table.kind")]) == {translate("modules.kinds.plain")}
    assert set(table["parameters()"]) == {"no"}
    warnings = " ".join(str(w.value) for w in at.warning)
    assert "self.W is a plain tensor" in warnings and "empty parameter list" in warnings
    assert any("nn.Parameter(torch.empty(3, 2))" in code.value for code in at.code)

    at.selectbox(key="modules_preset").set_value(
        translate("modules.presets.mylinear_parameter")
    ).run()
    at.button(key="modules_inspect").click().run()
    assert not at.exception
    table = _tensors(at)
    assert set(table[translate("modules.table.kind")]) == {translate("modules.kinds.parameter")}
    assert set(table["parameters()"]) == {"yes"} and set(table["state_dict()"]) == {"yes"}
    assert not any("plain tensor" in str(w.value) for w in at.warning)
    assert at.metric[0].value == "8"
    assert _query(at)["nn_preset"] == "mylinear_parameter"


def test_the_list_bug_and_the_tree() -> None:
    at = open_page(PAGE)
    at.selectbox(key="modules_preset").set_value(translate("modules.presets.list_bug")).run()
    at.button(key="modules_inspect").click().run()
    warnings = " ".join(str(w.value) for w in at.warning)
    assert "nn.ModuleList" in warnings and "nn.ParameterList" in warnings
    tree = _frame(at, translate("modules.tree.own"))
    assert tree[translate("modules.tree.class")].tolist()[:2] == ["Stack", "ModuleList"]
    assert at.get("graphviz_chart")


def test_pasted_code_that_is_refused_explains_itself() -> None:
    at = open_page(PAGE)
    at.text_area(key="modules_source").set_value("import os\nos.system('ls')\n")
    at.button(key="modules_inspect").click().run()
    assert not at.exception
    assert translate("modules.errors.refused.title") in at.error[0].value


def _section(at: AppTest, section: str) -> AppTest:
    return at.button_group(key=room_state.SECTION).set_value(section).run()


def test_a_training_run_draws_its_curve_and_steps_move_the_numbers() -> None:
    at = open_page(PAGE, modules_section="train")
    spec = _loss_spec(at)
    losses = spec["data"][0]["y"]
    assert len(losses) == room_state.DEFAULT_STEPS and losses[-1] < losses[0] / 10
    at.select_slider(key="modules_steps").set_value(50).run()
    assert len(_loss_spec(at)["data"][0]["y"]) == 50
    step_table = _step_table(at)
    assert set(step_table[".grad"]) == {"None"}  # forward of step 1: no gradient yet
    for _ in range(3):  # → loss → backward → step
        at.button(key="modules_next").click().run()
    assert at.session_state[room_state.PHASE] == "step"
    stepped = _step_table(at)
    assert "None" not in set(stepped[".grad"]) and set(stepped["changed"]) == {"yes"}
    assert list(stepped["value"]) != list(step_table["value"])
    at.select_slider(key="modules_lr").set_value(2.0).run()
    assert any("Diverging" in str(w.value) for w in at.warning)
    assert spec != _loss_spec(at)
    at.toggle(key="modules_forget").set_value(True).run()
    assert translate("modules.training.accumulating") in [str(i.value) for i in at.info]
    query = _query(at)
    assert query["nn_lr"] == "2.0" and query["nn_steps"] == "50" and query["nn_forget"] == "1"
    assert query["nn_section"] == "train"
    at.toggle(key="modules_forget").set_value(False).run()
    at.select_slider(key="modules_steps").set_value(200).run()  # long enough to overflow
    assert any("is no longer a finite number" in str(c.value) for c in at.caption)


def test_the_plain_model_refuses_to_train() -> None:
    at = open_page(PAGE, modules_section="train")
    at.selectbox(key="modules_train_model").set_value("mylinear_plain").run()
    assert translate("modules.training.refused") in [str(e.value) for e in at.error]
    assert any("empty parameter list" in code.value for code in at.code)


def _reveal(at: AppTest, key: str) -> AppTest:
    next(b for b in at.button if b.proto.form_id == f"{key}_form").click().run()
    return at


def test_predict_then_reveal() -> None:
    """Through the kit: a wrong prediction and a right one, each against torch's answer from a
    live run, with the run's own words or numbers below."""
    at = open_page(PAGE, modules_section="quiz")
    options = list(at.radio(key="modules_quiz_plain_step_given").options)
    changes = translate("modules.quiz.plain_step.options.changes")
    at.radio(key="modules_quiz_plain_step_given").set_value(options.index(changes))
    _reveal(at, "modules_quiz_plain_step")
    assert not at.exception
    expected = translate("modules.quiz.plain_step.options.refused")
    wrong = translate("kit.reveal.wrong", given=changes, expected=expected)
    assert wrong in [str(e.value) for e in at.error]
    assert any("empty parameter list" in code.value for code in at.code)  # torch's refusal
    summed = translate("modules.quiz.forgotten_zero_grad.options.sum")
    radio = at.radio(key="modules_quiz_forgotten_zero_grad_given")
    radio.set_value(list(radio.options).index(summed))
    _reveal(at, "modules_quiz_forgotten_zero_grad")
    right = translate("kit.reveal.right", expected=summed)
    assert right in [str(s.value) for s in at.success]


def test_modes_and_saving() -> None:
    at = open_page(PAGE)
    _section(at, "compare")
    comparison = at.table[0].value
    assert list(comparison.loc[translate("modules.compare.facts.in_state_dict")]) == [
        "no",
        "yes",
        "yes",
    ]
    assert "became 0" not in rendered_text(at)  # one section at a time
    _section(at, "modes")
    assert "became 0" in rendered_text(at)
    at.button_group(key=room_state.MODE).set_value("batchnorm").run()
    assert "momentum = 0.1" in rendered_text(at)
    _section(at, "memory")
    assert "kaiming_uniform_" in rendered_text(at)
    _section(at, "save")
    downloads = at.get("download_button")
    assert downloads, "no download button"
    assert "Weights only load failed" in " ".join(code.value for code in at.code)
    assert _query(at)["nn_section"] == "save"
    _section(at, "inspect")  # the code, the box and the answers outlive their section
    assert at.text_area(key="modules_source").value == PRESETS["mylinear_plain"].source
    assert _query(at)["nn_mode"] == "batchnorm"


def test_korean() -> None:
    at = open_page(PAGE, "ko")
    assert not at.exception
    text = rendered_text(at)
    assert at.title[0].value == translate("app.rooms.modules.title", "ko")
    assert translate("modules.inspect.header", "ko") in text
    assert "W은(는) 평범한 텐서입니다" in " ".join(str(w.value) for w in at.warning)
    # AppTest formats a picked option in the test's thread, in English: open the section
    trained = open_page(PAGE, "ko", modules_section="train")
    assert not trained.exception
    assert translate("modules.training.header", "ko") in rendered_text(trained)
    assert translate("modules.training.explain.forward", "ko", step=1).split(":")[0] in (
        rendered_text(trained)
    )


def test_a_shared_link_restores_the_room() -> None:
    source = PRESETS["with_buffer"].source.replace(
        "nn.Linear(features, 2)", "nn.Linear(features, 3)"
    )
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params.update(
        {
            "nn_preset": "with_buffer",
            "nn_src": encode_source(source),
            "nn_train": "mlp",
            "nn_lr": "0.3",
            "nn_steps": "40",
            "nn_mode": "batchnorm",
            "nn_save": "buffered",
        }
    )
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert at.text_area(key="modules_source").value == source
    assert at.metric[0].value == str(4 * 3 + 3 + 2 + 2)  # fc(4→3) and BatchNorm1d(2)
    assert _decode(_query(at)["nn_src"]) == source
    _section(at, "train")
    assert at.session_state[room_state.TRAIN_MODEL] == "mlp"
    assert len(_loss_spec(at)["data"][0]["y"]) == 40
    _section(at, "modes")
    assert "momentum" in rendered_text(at)
    assert _decode(_query(at)["nn_src"]) == source  # other sections keep the code


def test_a_damaged_link_keeps_the_defaults() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params.update({"nn_lr": "1e9", "nn_preset": "nope", "nn_src": "!!!"})
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    notice = translate("kit.link.broken", fields="nn_preset, nn_src, nn_lr")
    assert [str(info.value) for info in at.info] == [notice]  # each unused part named once
    assert at.session_state[room_state.LR] == room_state.DEFAULT_LR
    assert at.text_area(key="modules_source").value == PRESETS["mylinear_plain"].source


@pytest.mark.parametrize("section", room_state.SECTIONS)
def test_a_rerun_computes_nothing_again(monkeypatch: pytest.MonkeyPatch, section: str) -> None:
    at = open_page(PAGE, modules_section=section)
    calls: list[str] = []
    for name in ("train_contained", "inspect_module", "save_load", "modes", "uninitialised_memory"):
        original = getattr(room_state, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(room_state, name, counted)
    at.run()
    assert not at.exception and calls == []
