"""Layer 1, the static allow-list: what pasted model code may contain.

This layer exists to give honest mistakes a clear, line-numbered answer before anything runs.
It is NOT the defence: ``getattr`` can be reached in ways no parser sees, so the capability
namespace (:mod:`.facade`) and the isolated worker (:mod:`.worker`) must hold on their own.

Text is read too, because the standard library turns strings into code where no parser looks
(``typing.get_type_hints`` evaluates string annotations, ``namedtuple`` builds code with
``eval``, ``str.format`` looks attributes up): a string holding a double underscore is refused,
and a string that reads as Python is checked like code (:func:`check_text`, which the worker's
run-time text guard also applies to every text that becomes code while a job runs).
:func:`strip_annotations` removes annotations before compiling, so none exists at run time.
"""

from __future__ import annotations

import ast
import sys
import textwrap
import unicodedata
from dataclasses import asdict, dataclass
from types import CodeType

MAX_SOURCE_CHARS = 50_000
MAX_AST_NODES = 20_000
MAX_AST_DEPTH = 60

# The typing names a model may use: inert markers and aliases. Nothing that evaluates text
# (get_type_hints, ForwardRef, get_args, NamedTuple/TypedDict and their class machinery).
TYPING_NAMES = frozenset(
    {
        "Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Iterable", "Iterator",
        "List", "Literal", "Mapping", "MutableMapping", "NoReturn", "Optional", "Sequence",
        "Set", "TYPE_CHECKING", "Tuple", "Type", "TypeVar", "Union", "cast",
    }
)  # fmt: skip

# Module → names a ``from module import name`` may bind ("*" = any public name of the facade).
ALLOWED_IMPORTS: dict[str, frozenset[str] | None] = {
    "torch": None,
    "torch.nn": None,
    "torch.nn.functional": None,
    "torch.nn.init": None,
    "torchvision": frozenset({"models"}),
    "torchvision.models": None,
    "math": None,
    "typing": TYPING_NAMES,
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

# Helpers that turn text into code or into attribute look-ups (typing's evaluators, operator's
# getters, torch's dotted-name importer, torch.compile and its method on every nn.Module).
TEXT_EVALUATING_ATTRIBUTES = frozenset(
    {
        "get_type_hints", "get_annotations", "ForwardRef", "_eval_type", "_evaluate",
        "evaluate_forward_ref", "_type_check", "_type_convert", "get_args", "NamedTuple",
        "TypedDict", "attrgetter", "methodcaller", "literal_eval", "compile", "sympify",
        "parse_expr", "find_class", "_import_dotted_name", "_getframe", "currentframe",
    }
)  # fmt: skip

ALLOWED_DUNDER_DEFINITIONS = frozenset({"__init__"})

# Inside text that reads as code: builtins that the real interpreter would hand to it (an
# evaluator given empty globals adds the real builtins) and that reach code, names or files.
TEXT_FORBIDDEN_NAMES = frozenset({"help", "dir", "copyright", "credits", "license", "exit", "quit"})
# ... and dotted paths that start at a module the sandbox does not offer ("os.system",
# "builtins.eval", "torchatlas.sandbox…"): text such as a tensor type name is imported and
# walked attribute by attribute by some torch helpers.
OFFERED_MODULES = frozenset({"torch", "torchvision", "math", "typing", "collections", "functools"})
TEXT_FORBIDDEN_ROOTS = (
    frozenset(sys.stdlib_module_names)
    | {"numpy", "sympy", "torchatlas", "streamlit", "PIL", "pyseccomp", "seccomp", "pip",
       "setuptools", "pkg_resources", "site", "sitecustomize", "usercustomize"}
) - OFFERED_MODULES  # fmt: skip
MAX_TEXT_NESTING = 4  # text inside text inside text…: deeper than any honest string

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


def _docstring(body: list[ast.stmt]) -> ast.Constant | None:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[0].value if isinstance(body[0].value.value, str) else None
    return None


def _preview(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _dotted_root(node: ast.Attribute) -> str | None:
    value: ast.AST = node
    while isinstance(value, ast.Attribute):
        value = value.value
    return value.id if isinstance(value, ast.Name) else None


class _Checker(ast.NodeVisitor):
    """The allow-list over a tree; ``nesting`` > 0 checks text that reads as code."""

    def __init__(self, nesting: int = 0) -> None:
        self.refusals: list[Refusal] = []
        self.nesting = nesting
        self.docstrings: set[int] = set()

    def refuse(self, node: ast.AST, code: str, message: str) -> None:
        line = getattr(node, "lineno", 1)
        self.refusals.append(Refusal(line, getattr(node, "col_offset", 0) + 1, code, message))

    def refuse_dunder_name(self, node: ast.AST, name: str | None, what: str) -> None:
        if name is not None and _is_dunder(name):
            self.refuse(node, "dunder", f"`{name}` (a double-underscore name) cannot be used as "
                        f"{what} here.")  # fmt: skip

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, ALLOWED_NODES):
            kind = type(node).__name__
            self.refuse(
                node, "construct", f"`{kind}` is not needed in model code and is not allowed here."
            )
            return
        super().generic_visit(node)

    def visit_Module(self, node: ast.Module) -> None:
        self.note_docstring(node.body)
        self.generic_visit(node)

    def note_docstring(self, body: list[ast.stmt]) -> None:
        docstring = _docstring(body)
        if docstring is not None:
            self.docstrings.add(id(docstring))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS:
                self.refuse(node, "import", _import_message(alias.name))
            self.refuse_dunder_name(node, alias.asname, "a name to import as")
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
                elif _is_dunder(alias.name) or alias.name in TEXT_EVALUATING_ATTRIBUTES:
                    self.refuse(node, "import", f"`{alias.name}` cannot be imported from "
                                f"`{module}` here.")  # fmt: skip
                self.refuse_dunder_name(node, alias.asname, "a name to import as")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_DEFINITIONS:
            self.refuse(node, "dunder", f"Defining `{node.name}` is not allowed here; a model "
                        "only needs `__init__` and `forward`.")  # fmt: skip
        self.note_docstring(node.body)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.refuse_dunder_name(node, node.name, "a class name")
        self.note_docstring(node.body)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.refuse_dunder_name(node, node.arg, "a parameter name")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        # dict(__getattr__=f) and type(name, bases, dict(...)) would define hooks by keyword.
        self.refuse_dunder_name(node, node.arg, "a keyword argument")
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self.refuse_dunder_name(node, node.name, "an exception name")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self.refuse_dunder_name(node, name, "a global name")
        self.generic_visit(node)

    visit_Nonlocal = visit_Global  # type: ignore[assignment]

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_CALLS:
            self.refuse(node, "forbidden_name", f"`{node.id}` is not available here: it can run "
                        "or reach code and files outside the model.")  # fmt: skip
        elif _is_dunder(node.id):
            self.refuse(node, "dunder", f"`{node.id}` (a double-underscore name) is not allowed "
                        "here.")  # fmt: skip
        elif self.nesting and node.id in TEXT_FORBIDDEN_NAMES:
            self.refuse(node, "forbidden_name", f"`{node.id}` reaches Python's own help, files "
                        "or names, which model code never needs.")  # fmt: skip
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
        elif name in TEXT_EVALUATING_ATTRIBUTES:
            self.refuse(node, "evaluates_text", f"`.{name}` turns text into code or into "
                        "attribute look-ups, which is not available here.")  # fmt: skip
        root = _dotted_root(node) if self.nesting else None
        if root in TEXT_FORBIDDEN_ROOTS and not isinstance(node.ctx, ast.Store):
            self.refuse(node, "forbidden_attribute", f"`{root}.…` names a module the sandbox "
                        "does not offer.")  # fmt: skip
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if not isinstance(value, str):
            return
        if "__" in unicodedata.normalize("NFKC", value) and id(node) not in self.docstrings:
            self.refuse(node, "string_dunder", f"The text {_preview(value)} contains `__`; "
                        "text with double underscores can be turned into attribute look-ups "
                        "(format strings, annotations), so it is not allowed here. Rename or "
                        "reword it.")  # fmt: skip
            return
        inner = check_text(value, self.nesting + 1)
        if inner:
            reason = inner[0].message.rstrip(".")
            self.refuse(node, "string_code", f"The text {_preview(value)} reads as Python code "
                        f"that is not allowed here ({reason}); something could evaluate it, so "
                        "write the code itself or reword the text.")  # fmt: skip


def check_text(text: str, nesting: int = 1) -> list[Refusal]:
    """Refusals for ``text`` if it reads as Python that the allow-list refuses, else ``[]``.

    Text that is not Python (prose, ``"bchw->bc"``) cannot become code and passes; so does
    code the allow-list accepts (``"relu"``, ``"Optional[int]"``). Positions are inside the
    text. Used on every string constant and by the run-time text guard.
    """
    tree = parse_text(text)
    if tree is None:
        return []
    if isinstance(tree, Refusal):
        return [tree]
    if nesting > MAX_TEXT_NESTING:
        return [Refusal(1, 1, "too_complex", "Text that holds code nested this deeply is not "
                        "needed in model code.")]  # fmt: skip
    checker = _Checker(nesting)
    checker.visit(tree)
    return checker.refusals


def parse_text(text: str) -> ast.Module | Refusal | None:
    """The text as code (as written, or dedented the way ``eval`` strips it), None when it is
    not Python, or a refusal when it is too deep or large to check."""
    if not any(character.isalnum() or character == "_" for character in text):
        return None
    for candidate in (text, textwrap.dedent(text).strip()):
        try:
            tree = ast.parse(candidate)
        except (SyntaxError, ValueError):
            continue
        except (RecursionError, MemoryError):
            return Refusal(1, 1, "too_complex", "The text is nested too deeply to check.")
        if sum(1 for _ in ast.walk(tree)) > MAX_AST_NODES or (
            _depth(tree, MAX_AST_DEPTH) > MAX_AST_DEPTH
        ):
            return Refusal(1, 1, "too_complex", "The text is code nested more deeply than "
                           "a model needs.")  # fmt: skip
        return tree
    return None


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


class _AnnotationStripper(ast.NodeTransformer):
    """Drops every annotation: a model needs none, and typing helpers evaluate annotation text."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        node.type_comment = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None
        node.type_comment = None
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:  # `x: int` only records an annotation
            return ast.copy_location(ast.Pass(), node)
        assign = ast.Assign(targets=[node.target], value=node.value)
        return self.generic_visit(ast.copy_location(assign, node))  # type: ignore[return-value]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.stmt:
        # `from __future__ import annotations` keeps annotations as text; with none left it
        # has nothing to do, and removing it means no future flag reaches the compiler.
        if node.module == "__future__":
            return ast.copy_location(ast.Pass(), node)
        return node


def strip_annotations(tree: ast.Module) -> ast.Module:
    """``tree`` without argument, return or variable annotations (and ``__future__`` imports),
    so that no annotation, and no annotation text, exists when the code runs."""
    return ast.fix_missing_locations(_AnnotationStripper().visit(tree))


def compile_model(source: str, filename: str) -> CodeType:
    """Compile pasted code without its annotations (raises what ``compile`` raises)."""
    tree = strip_annotations(ast.parse(source, filename=filename))
    return compile(tree, filename, "exec", dont_inherit=True)


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
