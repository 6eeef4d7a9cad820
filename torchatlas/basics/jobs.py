"""The basics room's sandbox jobs (registered on the shared pool by torchatlas.sandboxed).

Every computation of this room whose sizes, values or structure a visitor chooses (operand
values, shapes, an einsum equation, an index expression, the saving demo's shape and view)
runs here, in a confined child with a memory limit and a CPU deadline. The parameters are the
visitor's text and whole numbers as JSON; the engine reads and checks them again in the child
(its own refusals come back as a code and parameters), so the job is sound whatever the server
sent. The server shows only the frozen dataclass rebuilt from the reply.

Only the promotion table (fixed operands, no visitor input) and the creation panel stay in the
server process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchatlas.basics.broadcasting import Broadcast, broadcast
from torchatlas.basics.einsum import EinsumPlan, einsum
from torchatlas.basics.errors import BasicsError, BasicsValueError, ErrorCode
from torchatlas.basics.indexing import IndexResult, index
from torchatlas.basics.promotion import DTypeSpec, Op, OperandKind, Promotion, parse_value, promote
from torchatlas.basics.saving import SaveReport, serialize
from torchatlas.sandbox.codec import Limits, job_reply

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

PROMOTE = "basics.promote"
BROADCAST = "basics.broadcast"
EINSUM = "basics.einsum"
INDEX = "basics.index"
SAVE = "basics.save"

# What each job's reply is rebuilt as on the server.
RETURNS: dict[str, type] = {
    PROMOTE: Promotion,
    BROADCAST: Broadcast,
    EINSUM: EinsumPlan,
    INDEX: IndexResult,
    SAVE: SaveReport,
}
# A reply's bounds: an index result lists at most 4096 picked cells; an exact value of two
# float64 operands has at most ~650 digits in its numerator or denominator.
REPLY_LIMITS = Limits(max_str=8000, max_items=8192, max_nodes=40_000, max_depth=12,
                      fraction_digits=800)  # fmt: skip


def _text(value: object, limit: int = 400) -> str:
    """A text parameter: a string within the room's longest input (the engine bounds it
    again), anything else refused as not a number or shape."""
    if not isinstance(value, str) or len(value) > limit:
        raise BasicsValueError(ErrorCode.TEXT_TOO_LONG, length=len(str(value)[:10_000]),
                               limit=limit)  # fmt: skip
    return value


def _shapes(value: object) -> list[list[int]]:
    if not isinstance(value, list):
        raise BasicsValueError(ErrorCode.EMPTY)
    return value  # each one is checked by the engine (check_shape)


def promote_job(
    namespace: dict[str, Any], *, left: str, left_value: str, right_kind: str, right: str,
    right_value: str, op: str,
) -> dict:  # fmt: skip
    """``a ⊕ b`` with the visitor's dtypes and values (typed text, read again here)."""
    del namespace

    def compute() -> Promotion:
        a = DTypeSpec(OperandKind.TENSOR, _text(left), parse_value(_text(left_value)))
        b = DTypeSpec(OperandKind(_text(right_kind)), _text(right), parse_value(_text(right_value)))
        return promote(a, b, Op(_text(op)))

    return job_reply(compute, refusals=(BasicsError,))


def broadcast_job(namespace: dict[str, Any], *, shapes: list) -> dict:
    del namespace
    return job_reply(lambda: broadcast(_shapes(shapes)), refusals=(BasicsError,))


def einsum_job(namespace: dict[str, Any], *, equation: str, shapes: list) -> dict:
    del namespace
    return job_reply(lambda: einsum(_text(equation), _shapes(shapes)), refusals=(BasicsError,))


def index_job(namespace: dict[str, Any], *, shape: list, expression: str) -> dict:
    del namespace
    return job_reply(lambda: index(shape, _text(expression)), refusals=(BasicsError,))


def save_job(namespace: dict[str, Any], *, shape: list, view: str, dtype: str) -> dict:
    del namespace
    return job_reply(lambda: serialize(shape, _text(view), _text(dtype)), refusals=(BasicsError,))


JOBS = {
    PROMOTE: promote_job,
    BROADCAST: broadcast_job,
    EINSUM: einsum_job,
    INDEX: index_job,
    SAVE: save_job,
}
# Run once in the zygote before it forks (so children find every import and kernel ready and
# never need to open a file): one tiny call of each job. None calls backward.
WARM_UP: list[dict[str, Any]] = [
    {"source": "", "job": PROMOTE, "params": {
        "left": "float16", "left_value": "0.1", "right_kind": "scalar", "right": "complex",
        "right_value": "1+2j", "op": "mul"}},
    {"source": "", "job": BROADCAST, "params": {"shapes": [[2, 3], [4]]}},
    {"source": "", "job": EINSUM, "params": {"equation": "ij,jk->ik", "shapes": [[2, 3], [3, 2]]}},
    {"source": "", "job": INDEX, "params": {"shape": [2, 3], "expression": "x[x > 1]"}},
    {"source": "", "job": SAVE, "params": {"shape": [4, 2], "view": "x[:2]", "dtype": "bfloat16"}},
    {"source": "", "job": SAVE, "params": {"shape": [4, 2], "view": "x[:2]", "dtype": "float32"}},
]  # fmt: skip


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's jobs and their warm-up with ``pool`` (again: a no-op)."""
    return pool.register(JOBS, WARM_UP)
