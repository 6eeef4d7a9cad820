"""The autograd room's sandbox job: a visitor's program traced and replayed backward in a
confined child, its frozen record sent back as bounded JSON.

A program is text a visitor types or a link carries. The parser (in the server: it gives the
clear, translated refusals) is the first wall; running the program, its backward and reading
the graph happen only here, in a child with a memory limit and a CPU deadline, so a program
that slips past the room's own size checks can exhaust nothing but that child.

:func:`contained_run` is the room's entry point. The program as plain PyTorch is text written
from the checked tree, bounded like the parse the server does anyway and evaluating nothing:
the server writes it while the child computes, so the two overlap.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

from torchatlas.autograd.backward import BackwardStep, BackwardTrace, LeafGrad, trace_and_backward
from torchatlas.autograd.errors import AutogradError, ProgramError
from torchatlas.autograd.examples import EXAMPLES
from torchatlas.autograd.graph import MAX_SHOWN, Graph, Values
from torchatlas.autograd.parser import Program, python_code
from torchatlas.autograd.programs import parse, parse_uncached
from torchatlas.clients import Visitor
from torchatlas.sandbox.codec import job_reply
from torchatlas.sandbox.schema import SchemaError
from torchatlas.sandboxed import JobFailure, RoomJob, run_room_job

if TYPE_CHECKING:
    from torchatlas.sandbox import SandboxPool

RUN = "autograd.run"


@dataclass(frozen=True)
class ProgramRun:
    """What the room shows of one program: its graph, backward from ``trace.root`` (None when
    the program stopped or has nothing to start from), and the program as plain PyTorch."""

    graph: Graph
    trace: BackwardTrace | None
    code: str


def run_program(program: str, seed: int, root: str | None, *, cached: bool = True) -> ProgramRun:
    """Trace ``program`` and replay backward from ``root`` (default: the graph's own). The
    text is checked once; ``cached=False`` skips the parse cache (a sandbox child runs one
    program and ends)."""
    parsed = parse(program) if cached else parse_uncached(program)
    graph, trace = trace_and_backward(parsed, root, seed=seed)
    return ProgramRun(graph, trace, python_code(parsed, seed))


@dataclass(frozen=True)
class PackedValues:
    """Every :class:`Values` of a replay on the wire, as columns: each one's shape and norm,
    and the numbers of those that kept theirs (at most MAX_SHOWN each), all of them in one
    run of little-endian floats in base64, cut into strings of at most ``DATA_CHUNK``
    characters (a string each was a Python call each way per value, and more of the reply
    to check). The floats are 4 bytes wide when every number is exactly a float32 (the
    values of float32 tensors, the common case: half the bytes), else 8 (exact either way)."""

    shapes: tuple[tuple[int, ...], ...]
    norms: tuple[float, ...]
    kept: tuple[int, ...]  # positions, in order, of the values whose numbers were kept
    width: Literal[4, 8]  # bytes per number in ``data``
    data: tuple[str, ...]  # the kept values' numbers, in order, as one base64 text in parts

    @classmethod
    def of(cls, table: Sequence[Values]) -> PackedValues:
        kept = [position for position, values in enumerate(table) if values.flat is not None]
        numbers = tuple(chain.from_iterable(table[position].flat or () for position in kept))
        width, raw = _packed_floats(numbers)
        text = base64.b64encode(raw).decode("ascii")
        return cls(
            tuple(values.shape for values in table),
            tuple(values.norm for values in table),
            tuple(kept),
            width,
            tuple(text[start : start + DATA_CHUNK] for start in range(0, len(text), DATA_CHUNK)),
        )

    def unpack(self) -> list[Values]:
        """The values, checked: columns of matching lengths, kept positions in order, and
        exactly as many numbers as the kept values' shapes hold, at most MAX_SHOWN each."""
        if len(self.shapes) != len(self.norms):
            raise SchemaError("values columns of different lengths")
        if list(self.kept) != sorted(set(self.kept)):
            raise SchemaError("kept values out of order")
        if self.kept and not (self.kept[0] >= 0 and self.kept[-1] < len(self.shapes)):
            raise SchemaError("a kept value outside the values table")
        counts = [_kept_count(self.shapes[position]) for position in self.kept]
        numbers = _floats("".join(self.data), sum(counts), self.width)
        flats: dict[int, tuple[float, ...]] = {}
        start = 0
        for position, count in zip(self.kept, counts, strict=True):
            flats[position] = numbers[start : start + count]
            start += count
        return [
            Values(shape, flats.get(position), norm)
            for position, (shape, norm) in enumerate(zip(self.shapes, self.norms, strict=True))
        ]


DATA_CHUNK = 16_384  # characters in one string of PackedValues.data, under the codec's bound
_FORMATS = {4: "f", 8: "d"}


def _packed_floats(numbers: tuple[float, ...]) -> tuple[Literal[4, 8], bytes]:
    """``numbers`` as little-endian float32 when that keeps every one of them exactly (read
    back equal: the sign of a zero survives, and a NaN is never equal, so it goes wide), else
    float64."""
    try:
        narrow = struct.pack(f"<{len(numbers)}f", *numbers)
    except OverflowError:  # a finite number past float32's range
        narrow = b""
    if narrow and struct.unpack(f"<{len(numbers)}f", narrow) == numbers:
        return 4, narrow
    return 8, struct.pack(f"<{len(numbers)}d", *numbers)


def _floats(text: str, count: int, width: int) -> tuple[float, ...]:
    """``count`` numbers of ``width`` bytes from ``text``, checked before and after decoding."""
    if width not in _FORMATS:
        raise SchemaError("values of an unknown width")
    if len(text) != 4 * ((width * count + 2) // 3):  # before decoding anything
        raise SchemaError("values that do not fill their shape")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SchemaError("values that are not base64") from exc
    if len(raw) != width * count:
        raise SchemaError("values that do not fill their shape")
    return struct.unpack(f"<{count}{_FORMATS[width]}", raw)


def _kept_count(shape: tuple[int, ...]) -> int:
    """How many numbers a kept value of ``shape`` holds; SchemaError past MAX_SHOWN (checked
    as the product grows: a forged shape of huge sizes is never multiplied out)."""
    if any(size < 0 for size in shape):
        raise SchemaError("a negative size")
    if 0 in shape:
        return 0
    count = 1
    for size in shape:
        count *= size
        if count > MAX_SHOWN:
            raise SchemaError("more values than a reply carries")
    return count


@dataclass(frozen=True)
class PackedStep:
    """A :class:`BackwardStep` whose gradients are positions in the replay's values table
    (the gradient one node sends is the one the next receives: sent once)."""

    index: int
    node: int
    name: str
    grad_in: tuple[int | None, ...]
    grad_out: tuple[int | None, ...]
    leaf: str | None


@dataclass(frozen=True)
class Replay:
    """A :class:`BackwardTrace` without its graph (the reply's own graph is that graph)."""

    root: str
    values: PackedValues
    steps: tuple[PackedStep, ...]
    total_steps: int
    grads: tuple[LeafGrad, ...]
    error: ProgramError | None

    @classmethod
    def of(cls, trace: BackwardTrace) -> Replay:
        positions: dict[int, int] = {}
        table: list[Values] = []

        def position(value: Values | None) -> int | None:
            if value is None:
                return None
            if id(value) not in positions:  # the engine shares one Values per gradient tensor
                positions[id(value)] = len(table)
                table.append(value)
            return positions[id(value)]

        steps = tuple(
            PackedStep(
                s.index,
                s.node,
                s.name,
                tuple(position(v) for v in s.grad_in),
                tuple(position(v) for v in s.grad_out),
                s.leaf,
            )
            for s in trace.steps
        )
        values = PackedValues.of(table)
        return cls(trace.root, values, steps, trace.total_steps, trace.grads, trace.error)

    def steps_unpacked(self) -> tuple[BackwardStep, ...]:
        # a position's value by a lookup in C; a position outside the table has none
        value = {None: None, **dict(enumerate(self.values.unpack()))}.__getitem__
        try:
            return tuple(
                BackwardStep(
                    s.index,
                    s.node,
                    s.name,
                    tuple(map(value, s.grad_in)),
                    tuple(map(value, s.grad_out)),
                    s.leaf,
                )
                for s in self.steps
            )
        except KeyError:
            raise SchemaError("a gradient outside the values table") from None


@dataclass(frozen=True)
class ProgramReply:
    """What the job sends back: a :class:`ProgramRun` with the graph once (a replay's graph
    is the run's graph: sending it twice doubled the reply and the server's decoding)."""

    graph: Graph
    replay: Replay | None

    @classmethod
    def of(cls, graph: Graph, trace: BackwardTrace | None) -> ProgramReply:
        if trace is not None and trace.graph is not graph:  # never: trace_and_backward's
            raise ValueError("a replay of another graph")  # pragma: no cover
        return cls(graph, None if trace is None else Replay.of(trace))

    def to_run(self, code: str) -> ProgramRun:
        """The room's :class:`ProgramRun`, with the program as plain PyTorch ``code``; raises
        SchemaError for a reply that does not hold together (values that do not fill their
        shape, a step pointing nowhere)."""
        trace = None
        if (r := self.replay) is not None:
            steps = r.steps_unpacked()
            trace = BackwardTrace(r.root, self.graph, steps, r.total_steps, r.grads, r.error)
        return ProgramRun(self.graph, trace, code)


def _trace_reply(program: str, seed: int, root: str | None) -> ProgramReply:
    return ProgramReply.of(*trace_and_backward(parse_uncached(program), root, seed=seed))


def run_job(namespace: dict[str, Any], *, program: str, seed: int, root: str | None) -> dict:
    """The sandbox job: :func:`run_program`'s graph and backward as JSON (a
    :class:`ProgramReply`; a refusal by the engine's own checks comes back as its code and
    parameters)."""
    del namespace  # no pasted module: the program is data for the room's own interpreter
    return job_reply(lambda: _trace_reply(program, seed, root), refusals=(AutogradError,))


def contained_run(
    program: Program, seed: int, root: str | None, *, visitor: Visitor | str, timeout_s: float
) -> RoomJob[ProgramRun]:
    """:func:`run_program` of a checked ``program`` with its tracing and backward in a
    sandbox job (``visitor``'s place in the fair queue). The value is the run; a refusal
    is the engine's code and parameters; a reply that does not hold together is an
    ``untrusted`` failure. Every failure comes back in the result, never as an exception
    (writing the code of a checked program cannot fail)."""
    code = ""

    def write_code() -> None:  # while the child computes
        nonlocal code
        code = python_code(program, seed)

    job = run_room_job(
        RUN,
        {"program": program.text, "seed": seed, "root": root},
        ProgramReply,
        visitor=visitor,
        timeout_s=timeout_s,
        meanwhile=write_code,
    )
    if job.value is None:
        return RoomJob(None, job.refused, job.failure, job.usage)
    try:
        return RoomJob(job.value.to_run(code), usage=job.usage)
    except SchemaError:  # the child's reply is hostile input: it must hold together
        return RoomJob(failure=JobFailure("untrusted"), usage=job.usage)


JOBS = {RUN: run_job}
# The warm-up runs in the zygote, before it forks: it touches the interpreter's paths with a
# program that has no root to replay (backward runs in children; the zygote settles autograd's
# engine itself, see torchatlas.sandbox.zygote.settle_autograd_engine).
WARM_UP: list[dict[str, Any]] = [
    {
        "source": "",
        "job": RUN,
        "params": {
            "program": "x = randn(3)\ny = (x * 2).sum()",
            "seed": 0,
            "root": None,
        },
    }
]


# Runs in each spare child while it waits for a job (a child may run backward): a forked child
# pays a page fault for every page it first touches, and the first call of each operation and
# of its backward fills the interpreter's caches, so a small program with a backward takes
# those first touches off the visitor's job. It is the MLP example with a tour of the room's
# common element-wise operations: a visitor's program mostly uses these, and each one the
# warm-up left out costs the visitor's job its first touches (``python -m
# bench.bench_contained`` shows the difference).
_MLP_LAYERS = EXAMPLES["mlp"].program.splitlines()[:-2]  # up to its hidden layer
SPARE_WARM_UP_PROGRAM = "\n".join(
    [
        *_MLP_LAYERS,
        "h = (h * 0.5 + 1).tanh() - h.sigmoid() * 2 / 3",
        "h = h.exp().log().sin().cos().abs().sqrt().square() + h.t().t()",
        "out = h @ w2",
        "loss = ((out - target) ** 2).mean() + out.sum()\n",
    ]
)
SPARE_WARM_UP: dict[str, Any] = {
    "source": "",
    "job": RUN,
    "params": {"program": SPARE_WARM_UP_PROGRAM, "seed": 0, "root": None},
}


def register_jobs(pool: SandboxPool) -> SandboxPool:
    """Register this room's job and its warm-ups with ``pool`` (again: a no-op); returns it."""
    return pool.register(JOBS, WARM_UP, SPARE_WARM_UP)
