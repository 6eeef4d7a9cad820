"""The interpreter of checked programs: walks the tree :func:`~torchatlas.autograd.parser.parse`
accepted and calls torch by the allow-listed names, never ``eval``/``exec``.

Sizes are checked before a tensor is made (creation sizes, broadcast shapes, matmul shapes),
so no program allocates more than the room's bounds; every result is counted against a total.
Random tensors come from a private generator seeded per run: two visitors never share (or
disturb) torch's global random state, and the same seed gives the same tensors.
"""

from __future__ import annotations

import ast
import math
import operator
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import torch

from torchatlas.autograd.diagnose import (
    Lesson,
    call_lesson,
    condition_lesson,
    inplace_lesson,
    operator_lesson,
    record_versions,
)
from torchatlas.autograd.errors import (
    AutogradError,
    ErrorCode,
    ProgramError,
    TorchRefused,
    explain,
)
from torchatlas.autograd.parser import (
    CREATION,
    FUNCTIONS,
    MAX_ELEMENTS,
    MAX_OPS,
    MAX_TOTAL_ELEMENTS,
    METHODS,
    RANDOM,
    Program,
    dtype_name,
)
from torchatlas.autograd.text import bounded_text
from torchatlas.cache import deep_size

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64,
    "double": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}  # fmt: skip
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.MatMult: operator.matmul,
    ast.Pow: operator.pow,
}
_INPLACE: dict[type, str] = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.Gt: operator.gt,
    ast.LtE: operator.le,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_GRAD_MODES: dict[str, Callable[[], Any]] = {
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "enable_grad": torch.enable_grad,
}
_BROADCASTING = ("add", "sub", "mul", "div", "pow", "add_", "sub_", "mul_", "div_")
_MATMUL = ("matmul", "mm")
# How big each method's result can be, known before torch allocates it. "same": never more
# elements than the tensor it is called on (elementwise, views, in place, reading values);
# "broadcast": the broadcast of every tensor argument, positional or keyword; "reduce": at
# most the input's elements, except a reduction over a dimension of size 0, which makes the
# other dimensions' product out of nothing (``zeros(0, A, B).sum(0)`` is A×B) and is asked
# of the meta device; "graph": backward, whose gradients are the sizes of tensors that
# already exist. A method with no rule (and matmul) is dry-run on the meta device, which
# computes the result's shape without any data.
_SIZE_RULES: dict[str, str] = {
    **dict.fromkeys(
        ("relu", "sigmoid", "tanh", "exp", "log", "sin", "cos", "abs", "sqrt", "square",
         "view", "reshape", "t", "detach", "clone", "requires_grad_", "retain_grad", "numpy",
         "item", "zero_", "fill_", "exp_", "sigmoid_", "relu_", "is_inference"),
        "same",
    ),
    **dict.fromkeys(_BROADCASTING, "broadcast"),
    "sum": "reduce",
    "mean": "reduce",
    "matmul": "matmul",
    "mm": "matmul",
    "backward": "graph",
}  # fmt: skip
MAX_SEQUENCE = 16  # items of a size or dim list handed to a torch method
INT64 = (-(1 << 63), (1 << 63) - 1)
BACKWARD_COST = 10  # operations one ``.backward()`` counts for


@dataclass
class Binding:
    """One assignment as it ran: the name, its line and the value bound."""

    name: str
    line: int
    value: Any


@dataclass
class Run:
    """A program's live state after it ran (or stopped): its bindings and its error. Internal:
    :mod:`torchatlas.autograd.graph` reads it into frozen dataclasses."""

    program: Program
    seed: int
    names: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    bindings: list[Binding] = field(default_factory=list)
    error: ProgramError | None = None
    ops: int = 0
    elements: int = 0
    backward_calls: int = 0
    # node id → the ``_version`` of each tensor it saved, read when the node was made (what
    # backward expects); the nodes themselves are kept so that no id is reused
    saved_versions: dict[int, dict[str, int]] = field(default_factory=dict)
    kept_nodes: list[Any] = field(default_factory=list)

    def tensor(self, name: str) -> torch.Tensor | None:
        value = self.names.get(name)
        return value if isinstance(value, torch.Tensor) else None


class _Stop(Exception):
    """Carries an exception out of the walk with the line it was raised on."""

    def __init__(self, error: BaseException, line: int) -> None:
        super().__init__()
        self.error, self.line = error, line


def execute(program: Program, seed: int = 0) -> Run:
    """Run a checked program on real torch. A failure (ours or PyTorch's) stops it and is
    kept as ``run.error``; everything bound before it stays readable."""
    run = Run(program=program, seed=seed)
    interpreter = _Interpreter(run, torch.Generator().manual_seed(seed))
    try:
        interpreter.block(program.tree.body)
    except _Stop as stop:
        run.error = explain(stop.error, stop.line)
    return run


def _numel(size: tuple[int, ...]) -> int:
    return math.prod(size) if size else 1


def _broadcast(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast shape of two shapes (None where they do not broadcast); plain Python,
    as torch.broadcast_shapes goes through its symbolic-shape machinery."""
    rank = max(len(left), len(right))
    left, right = (1,) * (rank - len(left)) + left, (1,) * (rank - len(right)) + right
    out = []
    for a, b in zip(left, right, strict=True):
        if a != b and 1 not in (a, b):
            return None
        out.append(b if a == 1 else a)
    return tuple(out)


class _Interpreter:
    def __init__(self, run: Run, generator: torch.Generator) -> None:
        self.run = run
        self.names = run.names
        self.generator = generator
        self.line = 0

    # ------------------------------------------------------------------ statements

    def block(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.line = node.lineno
            try:
                self.statement(node)
            except _Stop:
                raise
            except Exception as error:
                raise _Stop(error, node.lineno) from None

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            if isinstance(target, ast.Attribute):  # x.grad = None
                self.expect_tensor(self.name(target.value)).grad = None
                return
            assert isinstance(target, ast.Name)
            self.bind(target.id, self.expr(node.value), node.lineno)
        elif isinstance(node, ast.AugAssign):
            assert isinstance(node.target, ast.Name)
            current = self.name(node.target)
            other = self.expr(node.value)
            self.count(1)
            if isinstance(current, torch.Tensor):
                # Python's ``x += y`` on a tensor is the in-place method, as here
                self.check_broadcast(current, other)
                result = self.refused_as(
                    lambda: getattr(current, _INPLACE[type(node.op)])(other),
                    lambda: (
                        inplace_lesson(current, [current, other])
                        or operator_lesson(False, current, other)
                    ),
                )
                self.produced(result, count=False)
            else:
                result = _number_op(type(node.op), self.number(current), self.number(other))
            self.bind(node.target.id, result, node.lineno)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.With):
            call = node.items[0].context_expr
            assert isinstance(call, ast.Call)
            mode = call.func.id if isinstance(call.func, ast.Name) else call.func.attr  # type: ignore[attr-defined]
            with _GRAD_MODES[mode]():
                self.block(node.body)
        elif isinstance(node, ast.If):
            test = node.test
            assert isinstance(test, ast.Compare)
            left = self.operand(self.expr(test.left))
            right = self.operand(self.expr(test.comparators[0]))
            self.count(1)
            self.check_broadcast(left, right)  # a comparison makes a tensor too
            outcome = self.refused_as(
                lambda: _COMPARE[type(test.ops[0])](left, right),
                lambda: operator_lesson(False, left, right),
            )
            taken = self.refused_as(lambda: bool(outcome), lambda: condition_lesson(outcome))
            self.block(node.body if taken else node.orelse)
        elif isinstance(node, ast.For):
            assert isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call)
            values = [arg.value for arg in node.iter.args]  # type: ignore[attr-defined]
            for index in range(*values):
                self.bind(node.target.id, index, node.lineno)
                self.block(node.body)
        elif not isinstance(node, ast.Pass):
            raise AutogradError(ErrorCode.NOT_ALLOWED, what=type(node).__name__)

    def bind(self, name: str, value: Any, line: int) -> None:
        self.run.names[name] = value
        self.run.lines[name] = line
        self.run.bindings.append(Binding(name, line, value))

    # ------------------------------------------------------------------ expressions

    def count(self, ops: int) -> None:
        self.run.ops += ops
        if self.run.ops > MAX_OPS:
            raise AutogradError(ErrorCode.TOO_MANY_OPS, ops=self.run.ops, limit=MAX_OPS)

    def sequence(self, value: list[Any] | tuple[Any, ...]) -> Any:
        """A list or tuple display: an operation, and its items count toward the program's
        total like a tensor's elements (a program cannot build big structures for free)."""
        self.count(1)
        self.run.elements += len(value)
        if self.run.elements > MAX_TOTAL_ELEMENTS:
            raise AutogradError(ErrorCode.TOO_MUCH_MEMORY, limit=MAX_TOTAL_ELEMENTS)
        return value

    def check_size(self, shape: tuple[int, ...] | None) -> None:
        """Refuse a result of ``shape`` before it exists (None: torch will refuse it)."""
        if shape is None:
            return
        numel = _numel(shape)
        if numel > MAX_ELEMENTS:
            raise AutogradError(ErrorCode.TOO_BIG, numel=_count_text(numel), limit=MAX_ELEMENTS)
        if self.run.elements + numel > MAX_TOTAL_ELEMENTS:
            raise AutogradError(ErrorCode.TOO_MUCH_MEMORY, limit=MAX_TOTAL_ELEMENTS)

    def check_method(
        self, name: str, target: torch.Tensor, args: list[Any], kwargs: dict[str, Any]
    ) -> None:
        """The result size of ``target.name(*args, **kwargs)``, known before it runs."""
        rule = _SIZE_RULES.get(name, "meta")
        if rule in ("same", "graph"):
            return
        if rule == "broadcast":
            shapes = [
                tuple(v.shape) for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)
            ]
            self.check_size(_broadcast_all([tuple(target.shape), *shapes]))
            return
        if rule == "reduce":
            dims = args[0] if args else kwargs.get("dim")
            if target.numel() > 0 or dims is None:
                return  # at most the input's elements (or one number)
            self.check_size(_reduced_shape(tuple(target.shape), dims))
            return
        if rule == "matmul":
            other = args[0] if args else None
            if isinstance(other, torch.Tensor):
                left, right = tuple(target.shape), tuple(other.shape)
                if name == "matmul" or (len(left) == 2 and len(right) == 2):
                    self.check_size(_matmul_shape(left, right))
            return
        self.check_size(_meta_shape(target, name, args, kwargs))

    def produced(self, value: Any, *, count: bool = True) -> Any:
        """A result: counted against the bounds (unless ``count`` is False: an in-place
        result is a tensor already counted), and the saved versions of the nodes it made
        noted (what backward will expect of them)."""
        if isinstance(value, torch.Tensor):
            if count:
                numel = value.numel()
                if numel > MAX_ELEMENTS:
                    raise AutogradError(ErrorCode.TOO_BIG, numel=numel, limit=MAX_ELEMENTS)
                self.run.elements += numel
                if self.run.elements > MAX_TOTAL_ELEMENTS:
                    raise AutogradError(ErrorCode.TOO_MUCH_MEMORY, limit=MAX_TOTAL_ELEMENTS)
            if value.grad_fn is not None:
                record_versions(value, self.run.saved_versions, self.run.kept_nodes)
        return value

    @staticmethod
    def refused_as(act: Callable[[], Any], lesson: Callable[[], Lesson | None]) -> Any:
        """``act()``; when PyTorch refuses it, the lesson the condition names (read from the
        operands and the modes, as they still are: a refused op changes nothing), with
        PyTorch's exception kept for its words. A refusal no condition explains is raised
        as it came (shown in PyTorch's words)."""
        try:
            return act()
        except (RuntimeError, TypeError, ValueError, IndexError) as error:
            found = lesson()
            if found is None:
                raise
            raise TorchRefused(found[0], error, found[1]) from None

    def name(self, node: ast.AST) -> Any:
        assert isinstance(node, ast.Name)
        if node.id == "True":
            return True
        if node.id == "False":
            return False
        if node.id == "None":
            return None
        if node.id not in self.run.names:
            raise AutogradError(ErrorCode.UNKNOWN_NAME, name=node.id)
        return self.run.names[node.id]

    def expect_tensor(self, value: Any) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            raise AutogradError(ErrorCode.NOT_A_TENSOR, what=_kind(value))
        return value

    def number(self, value: Any) -> int | float:
        _no_bool(value)
        if not isinstance(value, int | float):
            raise AutogradError(ErrorCode.NOT_A_TENSOR, what=_kind(value))
        return _whole(value)

    def operand(self, value: Any) -> Any:
        """Tensors and plain numbers may meet an operator; nothing else (a NumPy array, a
        list) may."""
        kind = type(value)
        if kind is float or isinstance(value, torch.Tensor):
            return value
        _no_bool(value)
        if kind is int:
            return _whole(value)
        raise AutogradError(ErrorCode.NOT_A_TENSOR, what=_kind(value))

    def argument(self, value: Any) -> Any:
        """A value handed to a torch method besides tensors: a number, a flag, None, or a
        short flat list of whole numbers (sizes, dims). Nothing nested: torch would walk (and
        its errors would describe) whatever structure a program built."""
        if value is None or isinstance(value, bool | torch.Tensor | torch.dtype):
            return value
        if isinstance(value, list | tuple):
            for v in value[:MAX_SEQUENCE]:
                _no_bool(v, shown=value)
            if len(value) > MAX_SEQUENCE or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(value, 40))
            for v in value:
                _whole(v)
            return value
        return self.operand(value)

    def check_broadcast(self, left: Any, right: Any) -> None:
        """Operators and comparisons: the broadcast of the tensors among the operands (None
        where they do not broadcast: torch raises its own, explained, error first)."""
        if isinstance(left, torch.Tensor) and isinstance(right, torch.Tensor):
            shape = _broadcast(tuple(left.shape), tuple(right.shape))
            if shape is not None and _numel(shape) > left.numel() + right.numel():
                self.check_size(shape)  # only a result larger than both can be too big

    def check_matmul(self, left: Any, right: Any) -> None:
        if isinstance(left, torch.Tensor) and isinstance(right, torch.Tensor):
            self.check_size(_matmul_shape(tuple(left.shape), tuple(right.shape)))

    def expr(self, node: ast.expr) -> Any:
        return _plan(node)(self)

    def index(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self.index(item) for item in node.elts)
        if isinstance(node, ast.Slice):
            parts = [
                None if p is None else self.expr(p) for p in (node.lower, node.upper, node.step)
            ]
            for part in parts:
                _no_bool(part)
                if part is not None and not isinstance(part, int):
                    raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(part, 40))
                if part is not None:
                    _whole(part)
            return slice(*parts)
        value = self.expr(node)
        if value is None:
            return value
        _no_bool(value)
        if isinstance(value, int):
            return _whole(value)
        if isinstance(value, list | tuple):  # x[[0, 2]]: advanced indexing, not offered
            raise AutogradError(ErrorCode.INDEX_LIST, what=bounded_text(value, 40))
        raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(value, 40))

    def binary(self, op: type, left: Any, right: Any) -> Any:
        left_tensor, right_tensor = isinstance(left, torch.Tensor), isinstance(right, torch.Tensor)
        if not left_tensor:
            self.operand(left)
        if not right_tensor:
            self.operand(right)
        self.count(1)
        if not left_tensor and not right_tensor:
            return _number_op(op, left, right)
        if op is ast.MatMult:
            self.check_matmul(left, right)
        elif left_tensor and right_tensor:
            self.check_broadcast(left, right)
        return self.produced(
            self.refused_as(
                lambda: _BINARY[op](left, right),
                lambda: operator_lesson(op is ast.MatMult, left, right),
            )
        )

    def invoke(
        self, call: _Call, args: list[Any], kwargs: dict[str, Any], target: Any = None
    ) -> Any:
        """A checked call with its arguments evaluated: a creation function, ``torch.<f>(t,
        ...)`` or a method of ``target``."""
        self.count(1)
        name = call.name
        if call.kind is _CallKind.CREATION:
            return self.produced(self.create(name, args, kwargs))
        if call.kind is _CallKind.FUNCTION:
            if not args:
                raise AutogradError(ErrorCode.NOT_A_TENSOR, what="None")
            target, rest = self.expect_tensor(args[0]), args[1:]
        else:
            target, rest = self.expect_tensor(target), args
        rest = [self.argument(value) for value in rest]
        kwargs = {key: self.argument(value) for key, value in kwargs.items()}
        if name not in METHODS:  # the parser let only listed names through; say so twice
            raise AutogradError(ErrorCode.UNKNOWN_METHOD, name=name)
        if name in ("view", "reshape"):
            rest = [self.size_value(v) for v in rest]
        self.check_method(name, target, rest, kwargs)
        if name == "backward":
            # a backward runs every node of the graph: it counts as several operations
            self.count(BACKWARD_COST - 1)
            self.run.backward_calls += 1
        if name == "requires_grad_":
            return self.requires_grad_(target, rest, kwargs)
        versions = self.run.saved_versions
        if name == "backward":  # read before it runs: a failing backward frees what it used
            before = call_lesson(name, target, rest, kwargs, versions)
            lesson: Callable[[], Lesson | None] = lambda: before  # noqa: E731
        else:
            lesson = lambda: call_lesson(name, target, rest, kwargs, versions)  # noqa: E731
        result = self.refused_as(lambda: getattr(target, name)(*rest, **kwargs), lesson)
        return self.produced(result)

    def requires_grad_(
        self, target: torch.Tensor, args: list[Any], kwargs: dict[str, Any]
    ) -> torch.Tensor:
        """``requires_grad_()``: when torch refuses it on a tensor whose dtype cannot carry
        gradients, that is the integer lesson, decided from the dtype (torch words this
        refusal differently from the ``requires_grad=True`` one)."""
        return self.refused_as(
            lambda: target.requires_grad_(*args, **kwargs),
            lambda: call_lesson("requires_grad_", target, args, kwargs, self.run.saved_versions),
        )

    def size_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return tuple(self.size_value(v) for v in value)
        _no_bool(value)
        if not isinstance(value, int):
            raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(value, 40))
        return _whole(value)

    def size(self, args: list[Any]) -> tuple[int, ...]:
        """Creation sizes: ``randn(5, 5)`` or ``randn((5, 5))``, each whole and ≥ 0."""
        parts = args[0] if len(args) == 1 and isinstance(args[0], list | tuple) else args
        size = []
        if len(parts) > MAX_SEQUENCE:
            raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(parts, 40))
        for part in parts:
            _no_bool(part, shown=None if parts is args else parts)
            if not isinstance(part, int) or part < 0:
                raise AutogradError(ErrorCode.BAD_SIZE, what=bounded_text(part, 40))
            if part > MAX_ELEMENTS:
                raise AutogradError(ErrorCode.TOO_BIG, numel=_count_text(part), limit=MAX_ELEMENTS)
            size.append(part)
        if _numel(tuple(size)) > MAX_ELEMENTS:
            raise AutogradError(ErrorCode.TOO_BIG, numel=_numel(tuple(size)), limit=MAX_ELEMENTS)
        return tuple(size)

    def create(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> torch.Tensor:
        kwargs = {key: self.argument(value) for key, value in kwargs.items()}
        try:
            return self.make(name, args, kwargs)
        except RuntimeError as error:
            # ``requires_grad=True`` on a dtype that cannot carry gradients: decided from the
            # dtype the same call makes without the flag (its size was checked already)
            if not kwargs.get("requires_grad"):
                raise
            plain = self.make(name, args, {k: v for k, v in kwargs.items() if k != "requires_grad"})
            if plain.is_floating_point() or plain.is_complex():
                raise
            raise TorchRefused(ErrorCode.INT_REQUIRES_GRAD, error) from None

    def make(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> torch.Tensor:
        if name in RANDOM:
            return getattr(torch, name)(self.size(args), generator=self.generator, **kwargs)
        if name in ("zeros", "ones"):
            return getattr(torch, name)(self.size(args), **kwargs)
        if name == "full":
            if len(args) != 2:
                raise AutogradError(ErrorCode.BAD_SIZE, what="full(size, value)")
            return torch.full(self.size([args[0]]), self.number(args[1]), **kwargs)
        if name == "eye":
            size = self.size(args)
            if not 1 <= len(size) <= 2:
                raise AutogradError(ErrorCode.BAD_SIZE, what="eye(n)")
            rows, columns = size[0], size[-1]  # eye(n) is n × n
            self.size([rows, columns])
            return torch.eye(rows, columns, **kwargs)
        if name == "arange":
            numbers = [self.number(a) for a in args]
            if not 1 <= len(numbers) <= 3:
                raise AutogradError(ErrorCode.BAD_SIZE, what="arange(end)")
            start, end, step = (0, numbers[0], 1) if len(numbers) == 1 else (*numbers[:2], 1)
            if len(numbers) == 3:
                step = numbers[2]
            if step == 0:
                raise AutogradError(ErrorCode.BAD_SIZE, what="step=0")
            count = math.ceil((end - start) / step) if math.isfinite((end - start) / step) else -1
            if not 0 <= count <= MAX_ELEMENTS:
                raise AutogradError(ErrorCode.TOO_BIG, numel=max(count, MAX_ELEMENTS + 1),
                                    limit=MAX_ELEMENTS)  # fmt: skip
            return torch.arange(*numbers, **kwargs)
        assert name == "tensor"
        if len(args) != 1:
            raise AutogradError(ErrorCode.BAD_SIZE, what="tensor(data)")
        _check_data(args[0])
        return torch.tensor(args[0], **kwargs)


MAX_NUMBER = 1 << 63


def _no_bool(value: Any, shown: Any = None) -> None:
    """True or False where a number is needed (a size, an index, a dim, a value): refused
    by name, since Python would quietly count True as 1. ``shown``: what to quote (the
    whole list a boolean came in)."""
    if isinstance(value, bool):
        quoted = value if shown is None else shown
        raise AutogradError(ErrorCode.BOOL_NOT_NUMBER, what=bounded_text(quoted, 40))


def _whole(value: Any) -> Any:
    """A Python int past int64 cannot reach torch (it raises OverflowError deep inside, or
    wraps): refused with the room's own words. Other values pass unchanged."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not (INT64[0] <= value <= INT64[1])
    ):
        raise AutogradError(ErrorCode.NUMBER_TOO_BIG, what=bounded_text(value, 40))
    return value


def _count_text(count: int) -> str:
    """An element count for a message: exact, with separators, while it is short."""
    return f"{count:,}" if count.bit_length() <= 96 else bounded_text(count)


def _broadcast_all(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The broadcast shape of several shapes (None where they do not broadcast)."""
    out: tuple[int, ...] | None = shapes[0]
    for shape in shapes[1:]:
        if out is None:
            return None
        out = _broadcast(out, shape)
    return out


def _matmul_shape(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape of ``left @ right`` by torch.matmul's rules (a vector on either side gains
    and then loses a dimension; the batch dimensions broadcast); None where torch will
    refuse the shapes. Plain Python: a meta-device dry run costs a second on its first use."""
    if not left or not right:
        return None
    if len(left) == 1 and len(right) == 1:
        return () if left == right else None
    a = (1, *left) if len(left) == 1 else left
    b = (*right, 1) if len(right) == 1 else right
    if a[-1] != b[-2]:
        return None
    batch = _broadcast(a[:-2], b[:-2])
    if batch is None:
        return None
    rows = () if len(left) == 1 else (a[-2],)
    columns = () if len(right) == 1 else (b[-1],)
    return (*batch, *rows, *columns)


def _reduced_shape(shape: tuple[int, ...], dims: Any) -> tuple[int, ...] | None:
    """The dimensions a reduction over ``dims`` keeps (their product is the result's
    element count, with or without ``keepdim``); None where torch will refuse the dims."""
    picked = [dims] if isinstance(dims, int) else list(dims)
    rank = len(shape)
    if not picked:  # sum(dim=()) reduces every dimension
        return ()
    chosen = set()
    for dim in picked:
        if (
            not isinstance(dim, int)
            or isinstance(dim, bool)
            or not -max(rank, 1) <= dim < max(rank, 1)
        ):
            return None
        chosen.add(dim % max(rank, 1))
    return tuple(size for position, size in enumerate(shape) if position not in chosen)


def _on_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    return value


def _meta_shape(
    target: torch.Tensor, name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[int, ...] | None:
    """The shape ``target.name(*args, **kwargs)`` would have, computed on the meta device
    (shapes and dtypes, no data); None where the meta run refuses it (the real call then
    raises torch's own error, checked before it allocates)."""
    try:
        result = getattr(_on_meta(target), name)(
            *[_on_meta(v) for v in args], **{k: _on_meta(v) for k, v in kwargs.items()}
        )
    except Exception:
        return None
    return tuple(result.shape) if isinstance(result, torch.Tensor) else None


def _kind(value: Any) -> str:
    """What a value is, for the "needs a tensor" message (None: often a .grad not yet set)."""
    return "None" if value is None else type(value).__name__


def _number_op(op: type, left: int | float, right: int | float) -> int | float:
    """Arithmetic on plain numbers, bounded: Python's integers grow without limit, so a loop
    of ``n = n * n`` would otherwise build an enormous number."""
    if op is ast.MatMult:
        raise AutogradError(ErrorCode.NOT_A_TENSOR, what=type(left).__name__)
    # an integer power's size before it is computed: |left| ** right has at least
    # (bits(left) - 1) * right bits
    if (
        op is ast.Pow
        and isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and (abs(left).bit_length() - 1) * right >= 63
    ):
        raise AutogradError(ErrorCode.NUMBER_TOO_BIG, what=f"{left} ** {right}")
    if op is ast.Pow and abs(right) > 1024:
        raise AutogradError(ErrorCode.NUMBER_TOO_BIG, what=f"… ** {bounded_text(right, 30)}")
    result = _BINARY[op](left, right)
    return _whole(result)


# --------------------------------------------------------------------------- plans
# Each checked expression node is turned once into a closure (kept on the node itself, so it
# lives exactly as long as the parsed tree): running a program then calls closures instead
# of walking ``isinstance`` chains for every node on every run. The closures do what the
# interpreter's methods say; they never evaluate text.

Plan = Callable[["_Interpreter"], Any]


class _CallKind(StrEnum):
    CREATION = "creation"
    FUNCTION = "function"
    METHOD = "method"


@dataclass(frozen=True)
class _Call:
    kind: _CallKind
    name: str


def _plan(node: ast.expr) -> Plan:
    plan = getattr(node, "_atlas_plan", None)
    if plan is None:
        plan = _make_plan(node)
        node._atlas_plan = plan  # type: ignore[attr-defined]
    return plan


def _make_plan(node: ast.expr) -> Plan:
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda it: value
    if isinstance(node, ast.Name):
        name = node.id
        if name in ("True", "False", "None"):
            constant = {"True": True, "False": False, "None": None}[name]
            return lambda it: constant

        def variable(it: _Interpreter) -> Any:
            try:
                return it.names[name]
            except KeyError:
                raise AutogradError(ErrorCode.UNKNOWN_NAME, name=name) from None

        return variable
    if isinstance(node, ast.UnaryOp):
        operand, negative = _plan(node.operand), isinstance(node.op, ast.USub)

        def unary(it: _Interpreter) -> Any:
            value = it.operand(operand(it))
            it.count(1)
            return it.produced(_whole(-value if negative else +value))

        return unary
    if isinstance(node, ast.BinOp):
        left, right, op = _plan(node.left), _plan(node.right), type(node.op)
        return lambda it: it.binary(op, left(it), right(it))
    if isinstance(node, ast.List):
        items = [_plan(item) for item in node.elts]
        return lambda it: it.sequence([item(it) for item in items])
    if isinstance(node, ast.Tuple):
        items = [_plan(item) for item in node.elts]
        return lambda it: it.sequence(tuple(item(it) for item in items))
    if isinstance(node, ast.Attribute):
        value = _plan(node.value)
        if node.attr == "grad":
            return lambda it: it.expect_tensor(value(it)).grad
        return lambda it: it.produced(it.expect_tensor(value(it)).T)
    if isinstance(node, ast.Subscript):
        value, index = _plan(node.value), node.slice
        _plan_index(index)  # planned now, with the rest of the tree (see plan_program)

        def subscript(it: _Interpreter) -> Any:
            tensor = it.expect_tensor(value(it))
            key = it.index(index)
            it.count(1)
            return it.produced(tensor[key])

        return subscript
    if isinstance(node, ast.Call):
        return _call_plan(node)
    raise AutogradError(ErrorCode.NOT_ALLOWED, what=type(node).__name__)


def _plan_index(node: ast.expr) -> None:
    if isinstance(node, ast.Tuple):
        for item in node.elts:
            _plan_index(item)
    elif isinstance(node, ast.Slice):
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                _plan(part)
    else:
        _plan(node)


def _statement_expressions(body: list[ast.stmt]) -> Iterator[ast.expr]:
    """The expressions the interpreter evaluates with :meth:`_Interpreter.expr`."""
    for node in body:
        if isinstance(node, ast.AugAssign | ast.Expr) or (
            isinstance(node, ast.Assign) and not isinstance(node.targets[0], ast.Attribute)
        ):
            yield node.value
        elif isinstance(node, ast.If):
            yield node.test.left  # type: ignore[attr-defined]
            yield node.test.comparators[0]  # type: ignore[attr-defined]
            yield from _statement_expressions(node.body)
            yield from _statement_expressions(node.orelse)
        elif isinstance(node, ast.With | ast.For):
            yield from _statement_expressions(node.body)


def plan_program(program: Program) -> int:
    """Build every plan of a checked program now (a run then only reads them) and return
    the bytes they hold: the closures, their cells and what the cells keep besides other
    plans and the tree itself (which the caller counts)."""
    for expression in _statement_expressions(program.tree.body):
        _plan(expression)
    total = 0
    for node in ast.walk(program.tree):
        plan = getattr(node, "_atlas_plan", None)
        if plan is None:
            continue
        total += sys.getsizeof(plan) + sys.getsizeof(node.__dict__)
        cells = plan.__closure__ or ()
        total += sys.getsizeof(cells)
        for cell in cells:
            total += sys.getsizeof(cell)
            contents = cell.cell_contents
            if not callable(contents) and not isinstance(contents, ast.AST):
                total += deep_size(contents)
    return total


def _call_plan(node: ast.Call) -> Plan:
    func = node.func
    function = None
    if isinstance(func, ast.Name):
        function = func.id
    elif (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "torch"
    ):
        function = func.attr
    target: Plan | None = None
    if function is not None and function in CREATION:
        call = _Call(_CallKind.CREATION, function)
    elif function is not None and function in FUNCTIONS and isinstance(func, ast.Attribute):
        call = _Call(_CallKind.FUNCTION, function)
    else:
        assert isinstance(func, ast.Attribute)
        call = _Call(_CallKind.METHOD, func.attr)
        target = _plan(func.value)
    args = [_plan(arg) for arg in node.args]
    constants: dict[str, Any] = {}
    keywords: list[tuple[str, Plan]] = []
    for keyword in node.keywords:
        assert keyword.arg is not None
        if keyword.arg == "dtype":
            constants["dtype"] = _DTYPES[dtype_name(keyword.value) or "float32"]
        else:
            keywords.append((keyword.arg, _plan(keyword.value)))

    def invoke(it: _Interpreter) -> Any:
        values = [arg(it) for arg in args]
        kwargs = dict(constants)
        for name, plan in keywords:
            kwargs[name] = plan(it)
        return it.invoke(call, values, kwargs, None if target is None else target(it))

    return invoke


def _check_data(data: Any) -> int:
    """The numbers in ``tensor([...])``: only numbers, at most 4 deep, at most MAX_ELEMENTS.
    Every list or number visited counts, and the walk stops at the bound: sub-lists shared
    many times (``a = [a, a]`` repeated) are as long to walk as they are unfolded, so the
    walk never gets far (torch itself would walk them all)."""
    budget = 2 * MAX_ELEMENTS + 64  # lists and numbers visited
    numbers = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if budget < 0:
            raise AutogradError(ErrorCode.TOO_BIG, numel=f"> {MAX_ELEMENTS:,}", limit=MAX_ELEMENTS)
        if isinstance(value, list | tuple):
            if depth >= 4:
                raise AutogradError(ErrorCode.BAD_SIZE, what="tensor(data)")
            stack.extend((item, depth + 1) for item in value[: budget + 1])
        elif isinstance(value, int | float):  # True and False make a bool tensor, as in torch
            _whole(value)
            numbers += 1
            if numbers > MAX_ELEMENTS:
                raise AutogradError(
                    ErrorCode.TOO_BIG, numel=f"> {MAX_ELEMENTS:,}", limit=MAX_ELEMENTS
                )
        else:
            raise AutogradError(ErrorCode.BAD_SIZE, what=type(value).__name__)
    return numbers
