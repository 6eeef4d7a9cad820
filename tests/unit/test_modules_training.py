"""train_steps, modes, save_load, the side-by-side table and the quiz, against torch itself:
a hand-written loop must give the same numbers bit for bit, the file facts must be what
zipfile and torch.load say, and the modes' numbers what the formulas give."""

from __future__ import annotations

import io
import math
import zipfile

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from components.modules.draw import running_stats_frame, values_text, variance_text
from torchatlas.modules import (
    MAX_STEPS,
    LoadCase,
    ModelsError,
    modes,
    save_load,
    train_steps,
)
from torchatlas.modules.compare import Fact, side_by_side
from torchatlas.modules.quiz import OPTIONS, Question, grade
from torchatlas.modules.training import build_model, dataset


def _as_tensor(values: tuple[float, ...] | None, like: torch.Tensor) -> torch.Tensor:
    assert values is not None
    return torch.tensor(values, dtype=like.dtype).reshape(like.shape)


def hand_loop(model_key: str, lr: float, steps: int, forget: bool, seed: int = 0):
    """The loop as a tutorial writes it, recording what the trace claims to record."""
    model = build_model(model_key, seed)
    x, y = dataset(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    losses, grads, values = [], [], []
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        optimizer.step()
        if not forget:
            optimizer.zero_grad()
        losses.append(loss.item())
        values.append([p.detach().clone() for p in model.parameters()])
        if not math.isfinite(losses[-1]):
            break
    return losses, grads, values


@pytest.mark.parametrize(
    ("model_key", "lr", "steps", "forget"),
    [
        ("mylinear", 0.1, 100, False),
        ("mylinear", 0.05, 60, True),
        ("mlp", 0.3, 80, False),
        ("mlp", 0.1, 40, True),
        ("mylinear", 2.0, 200, False),
    ],
)
def test_train_steps_equals_a_hand_written_loop_bit_for_bit(
    model_key: str, lr: float, steps: int, forget: bool
) -> None:
    trace = train_steps(model_key, lr=lr, steps=steps, forget_zero_grad=forget)
    losses, grads, values = hand_loop(model_key, lr, steps, forget)
    assert len(trace.steps) == len(losses)
    assert trace.losses == losses  # exact: same floats
    for record, step_grads, step_values in zip(trace.steps, grads, values, strict=True):
        for index, (grad, value) in enumerate(zip(step_grads, step_values, strict=True)):
            assert torch.equal(_as_tensor(record.grads[index], grad), grad)
            assert torch.equal(_as_tensor(record.after[index], value), value)
    first = build_model(model_key)
    for index, parameter in enumerate(first.parameters()):
        assert torch.equal(_as_tensor(trace.initial[index], parameter), parameter.detach())
        assert trace.steps[0].before[index] == trace.initial[index]


def test_a_run_repeats_with_its_seed_and_differs_with_another() -> None:
    one = train_steps("mlp", lr=0.1, steps=20, seed=3)
    assert train_steps("mlp", lr=0.1, steps=20, seed=3) == one
    assert train_steps("mlp", lr=0.1, steps=20, seed=4).losses != one.losses


def test_forgetting_zero_grad_adds_the_gradients_up() -> None:
    forgot = train_steps("mylinear", lr=0.1, steps=3, forget_zero_grad=True)
    assert not any(record.grads_cleared for record in forgot.steps)
    # step 2's .grad = step 1's .grad + the fresh gradient at step 2's weights
    model = build_model("mylinear")
    x, y = dataset()
    with torch.no_grad():
        for parameter, values in zip(model.parameters(), forgot.steps[1].before, strict=True):
            parameter.copy_(_as_tensor(values, parameter))
    nn.MSELoss()(model(x), y).backward()
    for index, parameter in enumerate(model.parameters()):
        first = _as_tensor(forgot.steps[0].grads[index], parameter)
        second = _as_tensor(forgot.steps[1].grads[index], parameter)
        assert torch.allclose(second, first + parameter.grad, atol=1e-6)


def test_a_learning_rate_that_diverges_is_caught_with_its_numbers() -> None:
    trace = train_steps("mylinear", lr=2.0, steps=200)
    assert trace.diverged_at is not None
    assert trace.losses[trace.diverged_at] > 1000 * trace.losses[0]
    assert trace.losses[5] > trace.losses[0]
    calm = train_steps("mylinear", lr=0.1, steps=200)
    assert calm.diverged_at is None and calm.losses[-1] < calm.losses[0] / 100


def test_the_plain_tensor_model_cannot_train_and_torch_says_why() -> None:
    trace = train_steps("mylinear_plain", lr=0.1, steps=50)
    assert trace.names == ("W", "b") and trace.registered == (False, False)
    try:
        torch.optim.SGD([], lr=0.1)
    except ValueError as exc:
        assert str(exc) in trace.optimizer_error
    assert "does not require grad" in trace.backward_error
    assert trace.final == trace.initial and len(trace.steps) == 1
    # the same starting values as the trainable version: only registration differs
    assert trace.initial == train_steps("mylinear", lr=0.1, steps=1).initial


@pytest.mark.parametrize(
    "arguments",
    [
        {"model_key": "resnet", "lr": 0.1, "steps": 10},
        {"model_key": "mlp", "lr": 0.1, "steps": 0},
        {"model_key": "mlp", "lr": 0.1, "steps": MAX_STEPS + 1},
        {"model_key": "mlp", "lr": float("nan"), "steps": 10},
        {"model_key": "mlp", "lr": 1e9, "steps": 10},
        {"model_key": "mlp", "lr": 0.1, "steps": True},
    ],
)
def test_work_is_bounded(arguments: dict) -> None:
    model_key = arguments.pop("model_key")
    with pytest.raises(ModelsError):
        train_steps(model_key, **arguments)


# ---------------------------------------------------------------- modes
def test_dropout_in_train_and_eval() -> None:
    report = modes("dropout")
    values = {value for row in report.train_output for value in row}
    assert values <= {0.0, 2.0} and report.zeros_in_train == sum(
        value == 0 for row in report.train_output for value in row
    )
    assert 0 < report.zeros_in_train < 24
    assert report.eval_output == report.input == report.eval_output_again
    assert modes("dropout") == report  # repeatable with its seed


def test_batchnorm_statistics_follow_the_formulas() -> None:
    report = modes("batchnorm")
    x = torch.tensor(report.input)
    mean, var = x.mean(0), x.var(0)  # running_var keeps the unbiased variance
    assert torch.allclose(torch.tensor(report.running_mean_after), 0.1 * mean, atol=1e-6)
    assert torch.allclose(torch.tensor(report.running_var_after), 0.9 + 0.1 * var, atol=1e-5)
    train = (x - mean) / torch.sqrt(x.var(0, unbiased=False) + 1e-5)
    assert torch.allclose(torch.tensor(report.train_output), train, atol=1e-5)
    running_mean = torch.tensor(report.running_mean_after)
    running_var = torch.tensor(report.running_var_after)
    evaluated = (x - running_mean) / torch.sqrt(running_var + 1e-5)
    assert torch.allclose(torch.tensor(report.eval_output), evaluated, atol=1e-5)
    assert report.differs and report.batches_tracked == 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_batchnorm_names_both_variances_as_torch_computes_them(seed: int) -> None:
    """Issue 34 item 9: train() normalises with the biased variance and moves running_var
    towards the unbiased one. Both are shown, each equal to torch's own from the batch, and
    every word naming one is read off torch's result, never assumed."""
    report = modes("batchnorm", seed)
    x = torch.tensor(report.input, dtype=torch.float32)
    biased, unbiased = x.var(0, unbiased=False), x.var(0, unbiased=True)
    assert torch.allclose(torch.tensor(report.batch_var_biased), biased, atol=1e-6)
    assert torch.allclose(torch.tensor(report.batch_var), unbiased, atol=1e-6)
    assert report.batch_size == x.shape[0] and not torch.allclose(biased, unbiased)
    # torch's own train() pass, replayed: what its output and its buffer update used
    layer = nn.BatchNorm1d(x.shape[1])
    out = layer.train()(x)
    by_hand = (x - x.mean(0)) / torch.sqrt(biased + layer.eps)
    assert torch.allclose(out, by_hand, atol=1e-5) and report.normalised_with == "biased"
    towards = (layer.running_var - (1 - layer.momentum) * torch.ones(x.shape[1])) / 0.1
    assert torch.allclose(towards, unbiased, atol=1e-4) and report.running_var_towards == "unbiased"
    assert torch.allclose(torch.tensor(report.running_var_after), layer.running_var, atol=1e-6)
    for lang in ("en", "ko"):
        frame = running_stats_frame(report, lang)
        assert frame is not None
        cells = frame.values.tolist()
        assert cells[1][2] == values_text(report.batch_var)  # running_var ← unbiased
        assert cells[2][2] == values_text(report.batch_var_biased)  # normalised with biased
        assert variance_text(report, "unbiased", lang) in cells[1][0]
        assert variance_text(report, "biased", lang) in cells[2][0]
        assert str(report.batch_size - 1) in variance_text(report, "unbiased", lang)


# ---------------------------------------------------------------- saving and loading
@pytest.mark.parametrize("model_key", ["mylinear", "mlp", "buffered"])
def test_save_load_facts_are_torchs(model_key: str) -> None:
    report = save_load(model_key)
    model = build_model(model_key)
    state = model.state_dict()
    assert [entry.key for entry in report.entries] == list(state)
    with zipfile.ZipFile(io.BytesIO(report.file_bytes)) as archive:
        assert [(e.name, e.size) for e in report.zip_entries] == [
            (info.filename, info.file_size) for info in archive.infolist()
        ]
        assert sum(name.split("/")[-2] == "data" for name in archive.namelist()) == len(state)
    loaded = torch.load(io.BytesIO(report.file_bytes), weights_only=True)
    assert all(torch.equal(loaded[key], value) for key, value in state.items())
    assert report.round_trip_equal and report.loaded_keys == tuple(state)
    assert report.refusal_type == "UnpicklingError"
    assert "Weights only load failed" in report.refusal and "TrainingNote" in report.refusal
    assert "\x1b" not in report.refusal and report.default_refuses
    attempts = {attempt.case: attempt for attempt in report.attempts}
    missing = attempts[LoadCase.MISSING]
    assert "Missing key(s)" in missing.strict_error and missing.missing == (missing.key,)
    assert missing.kept_fresh == (missing.key,)  # strict=False left it as initialised
    unexpected = attempts[LoadCase.UNEXPECTED]
    assert "Unexpected key(s)" in unexpected.strict_error
    assert unexpected.unexpected == ("extra.weight",) and not unexpected.relaxed_error
    mismatched = attempts[LoadCase.MISMATCHED]
    assert (
        "size mismatch" in mismatched.strict_error and "size mismatch" in mismatched.relaxed_error
    )
    if model_key == "buffered":
        assert "cache" not in loaded  # a non-persistent buffer is not saved


def test_only_built_in_models_are_saved() -> None:
    with pytest.raises(ValueError):
        save_load("anything")


# ---------------------------------------------------------------- the rest of the room
def test_side_by_side_is_what_torch_does() -> None:
    rows = {row.fact: row for row in side_by_side()}
    assert set(rows) == set(Fact)
    assert not any(rows[fact].plain for fact in Fact)
    assert all(rows[fact].parameter for fact in Fact)
    buffer = {fact for fact in Fact if rows[fact].buffer}
    assert buffer == {Fact.IN_STATE_DICT, Fact.MOVED_BY_DEVICE, Fact.CONVERTED_BY_DTYPE}


@pytest.mark.parametrize("question", list(Question))
def test_quiz_answers_come_from_live_runs(question: Question) -> None:
    expected = {Question.PLAIN_STEP: "refused", Question.FORGOTTEN_ZERO_GRAD: "sum"}[question]
    for option in OPTIONS[question]:
        result = grade(question, option)
        assert result.expected == expected and result.correct == (option == expected)
    with pytest.raises(ValueError):
        grade(question, "maybe")
