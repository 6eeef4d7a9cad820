"""explore() and why_meta(): pasted code goes to the sandbox, errors come back as teaching data.

The first tests replace the sandbox with a recorder (the contract's shapes, no process); the
rest run the real sandbox end to end and are skipped only where it is not installed.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from dataclasses import dataclass, field

import pytest

from torchatlas.clients import Visitor
from torchatlas.i18n import LANGUAGES
from torchatlas.presets import PRESETS
from torchatlas.sandboxed import FAILURE_KINDS
from torchatlas.shapes import (
    JOBS,
    Constraint,
    ErrorKind,
    RefusalCode,
    RefusedLine,
    explore,
    parse_shapes,
    why_meta,
)


@dataclass
class FakeRefusal:
    line: int
    col: int
    code: str
    message: str


@dataclass
class FakeError:
    kind: str
    message: str
    line: int | None = None
    col: int | None = None
    refusals: list[FakeRefusal] = field(default_factory=list)


@dataclass
class FakeResult:
    ok: bool
    value: dict | None
    error: FakeError | None
    elapsed_s: float = 0.01


@pytest.fixture
def fake_sandbox(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    import torchatlas.sandboxed  # the real codec is imported before the fake sandbox replaces it

    calls: list[tuple] = []
    module = types.ModuleType("torchatlas.sandbox")
    module.answer = None  # type: ignore[attr-defined]

    def run_job(source, job, params, *, timeout_s=10.0, visitor=None, on_queued=None):
        calls.append((source, job, params, timeout_s, visitor))
        for position in module.queue:  # type: ignore[attr-defined]
            on_queued(position)
        return module.answer  # type: ignore[attr-defined]

    module.queue = []  # type: ignore[attr-defined]

    module.run_job = run_job  # type: ignore[attr-defined]
    registered: list[dict] = []

    class FakePool:
        def register(self, jobs, warm_up_requests=(), spare_warm_up=None):
            registered.append(dict(jobs))
            return self

        def run_job(self, *args, **kwargs):  # the pool torchatlas.sandboxed runs jobs on
            return module.run_job(*args, **kwargs)  # type: ignore[attr-defined]

    module.get_pool = FakePool  # type: ignore[attr-defined]
    module.registered = registered  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchatlas.sandbox", module)
    import torchatlas

    monkeypatch.setattr(torchatlas, "sandbox", module, raising=False)
    calls.append(module)  # type: ignore[arg-type]
    return calls


def test_explore_sends_the_job_and_reads_the_report(fake_sandbox: list) -> None:
    module = fake_sandbox.pop()
    module.answer = FakeResult(True, {"layers": [], "outputs": [[1, 10]], "flops": 5}, None)
    who = Visitor("ip:203.0.113.7", "s1")
    report = explore("src", [[1, 3, 32, 32]], model="Net()", symbolic=True, visitor=who)
    assert report.error is None and report.outputs == [[1, 10]] and report.flops == 5
    ((source, job, params, timeout_s, visitor),) = fake_sandbox
    assert (source, job, timeout_s, visitor) == ("src", "shapes.analyze", 10, who)
    assert params == {"input_shapes": [[1, 3, 32, 32]], "input_dtypes": ["float32"],
                      "model": "Net()", "symbolic": True}  # fmt: skip


def test_sandbox_refusals_become_errors_with_lines(fake_sandbox: list) -> None:
    module = fake_sandbox.pop()
    refusal = FakeRefusal(7, 19, "dunder", "`__class__` is not allowed: …")
    module.answer = FakeResult(False, None, FakeError("refused", "not run", 7, 19, [refusal]))
    report = explore("src", [[1, 3]])
    error = report.error
    assert error is not None and error.kind == "refused"
    assert (error.line, error.col) == (7, 19)
    assert error.refusals == [
        RefusedLine(7, 19, RefusalCode.DUNDER, "`__class__` is not allowed: …")
    ]
    assert "not allowed" in error.hint or "model code" in error.hint
    assert error.params["detail"] == "not run"  # the sandbox's English, kept as a detail only
    assert error.params["lines"] == 1


def test_unknown_refusal_codes_and_sandbox_kinds_read_as_ours(fake_sandbox: list) -> None:
    module = fake_sandbox.pop()
    refusal = FakeRefusal(2, 1, "brand_new_rule", "whatever")
    module.answer = FakeResult(False, None, FakeError("refused", "m", 2, 1, [refusal]))
    error = explore("src", [[1, 3]]).error
    assert error is not None and error.refusals[0].code is RefusalCode.OTHER
    module.answer = FakeResult(False, None, FakeError("a_kind_from_the_future", "m"))
    error = explore("other src", [[1, 3]]).error  # another source: the first report is shared
    assert error is not None and error.kind is ErrorKind.JOB_ERROR


@pytest.mark.parametrize("kind", sorted(FAILURE_KINDS))
@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_sandbox_kind_has_the_rooms_own_text(
    fake_sandbox: list, kind: str, lang: str
) -> None:
    """One source for text: the page's words for each kind of failure the sandbox client
    reports (torchatlas.sandboxed.FAILURE_KINDS) come from the room's tables in every
    language; the sandbox's English sentence is only a detail."""
    module = fake_sandbox.pop()
    module.answer = FakeResult(False, None, FakeError(kind, "Sandbox English."))
    error = explore("src", [[1, 3]], timeout_s=4).error
    assert error is not None and error.kind is ErrorKind(kind)
    for part in ("title", "message", "hint"):
        key = f"shapes.errors.{kind}.{part}"
        text = error.text(lang, part)
        assert text != key and "{" not in text and "Sandbox English." not in text, (key, text)


def test_the_waiting_line_reaches_the_caller(fake_sandbox: list) -> None:
    module = fake_sandbox.pop()
    module.queue = [3, 2, 1, 0]
    module.answer = FakeResult(True, {"layers": [], "outputs": [[1, 10]]}, None)
    heard: list[int] = []
    report = explore("src", [[1, 3]], on_queued=heard.append)
    assert report.error is None and heard == [3, 2, 1, 0]


def test_the_rooms_jobs_are_registered_before_they_run(fake_sandbox: list) -> None:
    """explore() registers every room's jobs on the pool it runs them in, this room's among
    them (the sandbox names none; torchatlas.sandboxed registers all rooms at once, so the
    zygote starts once with all of them), and every job travels to the zygote by the name it
    is defined with."""
    from torchatlas.modules.jobs import JOBS as MODULE_JOBS
    from torchatlas.sandbox.jobs import target_of

    module = fake_sandbox.pop()
    module.answer = FakeResult(True, {"layers": [], "outputs": [[1, 10]]}, None)
    explore("src", [[1, 3]])
    assert JOBS in module.registered and MODULE_JOBS in module.registered
    assert set(JOBS) == {"shapes.analyze", "shapes.why_meta"}
    for function in JOBS.values():
        assert target_of(function).startswith("torchatlas.shapes.")


@pytest.mark.parametrize("kind", ["timeout", "memory", "crashed", "busy", "output_too_large"])
def test_sandbox_failures_have_hints(fake_sandbox: list, kind: str) -> None:
    module = fake_sandbox.pop()
    module.answer = FakeResult(False, None, FakeError(kind, f"{kind} happened"))
    error = explore("src", [[1, 3]], timeout_s=4).error
    assert error is not None and error.kind == kind and error.hint
    assert error.params["timeout"] == "4"
    assert error.params["detail"] == f"{kind} happened"


def test_bad_shapes_never_reach_the_sandbox(fake_sandbox: list) -> None:
    fake_sandbox.pop()
    report = explore("src", [[1, 0, 3]])
    assert report.error is not None and report.error.kind == "bad_shape"
    assert fake_sandbox == []


def test_without_a_sandbox_nothing_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchatlas.sandbox", types.ModuleType("torchatlas.sandbox"))
    import torchatlas

    monkeypatch.setattr(torchatlas, "sandbox", sys.modules["torchatlas.sandbox"], raising=False)
    report = explore("raise SystemExit('ran in-process!')", [[1, 3]])
    assert report.error is not None and report.error.kind == "unavailable"


# ---------------------------------------------------------------- the real sandbox


def _sandbox_ready() -> bool:
    try:
        from torchatlas.sandbox import run_job  # noqa: F401
    except ImportError:
        return False
    return True


needs_sandbox = pytest.mark.skipif(not _sandbox_ready(), reason="torchatlas.sandbox not installed")


@needs_sandbox
def test_preset_through_the_sandbox() -> None:
    preset = PRESETS["net"]
    report = explore(preset.source, parse_shapes(preset.shapes), model=preset.model)
    assert report.error is None, report.error
    assert report.outputs == [[1024, 10]]
    assert report.total_params == 62006


@needs_sandbox
def test_resnet50_through_the_sandbox_with_a_huge_input() -> None:
    report = explore(PRESETS["resnet50"].source, [[1024, 3, 2048, 2048]], model="resnet50()")
    assert report.error is None, report.error
    assert report.outputs == [[1024, 1000]]
    assert report.layers[1].output_shapes == [[1024, 64, 1024, 1024]]


@needs_sandbox
def test_errors_that_teach_through_the_sandbox() -> None:
    preset = PRESETS["net_broken"]
    report = explore(preset.source, parse_shapes(preset.shapes), model=preset.model)
    error = report.error
    assert error is not None and error.kind == "linear_in_features"
    assert error.params["fix"] == "fc1 = nn.Linear(256, 120)"
    assert "self.fc1(x)" in preset.source.splitlines()[error.line - 1]


@needs_sandbox
def test_symbolic_through_the_sandbox() -> None:
    report = explore(PRESETS["net"].source, [[1, 3, 32, 32]], symbolic=True)
    assert report.error is None and report.symbolic_issue is None
    assert Constraint("fc1", "16·((H//4) − 3)·((W//4) − 3) = 400") in report.constraints


@needs_sandbox
def test_hostile_code_is_refused() -> None:
    source = "import os\n\nclass M:\n    pass\n"
    error = explore(source, [[1, 3]]).error
    assert error is not None and error.kind == "refused" and error.line == 1


@needs_sandbox
def test_refusals_are_counted_by_line() -> None:
    source = "import torch\n\nclass M:\n    def f(self, g):\n        return g.gi_frame.f_back\n"
    error = explore(source, [[1, 3]]).error
    assert error is not None and error.kind == "refused"
    assert len(error.refusals) == 2  # two refusals, one line
    assert "1 line(s)" in error.message


@needs_sandbox
def test_syntax_error_has_line_and_column() -> None:
    error = explore("import torch\nclass M(nn.Module)\n    pass\n", [[1, 3]]).error
    assert error is not None and error.kind == "syntax"
    assert error.line == 2 and error.col is not None


@needs_sandbox
def test_endless_loop_times_out() -> None:
    source = PRESETS["net"].source.replace(
        "        x = torch.flatten(x, 1)", "        while True:\n            pass"
    )
    error = explore(source, [[1, 3, 32, 32]], timeout_s=3).error
    assert error is not None and error.kind == "timeout"


@needs_sandbox
def test_why_meta_through_the_sandbox() -> None:
    result = why_meta(PRESETS["net"].source, [[1, 3, 32, 32]], model="Net()")
    assert result.error is None, result.error
    assert result.points[0].real_s is not None
    assert result.points[-1].real_s is None


def test_a_class_pressing_analyse_at_once_runs_one_job(fake_sandbox: list) -> None:
    """Thirty sessions asking for the same analysis at the same moment share one sandbox job,
    and a later press is answered from the shared report (components/shapes/state.py)."""
    from components.shapes.state import REPORTS, shared_report

    module = fake_sandbox.pop()
    release = threading.Event()
    answer = FakeResult(True, {"layers": [], "outputs": [[1, 10]], "flops": 5}, None)

    def slow_answer(*args: object, **kwargs: object) -> FakeResult:
        fake_sandbox.append(args)
        release.wait(10)
        return answer

    module.run_job = slow_answer
    reports: list = []

    def press(student: int) -> None:
        school = Visitor("ip:198.51.100.20", f"s{student}")  # one address, the whole class
        reports.append(shared_report("src", "1×3×32×32", "", "", False, visitor=school))

    missed_before = REPORTS.stats().misses
    threads = [threading.Thread(target=press, args=(n,)) for n in range(30)]
    for thread in threads:
        thread.start()
    # Every student has looked in the shared reports and missed (the leader then computes,
    # the others wait for it), and the one computation has reached the sandbox.
    deadline = time.monotonic() + 10
    while not (fake_sandbox and REPORTS.stats().misses - missed_before >= 30):
        assert time.monotonic() < deadline, "the students never reached the shared computation"
        time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(fake_sandbox) == 1
    assert len(reports) == 30 and all(r.outputs == [[1, 10]] for r in reports)
    shared_report("src", "1, 3, 32, 32", "float32", " ", False, visitor="late")  # the same boxes
    assert len(fake_sandbox) == 1
    shared_report("src", "2×3×32×32", "", "", False, visitor="other input")
    assert len(fake_sandbox) == 2
    explore("src", [[1, 3, 32, 32]])  # the engine itself keeps nothing
    assert len(fake_sandbox) == 3


@pytest.mark.parametrize("kind", ["timeout", "busy", "crashed"])
def test_a_busy_or_timed_out_analysis_is_not_kept(fake_sandbox: list, kind: str) -> None:
    from components.shapes.state import shared_report

    module = fake_sandbox.pop()
    module.answer = FakeResult(False, None, FakeError(kind, "stopped after 10 s"))
    assert shared_report("src", "1×4", "", "", False).error.kind == kind
    module.answer = FakeResult(True, {"layers": [], "outputs": [[1, 2]], "flops": 1}, None)
    assert shared_report("src", "1×4", "", "", False).error is None
    assert len(fake_sandbox) == 2


# ---------------------------------------------------------------- the curriculum's device idioms
CURRICULUM_GPU = """
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
width = 5 if torch.cuda.device_count() == 0 else 7


class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=width):
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim).to(device)
        self.head = nn.LazyLinear(2).cuda()

    def forward(self, x):
        x = x.to("cpu")
        return {"out": self.head(self.linear(x.to(device)))}
"""


@needs_sandbox
def test_device_idioms_stay_on_meta_and_are_explained_in_the_sandbox() -> None:
    """As the curriculum writes them: ``torch.cuda.is_available()`` answers False (no GPU in
    the sandbox, so the model gets width 5 and device "cpu"), ``.to(device)`` and ``.cuda()``
    in __init__ and ``x.to("cpu")`` in forward stay on meta and are noted, a lazy layer is
    counted after it materialises, and the dict's output is shown by its key."""
    report = explore(CURRICULUM_GPU, [[4, 3]], timeout_s=30)
    assert report.error is None, report.error
    assert report.outputs == [[4, 2]] and report.output_names == ["['out']"]
    assert report.total_params == 3 * 5 + 5 + 5 * 2 + 2
    by_line = {(m.line, m.call, m.device, m.tensors) for m in report.device_moves}
    lines = CURRICULUM_GPU.splitlines()
    assert by_line == {
        (lines.index("        self.linear = nn.Linear(input_dim, output_dim).to(device)") + 1,
         "Module.to", "cpu", 2),
        (lines.index("        self.head = nn.LazyLinear(2).cuda()") + 1, "Module.cuda", "cuda", 2),
        (lines.index('        x = x.to("cpu")') + 1, "Tensor.to", "cpu", 1),
        (lines.index('        return {"out": self.head(self.linear(x.to(device)))}') + 1,
         "Tensor.to", "cpu", 1),
    }  # fmt: skip


def test_the_facades_gpu_answers_hold_no_code() -> None:
    """torch.cuda and torch.backends.mps answer "no GPU" with builtins (no function of ours
    whose globals would lead back to the real torch)."""
    from torchatlas.sandbox.facade import facade_modules

    torch_facade = facade_modules()["torch"]
    answers = {
        "cuda.is_available": (torch_facade.cuda.is_available, False),
        "cuda.device_count": (torch_facade.cuda.device_count, 0),
        "cuda.is_initialized": (torch_facade.cuda.is_initialized, False),
        "mps.is_available": (torch_facade.backends.mps.is_available, False),
        "mps.is_built": (torch_facade.backends.mps.is_built, False),
    }
    for name, (function, expected) in answers.items():
        assert function() is expected or function() == expected, name
        assert not hasattr(function, "__globals__") and not hasattr(function, "__code__"), name
        assert type(function.func).__module__ == "builtins", name
    with pytest.raises(AttributeError, match="not available in this sandbox"):
        torch_facade.cuda.FloatTensor  # noqa: B018


TOP_LEVEL_MOVES = """
import torch
import torch.nn as nn

gpu = torch.device("cuda:0")
cpu = torch.device("cpu")


class MyLinear(nn.Module):
    def __init__(self, input_dim=3, output_dim=2):
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim)

    def forward(self, x):
        return self.linear(x)


model = MyLinear().cuda()
x = torch.zeros(2, 2).to(gpu)
x = x.to(cpu)
layer = nn.Linear(2, 2)
where = next(layer.parameters()).device
"""


def test_device_moves_at_the_top_level_stay_on_the_cpu() -> None:
    """The curriculum's moves written outside any class (``model = MyLinear().cuda()``,
    ``x.to(gpu)``) run before the analysis: they stay on the CPU (no GPU here) instead of
    ending the analysis in CUDA's "cannot re-initialize in a forked subprocess"."""
    report = explore(TOP_LEVEL_MOVES, [[4, 3]], model="MyLinear()", timeout_s=30)
    assert report.error is None, report.error
    assert report.outputs == [[4, 2]]
    assert report.total_params == 3 * 2 + 2
