"""Pure builders for the nn.Module room: tables, DOT, Plotly figures and code, no Streamlit.

Every text comes from the translation tables through ``torchatlas.i18n.translate`` with the
reader's language; every colour from the theme's palette.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from components.format import format_count
from components.palette import Palette
from torchatlas.i18n import translate
from torchatlas.modules import (
    Container,
    InitReport,
    ModeModel,
    ModeReport,
    ModuleReport,
    SerializationReport,
    TensorKind,
    TrainingTrace,
)
from torchatlas.modules.compare import COLUMNS, ComparisonRow

MAX_DOT_NODES = 150  # a graph beyond this is unreadable; the table shows every module
MAX_VALUES_SHOWN = 12  # numbers per tensor in the step table (the MLP's 3×8 weight has 24)


def mark(value: bool, lang: str) -> str:
    """Yes or no in words: emoji marks need a font that phones and servers may lack."""
    return translate("modules.yes" if value else "modules.no", lang)


def checked(value: bool | None, lang: str) -> str:
    """Yes, no, or that torch could not be asked (None)."""
    return translate("modules.table.unknown", lang) if value is None else mark(value, lang)


def number(value: float | None) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-4):
        return f"{value:.3e}"
    return f"{value:.4f}"


def values_text(values: Sequence[float] | None, shape: Sequence[int] = ()) -> str:
    """A tensor's first numbers, "[0.1234, -0.5000, …]" (None: no gradient)."""
    if values is None:
        return "None"
    shown = ", ".join(number(v) for v in values[:MAX_VALUES_SHOWN])
    more = ", …" if len(values) > MAX_VALUES_SHOWN else ""
    return f"[{shown}{more}]"


# ---------------------------------------------------------------- side by side
def comparison_frame(rows: Sequence[ComparisonRow], lang: str) -> pd.DataFrame:
    header = [translate(f"modules.compare.columns.{column}", lang) for column in COLUMNS]
    data = [[mark(row.value(column), lang) for column in COLUMNS] for row in rows]
    index = [translate(f"modules.compare.facts.{row.fact.value}", lang) for row in rows]
    return pd.DataFrame(data, columns=header, index=index)


# ---------------------------------------------------------------- the inspection
def tensor_frame(report: ModuleReport, lang: str) -> pd.DataFrame:
    """One row per tensor the model holds: where it is and what torch's machinery sees."""
    columns = [
        "name",
        "kind",
        "shape",
        "dtype",
        "requires_grad",
        "parameters",
        "buffers",
        "state_dict",
        "to_device",
        "to_dtype",
        "optimizer",
        "note",
    ]
    rows = []
    for row in report.tensors:
        notes = []
        if row.shared_with:
            notes.append(translate("modules.table.shared", lang, first=row.shared_with))
        if row.container is not Container.NONE:
            notes.append(
                translate("modules.table.in_container", lang, container=row.container.value)
            )
        if row.lazy:
            notes.append(translate("modules.table.lazy", lang))
        note = "; ".join(notes)
        rows.append(
            [
                row.name,
                translate(f"modules.kinds.{row.kind.value}", lang),
                row.shape_text,
                row.dtype,
                mark(row.requires_grad, lang),
                mark(row.in_parameters, lang),
                mark(row.in_buffers, lang),
                mark(row.in_state_dict, lang),
                checked(row.to_device, lang),
                checked(row.to_dtype, lang),
                mark(row.seen_by_optimizer, lang),
                note,
            ]
        )
    header = [translate(f"modules.table.{column}", lang) for column in columns]
    return pd.DataFrame(rows, columns=header)


def kind_counts(report: ModuleReport) -> dict[TensorKind, int]:
    """The summary's counts, each as torch counts it: ``parameters()`` (each tensor once),
    ``buffers()`` (registered on the model's modules, each once), and the distinct plain
    tensors torch does not register at all."""
    registered = [row for row in report.tensors if not row.shared_with]
    return {
        TensorKind.PARAMETER: sum(
            1 for r in registered if r.kind is TensorKind.PARAMETER and r.in_parameters
        ),
        TensorKind.BUFFER: sum(
            1 for r in registered if r.kind is TensorKind.BUFFER and r.in_buffers
        ),
        TensorKind.PLAIN: sum(1 for r in registered if r.kind is TensorKind.PLAIN),
    }


def tree_frame(report: ModuleReport, lang: str) -> pd.DataFrame:
    """The module tree as an indented table, with parameter counts per submodule."""
    rows = []
    for module in report.modules:
        name = module.path.rsplit(".", 1)[-1] if module.path else report.model or "model"
        label = "\u2003" * module.depth + name
        note = (
            translate("modules.tree.same_as", lang, first=module.shared_with)
            if module.shared_with
            else ""
        )
        rows.append(
            [
                label,
                module.class_name,
                format_count(module.own_params),
                format_count(module.total_params),
                format_count(module.buffers),
                module.plain_tensors,
                note,
            ]
        )
    header = [
        translate(f"modules.tree.{column}", lang)
        for column in ("module", "class", "own", "total", "buffers", "plain", "note")
    ]
    return pd.DataFrame(rows, columns=header)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def tree_dot(report: ModuleReport, palette: Palette, lang: str) -> str | None:
    """The module tree as Graphviz DOT (None past :data:`MAX_DOT_NODES` modules)."""
    if not report.modules or len(report.modules) > MAX_DOT_NODES:
        return None
    params = translate("modules.tree.params_short", lang)
    lines = [
        "digraph modules {",
        f'  bgcolor="transparent"; rankdir=LR; node [shape=box, style="rounded,filled", '
        f'fillcolor="{palette.surface}", color="{palette.border}", fontcolor="{palette.text}", '
        f'fontname="Helvetica", fontsize=11]; edge [color="{palette.muted}"];',
    ]
    index = {module.path: number for number, module in enumerate(report.modules)}
    for number, module in enumerate(report.modules):
        name = module.path.rsplit(".", 1)[-1] if module.path else (report.model or "model")
        plain = f"\\n⚠ {module.plain_tensors} plain" if module.plain_tensors else ""
        colour = f', color="{palette.accent}", penwidth=2' if module.plain_tensors else ""
        lines.append(
            f'  n{number} [label="{_dot_text(name)}: {_dot_text(module.class_name)}\\n'
            f'{format_count(module.total_params)} {params}{plain}"{colour}];'
        )
        if module.path:
            parent = module.path.rsplit(".", 1)[0] if "." in module.path else ""
            if parent in index:
                style = ' [style="dashed"]' if module.shared_with else ""
                lines.append(f"  n{index[parent]} -> n{number}{style};")
    lines.append("}")
    return "\n".join(lines)


def inspection_code(source: str, model: str) -> str:
    """A notebook cell that asks torch the same questions the table answers."""
    call = model or "Model()"
    return f"""{source.rstrip()}


model = {call}
print("parameters():", [name for name, _ in model.named_parameters()])
print("buffers():   ", [name for name, _ in model.named_buffers()])
print("state_dict():", list(model.state_dict()))
plain = [name for name, value in vars(model).items() if isinstance(value, torch.Tensor)]
print("plain tensor attributes:", plain)
try:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    print("optimiser sees", len(optimizer.param_groups[0]["params"]), "tensors")
except ValueError as error:
    print("optimiser:", error)
"""


# ---------------------------------------------------------------- training
def loss_figure(
    trace: TrainingTrace, palette: Palette, lang: str, current: int | None
) -> go.Figure:
    """The loss per step (log scale when it spans orders of magnitude or diverges)."""
    losses = [loss if math.isfinite(loss) else None for loss in trace.losses]
    steps = list(range(1, len(losses) + 1))
    figure = go.Figure(
        go.Scatter(
            x=steps,
            y=losses,
            mode="lines+markers" if len(steps) <= 60 else "lines",
            line={"color": palette.accent, "width": 2},
            name=translate("modules.training.loss", lang),
        )
    )
    finite = [loss for loss in losses if loss is not None and loss > 0]
    log = bool(finite) and max(finite) / min(finite) > 100
    if current is not None and 1 <= current <= len(steps) and losses[current - 1] is not None:
        figure.add_trace(
            go.Scatter(
                x=[current],
                y=[losses[current - 1]],
                mode="markers",
                marker={"color": palette.copy, "size": 12},
                name=translate("modules.training.current", lang),
            )
        )
    if trace.diverged_at is not None:
        figure.add_vline(x=trace.diverged_at + 1, line_dash="dash", line_color=palette.muted)
    figure.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis_title=translate("modules.training.step", lang),
        yaxis_title=translate("modules.training.loss", lang),
        yaxis_type="log" if log else "linear",
        # one tick per few decades, written as powers of ten (a diverging run spans 1e35)
        yaxis_exponentformat="power",
        yaxis_dtick=max(1, math.ceil(math.log10(max(finite) / min(finite)) / 6)) if log else None,
        showlegend=False,
        title=translate("modules.training.curve_title", lang, lr=f"{trace.lr:g}"),
    )
    return figure


def step_frame(trace: TrainingTrace, step: int, phase: str, lang: str) -> pd.DataFrame:
    """Each tensor's values and gradient at ``phase`` of step ``step`` (1-based)."""
    record = trace.steps[step - 1]
    rows = []
    for index, name in enumerate(trace.names):
        before, grad, after = record.before[index], record.grads[index], record.after[index]
        if phase in ("forward", "loss"):  # .grad as the previous step's zero_grad left it
            previous = trace.steps[step - 2] if step > 1 else None
            cleared = previous is None or previous.grads_cleared
            value, shown_grad = before, (None if cleared else previous.grads[index])
        elif phase == "backward":
            value, shown_grad = before, grad
        elif phase == "step":
            value, shown_grad = after, grad
        else:  # zero_grad
            value, shown_grad = after, (None if record.grads_cleared else grad)
        changed = phase in ("step", "zero_grad") and after != before
        rows.append(
            [
                name,
                translate(
                    f"modules.kinds.{'parameter' if trace.registered[index] else 'plain'}", lang
                ),
                "×".join(map(str, trace.shapes[index])),
                values_text(value),
                values_text(shown_grad),
                mark(changed, lang) if phase in ("step", "zero_grad") else "",
            ]
        )
    header = [
        translate(f"modules.training.columns.{column}", lang)
        for column in ("tensor", "kind", "shape", "value", "grad", "changed")
    ]
    return pd.DataFrame(rows, columns=header)


def training_code(model_key: str, lr: float, steps: int, forget: bool) -> str:
    """The loop the room ran, as a notebook cell (the model and data come from the engine)."""
    zero = (
        "    # optimizer.zero_grad()   # forgotten: gradients add up"
        if forget
        else ("    optimizer.zero_grad()")
    )
    return f'''import torch
from torch import nn
from torchatlas.modules.training import build_model, dataset

model = build_model("{model_key}", seed=0)
x, y = dataset(seed=0)
optimizer = torch.optim.SGD(model.parameters(), lr={lr:g})
loss_fn = nn.MSELoss()
for step in range({steps}):
    loss = loss_fn(model(x), y)   # forward, loss
    loss.backward()               # backward: fills .grad
    optimizer.step()              # step: W -= lr * W.grad
{zero}
    print(step, loss.item())
'''


# ---------------------------------------------------------------- modes
def _short(value: float | None, lang: str = "en") -> str:
    """A table cell: four significant digits (uninitialised memory can hold 1e38 or NaN);
    None is half of a word masked because it looked like an address."""
    if value is None:
        return translate("modules.memory.masked_cell", lang)
    return f"{value:.4g}"


def _rows_frame(
    rows: Sequence[Sequence[float | None]], prefix: str, lang: str = "en"
) -> pd.DataFrame:
    return pd.DataFrame(
        [[_short(value, lang) for value in row] for row in rows],
        columns=[f"{prefix}{index}" for index in range(len(rows[0]) if rows else 0)],
    )


def mode_frames(report: ModeReport, lang: str) -> dict[str, pd.DataFrame]:
    frames = {
        translate("modules.modes.input", lang): _rows_frame(report.input, "x"),
        translate("modules.modes.train_output", lang): _rows_frame(report.train_output, "y"),
        translate("modules.modes.eval_output", lang): _rows_frame(report.eval_output, "y"),
    }
    return frames


def variance_text(report: ModeReport, which: str, lang: str) -> str:
    """Which variance (``"biased"``, ``"unbiased"``, or ``""`` when torch's result matched
    neither), with its divisor for this batch."""
    key = which if which in ("biased", "unbiased") else "unknown"
    n = report.batch_size
    return translate(f"modules.modes.variance.{key}", lang, n=n, n1=n - 1)


def _variance_values(report: ModeReport, which: str) -> tuple[float, ...]:
    return report.batch_var_biased if which == "biased" else report.batch_var


def running_stats_frame(report: ModeReport, lang: str) -> pd.DataFrame | None:
    """The buffers before and after train(), the batch statistic each moved towards, and the
    variance train() normalised with: both variances of the batch, each named by which of
    torch's results it matched (the running_var update, the train() output)."""
    if report.model_key is not ModeModel.BATCHNORM:
        return None
    towards, normalised = report.running_var_towards, report.normalised_with
    empty: tuple[float, ...] = ()
    rows = [
        (
            translate("modules.modes.stats.mean_row", lang),
            report.running_mean_before,
            report.batch_mean,
            report.running_mean_after,
        ),
        (
            translate(
                "modules.modes.stats.var_row", lang, variance=variance_text(report, towards, lang)
            ),
            report.running_var_before,
            _variance_values(report, towards),
            report.running_var_after,
        ),
        (
            translate(
                "modules.modes.stats.normalised_row",
                lang,
                variance=variance_text(report, normalised, lang),
            ),
            empty,
            _variance_values(report, normalised),
            empty,
        ),
    ]
    header = [
        translate(f"modules.modes.stats.{c}", lang) for c in ("name", "before", "batch", "after")
    ]
    return pd.DataFrame(
        [
            [name, values_text(a) if a else "—", values_text(b), values_text(c) if c else "—"]
            for name, a, b, c in rows
        ],
        columns=header,
    )


# ---------------------------------------------------------------- saving and loading
def state_frame(report: SerializationReport, lang: str) -> pd.DataFrame:
    header = [
        translate(f"modules.save.state.{c}", lang) for c in ("key", "shape", "dtype", "numel")
    ]
    return pd.DataFrame(
        [[e.key, "×".join(map(str, e.shape)) or "()", e.dtype, e.numel] for e in report.entries],
        columns=header,
    )


def zip_frame(report: SerializationReport, lang: str) -> pd.DataFrame:
    header = [translate(f"modules.save.zip.{c}", lang) for c in ("name", "size", "compressed")]
    return pd.DataFrame(
        [[e.name, e.size, e.compressed] for e in report.zip_entries], columns=header
    )


def attempts_frame(report: SerializationReport, lang: str) -> pd.DataFrame:
    rows = []
    for attempt in report.attempts:
        relaxed = attempt.relaxed_error or translate(
            "modules.save.relaxed_result",
            lang,
            missing=", ".join(attempt.missing) or "—",
            unexpected=", ".join(attempt.unexpected) or "—",
        )
        rows.append(
            [
                translate(f"modules.save.cases.{attempt.case.value}", lang, key=attempt.key),
                attempt.strict_error or "—",
                relaxed,
                ", ".join(attempt.kept_fresh) or "—",
            ]
        )
    header = [
        translate(f"modules.save.attempts.{c}", lang) for c in ("case", "strict", "relaxed", "kept")
    ]
    return pd.DataFrame(rows, columns=header)


def save_code(model_key: str) -> str:
    return f'''import io, zipfile
import torch
from torchatlas.modules.training import build_model

model = build_model("{model_key}")
buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
print(zipfile.ZipFile(io.BytesIO(buffer.getvalue())).namelist())
state = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)   # tensors only
missing = dict(state)
missing.popitem()
print(model.load_state_dict(missing, strict=False))   # what strict=False hides
'''


# ---------------------------------------------------------------- memory
def memory_frames(report: InitReport, lang: str) -> dict[str, pd.DataFrame]:
    frames = {
        "torch.empty(4, 3)": _rows_frame(report.empty, "c", lang),
        "torch.FloatTensor(4, 3)": _rows_frame(report.float_tensor, "c", lang),
        translate("modules.memory.linear", lang): _rows_frame(report.linear_weight, "in"),
    }
    return {title: frame for title, frame in frames.items() if len(frame)}
