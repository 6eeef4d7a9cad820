"""Type promotion, asked of torch itself: ``torch.result_type`` and the real op, on the
operand kinds whose rules differ (a tensor, a 0-dim tensor, a Python scalar).

The category rule surprises everyone: a Python scalar or a 0-dim tensor only changes the
result's dtype when it belongs to a higher category (bool < integer < floating < complex), so
``int8_tensor + 1000`` stays int8 and wraps, and ``float16_tensor + 1.0`` stays float16 and
rounds. :func:`promote` runs the op on the operands' values and sets the exact answer beside
torch's, so the wrapped or rounded value is on the page, not described.
"""

from __future__ import annotations

import ast
import functools
import warnings
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

import torch

from torchatlas.basics.errors import BasicsValueError, ErrorCode, refused, torch_words
from torchatlas.basics.exact import parts_of
from torchatlas.basics.limits import MAX_VALUE_TEXT
from torchatlas.errors import RefusedByTorch, TorchRefusal

DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
SCALAR_TYPES: dict[str, type] = {"bool": bool, "int": int, "float": float, "complex": complex}


class OperandKind(StrEnum):
    TENSOR = "tensor"  # a tensor with dimensions: its dtype always counts
    ZERO_DIM = "zero_dim"  # torch.tensor(v, dtype=…): counts only from a higher category
    SCALAR = "scalar"  # a Python bool / int / float / complex: the same, and no dtype at all


class Op(StrEnum):
    ADD = "add"
    MUL = "mul"


OP_SYMBOLS = {Op.ADD: "+", Op.MUL: "*"}


class Outcome(StrEnum):
    EXACT = "exact"  # torch's value is the mathematical one, to the last digit
    WRAPPED = "wrapped"  # an integer result went round its range
    ROUNDED = "rounded"  # a floating result differs from the exact value (however little)
    OVERFLOWED = "overflowed"  # the exact value is finite, torch's is inf (or nan)
    NOT_FINITE = "not_finite"  # an operand is inf or nan: there is no exact value to compare
    LOGICAL = "logical"  # a bool result: + is "or", * is "and"
    RAISED = "raised"  # torch refused the op


# Values that sit near the edge of each dtype, so the default examples show what happens there.
DEFAULT_VALUES: dict[str, bool | int | float | complex] = {
    "bool": True,
    "uint8": 200,
    "int8": 100,
    "int16": 30000,
    "int32": 2_000_000_000,
    "int64": 2**62,
    "float16": 2048.0,
    "bfloat16": 256.0,
    "float32": 16_777_216.0,
    "float64": 2.0**53,
    "complex64": complex(16_777_216.0, 1.0),
    "complex128": complex(2.0**53, 1.0),
    # Python scalars
    "int": 1000,
    "float": 1.0,
    "complex": 1j,
}


@dataclass(frozen=True)
class DTypeSpec:
    """One operand: its kind, its dtype (a torch dtype name, or for a Python scalar one of
    ``bool``, ``int``, ``float``, ``complex``) and the value it holds."""

    kind: OperandKind
    dtype: str
    value: bool | int | float | complex | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OperandKind(self.kind))
        names = SCALAR_TYPES if self.kind is OperandKind.SCALAR else DTYPES
        if self.dtype not in names:
            raise BasicsValueError(
                ErrorCode.UNKNOWN_DTYPE, dtype=self.dtype, allowed=", ".join(names)
            )
        if self.value is None:
            object.__setattr__(self, "value", DEFAULT_VALUES[self.dtype])

    @property
    def code(self) -> str:
        """The operand as a line of Python. A Python scalar is written as the type it is (the
        value 1 as a ``float`` operand is ``1.0``: written ``1``, it would be an int and
        promote differently)."""
        value = _py(self.value)
        if self.kind is OperandKind.SCALAR:
            try:
                return _py(SCALAR_TYPES[self.dtype](self.value))
            except (TypeError, ValueError, OverflowError):
                return value
        if self.kind is OperandKind.ZERO_DIM:
            return f"torch.tensor({value}, dtype=torch.{self.dtype})"
        return f"torch.tensor([{value}], dtype=torch.{self.dtype})"

    def make(self) -> torch.Tensor | bool | int | float | complex:
        """The operand itself; raises BasicsValueError when the value does not fit the dtype
        (torch refuses to build an int8 tensor holding 1000)."""
        assert self.value is not None
        if self.kind is OperandKind.SCALAR:
            try:
                return SCALAR_TYPES[self.dtype](self.value)
            except (TypeError, ValueError, OverflowError):  # complex → int, inf → int
                raise BasicsValueError(
                    ErrorCode.VALUE_DOES_NOT_FIT, value=_py(self.value), dtype=self.dtype,
                    torch_message="",
                ) from None  # fmt: skip
        try:
            data = self.value if self.kind is OperandKind.ZERO_DIM else [self.value]
            return torch.tensor(data, dtype=DTYPES[self.dtype])
        except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
            raise BasicsValueError(
                ErrorCode.VALUE_DOES_NOT_FIT,
                value=_py(self.value),
                dtype=self.dtype,
                torch_message=torch_words(exc),
            ) from None


def _py(value: object) -> str:
    if isinstance(value, complex):
        return f"complex({value.real!r}, {value.imag!r})"
    return repr(value)


def parse_value(text: str) -> bool | int | float | complex:
    """A typed number: ``1000``, ``-3``, ``2.5``, ``1e-4``, ``True``, ``1+2j``; never eval."""
    if len(text) > MAX_VALUE_TEXT:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(text), limit=MAX_VALUE_TEXT)
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise BasicsValueError(ErrorCode.NOT_A_NUMBER, text=text) from None
    value = _number(node)
    if value is None:
        raise BasicsValueError(ErrorCode.NOT_A_NUMBER, text=text)
    if type(value) is int and abs(value) > MAX_INT:
        # Python's ints have no size; torch's stop at 64 bits (past that, its conversion
        # raises OverflowError): the room says so instead of handing the number over
        raise BasicsValueError(ErrorCode.INT_TOO_LARGE, text=text.strip(), limit=MAX_INT)
    return value


MAX_INT = 2**64  # the largest whole number handed to torch (uint64's range ends just below)


def _number(node: ast.AST) -> bool | int | float | complex | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | complex):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _number(node.operand)
        if inner is None or isinstance(inner, bool):
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        # 1+2j and 1-2j only: a real part and an imaginary literal
        left, right = _number(node.left), node.right
        if (
            isinstance(left, int | float)
            and not isinstance(left, bool)
            and isinstance(right, ast.Constant)
            and isinstance(right.value, complex)
        ):
            return left + right.value if isinstance(node.op, ast.Add) else left - right.value
    return None


@dataclass(frozen=True)
class Promotion(RefusedByTorch):
    """``a ⊕ b`` as torch computes it, beside the exact value of the same operands.

    ``exact`` is the mathematical result of the operands *as stored* (the values torch
    actually combines), computed with fractions: a finite float is an exact fraction, so the
    exact value has no rounding of its own. ``got`` is torch's result as an exact fraction
    too, so "exact" is decided by equality, never by a tolerance. Complex numbers keep their
    imaginary parts in the ``*_imag`` fields (None for a real number)."""

    a: DTypeSpec
    b: DTypeSpec
    op: Op
    result_type: str  # torch.result_type(a, b) (or the op's dtype where result_type raised)
    op_dtype: str | None  # the dtype of the real op's result (None when it raised)
    value: str | None  # the real op's value, as Python prints torch's item()
    exact: Fraction | None  # the mathematical value of the stored operands (None: no value)
    outcome: Outcome
    refusal: TorchRefusal | None = None  # what torch said when the op raised
    categories_differ: bool = False  # a scalar / 0-dim operand of a higher category
    exact_imag: Fraction | None = None
    got: Fraction | None = None  # torch's result, exactly (None when not finite or raised)
    got_imag: Fraction | None = None
    stored_a: Fraction | None = None  # the operands as torch holds them, exactly
    stored_a_imag: Fraction | None = None
    stored_b: Fraction | None = None
    stored_b_imag: Fraction | None = None
    a_changed: bool = False  # storing a's value in its dtype changed it (float16 of 0.1, ...)
    b_changed: bool = False
    int_overflow: bool = False  # torch refused a whole number past its 64 bits

    @property
    def code(self) -> str:
        return f"{self.a.code} {OP_SYMBOLS[self.op]} {self.b.code}"

    @property
    def derivation(self) -> Derivation | None:
        """Where the result dtype comes from (the real op's dtype, else the one
        ``torch.result_type`` names); None when torch named none."""
        named = self.op_dtype or self.result_type
        try:
            return derive(self.a.dtype, self.b.kind, self.b.dtype, named)
        except BasicsValueError:
            return None

    @property
    def difference(self) -> tuple[Fraction, Fraction | None] | None:
        """torch's value minus the exact one, exactly (None when either is missing)."""
        if self.got is None or self.exact is None:
            return None
        imag = None
        if self.got_imag is not None or self.exact_imag is not None:
            imag = (self.got_imag or Fraction(0)) - (self.exact_imag or Fraction(0))
        return self.got - self.exact, imag


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _as_python(tensor: torch.Tensor) -> bool | int | float | complex:
    return tensor.reshape(-1)[0].item()


def _exact(
    a: tuple[Fraction | None, Fraction | None],
    b: tuple[Fraction | None, Fraction | None],
    op: Op,
) -> tuple[Fraction, Fraction | None]:
    """``a ⊕ b`` on exact (real, imaginary) parts of finite operands (imaginary None for a
    real one)."""
    (ar, ai), (br, bi) = a, b
    assert ar is not None and br is not None
    if ai is None and bi is None:
        return (ar + br, None) if op is Op.ADD else (ar * br, None)
    ai, bi = ai or Fraction(0), bi or Fraction(0)
    if op is Op.ADD:
        return ar + br, ai + bi
    return ar * br - ai * bi, ar * bi + ai * br


def _finite_parts(value: object) -> tuple[Fraction | None, Fraction | None] | None:
    """Exact parts of a real or complex value; None when any part is inf or nan."""
    real, imag = parts_of(value)
    if real is None or (isinstance(value, complex) and imag is None):
        return None
    return real, imag


class Category(StrEnum):
    """A dtype's category, read from torch's own flags (``is_complex``,
    ``is_floating_point``), in the order the promotion lesson names: bool < integer <
    floating < complex."""

    BOOL = "bool"
    INTEGER = "integer"
    FLOATING = "floating"
    COMPLEX = "complex"

    @property
    def rank(self) -> int:
        return list(Category).index(self)


def dtype_of(name: str) -> torch.dtype:
    """torch's dtype of this name (``complex32`` and ``bcomplex32`` included: torch.result_type
    names them), or raises BasicsValueError."""
    found = getattr(torch, name, None) if name.isidentifier() else None
    if not isinstance(found, torch.dtype):
        raise BasicsValueError(ErrorCode.UNKNOWN_DTYPE, dtype=name, allowed=", ".join(DTYPES))
    return found


def category(dtype: torch.dtype | str) -> Category:
    dtype = dtype_of(dtype) if isinstance(dtype, str) else dtype
    if dtype is torch.bool:
        return Category.BOOL
    if dtype.is_complex:
        return Category.COMPLEX
    if dtype.is_floating_point:
        return Category.FLOATING
    return Category.INTEGER


def own_dtype(kind: OperandKind | str, dtype: str) -> str:
    """The dtype an operand has on its own: a tensor's is its dtype; a Python scalar has none,
    so it is the dtype torch gives it alone (``torch.tensor(1.0).dtype``, asked of torch)."""
    if OperandKind(kind) is OperandKind.SCALAR:
        return _name(torch.tensor(SCALAR_TYPES[dtype](1)).dtype)
    return _name(dtype_of(dtype))


def _part(dtype: torch.dtype) -> torch.dtype:
    """The dtype of each part: a complex dtype's real and imaginary parts (torch's
    ``to_real``), a real dtype itself."""
    return dtype.to_real() if dtype.is_complex else dtype


class Origin(StrEnum):
    """Which operand a property of the result matches."""

    LEFT = "left"
    RIGHT = "right"
    BOTH = "both"
    NEITHER = "neither"


def _origin(value: object, left: object, right: object) -> Origin:
    if value == left and value == right:
        return Origin.BOTH
    if value == left:
        return Origin.LEFT
    if value == right:
        return Origin.RIGHT
    return Origin.NEITHER


@dataclass(frozen=True)
class Derivation:
    """Where a result dtype comes from, read off torch's result: never a rule written beside
    it. ``result`` is the dtype torch gave (the real op's, or ``torch.result_type``'s where the
    op raised); each field compares it with the two operands' own dtypes (a Python scalar's
    own dtype is the one torch gives it alone)."""

    left: str
    right_kind: OperandKind
    right: str  # the right operand's dtype, or its Python type for a scalar
    right_alone: str  # the right operand's own dtype
    result: str
    category: Category  # the result's
    left_category: Category
    right_category: Category
    part: str  # the dtype of each of the result's parts (itself for a real dtype)
    part_bits: int
    left_part: str
    right_part: str

    @property
    def source(self) -> Origin:
        """Whose dtype the result is."""
        return _origin(self.result, self.left, self.right_alone)

    @property
    def category_from(self) -> Origin:
        return _origin(self.category, self.left_category, self.right_category)

    @property
    def part_from(self) -> Origin:
        return _origin(self.part, self.left_part, self.right_part)


@functools.cache
def derive(left: str, right_kind: OperandKind | str, right: str, result: str) -> Derivation:
    """Compare ``result`` (a dtype torch gave for ``left_tensor ⊕ right``) with the operands:
    whose dtype it is, whose category, whose precision (the dtype of its parts)."""
    kind = OperandKind(right_kind)
    alone = own_dtype(kind, right)
    out, a, b = dtype_of(result), dtype_of(left), dtype_of(alone)
    return Derivation(
        left=left, right_kind=kind, right=right, right_alone=alone, result=_name(out),
        category=category(out), left_category=category(a), right_category=category(b),
        part=_name(_part(out)), part_bits=_part(out).itemsize * 8,
        left_part=_name(_part(a)), right_part=_name(_part(b)),
    )  # fmt: skip


def promote(a: DTypeSpec, b: DTypeSpec, op: Op | str = Op.ADD) -> Promotion:
    """``a ⊕ b``: torch.result_type, the real op's dtype and value, and the exact value.
    ``a`` is the tensor on the left (any kind: a scalar on both sides is plain Python)."""
    op = Op(op)
    left, right = a.make(), b.make()
    if not isinstance(left, torch.Tensor) and not isinstance(right, torch.Tensor):
        raise BasicsValueError(ErrorCode.UNKNOWN_OPERAND, kind=a.kind)
    categories_differ = (
        b.kind is not OperandKind.TENSOR
        and category(own_dtype(b.kind, b.dtype)).rank > category(a.dtype).rank
    )
    held_a = _as_python(left) if isinstance(left, torch.Tensor) else left
    held_b = _as_python(right) if isinstance(right, torch.Tensor) else right
    parts_a, parts_b = _finite_parts(held_a), _finite_parts(held_b)
    stored = {
        "stored_a": parts_a[0] if parts_a else None,
        "stored_a_imag": parts_a[1] if parts_a else None,
        "stored_b": parts_b[0] if parts_b else None,
        "stored_b_imag": parts_b[1] if parts_b else None,
        "a_changed": _changed(a.value, held_a),
        "b_changed": _changed(b.value, held_b),
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result_type = _name(torch.result_type(left, right))  # type: ignore[arg-type]
            out = left + right if op is Op.ADD else left * right  # type: ignore[operator]
    except (RuntimeError, NotImplementedError, TypeError, ValueError, OverflowError) as exc:
        # OverflowError / "Overflow when unpacking long": a Python int past 64 bits
        overflow = isinstance(exc, OverflowError) or "Overflow" in str(exc)[:200]
        try:
            named = _name(torch.result_type(left, right))  # type: ignore[arg-type]
        except (RuntimeError, TypeError, ValueError, OverflowError):
            named = "—"
        return Promotion(
            a, b, op, named, None, None, None, Outcome.RAISED, refused(exc),
            categories_differ, int_overflow=overflow, **stored,
        )  # fmt: skip
    got = _as_python(out)
    op_dtype = _name(out.dtype)
    exact, exact_imag = (None, None)
    if parts_a is not None and parts_b is not None:
        exact, exact_imag = _exact(parts_a, parts_b, op)
    got_parts = _finite_parts(got)
    got_real, got_imag = got_parts if got_parts is not None else (None, None)
    if out.dtype is torch.bool:
        outcome = Outcome.LOGICAL
    elif exact is None:
        outcome = Outcome.NOT_FINITE
    elif got_real is None:
        outcome = Outcome.OVERFLOWED
    elif got_real == exact and (got_imag or 0) == (exact_imag or 0):
        outcome = Outcome.EXACT
    elif not (out.dtype.is_floating_point or out.dtype.is_complex):
        outcome = Outcome.WRAPPED
    else:
        outcome = Outcome.ROUNDED
    return Promotion(
        a, b, op, result_type, op_dtype, _show(got), exact, outcome, None, categories_differ,
        exact_imag=exact_imag, got=got_real, got_imag=got_imag, **stored,
    )  # fmt: skip


def _changed(typed: object, held: object) -> bool:
    """Whether storing ``typed`` in its operand changed the number (float16 of 0.1; a bool
    of 5 is True, but a whole number stored as a float is the same number)."""
    typed_parts, held_parts = parts_of(typed), parts_of(held)
    if None in (typed_parts[0], held_parts[0]):
        return False  # inf / nan: nothing exact to compare
    return (typed_parts[0], typed_parts[1] or 0) != (held_parts[0], held_parts[1] or 0)


def _show(value: object) -> str:
    """torch's value as Python prints it (``repr``: the shortest text that reads back as the
    same number); bounded, since a value is at most a complex of two floats."""
    return repr(value)[:80]


# --------------------------------------------------------------------------- the full table

TABLE_COLUMNS: tuple[tuple[OperandKind, str], ...] = (
    *((OperandKind.TENSOR, name) for name in DTYPES),
    *((OperandKind.ZERO_DIM, name) for name in DTYPES),
    *((OperandKind.SCALAR, name) for name in SCALAR_TYPES),
)


@dataclass(frozen=True)
class TableCell:
    row: str  # the left tensor's dtype
    column: tuple[OperandKind, str]
    result_type: str
    # The real op's dtype (the same as result_type: the table checks it), or None where the
    # op raised: float16 or bfloat16 with a complex scalar asks for a half-precision complex
    # dtype that few kernels support.
    op_dtype: str | None

    @property
    def derivation(self) -> Derivation:
        """Where this cell's dtype comes from (the real op's, else torch.result_type's)."""
        return derive(self.row, *self.column, self.op_dtype or self.result_type)


@dataclass(frozen=True)
class PromotionTable:
    rows: tuple[str, ...]
    columns: tuple[tuple[OperandKind, str], ...]
    cells: tuple[tuple[TableCell, ...], ...]  # cells[row][column]

    def cell(self, row: str, kind: OperandKind | str, dtype: str) -> TableCell:
        r = self.rows.index(row)
        c = self.columns.index((OperandKind(kind), dtype))
        return self.cells[r][c]


# One operand per (kind, dtype), built once: the table runs the real op on them.
_ONES: dict[tuple[OperandKind, str], torch.Tensor | bool | int | float | complex] = {}


def table_operand(kind: OperandKind, dtype: str) -> torch.Tensor | bool | int | float | complex:
    """The operand the table uses for (kind, dtype): ones, built once per process."""
    key = (kind, dtype)
    if key not in _ONES:
        if kind is OperandKind.SCALAR:
            _ONES[key] = SCALAR_TYPES[dtype](1)
        elif kind is OperandKind.ZERO_DIM:
            _ONES[key] = torch.ones((), dtype=DTYPES[dtype])
        else:
            _ONES[key] = torch.ones(2, dtype=DTYPES[dtype])
    return _ONES[key]


def build_table() -> PromotionTable:
    """Every left tensor dtype against every column: ``torch.result_type`` and the dtype of
    the real ``+`` (bool + bool is a logical or, so the op runs for every pair)."""
    rows = tuple(DTYPES)
    cells = []
    with warnings.catch_warnings():
        # torch warns that half-precision complex is experimental each time one is made
        warnings.simplefilter("ignore", UserWarning)
        return _fill(rows, cells)


def _fill(rows: tuple[str, ...], cells: list) -> PromotionTable:
    for row in rows:
        left = table_operand(OperandKind.TENSOR, row)
        line = []
        for kind, dtype in TABLE_COLUMNS:
            right = table_operand(kind, dtype)
            result = torch.result_type(left, right)  # type: ignore[arg-type]
            try:
                op_dtype: str | None = _name(torch.add(left, right).dtype)  # type: ignore[arg-type]
            except (RuntimeError, NotImplementedError):
                op_dtype = None
            line.append(TableCell(row, (kind, dtype), _name(result), op_dtype))
        cells.append(tuple(line))
    return PromotionTable(rows, TABLE_COLUMNS, tuple(cells))


@functools.cache
def promotion_table() -> PromotionTable:
    """:func:`build_table` once per process: it depends only on the installed torch."""
    return build_table()
