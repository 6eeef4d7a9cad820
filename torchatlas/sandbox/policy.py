"""Layer 1, the static allow-list: what pasted model code may contain.

This layer exists to give honest mistakes a clear, line-numbered answer before anything runs.
It is NOT the defence: ``getattr`` can be reached in ways no parser sees, so the capability
namespace (:mod:`.facade`) and the isolated worker (:mod:`.worker`) must hold on their own.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass

MAX_SOURCE_CHARS = 50_000
MAX_AST_NODES = 20_000
MAX_AST_DEPTH = 60

# Module → names a ``from module import name`` may bind ("*" = any public name of the facade).
ALLOWED_IMPORTS: dict[str, frozenset[str] | None] = {
    "torch": None,
    "torch.nn": None,
    "torch.nn.functional": None,
    "torch.nn.init": None,
    "torchvision": frozenset({"models"}),
    "torchvision.models": None,
    "math": None,
    "typing": None,
    "collections": frozenset({"OrderedDict", "namedtuple", "defaultdict"}),
    "functools": frozenset({"partial", "reduce"}),
    "__future__": frozenset({"annotations"}),
}

FORBIDDEN_CALLS = frozenset(
    {
        "eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "globals", "vars",
        "locals", "__import__", "breakpoint",
    }
)  # fmt: skip

# Frame, code and generator internals: the classic ways from any function back to module globals.
FORBIDDEN_ATTRIBUTE_PREFIXES = ("co_", "gi_", "cr_", "ag_", "tb_")
FRAME_ATTRIBUTES = frozenset(
    {"f_globals", "f_locals", "f_back", "f_builtins", "f_code", "f_trace", "func_globals"}
)
# Names on torch that reach the operating system, files or native code.
FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "format", "format_map", "mro", "os", "sys", "hub", "load", "save", "ops", "_C",
        "cpp_extension", "load_library", "load_inline", "from_file", "importlib", "subprocess",
        "builtins", "ctypes", "library", "classes", "_dynamo", "_inductor", "multiprocessing",
    }
)  # fmt: skip

ALLOWED_DUNDER_DEFINITIONS = frozenset({"__init__"})

# Statement and expression kinds a model file needs; anything else is refused by name.
ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.Import, ast.ImportFrom, ast.alias, ast.ClassDef, ast.FunctionDef,
    ast.arguments, ast.arg, ast.keyword, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign,
    ast.For, ast.While, ast.If, ast.With, ast.withitem, ast.Raise, ast.Try, ast.ExceptHandler,
    ast.Assert, ast.Expr, ast.Pass, ast.Break, ast.Continue, ast.Delete, ast.Global,
    ast.Nonlocal, ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp,
    ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.comprehension, ast.Yield, ast.Compare, ast.Call, ast.JoinedStr, ast.FormattedValue,
    ast.Constant, ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple,
    ast.Slice, ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip


@dataclass
class Refusal:
    """One reason the static allow-list refuses the source."""

    line: int
    col: int
    code: str
    message: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_super_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.refusals: list[Refusal] = []

    def refuse(self, node: ast.AST, code: str, message: str) -> None:
        line = getattr(node, "lineno", 1)
        self.refusals.append(Refusal(line, getattr(node, "col_offset", 0) + 1, code, message))

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, ALLOWED_NODES):
            kind = type(node).__name__
            self.refuse(
                node, "construct", f"`{kind}` is not needed in model code and is not allowed here."
            )
            return
        super().generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS:
                self.refuse(node, "import", _import_message(alias.name))
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_IMPORTS:
            self.refuse(node, "import", _import_message("." * node.level + module))
        else:
            allowed = ALLOWED_IMPORTS[module]
            for alias in node.names:
                if alias.name == "*":
                    self.refuse(node, "import", f"`from {module} import *` hides which names "
                                "the code uses; import the names you need.")  # fmt: skip
                elif allowed is not None and alias.name not in allowed:
                    names = ", ".join(sorted(allowed))
                    self.refuse(node, "import", f"`{alias.name}` cannot be imported from "
                                f"`{module}` here; allowed: {names}.")  # fmt: skip
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_DEFINITIONS:
            self.refuse(node, "dunder", f"Defining `{node.name}` is not allowed here; a model "
                        "only needs `__init__` and `forward`.")  # fmt: skip
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_CALLS:
            self.refuse(node, "forbidden_name", f"`{node.id}` is not available here: it can run "
                        "or reach code and files outside the model.")  # fmt: skip
        elif _is_dunder(node.id):
            self.refuse(node, "dunder", f"`{node.id}` (a double-underscore name) is not allowed "
                        "here.")  # fmt: skip
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if _is_dunder(name):
            if not (name == "__init__" and _is_super_call(node.value)):
                self.refuse(node, "dunder", f"`.{name}` is not allowed here: double-underscore "
                            "attributes lead out of the model into Python's internals. Only "
                            "`super().__init__()` is allowed.")  # fmt: skip
        elif name in ("format", "format_map"):
            self.refuse(node, "format", f"`.{name}()` is not allowed here because format strings "
                        "can look up attributes; use an f-string instead.")  # fmt: skip
        elif name.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES) or name in FRAME_ATTRIBUTES:
            self.refuse(node, "internals", f"`.{name}` reaches frame, code or generator "
                        "internals, which model code never needs.")  # fmt: skip
        elif name in FORBIDDEN_ATTRIBUTES:
            self.refuse(node, "forbidden_attribute", f"`.{name}` reaches files, the operating "
                        "system or native code, which is not available here.")  # fmt: skip
        self.generic_visit(node)


def _import_message(module: str) -> str:
    allowed = "torch, torch.nn, torch.nn.functional, math, torchvision.models, typing, collections"
    return f"`{module}` cannot be imported here; only {allowed} are available."


def _depth(node: ast.AST, limit: int) -> int:
    """Nesting depth, stopping early once ``limit`` is passed (deep trees are refused anyway)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(current))
    return deepest


def syntax_refusal(exc: SyntaxError) -> Refusal:
    return Refusal(
        line=exc.lineno or 1,
        col=exc.offset or 1,
        code="syntax",
        message=f"Python syntax error: {exc.msg}.",
    )


def check_source(source: str) -> list[Refusal]:
    """The static allow-list's verdict: ``[]`` means accepted.

    A syntax error comes back as a single refusal with ``code="syntax"`` (line and column).
    """
    if not isinstance(source, str):
        return [Refusal(1, 1, "type", "The code must be text.")]
    if len(source) > MAX_SOURCE_CHARS:
        return [
            Refusal(1, 1, "too_large", f"The code is {len(source):,} characters long; the limit "
                    f"is {MAX_SOURCE_CHARS:,}. Paste only the model's classes.")
        ]  # fmt: skip
    if "\x00" in source:
        return [Refusal(1, 1, "type", "The code contains a NUL character; paste plain text.")]
    try:
        tree = ast.parse(source, filename="<pasted model>")
    except SyntaxError as exc:
        return [syntax_refusal(exc)]
    except (ValueError, RecursionError, MemoryError):
        return [Refusal(1, 1, "too_complex", "The code is nested too deeply to check.")]
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_AST_NODES:
        return [Refusal(1, 1, "too_complex", f"The code has {count:,} syntax nodes; the limit is "
                        f"{MAX_AST_NODES:,}. Paste only the model's classes.")]  # fmt: skip
    if _depth(tree, MAX_AST_DEPTH) > MAX_AST_DEPTH:
        return [Refusal(1, 1, "too_complex", "The code is nested more deeply than a model needs; "
                        "split long expressions into several lines.")]  # fmt: skip
    checker = _Checker()
    checker.visit(tree)
    return sorted(checker.refusals, key=lambda refusal: (refusal.line, refusal.col))
