"""The autograd room's pure builders: step text, the .grad table as a step sees it, the
version note of the in-place trap, and the freezing bar and table."""

from __future__ import annotations

import re

import pytest

from components.autograd import draw
from components.theme import DARK, LIGHT
from torchatlas.autograd import backward, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.freeze import BLOCKS, BlockInfo, FreezeReport, OptimizerView
from torchatlas.i18n import translate


def _replay(key: str):
    graph = trace(EXAMPLES[key].program)
    return graph, backward(graph, graph.default_root)


def test_step_text_before_during_and_at_a_leaf() -> None:
    _, result = _replay("propagation")
    assert draw.step_text(result, 0, "en") == translate("autograd.graph.before")
    first = draw.step_text(result, 1, "en")
    assert "SumBackward0" in first and "Step 1 of 4" in first
    last = draw.step_text(result, 4, "ko")
    assert "z.grad" in last and "AccumulateGrad" in last


def test_accumulation_says_what_was_added_to_what() -> None:
    _, result = _replay("accumulate")
    text = draw.step_text(result, len(result.steps), "en")
    # w = ones(3), x = [1, 2, 3]: an earlier backward left [1, 2, 3]; this one adds [1, 2, 3]
    assert "added [1, 2, 3]" in text and "held [1, 2, 3]" in text and "now [2, 4, 6]" in text


def test_grads_table_fills_a_leaf_only_once_its_step_ran() -> None:
    _, result = _replay("mlp")
    filled_at = result.grad("w1").filled_at
    before = {row[0]: row for row in draw.grads_rows(result, filled_at, "en")}
    after = {row[0]: row for row in draw.grads_rows(result, filled_at + 1, "en")}
    assert before["w1"][2] == translate("autograd.grads.pending", step=filled_at + 1)
    assert after["w1"][1] == result.grad("w1").grad.short(4)
    assert after["w1"][2] == translate("autograd.grads.reasons.filled")
    table = draw.grads_table(result, filled_at + 1, "ko")
    assert table.count("\n") == len(result.grads) + 1  # header, rule, a row per variable
    assert f"| `w1` | `{after['w1'][1]}` |" in table


def test_variables_table_has_every_field() -> None:
    graph, _ = _replay("propagation")
    table = draw.variables_table(graph, "en")
    assert "| `b` | 5 | 5×5 | float32 | True | False | AddBackward0 | 0 |" in table
    assert "| `a` | 4 | 5×5 | float32 | False | True | None | 0 |" in table
    assert "| `loss` | 6 | () | float32 | True | False | SumBackward0 | 0 |" in table
    block = draw.scrolling(table, "Variables table")
    # a keyboard can focus the block to scroll it; a screen reader hears its name
    assert block.startswith('<div role="region" tabindex="0" aria-label="Variables table"')
    assert 'style="overflow-x:auto">\n\n| ' in block


def test_version_note_names_the_tensor_changed_in_place() -> None:
    graph, result = _replay("inplace_trap")
    note = draw.version_note(graph, result.error, "en")
    assert note is not None and "`a`" in note and "version 1" in note
    assert draw.version_note(graph, graph.error or result.error, "ko") is not None


def test_dark_dot_colours_differ_from_light() -> None:
    graph, result = _replay("propagation")
    light = draw.dot_text(graph, result, 2, draw.dot_colors(LIGHT, False))
    dark = draw.dot_text(graph, result, 2, draw.dot_colors(DARK, True))
    assert light != dark and DARK.text in dark


def _report(trainable: tuple[str, ...]) -> FreezeReport:
    blocks = tuple(BlockInfo(b, b in trainable, 2, 100 * (i + 1), 400 * (i + 1))
                   for i, b in enumerate(BLOCKS))  # fmt: skip
    views = (OptimizerView("model.parameters()", 1, 12, 2100, 10),
             OptimizerView("model.fc.parameters()", 1, 2, 600, 0))  # fmt: skip
    return FreezeReport("resnet18", trainable, (512, 100), (2, 3, 64, 64), (), blocks, views,
                        4096, 1, 8192, 2)  # fmt: skip


def test_freezing_bar_and_table() -> None:
    report = _report(("fc",))
    html = draw.freeze_bar_html(report, LIGHT, "en")
    assert html.count(f"background:{LIGHT.accent};height") == 1  # only fc is trainable
    assert html.count(f"background:{LIGHT.border};height") == len(BLOCKS) - 1
    assert "fc</b> 600" in html
    table = draw.optimizer_table(report, "ko")
    assert "| `model.fc.parameters()` | 1 | 2 | 600 | 0 |" in table
    assert translate("autograd.freeze.col_source", "ko") in table
    code = draw.freeze_code(report)
    assert "model.fc = torch.nn.Linear(512, 100)" in code
    assert "torch.optim.SGD(model.fc.parameters(), lr=0.01)" in code
    compile(code, "<freeze code>", "exec")


def test_dot_marks_leaves_colours_and_step_gradients() -> None:
    graph = trace(EXAMPLES["propagation"].program)
    result = backward(graph, "loss")
    before = draw.dot_text(graph, result, step=0)
    assert before.startswith("digraph") and before.rstrip().endswith("}")
    assert re.search(r'v_z \[label="z\\n\(5, 5\) leaf".*peripheries=2', before)
    assert re.search(r'v_b \[label="b\\n\(5, 5\)".*peripheries=1', before)
    requires, plain = "#ee4c2c", "#8a8f98"
    assert f'color="{requires}"' in before.split("v_z")[1].split("\n")[0]
    assert f'color="{plain}"' in before.split("v_x")[1].split("\n")[0]
    assert "penwidth" not in before and ".grad" not in before
    after = draw.dot_text(graph, result, step=result.total_steps)
    grad = result.grad("z").grad
    assert f".grad {grad.short()}" in after
    # every gradient a node sent along an edge is drawn on that edge
    assert after.count("penwidth=2") == sum(
        1 for s in result.steps for g in s.grad_out if g is not None
    )
    # colours can be the page's theme
    dark = draw.dot_text(graph, result, 1, {"text": "#e8eaf0"})
    assert 'fontcolor="#e8eaf0"' in dark
    # and the words can be the reader's language
    korean = draw.dot_text(graph, result, 1, words={"leaf": "리프", "saved": "저장"})
    assert "(5, 5) 리프" in korean and "저장: other, self" in korean and " leaf" not in korean


def test_dot_quotes_labels() -> None:
    graph = trace("x = randn(2, requires_grad=True)\ny = x * 2\n")
    dot = draw.dot_text(graph)
    assert dot.count("{") == dot.count("}") == 1
    assert '\\"' not in dot


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_the_dot_text_of_every_example_is_the_stored_one(key: str, golden) -> None:
    """What the room draws for each example before backward (a reviewed diff when the
    drawing or torch's graph changes: ``--update-golden``)."""
    golden(f"autograd/dot_{key}", draw.dot_text(trace(EXAMPLES[key].program)))


@pytest.mark.parametrize("step", [1, 2, 4])
def test_the_dot_text_of_backward_steps_is_the_stored_one(step: int, golden) -> None:
    """Stepping backward through the propagation example: the nodes run so far, the
    gradients on their edges and, at the end, the leaf's ``.grad``."""
    graph, result = _replay("propagation")
    assert result.total_steps == 4
    golden(f"autograd/dot_propagation_step_{step}", draw.dot_text(graph, result, step))
