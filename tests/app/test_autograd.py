"""The autograd page under AppTest: run an example, step backward to the end, read a leaf's
.grad on the page, predict and reveal, errors explained, Korean, and a shared link."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from components.autograd.state import ROOM_CACHE
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.autograd import backward, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.i18n import translate


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def graph_dot(at: AppTest) -> str:
    return at.get("graphviz_chart")[0].proto.spec


def grads_table(at: AppTest) -> dict[str, tuple[str, str]]:
    """The .grad table (a markdown table under its header): variable → (.grad, why)."""
    header = translate("autograd.grads.header")
    text = next(m.value for m in at.markdown if m.value.startswith(f"**{header}**"))
    rows = {}
    table = [line for line in text.splitlines() if line.startswith("| ")]
    for line in table[1:]:  # the header row first; the rule starts with "|-"
        name, grad, why = (cell.strip() for cell in line.strip("| ").split(" | "))
        rows[name.strip("`")] = (grad.strip("`"), why)
    return rows


def step_to_end(at: AppTest) -> int:
    steps = 0
    while not at.button(key="autograd_next").disabled:
        at.button(key="autograd_next").click().run()
        ok(at)
        steps += 1
        assert steps < 50
    return steps


def test_run_an_example_and_step_backward_to_the_end() -> None:
    at = open_page("views/autograd.py")
    ok(at)
    text = rendered_text(at)
    assert translate("autograd.graph.header") in text
    assert translate("autograd.graph.before") in next(i.value for i in at.info)
    dot = graph_dot(at)
    assert dot.startswith("digraph") and "AccumulateGrad" in dot and ".grad" not in dot
    # before backward, z's .grad is not there yet
    assert grads_table(at)["z"][0] == "—"
    expected = backward(trace(EXAMPLES["propagation"].program), "loss")
    steps = step_to_end(at)
    assert steps == len(expected.steps) == 4
    assert at.success[0].value == translate("autograd.graph.done", total=4)
    # the leaf's .grad, as torch filled it, is in the table and on the graph
    table = grads_table(at)
    assert table["z"] == (
        expected.grad("z").grad.short(4),
        translate("autograd.grads.reasons.filled"),
    )
    assert f".grad {expected.grad('z').grad.short()}" in graph_dot(at)
    assert table["a"][0] == "None"
    # one step back hides it again
    at.button(key="autograd_prev").click().run()
    assert ".grad" not in graph_dot(at)
    assert at.query_params["a_step"] == "3"
    assert "a_ex" not in at.query_params  # the link's default example: left out of the link


def _predict(at: AppTest, variable: str, question: str, answer: str) -> None:
    """Pick ``answer`` for the question asked now, press its Reveal (the kit's form), then
    go on to the next question."""
    key = f"autograd_quiz_{variable}_{question}"
    at.radio(key=f"{key}_given").set_value(("True", "False").index(answer))
    next(b for b in at.button if b.proto.form_id == f"{key}_form").click().run()
    ok(at)
    if any(b.key == "autograd_next_question" for b in at.button):
        at.button(key="autograd_next_question").click().run()
        ok(at)


def test_predict_then_reveal_grades_each_answer_against_torch() -> None:
    at = open_page("views/autograd.py")
    # a: requires_grad False, is_leaf True, .grad None → all three right;
    # b: requires_grad True and .grad is None True (not a leaf) → predicting False misses both;
    # z: requires_grad True, is_leaf True, .grad filled → all three right.
    predictions = {
        "a": ("False", "True", "True"),
        "b": ("False", "False", "False"),
        "z": ("True", "True", "False"),
    }
    questions = ("requires_grad", "is_leaf", "grad_is_none")
    score = translate("autograd.quiz.score", correct=7, total=9)
    asked = 0
    for variable, answers in predictions.items():
        for question, answer in zip(questions, answers, strict=True):
            asked += 1  # one question at a time, in order
            assert translate("autograd.quiz.progress", number=asked, total=9) in rendered_text(at)
            assert all(s.value != score for s in at.success)  # scored once all are revealed
            _predict(at, variable, question, answer)
    assert any(s.value == score for s in at.success)
    at.run()  # the last verdict joins the table of answers
    table = next(m.value for m in at.markdown if m.value.startswith("| "))
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 9
    wrong = [row for row in rows if "✗" in row]
    assert [row.split(" | ")[0] for row in wrong] == ["| `b`", "| `b`"]
    assert all("`True`" in row for row in wrong)  # torch's answer, as torch prints it
    assert [r.key for r in at.radio] == ["lang"]  # all revealed: no prediction can change
    at.button(key="autograd_again").click().run()
    assert at.radio(key="autograd_quiz_a_requires_grad_given").value is None


def test_in_place_trap_shows_the_version_counter_in_the_page() -> None:
    at = open_page("views/autograd.py")
    at.selectbox(key="autograd_example").set_value("inplace_trap").run()
    ok(at)
    step_to_end(at)
    errors = " ".join(e.value for e in at.error)
    assert translate("autograd.errors.inplace_saved", line=4, op="Sigmoid", version=1,
                     expected=0) in errors  # fmt: skip
    warnings = " ".join(w.value for w in at.warning)
    assert "`a`" in warnings and "version 1" in warnings


def test_refused_program_is_explained_and_nothing_runs() -> None:
    at = open_page("views/autograd.py")
    at.text_area(key="autograd_program").set_value("x = randn(3)\ny = x.__class__").run()
    ok(at)
    assert at.selectbox(key="autograd_example").value == "custom"
    assert translate("autograd.errors.private_name", line=2, name="__class__") in at.error[0].value
    assert not at.get("graphviz_chart")


def test_teaching_error_in_the_program_is_explained_with_torchs_words() -> None:
    at = open_page("views/autograd.py")
    at.selectbox(key="autograd_example").set_value("numpy_requires_grad").run()
    ok(at)
    assert translate("autograd.errors.numpy_requires_grad", line=2) in at.error[0].value
    assert any("detach().numpy()" in c.value for c in at.caption)


def test_korean_and_a_shared_link() -> None:
    at = open_page("views/autograd.py")
    at.selectbox(key="autograd_example").set_value("mlp").run()
    at.button(key="autograd_all").click().run()
    ok(at)
    at.session_state["lang"] = "ko"  # the sidebar's language switch
    at.run()
    ok(at)
    text = rendered_text(at)
    assert translate("autograd.graph.header", "ko") in text
    assert translate("autograd.graph.done", "ko", total=10) == at.success[0].value
    link = at.code[0].value
    assert "a_ex=mlp" in link and "a_step=10" in link and "lang=ko" in link
    # the link, opened in a new session, restores the example and the step
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    fresh.session_state["lang"] = "en"
    fresh.run()
    fresh.query_params["a_ex"] = "mlp"
    fresh.query_params["a_step"] = "10"
    fresh.query_params["a_seed"] = "0"
    fresh.switch_page("views/autograd.py").run()
    ok(fresh)
    assert fresh.text_area(key="autograd_program").value == EXAMPLES["mlp"].program
    assert fresh.success[0].value == translate("autograd.graph.done", total=10)


def test_a_custom_program_travels_in_the_link_and_a_broken_link_is_told() -> None:
    fresh = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    fresh.session_state["lang"] = "en"
    fresh.run()
    fresh.query_params["a_prog"] = "w = ones(2, requires_grad=True)\nloss = (w * 3).sum()\n"
    fresh.switch_page("views/autograd.py").run()
    ok(fresh)
    assert fresh.selectbox(key="autograd_example").value == "custom"
    fresh.button(key="autograd_all").click().run()
    assert grads_table(fresh)["w"][0] == "[3, 3]"
    broken = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    broken.session_state["lang"] = "en"
    broken.run()
    broken.query_params["a_prog"] = "x" * 5000
    broken.switch_page("views/autograd.py").run()
    ok(broken)
    assert translate("kit.link.broken", fields="a_prog") in [i.value for i in broken.info]


def test_freezing_toggles_change_the_counts() -> None:
    at = open_page("views/autograd.py", autograd_panel=translate("autograd.tabs.freeze"))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("autograd.freeze.trainable_params")] == f"{512 * 100 + 100:,}"
    at.toggle(key="autograd_train_layer4").set_value(True).run()
    ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("autograd.freeze.trainable_params")] == f"{8_445_028:,}"
    assert ("freeze", ("layer4", "fc")) in ROOM_CACHE
    tables = " ".join(m.value for m in at.markdown)
    assert "`model.parameters()` | 1 | 62 |" in tables
    assert "`[p for p in model.parameters() if p.requires_grad]` | 1 | 17 |" in tables


def test_then_and_now_tab_runs_variable_and_volatile() -> None:
    at = open_page("views/autograd.py", autograd_panel=translate("autograd.tabs.history"))
    ok(at)
    codes = " ".join(c.value for c in at.code)
    assert "volatile=True" in codes and "torch.inference_mode()" in codes
    assert "volatile was removed" in rendered_text(at)


def test_only_the_open_tab_runs() -> None:
    at = open_page("views/autograd.py")
    assert not at.metric  # the freezing tab is closed: no ResNet-18 ran for this rerun
    assert any("import torch" in c.value for c in at.code)  # the code, in the open tab
