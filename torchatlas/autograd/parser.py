"""An allow-listed parser for the room's small programs.

The text is parsed with :mod:`ast` and walked node by node before anything runs: only
assignments to plain names, calls of the listed creation functions and methods, the listed
operators, ``with no_grad():`` / ``with inference_mode():`` blocks, ``if`` on a comparison and
``for i in range(k)`` with a literal ``k`` pass. Names that start with ``_`` never pass, so
attribute escapes (``x.__class__``) are refused before evaluation. Nothing the user typed is
handed to ``eval``, ``exec`` or ``compile``: :mod:`torchatlas.autograd.run` interprets the
checked tree itself, calling torch by the allow-listed names.

Every walk is bounded: the text length, the statement count, the nesting depth and a static
count of operations (a loop's body counts once per pass) are checked, so parsing stays linear
in the text and a program's cost is known before it runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from torchatlas.autograd.errors import ErrorCode, ProgramRefused

__all__ = [
    "CREATION",
    "FUNCTIONS",
    "GRAD_MODES",
    "MAX_ELEMENTS",
    "MAX_LOOP",
    "MAX_OPS",
    "MAX_SOURCE",
    "MAX_STATEMENTS",
    "METHODS",
    "Program",
    "check",
    "python_code",
]

MAX_SOURCE = 4000  # characters of program text
MAX_STATEMENTS = 80  # statements in the text (a 50-operation program fits)
MAX_LINES = 120
MAX_DEPTH = 16  # nesting of expressions
MAX_BLOCKS = 3  # nesting of with / if / for
MAX_LOOP = 10  # passes of one ``for i in range(k)``
MAX_OPS = 300  # operations a program may run, loops unrolled
MAX_ELEMENTS = 4096  # elements of one tensor
MAX_TOTAL_ELEMENTS = 1 << 18  # elements of every result of a program together
INT64_MAX = (1 << 63) - 1  # PyTorch's whole numbers are 64-bit: a literal past it is refused

# Creation functions and the keywords each accepts (called bare or as ``torch.<name>``).
CREATION: dict[str, tuple[str, ...]] = {
    "randn": ("requires_grad", "dtype"),
    "rand": ("requires_grad", "dtype"),
    "zeros": ("requires_grad", "dtype"),
    "ones": ("requires_grad", "dtype"),
    "tensor": ("requires_grad", "dtype"),
    "arange": ("requires_grad", "dtype"),
    "full": ("requires_grad", "dtype"),
    "eye": ("requires_grad", "dtype"),
}
RANDOM = ("randn", "rand")  # these take the program's seeded generator

# Tensor methods and the keywords each accepts; those in FUNCTIONS may also be called as
# ``torch.<name>(tensor, ...)`` (never bare: ``t`` and ``sum`` stay free as variable names).
METHODS: dict[str, tuple[str, ...]] = {
    "sum": ("dim", "keepdim"),
    "mean": ("dim", "keepdim"),
    "relu": (),
    "sigmoid": (),
    "tanh": (),
    "exp": (),
    "log": (),
    "sin": (),
    "cos": (),
    "abs": (),
    "sqrt": (),
    "square": (),
    "matmul": (),
    "mm": (),
    "add": ("alpha",),
    "sub": ("alpha",),
    "mul": (),
    "div": (),
    "pow": ("exponent",),
    "view": (),
    "reshape": (),
    "t": (),
    "detach": (),
    "clone": (),
    "requires_grad_": ("requires_grad",),
    "retain_grad": (),
    "backward": ("gradient", "retain_graph"),
    "numpy": (),
    "item": (),
    "zero_": (),
    "fill_": (),
    "add_": ("alpha",),
    "sub_": ("alpha",),
    "mul_": (),
    "div_": (),
    "exp_": (),
    "sigmoid_": (),
    "relu_": (),
    "is_inference": (),
}
FUNCTIONS: tuple[str, ...] = (
    "sum", "mean", "relu", "sigmoid", "tanh", "exp", "log", "sin", "cos", "abs", "sqrt",
    "square", "matmul", "mm", "add", "sub", "mul", "div", "pow", "t", "detach", "clone",
)  # fmt: skip
ATTRIBUTES: tuple[str, ...] = ("grad", "T")
GRAD_MODES: tuple[str, ...] = ("no_grad", "inference_mode", "enable_grad")
DTYPES: tuple[str, ...] = (
    "float32", "float64", "float", "double", "float16", "bfloat16", "int64", "long", "int32",
    "int", "int16", "int8", "uint8", "bool",
)  # fmt: skip
# Names a program may not rebind: the callables it can name bare, and the dtypes.
RESERVED: frozenset[str] = frozenset(
    {"torch", "range", "True", "False", "None", *CREATION, *GRAD_MODES, *DTYPES}
)
_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow)
_COMPARE = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)


@dataclass(frozen=True)
class Program:
    """A checked program: its text, the checked tree, its statement count and the most
    operations it can run (loops unrolled)."""

    text: str
    tree: ast.Module = field(compare=False, repr=False)
    statements: int
    ops: int
    # bytes of the interpreter's plans attached to the tree's nodes (see ``parse``)
    plan_bytes: int = field(default=0, compare=False)


def _refuse(
    code: ErrorCode, node: ast.AST | None = None, *, line: int | None = None, **params: object
) -> ProgramRefused:
    if line is None:
        line = getattr(node, "lineno", 0) if node is not None else 0
    return ProgramRefused(code, line=line, **params)


def _what(node: ast.AST) -> str:
    """A short quote of the refused part (bounded: the page shows it)."""
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):  # pragma: no cover - unparse of a checked-size tree
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "…"


def check(text: str) -> Program:
    """Check ``text`` against the allow list; raise :class:`ProgramRefused` (code, line,
    what was refused) on the first thing outside it. Nothing is evaluated and nothing is
    kept: :func:`torchatlas.autograd.programs.parse` is the cached entry point (with the
    interpreter's plans built), which everything else uses."""
    if len(text) > MAX_SOURCE:  # before anything else reads a long text
        raise _refuse(ErrorCode.TOO_LONG, length=f"{len(text):,}", limit=f"{MAX_SOURCE:,}")
    return _parse(text)


def _parse(text: str) -> Program:
    if not text.strip():
        raise _refuse(ErrorCode.EMPTY)
    if len(text) > MAX_SOURCE:
        raise _refuse(ErrorCode.TOO_LONG, length=f"{len(text):,}", limit=f"{MAX_SOURCE:,}")
    if text.count("\n") + 1 > MAX_LINES:
        raise _refuse(ErrorCode.TOO_MANY_LINES, limit=MAX_STATEMENTS)
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as error:
        if "too many nested" in str(error.msg):
            raise _refuse(ErrorCode.TOO_DEEP, line=error.lineno or 0, limit=MAX_DEPTH) from None
        raise _refuse(ErrorCode.SYNTAX, line=error.lineno or 0) from None
    except (ValueError, RecursionError, MemoryError):
        # Deep nesting makes Python's own parser give up (a parser stack, not the process's
        # memory): malformed like any other text.
        raise _refuse(ErrorCode.TOO_DEEP, limit=MAX_DEPTH) from None
    checker = _Checker()
    ops = checker.block(tree.body, blocks=0)
    if checker.statements > MAX_STATEMENTS:
        raise _refuse(ErrorCode.TOO_MANY_LINES, limit=MAX_STATEMENTS)
    if ops > MAX_OPS:
        raise _refuse(ErrorCode.TOO_MANY_OPS, ops=ops, limit=MAX_OPS)
    return Program(text=text, tree=tree, statements=checker.statements, ops=ops)


class _Checker:
    """One walk over the tree; every method returns the operations its node may run."""

    def __init__(self) -> None:
        self.statements = 0

    def block(self, body: list[ast.stmt], blocks: int) -> int:
        if blocks > MAX_BLOCKS:
            raise _refuse(ErrorCode.TOO_DEEP, body[0], limit=MAX_DEPTH)
        return sum(self.statement(node, blocks) for node in body)

    def statement(self, node: ast.stmt, blocks: int) -> int:
        self.statements += 1
        if self.statements > MAX_STATEMENTS:
            raise _refuse(ErrorCode.TOO_MANY_LINES, node, limit=MAX_STATEMENTS)
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                raise _refuse(ErrorCode.BAD_TARGET, node, what=_what(node))
            target = node.targets[0]
            if isinstance(target, ast.Attribute):
                # ``x.grad = None``: the usual way to zero a gradient by hand
                if not (
                    target.attr == "grad"
                    and isinstance(target.value, ast.Name)
                    and isinstance(node.value, ast.Constant)
                    and node.value.value is None
                ):
                    raise _refuse(ErrorCode.BAD_TARGET, node, what=_what(target))
                self.name(target.value)
                return 0
            self.target(target)
            return self.expr(node.value, 0)
        if isinstance(node, ast.AugAssign):
            self.target(node.target)
            if not isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
                raise _refuse(ErrorCode.NOT_ALLOWED, node, what=_what(node))
            return 1 + self.expr(node.value, 0)
        if isinstance(node, ast.Expr):
            return self.expr(node.value, 0)
        if isinstance(node, ast.Pass):
            return 0
        if isinstance(node, ast.With):
            if len(node.items) != 1 or node.items[0].optional_vars is not None:
                raise _refuse(ErrorCode.BAD_WITH, node, what=_what(node.items[0].context_expr))
            context = node.items[0].context_expr
            if not (
                isinstance(context, ast.Call)
                and not context.args
                and not context.keywords
                and _function_name(context.func) in GRAD_MODES
            ):
                raise _refuse(ErrorCode.BAD_WITH, node, what=_what(context))
            return self.block(node.body, blocks + 1)
        if isinstance(node, ast.If):
            test = node.test
            if not (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], _COMPARE)
            ):
                raise _refuse(ErrorCode.BAD_CONDITION, node, what=_what(test))
            cost = self.expr(test.left, 1) + self.expr(test.comparators[0], 1) + 1
            cost += max(self.block(node.body, blocks + 1), self.block(node.orelse, blocks + 1))
            return cost
        if isinstance(node, ast.For):
            passes = _range_passes(node)
            self.target(node.target)
            if node.orelse:
                raise _refuse(ErrorCode.BAD_LOOP, node, limit=MAX_LOOP)
            return passes * self.block(node.body, blocks + 1)
        raise _refuse(ErrorCode.NOT_ALLOWED, node, what=_what(node))

    def target(self, node: ast.AST) -> None:
        if not isinstance(node, ast.Name):
            raise _refuse(ErrorCode.BAD_TARGET, node, what=_what(node))
        self.name(node)
        if node.id in RESERVED:
            raise _refuse(ErrorCode.RESERVED_NAME, node, name=node.id)

    def name(self, node: ast.AST) -> None:
        if not isinstance(node, ast.Name):
            raise _refuse(ErrorCode.BAD_TARGET, node, what=_what(node))
        if node.id.startswith("_"):
            raise _refuse(ErrorCode.PRIVATE_NAME, node, name=node.id)

    def expr(self, node: ast.expr, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise _refuse(ErrorCode.TOO_DEEP, node, limit=MAX_DEPTH)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, int) and not isinstance(value, bool) and value > INT64_MAX:
                # (a minus sign is a unary op: -2**63 is refused too, harmlessly)
                raise _refuse(ErrorCode.NUMBER_TOO_BIG, node, what=_what(node))
            if isinstance(value, bool) or value is None or isinstance(value, int | float):
                return 0
            raise _refuse(ErrorCode.BAD_LITERAL, node, what=_what(node))
        if isinstance(node, ast.Name):
            self.name(node)
            if node.id in RESERVED and node.id not in ("True", "False", "None"):
                raise _refuse(ErrorCode.RESERVED_NAME, node, name=node.id)
            return 0
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub | ast.UAdd):
                raise _refuse(ErrorCode.NOT_ALLOWED, node, what=_what(node))
            return 1 + self.expr(node.operand, depth + 1)
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINARY):
                raise _refuse(ErrorCode.NOT_ALLOWED, node, what=_what(node))
            return 1 + self.expr(node.left, depth + 1) + self.expr(node.right, depth + 1)
        if isinstance(node, ast.List | ast.Tuple):
            # building a list is an operation too (the interpreter counts it when it runs)
            return 1 + sum(self.expr(item, depth + 1) for item in node.elts)
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise _refuse(ErrorCode.PRIVATE_NAME, node, name=node.attr)
            if _is_torch(node.value):
                raise _refuse(ErrorCode.UNKNOWN_FUNCTION, node, name=f"torch.{node.attr}")
            if node.attr not in ATTRIBUTES:
                raise _refuse(ErrorCode.UNKNOWN_ATTRIBUTE, node, name=node.attr)
            return self.expr(node.value, depth + 1)
        if isinstance(node, ast.Subscript):
            cost = 1 + self.expr(node.value, depth + 1)
            return cost + self.index(node.slice, depth + 1)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise _refuse(ErrorCode.NOT_ALLOWED, node, what=_what(node))

    def index(self, node: ast.expr, depth: int) -> int:
        if isinstance(node, ast.Tuple):
            return sum(self.index(item, depth + 1) for item in node.elts)
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return sum(self.expr(part, depth + 1) for part in parts if part is not None)
        return self.expr(node, depth + 1)

    def call(self, node: ast.Call, depth: int) -> int:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr.startswith("_"):
            raise _refuse(ErrorCode.PRIVATE_NAME, node, name=func.attr)
        name = _function_name(func)
        allowed: tuple[str, ...]
        if name is not None:
            if name in CREATION:
                allowed = CREATION[name]
            elif name in FUNCTIONS and isinstance(func, ast.Attribute):  # torch.sigmoid(x)
                allowed = METHODS[name]
            else:
                raise _refuse(ErrorCode.UNKNOWN_FUNCTION, node, name=_what(func))
        elif isinstance(func, ast.Attribute):
            if func.attr not in METHODS:
                raise _refuse(ErrorCode.UNKNOWN_METHOD, node, name=func.attr)
            allowed = METHODS[func.attr]
        else:
            raise _refuse(ErrorCode.UNKNOWN_FUNCTION, node, name=_what(func))
        cost = 1
        if isinstance(func, ast.Attribute) and name is None:
            cost += self.expr(func.value, depth + 1)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise _refuse(ErrorCode.NOT_ALLOWED, arg, what=_what(arg))
            cost += self.expr(arg, depth + 1)
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg not in allowed:
                raise _refuse(
                    ErrorCode.BAD_KEYWORD,
                    node,
                    keyword=str(keyword.arg),
                    name=name or getattr(func, "attr", "?"),
                    allowed=", ".join(allowed) or "—",
                )
            if keyword.arg == "dtype":
                if _dtype_name(keyword.value) is None:
                    raise _refuse(ErrorCode.BAD_LITERAL, keyword.value, what=_what(keyword.value))
                continue
            cost += self.expr(keyword.value, depth + 1)
        return cost


def _is_torch(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "torch"


def _function_name(node: ast.AST) -> str | None:
    """``randn`` for ``randn`` and ``torch.randn``; None for a method call on a value."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and _is_torch(node.value):
        return node.attr
    return None


def _dtype_name(node: ast.AST) -> str | None:
    name = _function_name(node)
    return name if name in DTYPES else None


def dtype_name(node: ast.AST) -> str | None:
    """The dtype a checked ``dtype=`` keyword names."""
    return _dtype_name(node)


def _range_passes(node: ast.For) -> int:
    call = node.iter
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "range"
        and not call.keywords
        and 1 <= len(call.args) <= 2
        and all(
            isinstance(arg, ast.Constant)
            and isinstance(arg.value, int)
            and not isinstance(arg.value, bool)
            for arg in call.args
        )
    ):
        raise _refuse(ErrorCode.BAD_LOOP, node, limit=MAX_LOOP)
    values = [arg.value for arg in call.args]  # type: ignore[attr-defined]
    start, stop = (0, values[0]) if len(values) == 1 else (values[0], values[1])
    passes = max(0, stop - start)
    if passes > MAX_LOOP or abs(start) > 1000:
        raise _refuse(ErrorCode.BAD_LOOP, node, limit=MAX_LOOP)
    return passes


class _ToTorch(ast.NodeTransformer):
    """Rewrites a checked tree as plain PyTorch: ``torch.`` prefixes and the seeded
    generator, so the code shown beside the graph runs as it stands."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = _function_name(node.func)
        if isinstance(node.func, ast.Name) and name in (*CREATION, *GRAD_MODES):
            node.func = ast.Attribute(value=ast.Name("torch"), attr=name, ctx=ast.Load())
        if name in RANDOM:
            node.keywords.append(ast.keyword(arg="generator", value=ast.Name("g")))
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        self.generic_visit(node)
        if node.arg == "dtype" and isinstance(node.value, ast.Name):
            node.value = ast.Attribute(value=ast.Name("torch"), attr=node.value.id)
        return node


def python_code(program: Program, seed: int) -> str:
    """The program as PyTorch code that runs on its own (the text is never run by the room;
    this is for the reader to copy)."""
    tree = ast.parse(program.text)
    tree = ast.fix_missing_locations(_ToTorch().visit(tree))
    body = ast.unparse(tree)
    return f"import torch\n\ng = torch.Generator().manual_seed({seed})\n{body}\n"
