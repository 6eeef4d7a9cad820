"""The autograd room's other lessons against torch: freezing ResNet-18, then vs now, the
prediction quiz (the Graphviz text is the page's: test_autograd_draw.py)."""

from __future__ import annotations

import pytest
import torch

from torchatlas.autograd import backward, trace
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.freeze import BLOCKS, block_of, freeze
from torchatlas.autograd.history import then_and_now
from torchatlas.autograd.quiz import Question, grade, truth
from torchatlas.quiz import Grade


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
    # each prediction is graded against torch's answer, worded as torch prints it
    assert grade(graph, result, "a", Question.IS_LEAF, "False") == Grade(False, "True", "False")
    assert grade(graph, result, "a", Question.REQUIRES_GRAD, "False").correct
    assert grade(graph, result, "b", Question.REQUIRES_GRAD, "True").correct
    assert grade(graph, result, "z", Question.GRAD_IS_NONE, "False").correct
    assert grade(graph, None, "z", Question.GRAD_IS_NONE, "False").expected == "True"
    assert not grade(graph, result, "z", Question.IS_LEAF, "yes").correct  # not an option
    with pytest.raises(KeyError):
        grade(graph, result, "nope", Question.IS_LEAF, "True")
