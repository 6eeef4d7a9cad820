"""The named facts a lesson may ask about, each computed by the torch that runs the app.

A lesson never types an answer: a question names a fact and its arguments, gives the options
a student picks from, and the loader asks torch which option is right
(:func:`evaluate`). A step's ``expect`` names a fact in the same way; the lesson tests check
that the room shows that very value. When a torch release changes a behaviour, the answer
follows it, and a question whose options no longer contain torch's answer fails to load.

Arguments come from lesson files (trusted repository files), yet nothing here evaluates
text: an op such as ``".view(3, 3)"`` or ``"[1:, 0]"`` is parsed into a small tree and only
the allow-listed methods below are called, with whole-number arguments. Every tensor is
small (at most :data:`MAX_ELEMENTS` elements) or lives on the meta device.

Values are canonical strings: shapes and strides as Python tuples ``"(3, 1)"``, counts as
``"51300"``, dtypes without ``torch.`` (``"float64"``), booleans ``"True"``/``"False"``, and
``"error"`` where torch refuses.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

MAX_ELEMENTS = 4096  # real tensors a fact builds (meta tensors have no data)
MAX_OP_TEXT = 60
MAX_OPS = 8
ERROR = "error"

DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}  # fmt: skip
SCALARS: dict[str, Any] = {"int": 3, "float": 0.5, "bool": True}


class FactError(ValueError):
    """A fact's arguments are not ones it accepts: ``code`` and ``params``, no sentence."""

    def __init__(self, code: str, **params: Any) -> None:
        super().__init__(code)
        self.code = code
        self.params = params


# --------------------------------------------------------------------------- formatting


def shape_text(shape: tuple[int, ...] | torch.Size) -> str:
    """``(2, 2)``, ``(9,)``, ``()``: the way Python prints the tuple."""
    return str(tuple(int(n) for n in shape))


def _bool(value: bool) -> str:
    return "True" if value else "False"


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _number(value: float) -> str:
    """A float rounded to six significant digits, printed as Python prints it."""
    return repr(float(f"{value:.6g}"))


# --------------------------------------------------------------------------- ops on tensors
_METHODS: dict[str, int] = {  # allowed method → the most whole-number arguments it takes
    "view": 6, "reshape": 6, "t": 0, "transpose": 2, "permute": 6, "contiguous": 0,
    "clone": 0, "unsqueeze": 1, "squeeze": 1, "flatten": 2, "mean": 1, "sum": 1,
    "select": 2, "narrow": 3, "expand": 6,
}  # fmt: skip


def _whole(node: ast.expr) -> int | None:
    """A whole-number literal (optionally negative), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _whole(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 2**20:
        return node.value
    return None


def _index_part(node: ast.expr) -> Any:
    if isinstance(node, ast.Slice):
        parts = [None if p is None else _whole(p) for p in (node.lower, node.upper, node.step)]
        for given, value in zip((node.lower, node.upper, node.step), parts, strict=True):
            if given is not None and value is None:
                raise FactError("bad_op")
        return slice(*parts)
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return Ellipsis
    value = _whole(node)
    if value is None:
        raise FactError("bad_op")
    return value


def parse_op(text: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """One op of a chain (``.view(3, 3)``, ``[1:, 0]``, ``.t()``) as a function of a tensor.
    Raises :class:`FactError` (``bad_op``) for anything outside the allow-list."""
    if not isinstance(text, str) or len(text) > MAX_OP_TEXT or not text.isascii():
        raise FactError("bad_op", op=str(text)[:MAX_OP_TEXT])
    try:
        node = ast.parse("x" + text.strip(), mode="eval").body
    except SyntaxError:
        raise FactError("bad_op", op=text) from None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = tuple(_index_part(p) for p in parts)
        return lambda tensor: tensor[index]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.attr in _METHODS
        and not node.keywords
        and len(node.args) <= _METHODS[node.func.attr]
    ):
        args = [_whole(arg) for arg in node.args]
        if any(arg is None for arg in args):
            raise FactError("bad_op", op=text)
        name = node.func.attr
        return lambda tensor: getattr(tensor, name)(*args)
    raise FactError("bad_op", op=text)


def _start(shape: list[int], dtype: str) -> torch.Tensor:
    if dtype not in DTYPES or not isinstance(shape, list):
        raise FactError("bad_dtype", dtype=dtype)
    if any(type(n) is not int or n < 0 for n in shape) or len(shape) > 6:
        raise FactError("bad_shape", shape=shape)
    numel = math.prod(shape)
    if numel > MAX_ELEMENTS:
        raise FactError("too_big", numel=numel)
    return torch.arange(numel).to(DTYPES[dtype]).reshape(shape)


def _chain(shape: list[int], ops: list[str], dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(start, result) of ``arange(numel).reshape(shape)`` through ``ops``; a RuntimeError
    of torch's passes through."""
    if not isinstance(ops, list) or len(ops) > MAX_OPS:
        raise FactError("bad_ops")
    functions = [parse_op(op) for op in ops]  # every op is checked before torch runs
    start = tensor = _start(shape, dtype)
    for function in functions:
        tensor = function(tensor)
    return start, tensor


def _chain_fact(read: Callable[[torch.Tensor, torch.Tensor], str]) -> Callable[..., str]:
    def fact(shape: list[int], ops: list[str], dtype: str = "int64") -> str:
        try:
            start, result = _chain(shape, ops, dtype)
        except (RuntimeError, IndexError):
            return ERROR
        return read(start, result)

    return fact


tensor_size = _chain_fact(lambda _, t: shape_text(t.shape))
tensor_stride = _chain_fact(lambda _, t: shape_text(t.stride()))
tensor_offset = _chain_fact(lambda _, t: str(t.storage_offset()))
tensor_contiguous = _chain_fact(lambda _, t: _bool(t.is_contiguous()))
tensor_dtype = _chain_fact(lambda _, t: _dtype(t.dtype))
shares_storage = _chain_fact(
    lambda s, t: _bool(s.untyped_storage().data_ptr() == t.untyped_storage().data_ptr())
)


def tensor_values(shape: list[int], ops: list[str], dtype: str = "int64") -> str:
    """The result's elements, flat, as a Python list (``[4, 5, 7, 8]``)."""
    try:
        _, result = _chain(shape, ops, dtype)
    except (RuntimeError, IndexError):
        return ERROR
    return str(result.reshape(-1).tolist())


# --------------------------------------------------------------------------- dtypes


def result_dtype(left: str, right: str, right_kind: str = "tensor") -> str:
    """The dtype of ``left_tensor * right`` where right is a tensor of dtype ``right`` or a
    Python scalar of type ``right`` (``int``, ``float``, ``bool``)."""
    if left not in DTYPES:
        raise FactError("bad_dtype", dtype=left)
    a = torch.ones(2, dtype=DTYPES[left])
    if right_kind == "tensor" and right in DTYPES:
        b: Any = torch.ones(2, dtype=DTYPES[right])
    elif right_kind == "scalar" and right in SCALARS:
        b = SCALARS[right]
    else:
        raise FactError("bad_dtype", dtype=right)
    return _dtype((a * b).dtype)


_UNARY = ("cos", "sin", "sqrt", "exp", "abs", "neg")


def unary_dtype(op: str, dtype: str) -> str:
    """The dtype of ``torch.<op>(t)`` for an ``arange(9)`` tensor ``t`` of ``dtype``."""
    if op not in _UNARY or dtype not in DTYPES:
        raise FactError("bad_op", op=op)
    try:
        return _dtype(getattr(torch, op)(torch.arange(9).to(DTYPES[dtype])).dtype)
    except RuntimeError:
        return ERROR


def inplace_unary(op: str, dtype: str) -> str:
    """``"ok"`` when ``t.<op>_()`` keeps ``dtype``, ``"error"`` when torch refuses."""
    if op not in _UNARY or dtype not in DTYPES:
        raise FactError("bad_op", op=op)
    try:
        getattr(torch.arange(9).to(DTYPES[dtype]), f"{op}_")()
    except RuntimeError:
        return ERROR
    return "ok"


def named_tensors() -> str:
    """``"ok"`` when ``torch.tensor(..., names=...)`` works, else the exception's class."""
    try:
        torch.tensor([0.2126, 0.7152, 0.0722], names=["channels"])  # type: ignore[call-arg]
    except (TypeError, RuntimeError) as refused:
        return type(refused).__name__
    return "ok"


def broadcast_shape(shapes: list[list[int]]) -> str:
    try:
        return shape_text(torch.broadcast_shapes(*(tuple(s) for s in shapes)))
    except RuntimeError:
        return ERROR


def einsum_shape(equation: str, shapes: list[list[int]]) -> str:
    allowed = set("abcdefghijklmnopqrstuvwxyz.,->")
    if len(equation) > 40 or not set(equation.replace(" ", "")) <= allowed:
        raise FactError("bad_equation", equation=equation)
    operands = [torch.empty(tuple(s), device="meta") for s in shapes]
    try:
        return shape_text(torch.einsum(equation, *operands).shape)
    except RuntimeError:
        return ERROR


# --------------------------------------------------------------------------- autograd
# The curriculum's small programs, written here as plain torch (the autograd room runs its
# own text of them; the lesson tests check both agree, variable by variable).


def _propagation() -> dict[str, torch.Tensor]:
    x, y = torch.randn(5, 5), torch.randn(5, 5)
    z = torch.randn(5, 5, requires_grad=True)
    a = x + y
    b = a + z
    loss = (b * b).sum()
    return {"x": x, "y": y, "z": z, "a": a, "b": b, "loss": loss}


def _detach() -> dict[str, torch.Tensor]:
    w = torch.randn(3, requires_grad=True)
    h = w * 2
    d = h.detach()
    return {"w": w, "h": h, "d": d, "loss": (h * d).sum()}


def _no_grad() -> dict[str, torch.Tensor]:
    w, x = torch.randn(3, requires_grad=True), torch.randn(3)
    with torch.no_grad():
        frozen = w * x
    with torch.inference_mode():
        fast = w * x
    y = w * x
    return {"w": w, "x": x, "frozen": frozen, "fast": fast, "y": y, "loss": (y + frozen).sum()}


def _accumulate() -> dict[str, torch.Tensor]:
    w = torch.ones(3, requires_grad=True)
    x = torch.tensor([1.0, 2.0, 3.0])
    first = (w * x).sum()
    first.backward()
    loss = (w * x).sum()
    return {"w": w, "x": x, "first": first, "loss": loss}


def _inplace_trap() -> dict[str, torch.Tensor]:
    x = torch.randn(4, requires_grad=True)
    a = x.sigmoid()
    a.mul_(2)
    return {"x": x, "a": a, "loss": a.sum()}


SCENARIOS: dict[str, Callable[[], dict[str, torch.Tensor]]] = {
    "propagation": _propagation,
    "detach": _detach,
    "no_grad": _no_grad,
    "accumulate": _accumulate,
    "inplace_trap": _inplace_trap,
}


def _scenario(scenario: str, name: str) -> dict[str, torch.Tensor]:
    if scenario not in SCENARIOS:
        raise FactError("bad_scenario", scenario=scenario)
    with torch.random.fork_rng(devices=[]):  # the server's global generator stays as it was
        torch.manual_seed(0)
        variables = SCENARIOS[scenario]()
    if name not in variables:
        raise FactError("bad_name", name=name)
    return variables


def requires_grad(scenario: str, name: str) -> str:
    return _bool(_scenario(scenario, name)[name].requires_grad)


def is_leaf(scenario: str, name: str) -> str:
    return _bool(_scenario(scenario, name)[name].is_leaf)


def grad_after_backward(scenario: str, name: str) -> str:
    """The ``.grad`` of ``name`` after ``loss.backward()``: a list, ``"None"`` or
    ``"error"`` (torch refuses the backward)."""
    variables = _scenario(scenario, name)
    try:
        variables["loss"].backward()
    except RuntimeError:
        return ERROR
    grad = variables[name].grad
    return "None" if grad is None else str([float(v) for v in grad.reshape(-1).tolist()])


def variable_is_tensor() -> str:
    """Is ``torch.autograd.Variable(t)`` a plain ``torch.Tensor`` today (the old wrapper is
    kept only as a name)?"""
    from torch.autograd import Variable

    return _bool(type(Variable(torch.ones(2))) is torch.Tensor)


def backward_outcome(scenario: str) -> str:
    """``"ok"`` or ``"error"``: does ``loss.backward()`` run?"""
    return "ok" if grad_after_backward(scenario, "loss") != ERROR else ERROR


# --------------------------------------------------------------------------- modules


class _Net(nn.Module):
    """The "Reasoning about Shapes" recipe's network (``in_channels`` 3 as in the recipe)."""

    def __init__(self, in_channels: int = 3, fc1_in: int = 16 * 5 * 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(fc1_in, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def _shape_arg(shape: list[int]) -> tuple[int, ...]:
    if not isinstance(shape, list) or not 1 <= len(shape) <= 6:
        raise FactError("bad_shape", shape=shape)
    if any(type(n) is not int or not 0 < n < 2**40 for n in shape):
        raise FactError("bad_shape", shape=shape)
    return tuple(shape)


def net_output_shape(
    layer: str, shape: list[int], in_channels: int = 3, fc1_in: int = 16 * 5 * 5
) -> str:
    """The output shape of one of the Net's layers (a forward hook on the meta device), or
    ``"error"`` when the forward fails before that layer (a shape that does not fit)."""
    size = _shape_arg(shape)
    with torch.device("meta"):
        net = _Net(in_channels, fc1_in)
        if layer not in dict(net.named_children()):
            raise FactError("bad_layer", layer=layer)
        seen: dict[str, tuple[int, ...]] = {}

        def hook(_module: nn.Module, _inputs: Any, output: torch.Tensor) -> None:
            seen[layer] = tuple(output.shape)  # returns None: the output is left as it is

        getattr(net, layer).register_forward_hook(hook)
        # a later layer may refuse: the hooked layer's shape is known all the same
        with contextlib.suppress(RuntimeError):
            net(torch.empty(size))
    return shape_text(seen[layer]) if layer in seen else ERROR


def net_features_into_fc1(shape: list[int], in_channels: int = 3) -> str:
    """How many features ``torch.flatten(x, 1)`` hands to fc1 for this input."""
    size = _shape_arg(shape)
    with torch.device("meta"):
        net = _Net(in_channels)
        x = net.pool(torch.relu(net.conv1(torch.empty(size))))
        x = net.pool(torch.relu(net.conv2(x)))
        return str(torch.flatten(x, 1).shape[1])


def conv_output_shape(in_channels: int, out_channels: int, kernel: int, shape: list[int]) -> str:
    with torch.device("meta"):
        conv = nn.Conv2d(in_channels, out_channels, kernel)
        return shape_text(conv(torch.empty(_shape_arg(shape))).shape)


class _PlainLinear(nn.Module):
    def __init__(self, input_dim: int = 3, output_dim: int = 2) -> None:
        super().__init__()
        self.W = torch.empty(input_dim, output_dim)
        self.b = torch.empty(output_dim)


class _ParameterLinear(nn.Module):
    def __init__(self, input_dim: int = 3, output_dim: int = 2) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.empty(input_dim, output_dim))
        self.b = nn.Parameter(torch.empty(output_dim))


class _WrappedLinear(nn.Module):
    def __init__(self, input_dim: int = 3, output_dim: int = 2) -> None:
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim)


_LINEARS: dict[str, type[nn.Module]] = {
    "plain": _PlainLinear, "parameter": _ParameterLinear, "nn_linear": _WrappedLinear,
}  # fmt: skip


def _linear(kind: str, input_dim: int, output_dim: int) -> nn.Module:
    if kind not in _LINEARS or not (0 < input_dim <= 4096 and 0 < output_dim <= 4096):
        raise FactError("bad_model", model=kind)
    with torch.device("meta"):
        return _LINEARS[kind](input_dim, output_dim)


def parameter_count(kind: str, input_dim: int = 3, output_dim: int = 2) -> str:
    """Elements in ``model.parameters()`` of a MyLinear written as ``kind``."""
    return str(sum(p.numel() for p in _linear(kind, input_dim, output_dim).parameters()))


def parameter_tensors(kind: str, input_dim: int = 3, output_dim: int = 2) -> str:
    return str(len(list(_linear(kind, input_dim, output_dim).parameters())))


def parameter_shape(kind: str, name: str, input_dim: int = 3, output_dim: int = 2) -> str:
    """The shape of registered parameter ``name`` of a MyLinear written as ``kind``."""
    parameters = dict(_linear(kind, input_dim, output_dim).named_parameters())
    if name not in parameters:
        raise FactError("bad_name", name=name)
    return shape_text(parameters[name].shape)


def linear_output_shape(input_dim: int, output_dim: int, batch: int) -> str:
    with torch.device("meta"):
        return shape_text(nn.Linear(input_dim, output_dim)(torch.empty(batch, input_dim)).shape)


def sgd_update(weight: float, grad: float, lr: float) -> str:
    """The weight after one ``torch.optim.SGD`` step with this gradient and learning rate."""
    w = nn.Parameter(torch.tensor([float(weight)], dtype=torch.float64))
    w.grad = torch.tensor([float(grad)], dtype=torch.float64)
    torch.optim.SGD([w], lr=float(lr)).step()
    return _number(w.item())


def trainable_after_freeze(out_features: int = 100) -> str:
    """Trainable parameter elements of a ResNet-18 frozen whole, then given a new
    ``fc = nn.Linear(512, out_features)`` (built on the meta device: no weights needed)."""
    from torchvision.models import resnet18

    with torch.device("meta"):
        model = resnet18()
        for parameter in model.parameters():
            parameter.requires_grad = False
        model.fc = nn.Linear(model.fc.in_features, int(out_features))
    return str(sum(p.numel() for p in model.parameters() if p.requires_grad))


def to_returns_same(kind: str, dtype: str = "float64") -> str:
    """Is ``thing.to(dtype)`` the very object it was called on? ``kind``: ``module`` (an
    ``nn.Linear``) or ``tensor`` (a float32 tensor)."""
    if dtype not in DTYPES:
        raise FactError("bad_dtype", dtype=dtype)
    if kind == "module":
        layer = nn.Linear(2, 2)
        return _bool(layer.to(DTYPES[dtype]) is layer)
    if kind == "tensor":
        tensor = torch.zeros(2, 2)
        return _bool(tensor.to(DTYPES[dtype]) is tensor)
    raise FactError("bad_model", model=kind)


def accelerator_available() -> str:
    """Whether this machine's torch sees an accelerator (CUDA, MPS, …)."""
    return _bool(torch.accelerator.is_available())


# --------------------------------------------------------------------------- images


def preprocess_shape(resize: int, crop: int, width: int = 451, height: int = 300) -> str:
    """The tensor shape ``Resize(resize) → CenterCrop(crop) → ToTensor()`` makes of an RGB
    picture ``width`` × ``height``."""
    from PIL import Image
    from torchvision import transforms

    if not all(0 < n <= 4096 for n in (resize, crop, width, height)):
        raise FactError("bad_shape", shape=[resize, crop, width, height])
    pipeline = transforms.Compose(
        [transforms.Resize(resize), transforms.CenterCrop(crop), transforms.ToTensor()]
    )
    return shape_text(pipeline(Image.new("RGB", (width, height))).shape)


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Fact:
    name: str
    compute: Callable[..., str]

    def parameters(self) -> tuple[str, ...]:
        return tuple(inspect.signature(self.compute).parameters)


FACTS: dict[str, Fact] = {
    fact.__name__: Fact(fact.__name__, fact)
    for fact in (
        tensor_values, result_dtype, unary_dtype, inplace_unary, named_tensors,
        broadcast_shape, einsum_shape, requires_grad, is_leaf, grad_after_backward,
        backward_outcome, variable_is_tensor, net_output_shape, net_features_into_fc1,
        conv_output_shape, parameter_count, parameter_tensors, parameter_shape,
        linear_output_shape, sgd_update, trainable_after_freeze, to_returns_same,
        accelerator_available, preprocess_shape,
    )
}  # fmt: skip
for _name, _fact in (
    ("tensor_size", tensor_size), ("tensor_stride", tensor_stride),
    ("tensor_offset", tensor_offset), ("tensor_contiguous", tensor_contiguous),
    ("tensor_dtype", tensor_dtype), ("shares_storage", shares_storage),
):  # fmt: skip
    FACTS[_name] = Fact(_name, _fact)


# What torch raises when it refuses an operation (a shape that does not fit, a dimension out
# of range, a learning rate it rejects, an unsupported dtype). Any of them, from any fact, is
# the answer :data:`ERROR`: "torch raises" is a value a lesson can ask about, never a crash.
TORCH_REFUSALS: tuple[type[Exception], ...] = (
    RuntimeError, IndexError, ValueError, TypeError, NotImplementedError,
)  # fmt: skip


def evaluate(name: str, args: dict[str, Any]) -> str:
    """The value of fact ``name`` for ``args``, computed by torch now; :data:`ERROR` when
    torch raises while computing it (whatever the fact). Raises :class:`FactError`
    (``unknown_fact``, ``bad_args`` or the fact's own code) for arguments the fact refuses."""
    fact = FACTS.get(name)
    if fact is None:
        raise FactError("unknown_fact", fact=name)
    try:
        inspect.signature(fact.compute).bind(**args)
    except TypeError:
        raise FactError("bad_args", fact=name, args=sorted(args)) from None
    try:
        return fact.compute(**args)
    except FactError:
        raise
    except TORCH_REFUSALS:
        return ERROR
