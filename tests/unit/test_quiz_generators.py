"""Every quiz question of the modules room and of the lessons, drawn whole and answered again
by plain torch written out here: the right option is torch's answer, and where torch raises,
"torch raises" is an option and is the right one.

The devices, shapes and classify rooms ask no generated question (the devices room's
"predict" lines ask the visitor to run the demonstration, whose findings come from the run;
``tests/unit/test_devices.py`` checks them against torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from torchatlas.lessons import FACTS, evaluate, load_all
from torchatlas.lessons.facts import _LINEARS, ERROR, SCENARIOS, TORCH_REFUSALS, _Net
from torchatlas.modules import quiz
from torchatlas.modules.training import build_model, dataset

# --------------------------------------------------------------------------- modules room


def _sgd_or_error(model: nn.Module) -> torch.optim.Optimizer | str:
    try:
        return torch.optim.SGD(model.parameters(), lr=0.1)
    except ValueError as refused:
        return str(refused)


def _torch_plain_step() -> str:
    """Plain torch: a MyLinear holding plain tensors, one SGD step."""
    model = build_model("mylinear_plain")
    optimizer = _sgd_or_error(model)
    if isinstance(optimizer, str):
        assert "empty parameter list" in optimizer  # what the "refused" option says
        return "refused"
    before = [t.clone() for t in (model.W, model.b)]
    x, y = dataset()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    same = all(torch.equal(a, b) for a, b in zip(before, (model.W, model.b), strict=True))
    return "unchanged" if same else "changes"


def _torch_forgotten_zero_grad() -> str:
    """Plain torch: two backward() calls without zero_grad(), against the fresh gradient at
    the same weights."""
    x, y = dataset()

    def second_grad(clear: bool) -> tuple[torch.Tensor, torch.Tensor]:
        model = build_model("mylinear")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        nn.functional.mse_loss(model(x), y).backward()
        first = model.W.grad.clone()
        optimizer.step()
        if clear:
            optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        return first, model.W.grad.clone()

    first, kept = second_grad(clear=False)
    _, fresh = second_grad(clear=True)
    if torch.count_nonzero(kept) == 0:
        return "zero"
    return "sum" if torch.allclose(kept, first + fresh, rtol=1e-5, atol=1e-6) else "fresh"


TORCH_MODULES_ANSWERS: dict[quiz.Question, Callable[[], str]] = {
    quiz.Question.PLAIN_STEP: _torch_plain_step,
    quiz.Question.FORGOTTEN_ZERO_GRAD: _torch_forgotten_zero_grad,
}


def test_every_modules_question_has_a_torch_oracle() -> None:
    assert set(TORCH_MODULES_ANSWERS) == set(quiz.Question)


@pytest.mark.parametrize("question", list(quiz.Question))
def test_modules_quiz_answer_is_torchs(question: quiz.Question) -> None:
    truth = TORCH_MODULES_ANSWERS[question]()
    answer = quiz.answer(question)
    assert answer.expected == truth
    assert answer.expected in quiz.OPTIONS[question]
    assert quiz.grade(question, truth, answer).correct
    for other in quiz.OPTIONS[question]:
        if other != truth:
            assert not quiz.grade(question, other, answer).correct


def test_plain_step_offers_torch_raising_and_it_is_right() -> None:
    """torch raises building the optimiser: "refused" is the option that says so."""
    assert isinstance(_sgd_or_error(build_model("mylinear_plain")), str)
    assert "refused" in quiz.OPTIONS[quiz.Question.PLAIN_STEP]
    assert quiz.answer(quiz.Question.PLAIN_STEP).expected == "refused"


def test_a_run_that_raised_is_never_graded_as_zero(monkeypatch) -> None:
    """A run with no gradient (torch raised) fits none of forgotten_zero_grad's options: the
    question refuses to answer instead of calling it "zero"."""
    from torchatlas.modules import training

    real = training.train_steps

    def failing(*args: Any, **kwargs: Any) -> training.TrainingTrace:
        trace = real(*args, **kwargs)
        return training.TrainingTrace(
            **{
                **{f: getattr(trace, f) for f in trace.__dataclass_fields__},
                "backward_error": "RuntimeError: element 0 of tensors does not require grad",
            }
        )

    monkeypatch.setattr(quiz, "train_steps", failing)
    with pytest.raises(quiz.NoOptionFits):
        quiz.answer(quiz.Question.FORGOTTEN_ZERO_GRAD)


# --------------------------------------------------------------------------- lessons' questions
# Each fact a question asks, answered by plain torch written here (trusted lesson files: an
# op's text is applied with ``eval`` in this test only). Any exception torch raises is ERROR.


def _raises_is_error(compute: Callable[[], str]) -> str:
    try:
        return compute()
    except TORCH_REFUSALS:
        return ERROR


def _chain(shape: list[int], ops: list[str], dtype: str = "int64") -> torch.Tensor:
    start = torch.arange(int(torch.tensor(shape).prod())).to(getattr(torch, dtype)).reshape(shape)
    tensor = start
    for op in ops:
        tensor = eval("tensor" + op, {"tensor": tensor})  # lesson files, in a test only
    return tensor


def _shape(size: Any) -> str:
    return str(tuple(int(n) for n in size))


def _net_forward(shape: list[int], in_channels: int = 3, fc1_in: int = 400) -> dict[str, Any]:
    """Every layer's output shape (until one raises) and the features fc1 receives, with real
    CPU tensors."""
    torch.manual_seed(0)
    net = _Net(in_channels, fc1_in)
    seen: dict[str, Any] = {}
    x = torch.zeros(shape)
    try:
        x = net.conv1(x)
        seen["conv1"] = x.shape
        x = net.pool(torch.relu(x))
        seen["pool"] = x.shape
        x = net.conv2(x)
        seen["conv2"] = x.shape
        x = torch.flatten(net.pool(torch.relu(x)), 1)
        seen["features"] = x.shape[1]
        for name in ("fc1", "fc2", "fc3"):
            x = getattr(net, name)(x)
            seen[name] = x.shape
            x = torch.relu(x)
    except RuntimeError:
        pass
    return seen


def _net_output(layer: str, shape: list[int], in_channels: int = 3, fc1_in: int = 400) -> str:
    seen = _net_forward(shape, in_channels, fc1_in)
    return _shape(seen[layer]) if layer in seen else ERROR


def _features(shape: list[int], in_channels: int = 3) -> str:
    seen = _net_forward(shape, in_channels)
    return str(seen["features"]) if "features" in seen else ERROR


def _sgd(weight: float, grad: float, lr: float) -> str:
    w = torch.tensor([weight], dtype=torch.float64, requires_grad=True)
    (w * grad).sum().backward()  # d/dw (w * grad) = grad
    torch.optim.SGD([w], lr=lr).step()
    return repr(float(f"{w.item():.6g}"))


def _scenario(scenario: str) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return SCENARIOS[scenario]()


def _grad(scenario: str, name: str) -> str:
    variables = _scenario(scenario)
    variables["loss"].backward()
    grad = variables[name].grad
    return "None" if grad is None else str([float(v) for v in grad.reshape(-1).tolist()])


def _preprocess(resize: int, crop: int, width: int = 451, height: int = 300) -> str:
    from PIL import Image
    from torchvision.transforms import functional as F

    picture = F.center_crop(F.resize(Image.new("RGB", (width, height)), resize), crop)
    return _shape(F.to_tensor(picture).shape)


def _trainable(out_features: int = 100) -> str:
    from torchvision.models import resnet18

    model = resnet18()
    model.requires_grad_(False)
    model.fc = nn.Linear(512, out_features)
    return str(sum(p.numel() for p in model.parameters() if p.requires_grad))


def _named() -> str:
    try:
        torch.tensor([0.2126, 0.7152, 0.0722], names=["channels"])  # type: ignore[call-arg]
    except (TypeError, RuntimeError) as refused:
        return type(refused).__name__
    return "ok"


ORACLES: dict[str, Callable[..., str]] = {
    "tensor_size": lambda shape, ops, dtype="int64": _shape(_chain(shape, ops, dtype).shape),
    "tensor_stride": lambda shape, ops, dtype="int64": _shape(_chain(shape, ops, dtype).stride()),
    "tensor_offset": lambda shape, ops, dtype="int64": str(
        _chain(shape, ops, dtype).storage_offset()
    ),
    "result_dtype": lambda left, right, right_kind="tensor": str(
        torch.promote_types(getattr(torch, left), getattr(torch, right))
    ).removeprefix("torch."),
    "broadcast_shape": lambda shapes: _shape(
        (torch.empty(shapes[0], device="meta") + torch.empty(shapes[1], device="meta")).shape
    ),
    "inplace_unary": lambda op, dtype: (
        getattr(torch.arange(9).to(getattr(torch, dtype)), op + "_")(),
        "ok",
    )[1],
    "conv_output_shape": lambda in_channels, out_channels, kernel, shape: _shape(
        nn.functional.conv2d(
            torch.zeros(shape), torch.zeros(out_channels, in_channels, kernel, kernel)
        ).shape
    ),
    "net_output_shape": _net_output,
    "net_features_into_fc1": _features,
    "parameter_count": lambda kind, input_dim=3, output_dim=2: str(
        sum(p.numel() for p in _LINEARS[kind](input_dim, output_dim).parameters())
    ),
    "parameter_tensors": lambda kind, input_dim=3, output_dim=2: str(
        len(list(_LINEARS[kind](input_dim, output_dim).parameters()))
    ),
    "linear_output_shape": lambda input_dim, output_dim, batch: _shape(
        nn.Linear(input_dim, output_dim)(torch.zeros(batch, input_dim)).shape
    ),
    "sgd_update": _sgd,
    "to_returns_same": lambda kind, dtype="float64": str(
        (lambda thing: thing.to(getattr(torch, dtype)) is thing)(
            nn.Linear(2, 2) if kind == "module" else torch.zeros(2, 2)
        )
    ),
    "accelerator_available": lambda: str(
        torch.cuda.is_available() or torch.backends.mps.is_available()
    ),
    "requires_grad": lambda scenario, name: str(_scenario(scenario)[name].requires_grad),
    "grad_after_backward": _grad,
    "backward_outcome": lambda scenario: (_grad(scenario, "loss"), "ok")[1],
    "variable_is_tensor": lambda: str(type(torch.autograd.Variable(torch.ones(2))) is torch.Tensor),
    "trainable_after_freeze": _trainable,
    "preprocess_shape": _preprocess,
    "named_tensors": _named,
}

QUESTIONS = [
    (f"{lesson.id}#{step.number}", step.question)
    for lesson in load_all()
    for step in lesson.steps
    if step.question is not None and step.question.kind == "fact"  # others: test_lesson_kinds
]


def _thawed(value: Any) -> Any:
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


def test_every_fact_a_question_asks_has_a_plain_torch_oracle() -> None:
    asked = {question.fact for _, question in QUESTIONS}
    assert asked <= set(ORACLES), sorted(asked - set(ORACLES))


@pytest.mark.parametrize(("where", "question"), QUESTIONS, ids=[w for w, _ in QUESTIONS])
def test_every_lesson_question_is_answered_by_torch(where: str, question) -> None:
    args = {k: _thawed(v) for k, v in question.args}
    truth = _raises_is_error(lambda: ORACLES[question.fact](**args))
    assert question.value == truth, where
    assert question.options.count(truth) == 1
    if truth == ERROR:
        assert ERROR in question.options  # "torch raises" is offered where it is the truth


# --------------------------------------------------------------------------- the class
# Any fact whose computation torch refuses answers ERROR (the option "torch raises"), never a
# crash that would keep a lesson from loading or a question from being asked.

TORCH_REFUSES = [
    ("conv_output_shape", {"in_channels": 3, "out_channels": 5, "kernel": 5, "shape": [3, 2, 2]}),
    ("conv_output_shape", {"in_channels": 3, "out_channels": 5, "kernel": 2, "shape": [4, 8, 8]}),
    ("net_features_into_fc1", {"shape": [1, 3, 8, 8]}),
    ("net_features_into_fc1", {"shape": [1, 1, 32, 32]}),
    ("net_output_shape", {"layer": "fc1", "shape": [1, 1, 28, 28], "in_channels": 1}),
    ("sgd_update", {"weight": 1.0, "grad": 0.5, "lr": -1.0}),
    ("tensor_size", {"shape": [3, 2], "ops": [".t()", ".view(-1)"]}),
    ("tensor_size", {"shape": [2, 3], "ops": [".squeeze(5)"]}),
    ("tensor_values", {"shape": [2, 3], "ops": [".mean(0)"]}),
    ("broadcast_shape", {"shapes": [[2, 3], [3, 2]]}),
    ("einsum_shape", {"equation": "ij,jk->ik", "shapes": [[2, 3], [4, 5]]}),
    ("inplace_unary", {"op": "cos", "dtype": "int64"}),
    ("backward_outcome", {"scenario": "inplace_trap"}),
    ("grad_after_backward", {"scenario": "inplace_trap", "name": "x"}),
]


@pytest.mark.parametrize(("fact", "args"), TORCH_REFUSES, ids=[f for f, _ in TORCH_REFUSES])
def test_a_fact_torch_refuses_is_the_answer_error(fact: str, args: dict) -> None:
    assert fact in FACTS
    with pytest.raises(TORCH_REFUSALS):
        _refusal = ORACLES.get(fact) or FACTS[fact].compute
        value = _refusal(**args)
        if value == ERROR:  # the fact catches torch's refusal itself
            raise RuntimeError(value)
    assert evaluate(fact, args) == ERROR
