"""Training, modes, saving and loading on the room's built-in tiny models (trusted code that
runs on the server; pasted code never reaches this module).

- :func:`train_steps`: forward → loss → backward → ``step()`` → ``zero_grad()``, each step's
  loss and every parameter's value and ``.grad`` recorded, exactly the numbers a plain torch
  loop computes (tests/unit/test_modules_training.py checks them bit for bit).
- :func:`modes`: the same input through ``train()`` and ``eval()`` (Dropout, BatchNorm).

Every model is built and filled from a private ``torch.Generator`` seeded by the caller, so a
run repeats exactly and another thread's use of the global random state cannot change it.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from enum import StrEnum

import torch
from torch import nn

from torchatlas.errors import CodedError

MAX_STEPS = 500
MIN_LR, MAX_LR = 1e-4, 10.0
SAMPLES = 16
# Loss beyond this many times the first step's counts as diverging: the page says so with
# the numbers, and the run stops once the loss is no longer finite.
DIVERGENCE_FACTOR = 1e3


class TrainingError(StrEnum):
    """Why a run could not train (``modules.training.errors.<value>``)."""

    BAD_MODEL = "bad_model"
    BAD_STEPS = "bad_steps"
    BAD_LR = "bad_lr"


class ModelsError(CodedError, ValueError):
    """A request outside the bounds (the room's coded error): ``code`` and ``params`` select
    ``modules.training.errors.<code>``."""

    room = "modules"
    codes = TrainingError

    @property
    def key(self) -> str:
        return f"modules.training.errors.{getattr(self.code, 'value', self.code)}"


# ---------------------------------------------------------------------------- the models
class MyLinear(nn.Module):
    """The curriculum's second version: ``W`` and ``b`` registered as parameters."""

    def __init__(self, input_dim: int = 3, output_dim: int = 2) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.FloatTensor(input_dim, output_dim))
        self.b = nn.Parameter(torch.FloatTensor(output_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.W) + self.b


class MyLinearPlain(nn.Module):
    """The curriculum's first version: ``W`` and ``b`` are plain tensors."""

    def __init__(self, input_dim: int = 3, output_dim: int = 2) -> None:
        super().__init__()
        self.W = torch.FloatTensor(input_dim, output_dim)
        self.b = torch.FloatTensor(output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.W) + self.b


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))


class Buffered(nn.Module):
    """A model with buffers: two saved ones (``mean``, ``std``) and one left out of the file."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("std", torch.ones(3))
        self.register_buffer("cache", torch.zeros(3), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc((x - self.mean) / self.std)


BUILDERS = {
    "mylinear": MyLinear,
    "mylinear_plain": MyLinearPlain,
    "mlp": _mlp,
    "buffered": Buffered,
}
TRAINABLE = ("mylinear", "mylinear_plain", "mlp")
TRUE_W = ((2.0, -1.0), (0.5, 1.0), (-1.0, 3.0))
TRUE_B = (0.5, -2.0)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


def _tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every float tensor the model's code uses: its registered parameters, and (for the plain
    version) the tensors it keeps as ordinary attributes, in a fixed order."""
    found = list(model.named_parameters())
    names = {name for name, _ in found}
    for name, value in vars(model).items():
        if isinstance(value, torch.Tensor) and name not in names:
            found.append((name, value))
    return found


def build_model(model_key: str, seed: int = 0) -> nn.Module:
    """A fresh built-in model with every weight drawn from ``seed`` (uniform in ±1/√fan_in, as
    ``nn.Linear`` draws them): the lesson's ``torch.FloatTensor`` leaves memory as it was, and
    a run must repeat."""
    if model_key not in BUILDERS:
        raise ModelsError(TrainingError.BAD_MODEL, model=model_key, choices=", ".join(BUILDERS))
    model = BUILDERS[model_key]()
    generator = _generator(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                owned = [module.weight, module.bias]
                bound = 1 / math.sqrt(module.in_features)
            elif isinstance(module, MyLinear | MyLinearPlain):
                owned = [module.W, module.b]
                bound = 1 / math.sqrt(module.W.shape[0])
            else:
                continue
            for tensor in owned:
                tensor.uniform_(-bound, bound, generator=generator)
    return model


def dataset(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A small linear-regression set: ``y = x @ TRUE_W + TRUE_B`` plus a little noise."""
    generator = _generator(seed + 1)
    x = torch.randn(SAMPLES, 3, generator=generator)
    noise = torch.randn(SAMPLES, 2, generator=generator)
    y = x @ torch.tensor(TRUE_W) + torch.tensor(TRUE_B) + 0.1 * noise
    return x, y


# ---------------------------------------------------------------------------- training
Values = tuple[float, ...]


@dataclass(frozen=True)
class StepRecord:
    """One step: the loss of its forward pass, each tensor's values before ``step()``, its
    ``.grad`` after ``backward()`` (None: no gradient), and its values after ``step()``."""

    index: int
    loss: float
    before: tuple[Values, ...]
    grads: tuple[Values | None, ...]
    after: tuple[Values, ...]
    grads_cleared: bool  # zero_grad() ran after the step (set_to_none: .grad is None again)


@dataclass(frozen=True)
class TrainingTrace:
    model_key: str
    lr: float
    steps_requested: int
    forget_zero_grad: bool
    seed: int
    names: tuple[str, ...] = ()
    shapes: tuple[tuple[int, ...], ...] = ()
    registered: tuple[bool, ...] = ()  # each tensor is a parameter (not a plain attribute)
    initial: tuple[Values, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    diverged_at: int | None = None  # first step whose loss is past DIVERGENCE_FACTOR × the first
    stopped_at: int | None = None  # the loss stopped being finite: no later step is run
    optimizer_error: str = ""  # torch's own refusal (an empty parameter list)
    backward_error: str = ""  # torch's own refusal (a loss no parameter contributed to)
    elapsed_s: float = field(default=0.0, compare=False)  # timing, not a result

    @property
    def losses(self) -> list[float]:
        return [record.loss for record in self.steps]

    @property
    def final(self) -> tuple[Values, ...]:
        return self.steps[-1].after if self.steps else self.initial


def _values(tensor: torch.Tensor | None) -> Values | None:
    return None if tensor is None else tuple(tensor.detach().reshape(-1).tolist())


def _check(model_key: str, lr: float, steps: int) -> None:
    if model_key not in TRAINABLE:
        raise ModelsError(TrainingError.BAD_MODEL, model=model_key, choices=", ".join(TRAINABLE))
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= MAX_STEPS:
        raise ModelsError(TrainingError.BAD_STEPS, steps=str(steps), limit=MAX_STEPS)
    if not (isinstance(lr, int | float) and math.isfinite(lr) and MIN_LR <= lr <= MAX_LR):
        raise ModelsError(TrainingError.BAD_LR, lr=str(lr), low=MIN_LR, high=MAX_LR)


def train_steps(
    model_key: str,
    *,
    lr: float,
    steps: int,
    forget_zero_grad: bool = False,
    seed: int = 0,
) -> TrainingTrace:
    """``steps`` steps of plain SGD with MSE loss on :func:`dataset`, everything recorded.

    The loop is the one every tutorial writes — ``loss = mse(model(x), y)``, ``backward()``,
    ``step()``, ``zero_grad()`` — with ``zero_grad()`` left out when ``forget_zero_grad`` (the
    gradients then add up from step to step). The plain-tensor model cannot train: torch
    refuses to build the optimiser and to run ``backward()``, and the trace carries torch's
    own messages with the unchanged values. Raises :class:`ModelsError` outside the bounds.
    """
    import time

    _check(model_key, lr, steps)
    started = time.perf_counter()
    model = build_model(model_key, seed)
    x, y = dataset(seed)
    tensors = _tensors(model)
    names = tuple(name for name, _ in tensors)
    shapes = tuple(tuple(tensor.shape) for _, tensor in tensors)
    registered = tuple(isinstance(tensor, nn.Parameter) for _, tensor in tensors)
    initial = tuple(_values(tensor) for _, tensor in tensors)
    base = dict(
        model_key=model_key,
        lr=float(lr),
        steps_requested=steps,
        forget_zero_grad=forget_zero_grad,
        seed=seed,
        names=names,
        shapes=shapes,
        registered=registered,
        initial=initial,
    )
    loss_fn = nn.MSELoss()
    try:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    except ValueError as exc:  # "optimizer got an empty parameter list"
        record, backward_error = _untrainable_step(model, x, y, loss_fn, initial)
        return TrainingTrace(
            **base,
            steps=(record,),
            optimizer_error=f"{type(exc).__name__}: {exc}",
            backward_error=backward_error,
            elapsed_s=time.perf_counter() - started,
        )
    parameters = [tensor for _, tensor in tensors]
    records, diverged_at, stopped_at = _sgd_loop(
        model, optimizer, loss_fn, x, y, parameters, steps, forget_zero_grad
    )
    return TrainingTrace(
        **base,
        steps=tuple(records),
        diverged_at=diverged_at,
        stopped_at=stopped_at,
        elapsed_s=time.perf_counter() - started,
    )


def _untrainable_step(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss_fn: nn.Module, initial: tuple
) -> tuple[StepRecord, str]:
    """The one step a model with no parameters shows: its loss, the values unchanged, and
    torch's words when ``backward()`` refuses (empty when it ran)."""
    loss = loss_fn(model(x), y)
    try:
        loss.backward()
        backward_error = ""
    except RuntimeError as inner:
        backward_error = f"{type(inner).__name__}: {inner}"
    record = StepRecord(
        0,
        float(loss.item()),
        initial,
        tuple(None for _ in initial),
        initial,
        grads_cleared=False,
    )
    return record, backward_error


def _sgd_loop(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    parameters: list[torch.Tensor],
    steps: int,
    forget_zero_grad: bool,
) -> tuple[list[StepRecord], int | None, int | None]:
    """The training loop, each step recorded; with the step where the loss diverged and the
    one where it stopped being a number (the loop stops there)."""
    records: list[StepRecord] = []
    diverged_at = stopped_at = None
    first_loss = None
    for index in range(steps):
        loss = loss_fn(model(x), y)
        loss.backward()
        before = tuple(_values(p) for p in parameters)
        grads = tuple(_values(p.grad) for p in parameters)
        optimizer.step()
        if not forget_zero_grad:
            optimizer.zero_grad()
        value = float(loss.item())
        records.append(
            StepRecord(
                index,
                value,
                before,
                grads,
                tuple(_values(p) for p in parameters),
                grads_cleared=not forget_zero_grad,
            )
        )
        first_loss = value if first_loss is None else first_loss
        if diverged_at is None and (
            not math.isfinite(value) or value > DIVERGENCE_FACTOR * max(first_loss, 1e-12)
        ):
            diverged_at = index
        if not math.isfinite(value):
            stopped_at = index
            break
    return records, diverged_at, stopped_at


# ---------------------------------------------------------------------------- modes
class ModeModel(StrEnum):
    DROPOUT = "dropout"
    BATCHNORM = "batchnorm"


Rows = tuple[tuple[float, ...], ...]


def _rows(tensor: torch.Tensor) -> Rows:
    return tuple(tuple(row) for row in tensor.detach().tolist())


@dataclass(frozen=True)
class ModeReport:
    """The same input through ``train()`` and ``eval()``."""

    model_key: ModeModel
    input: Rows
    train_output: Rows
    train_output_again: Rows  # a second train() pass: Dropout draws a new mask
    eval_output: Rows
    eval_output_again: Rows  # eval() is deterministic
    dropout_p: float = 0.0
    zeros_in_train: int = 0
    running_mean_before: tuple[float, ...] = ()
    running_mean_after: tuple[float, ...] = ()
    running_var_before: tuple[float, ...] = ()
    running_var_after: tuple[float, ...] = ()
    batch_mean: tuple[float, ...] = ()
    # Two variances of the same batch, each computed by torch from it: train() normalises
    # with the biased one (÷N) and moves running_var towards the unbiased one (÷(N−1)).
    batch_var: tuple[float, ...] = ()  # unbiased: x.var(0, unbiased=True)
    batch_var_biased: tuple[float, ...] = ()  # biased: x.var(0, unbiased=False)
    batch_size: int = 0  # N, the rows of the batch
    # Which of the two torch's own results match (read off the train() output and the
    # running_var update; "" when neither does): "biased" or "unbiased".
    normalised_with: str = ""
    running_var_towards: str = ""
    momentum: float = 0.0
    batches_tracked: int = 0

    @property
    def differs(self) -> bool:
        return self.train_output != self.eval_output


# Dropout draws its mask from the global generator: a lock and a forked random state keep
# the room's own draws repeatable without changing anyone else's sequence afterwards.
_RNG_LOCK = threading.Lock()


def modes(model_key: str, seed: int = 0) -> ModeReport:
    """Dropout(p=0.5) on ones, or BatchNorm1d(3) on a shifted batch, in both modes."""
    key = ModeModel(model_key)
    generator = _generator(seed)
    if key is ModeModel.DROPOUT:
        layer: nn.Module = nn.Dropout(p=0.5)
        x = torch.ones(4, 6)
    else:
        layer = nn.BatchNorm1d(3)
        x = torch.randn(6, 3, generator=generator) * torch.tensor([1.0, 2.0, 0.5]) + torch.tensor(
            [5.0, -3.0, 1.0]
        )
    with _RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        stats_before = _stats(layer)
        layer.train()
        train_output = layer(x)
        stats_after = _stats(layer)
        train_again = layer(x) if key is ModeModel.DROPOUT else train_output
    layer.eval()
    with torch.no_grad():
        eval_output, eval_again = layer(x), layer(x)
    extra: dict[str, object] = {}
    if key is ModeModel.DROPOUT:
        extra = {"dropout_p": 0.5, "zeros_in_train": int((train_output == 0).sum())}
    else:
        extra = {
            "running_mean_before": stats_before[0],
            "running_var_before": stats_before[1],
            "running_mean_after": stats_after[0],
            "running_var_after": stats_after[1],
            "batch_mean": tuple(x.mean(0).tolist()),
            **_batch_variances(layer, x, train_output, stats_before, stats_after),
            "momentum": float(layer.momentum or 0.0),
            "batches_tracked": int(layer.num_batches_tracked),
        }
    return ModeReport(
        key,
        _rows(x),
        _rows(train_output),
        _rows(train_again),
        _rows(eval_output),
        _rows(eval_again),
        **extra,
    )  # type: ignore[arg-type]


_VARIANCES = ("biased", "unbiased")


def _batch_variances(
    layer: nn.Module,
    x: torch.Tensor,
    train_output: torch.Tensor,
    before: tuple[tuple[float, ...], tuple[float, ...]],
    after: tuple[tuple[float, ...], tuple[float, ...]],
) -> dict[str, object]:
    """Both variances of the batch ``x`` (torch's ``var``, ÷N and ÷(N−1)), and which of them
    torch's own train() pass used: the one its output is normalised with (``(x − mean) /
    sqrt(var + eps)``, then weight and bias) and the one ``running_var`` moved towards
    (``(after − (1 − momentum)·before) / momentum``)."""
    variances = {
        "biased": x.var(0, unbiased=False).detach(),
        "unbiased": x.var(0, unbiased=True).detach(),
    }
    mean = x.mean(0)
    weight = layer.weight.detach() if layer.weight is not None else 1.0
    bias = layer.bias.detach() if layer.bias is not None else 0.0
    normalised_with = next(
        (
            name
            for name in _VARIANCES
            if torch.allclose(
                (x - mean) / torch.sqrt(variances[name] + layer.eps) * weight + bias,
                train_output.detach(),
                rtol=1e-4,
                atol=1e-5,
            )
        ),
        "",
    )
    towards = ""
    momentum = float(layer.momentum or 0.0)
    if momentum and before[1] and after[1]:
        target = (torch.tensor(after[1]) - (1 - momentum) * torch.tensor(before[1])) / momentum
        towards = next(
            (
                name
                for name in _VARIANCES
                if torch.allclose(target, variances[name].to(target.dtype), rtol=1e-4, atol=1e-4)
            ),
            "",
        )
    return {
        "batch_var": tuple(variances["unbiased"].tolist()),
        "batch_var_biased": tuple(variances["biased"].tolist()),
        "batch_size": int(x.shape[0]),
        "normalised_with": normalised_with,
        "running_var_towards": towards,
    }


def _stats(layer: nn.Module) -> tuple[tuple[float, ...], tuple[float, ...]]:
    mean = getattr(layer, "running_mean", None)
    var = getattr(layer, "running_var", None)
    return (
        tuple(mean.tolist()) if isinstance(mean, torch.Tensor) else (),
        tuple(var.tolist()) if isinstance(var, torch.Tensor) else (),
    )
