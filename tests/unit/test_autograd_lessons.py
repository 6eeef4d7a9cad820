"""The autograd room's other lessons against torch: freezing ResNet-18, then vs now, the
prediction quiz, and the Graphviz text."""

from __future__ import annotations

import re

import pytest
import torch

from torchatlas.autograd import backward, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.freeze import BLOCKS, block_of, freeze
from torchatlas.autograd.history import then_and_now
from torchatlas.autograd.quiz import Question, grade, truth


@pytest.fixture(scope="module")
def fc_only():
    return freeze(trainable=("fc",))


def test_freeze_matches_the_recipe_done_by_hand(fc_only) -> None:
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet18(weights=None)
    model.fc = torch.nn.Linear(512, 100)
    for param in model.parameters():
        param.requires_grad = False
    for param in model.fc.parameters():
        param.requires_grad = True
    named = dict(model.named_parameters())
    assert [p.name for p in fc_only.params] == list(named)
    for info in fc_only.params:
        assert info.requires_grad is named[info.name].requires_grad
        assert info.shape == tuple(named[info.name].shape)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert fc_only.trainable_numel == trainable == 512 * 100 + 100
    assert fc_only.frozen_numel == sum(p.numel() for p in model.parameters()) - trainable
    # after one backward only fc's two tensors have a .grad
    assert fc_only.grads_none == len(named) - 2
    assert {p.name for p in fc_only.params if not p.grad_is_none} == {"fc.weight", "fc.bias"}
    # what the optimisers hold, as torch.optim built them
    everything, only_fc = fc_only.optimizers
    assert everything.source == "model.parameters()" and everything.tensors == len(named)
    assert everything.frozen_tensors == len(named) - 2
    assert only_fc.source == "model.fc.parameters()"
    assert (only_fc.tensors, only_fc.numel, only_fc.frozen_tensors) == (2, trainable, 0)


def test_freezing_saves_less_for_backward(fc_only) -> None:
    assert 0 < fc_only.saved_bytes < fc_only.saved_bytes_unfrozen
    # with only fc trainable, autograd saves just fc's input: batch × 512 floats
    assert fc_only.saved_bytes == fc_only.batch[0] * 512 * 4
    more = freeze(trainable=("layer4", "fc"))
    assert fc_only.saved_bytes < more.saved_bytes < more.saved_bytes_unfrozen
    assert more.saved_bytes_unfrozen == fc_only.saved_bytes_unfrozen
    assert {b.name for b in more.blocks if b.trainable} == {"layer4", "fc"}
    assert sum(b.numel for b in more.blocks) == more.trainable_numel + more.frozen_numel
    assert all(block_of(p.name) in BLOCKS for p in more.params)


def test_nothing_trainable_records_nothing() -> None:
    report = freeze(trainable=())
    assert report.trainable_numel == 0 and report.saved_bytes == 0
    assert report.grads_none == len(report.params)
    assert report.optimizers[1].tensors == 0


def test_freeze_refuses_unknown_blocks() -> None:
    with pytest.raises(ValueError):
        freeze(trainable=("layer9",))


def test_then_and_now_run_on_this_torch() -> None:
    cases = {case.key: case for case in then_and_now()}
    variable = cases["variable"]
    assert variable.then.type_name == "torch.Tensor"
    assert variable.then.requires_grad and variable.then.is_leaf
    assert all(now.requires_grad and now.is_leaf for now in variable.now)
    volatile = cases["volatile"]
    # volatile is ignored now: a warning, and the product still requires grad
    assert any("volatile" in w for w in volatile.then.warnings)
    assert volatile.then.requires_grad
    no_grad, inference = volatile.now
    assert not no_grad.requires_grad and not no_grad.is_inference
    assert not inference.requires_grad and inference.is_inference


def test_quiz_answers_come_from_torch() -> None:
    example = EXAMPLES["propagation"]
    graph = trace(example.program)
    result = backward(graph, "loss")
    assert truth(graph, result, "a") == {
        Question.REQUIRES_GRAD: False,
        Question.IS_LEAF: True,
        Question.GRAD_IS_NONE: True,
    }
    assert truth(graph, result, "z")[Question.GRAD_IS_NONE] is False
    assert truth(graph, None, "z")[Question.GRAD_IS_NONE] is True  # before backward
    predictions = {
        ("a", Question.REQUIRES_GRAD): False,
        ("a", Question.IS_LEAF): False,  # wrong: a is a leaf (no input required grad)
        ("b", Question.REQUIRES_GRAD): True,
        ("z", Question.GRAD_IS_NONE): False,
    }
    score = grade(graph, result, ("a", "b", "z", "nope"), predictions)
    assert score.total == 9
    assert score.correct == 3
    wrong = [a for a in score.answers if a.predicted is not None and not a.correct]
    assert [(a.variable, a.question) for a in wrong] == [("a", Question.IS_LEAF)]


def test_dot_marks_leaves_colours_and_step_gradients() -> None:
    graph = trace(EXAMPLES["propagation"].program)
    result = backward(graph, "loss")
    before = graph.to_dot(result, step=0)
    assert before.startswith("digraph") and before.rstrip().endswith("}")
    assert re.search(r'v_z \[label="z\\n\(5, 5\) leaf".*peripheries=2', before)
    assert re.search(r'v_b \[label="b\\n\(5, 5\)".*peripheries=1', before)
    requires, plain = "#ee4c2c", "#8a8f98"
    assert f'color="{requires}"' in before.split("v_z")[1].split("\n")[0]
    assert f'color="{plain}"' in before.split("v_x")[1].split("\n")[0]
    assert "penwidth" not in before and ".grad" not in before
    after = graph.to_dot(result, step=result.total_steps)
    grad = result.grad("z").grad
    assert f".grad {grad.short()}" in after
    # every gradient a node sent along an edge is drawn on that edge
    assert after.count("penwidth=2") == sum(
        1 for s in result.steps for g in s.grad_out if g is not None
    )
    # colours can be the page's theme
    dark = graph.to_dot(result, 1, {"text": "#e8eaf0"})
    assert 'fontcolor="#e8eaf0"' in dark
    # and the words can be the reader's language
    korean = graph.to_dot(result, 1, words={"leaf": "리프", "saved": "저장"})
    assert "(5, 5) 리프" in korean and "저장: other, self" in korean and " leaf" not in korean


def test_dot_quotes_labels() -> None:
    graph = trace("x = randn(2, requires_grad=True)\ny = x * 2\n")
    dot = graph.to_dot()
    assert dot.count("{") == dot.count("}") == 1
    assert '\\"' not in dot
