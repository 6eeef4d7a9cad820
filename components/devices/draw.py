"""Pure builders for the devices room: markdown, tables and the bandwidth chart.

Each takes the engine's frozen dataclasses and the reader's language (and, for colours, a
palette) and returns a string, a DataFrame or a Plotly figure; ``panels`` puts them on the
page. No Streamlit here, so tests call every builder directly.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from components.format import format_bytes, format_seconds
from components.palette import Palette
from torchatlas.devices.demos import Demonstration, Snapshot, SnapshotKind
from torchatlas.devices.inventory import AcceleratorInfo, BuildInfo, CpuInfo, MetaInfo
from torchatlas.devices.transfer import (
    PATH_CODE,
    BenchmarkConfig,
    BenchmarkResult,
    Progress,
    RunPhase,
    RunStatus,
    SharedResult,
    TransferPath,
)
from torchatlas.i18n import translate

# One colour per transfer path, chosen to stay distinct on light and dark backgrounds.
PATH_COLOURS: dict[TransferPath, str] = {
    TransferPath.CPU_TO_CPU: "#ee4c2c",
    TransferPath.HOST_TO_DEVICE_PAGEABLE: "#2f7fd8",
    TransferPath.HOST_TO_DEVICE_PINNED: "#2ca58d",
    TransferPath.HOST_TO_DEVICE_NON_BLOCKING: "#9b59b6",
    TransferPath.DEVICE_TO_HOST: "#e6a100",
    TransferPath.DEVICE_TO_DEVICE: "#7f8c8d",
}
HOLDS_ICON = ":green[:material/check_circle:]"
FAILS_ICON = ":red[:material/cancel:]"


def _lines(rows: list[tuple[str, str]]) -> str:
    return "  \n".join(f"{label}: **{value}**" for label, value in rows)


# ---------------------------------------------------------------- inventory


def build_lines(build: BuildInfo, lang: str) -> str:
    none = translate("devices.none", lang)
    return _lines(
        [
            ("torch", build.torch_version),
            (translate("devices.inventory.cuda_built", lang), build.cuda_version or none),
            ("cuDNN", build.cudnn_version or none),
            *([("ROCm/HIP", build.hip_version)] if build.hip_version else []),
            (
                translate("devices.inventory.compiled_for", lang),
                build.compiled_accelerator or "cpu",
            ),
            (translate("devices.inventory.cpu_kernels", lang), build.cpu_capability),
            ("NumPy", build.numpy_version),
        ]
    )


def cpu_lines(cpu: CpuInfo, lang: str) -> str:
    model = cpu.model or translate("devices.inventory.unknown", lang)
    return _lines(
        [
            (translate("devices.inventory.model", lang), model),
            (
                translate("devices.inventory.cores", lang),
                f"{cpu.usable_cores} / {cpu.logical_cores}",
            ),
            (
                translate("devices.inventory.threads", lang),
                f"{cpu.torch_threads} (+{cpu.interop_threads})",
            ),
            (
                translate("devices.inventory.memory_free", lang),
                format_bytes(cpu.memory_available_bytes),
            ),
            (
                translate("devices.inventory.memory_total", lang),
                format_bytes(cpu.memory_total_bytes),
            ),
        ]
    )


def accelerator_lines(info: AcceleratorInfo, lang: str) -> str:
    rows = [
        (translate("devices.inventory.name", lang), info.name),
        (translate("devices.inventory.memory_free", lang), format_bytes(info.free_memory_bytes)),
        (translate("devices.inventory.memory_total", lang), format_bytes(info.total_memory_bytes)),
    ]
    if info.compute_capability:
        rows.append((translate("devices.inventory.capability", lang), info.compute_capability))
    if info.multiprocessors:
        rows.append(
            (translate("devices.inventory.multiprocessors", lang), str(info.multiprocessors))
        )
    if info.pcie:
        link = f"PCIe {info.pcie.generation}.0 x{info.pcie.lanes}"
        nominal = translate("devices.inventory.nominal", lang, gbps=f"{info.pcie.nominal_gbps:g}")
        rows.append((translate("devices.inventory.link", lang), f"{link} ({nominal})"))
    return _lines(rows)


def meta_text(meta: MetaInfo, lang: str) -> str:
    return translate(
        "devices.inventory.meta",
        lang,
        shape=" × ".join(map(str, meta.shape)),
        dtype=meta.dtype,
        size=format_bytes(meta.nbytes),
        address=hex(meta.storage_address),
        time=format_seconds(meta.created_in_s),
    )


# ---------------------------------------------------------------- demonstrations


class MemoryLabels:
    """Short, stable names for objects and memory blocks within one demonstration, so equal
    labels mean "the very same object" / "the very same memory"."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.objects: dict[int, str] = {}
        self.blocks: dict[int, str] = {}

    def obj(self, object_id: int, type_name: str) -> str:
        label = self.objects.setdefault(object_id, f"#{len(self.objects) + 1}")
        return f"{type_name} {label}"

    def memory(self, address: int | None) -> str:
        if address is None:
            return "—"
        if address == 0:
            return translate("devices.demo.no_memory", self.lang)
        letter = self.blocks.setdefault(address, chr(ord("A") + len(self.blocks) % 26))
        return f"{letter} · {hex(address)}"


def _rows(shot: Snapshot, labels: MemoryLabels) -> list[dict[str, str]]:
    if shot.kind is SnapshotKind.MODULE:
        rows = [
            {
                "variable": shot.name,
                "object": labels.obj(shot.object_id, shot.type_name),
                "device": "—",
                "dtype": "—",
                "memory": "—",
                "values": translate(
                    "devices.demo.module_row", labels.lang, count=len(shot.parameters)
                ),
            }
        ]
        rows += [
            {
                "variable": f"{shot.name}.{param.name}",
                "object": labels.obj(param.object_id, "Parameter"),
                "device": param.device,
                "dtype": param.dtype,
                "memory": labels.memory(param.address),
                "values": "",
            }
            for param in shot.parameters
        ]
        return rows
    no_data = translate("devices.demo.no_data", labels.lang)
    return [
        {
            "variable": shot.name,
            "object": labels.obj(shot.object_id, shot.type_name),
            "device": shot.device or "—",
            "dtype": shot.dtype or "—",
            "memory": labels.memory(shot.address),
            "values": shot.values if shot.values is not None else no_data,
        }
    ]


def _frame(rows: list[dict[str, str]], lang: str) -> pd.DataFrame:
    return pd.DataFrame(rows).rename(
        columns={
            "variable": translate("devices.demo.col_variable", lang),
            "object": translate("devices.demo.col_object", lang),
            "device": translate("devices.demo.col_device", lang),
            "dtype": "dtype",
            "memory": translate("devices.demo.col_memory", lang),
            "values": translate("devices.demo.col_values", lang),
        }
    )


def step_tables(demo: Demonstration, lang: str) -> list[pd.DataFrame | None]:
    """One table per step: the watched variables that step changed (None: it changed none).

    Labels are handed out in step order across the whole demonstration, so a label seen in
    two tables names the same object or memory block."""
    labels = MemoryLabels(lang)
    previous: dict[str, Snapshot] = {}
    tables: list[pd.DataFrame | None] = []
    for step in demo.steps:
        changed = [shot for shot in step.snapshots if previous.get(shot.name) != shot]
        rows = [row for shot in changed for row in _rows(shot, labels)]
        tables.append(_frame(rows, lang) if rows else None)
        previous = {shot.name: shot for shot in step.snapshots}
    return tables


def findings_markdown(demo: Demonstration, lang: str) -> str:
    """The findings as a list, each ticked or crossed by what the live objects showed."""
    return "\n".join(
        f"- {HOLDS_ICON if finding.holds else FAILS_ICON} "
        + translate(
            f"devices.findings.{finding.code}.{'yes' if finding.holds else 'no'}",
            lang,
            **finding.params,
        )
        for finding in demo.findings
    )


# ---------------------------------------------------------------- transfer benchmark


def path_label(path: TransferPath, lang: str) -> str:
    return translate(f"devices.bench.paths.{path}", lang)


def progress_text(progress: Progress | None, lang: str) -> str:
    if progress is None:
        return translate("devices.bench.preparing", lang)
    return translate(
        "devices.bench.progress",
        lang,
        done=progress.done,
        total=progress.total,
        path=path_label(progress.path, lang),
        size=format_bytes(progress.size_bytes),
        elapsed=f"{progress.elapsed_s:.1f}",
    )


def age_text(age_s: float, lang: str) -> str:
    """How long ago, in whole units a reader takes in at a glance ("2 min ago")."""
    if age_s < 5:
        return translate("devices.bench.age.now", lang)
    if age_s < 60:
        return translate("devices.bench.age.seconds", lang, count=int(age_s))
    if age_s < 3600:
        return translate("devices.bench.age.minutes", lang, count=int(age_s // 60))
    return translate("devices.bench.age.hours", lang, count=int(age_s // 3600))


def settings_params(config: BenchmarkConfig) -> dict[str, str]:
    """A run's settings as the texts name them: the largest copy and the time budget."""
    return {"max_size": format_bytes(config.max_bytes), "budget": f"{config.time_budget_s:g}"}


def measured_text(shared: SharedResult, lang: str) -> str:
    """Who measured the shown result, when, and with which settings."""
    return translate(
        "devices.bench.measured",
        lang,
        age=age_text(shared.age_s, lang),
        **settings_params(shared.config),
    )


def recent_text(shared: SharedResult, lang: str) -> str:
    """Why a press showed the latest result instead of measuring again, and when it will."""
    return translate(
        "devices.bench.recent",
        lang,
        age=age_text(shared.age_s, lang),
        seconds=shared.rerun_after_s,
    )


def run_status_text(status: RunStatus, lang: str) -> str:
    """A watched run in words: the visitor's own run, one they joined, or their place in line."""
    params = settings_params(status.config)
    if status.phase is RunPhase.QUEUED:
        return translate("devices.bench.queued", lang, ahead=status.ahead, **params)
    if status.mine:
        return translate("devices.bench.running_mine", lang, **params)
    return translate("devices.bench.running_joined", lang, **params)


def log_ticks(low: float, high: float, most: int = 9) -> list[float]:
    """Round 1-2-5 values for a log axis over [low, high], each labelled in full.

    Plotly's own log ticks label 20 and 0.02 as a bare "2", which reads as nonsense to a
    student. With more than ``most`` ticks inside the data's range only the powers of ten are
    kept. One decade of margin on each side: the axis shows the ticks its range reaches."""
    if not (0 < low <= high) or not math.isfinite(high):
        return []
    first, last = math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1
    mantissas = (1, 2, 5)
    decades = range(first, last + 1)
    if sum(low <= m * 10.0**e <= high for e in decades for m in mantissas) > most:
        mantissas = (1,)
    return [round(m * 10.0**e, 12) for e in decades for m in mantissas]


def bandwidth_chart(result: BenchmarkResult, colours: Palette, lang: str) -> go.Figure:
    """Bandwidth against copy size, one line per path, both axes logarithmic; nominal
    references (the PCIe link) as dashed lines."""
    figure = go.Figure()
    for path in result.paths:
        rows = result.for_path(path)
        if not rows:
            continue
        figure.add_trace(
            go.Scatter(
                x=[m.size_bytes for m in rows],
                y=[m.gbps for m in rows],
                mode="lines+markers",
                name=path_label(path, lang),
                line={"color": PATH_COLOURS[path], "width": 2},
                customdata=[[format_bytes(m.size_bytes), format_seconds(m.median_s)] for m in rows],
                hovertemplate="%{customdata[0]}: %{y:.3g} GB/s · %{customdata[1]}<extra></extra>",
            )
        )
    for reference in result.references:
        label = translate(f"devices.bench.reference.{reference.code}", lang,
                          gbps=f"{reference.gbps:g}", **reference.params)  # fmt: skip
        figure.add_hline(
            y=reference.gbps,
            line={"dash": "dash", "color": colours.muted, "width": 1},
            annotation_text=label,
            annotation_position="top left",
            annotation_font_color=colours.muted,
        )
    sizes = list(result.sizes)
    figure.update_xaxes(
        type="log",
        title=translate("devices.bench.axis_size", lang),
        tickvals=sizes,
        ticktext=[format_bytes(size) for size in sizes],
    )
    values = [m.gbps for m in result.measurements] + [r.gbps for r in result.references]
    y_ticks = log_ticks(min(values), max(values)) if values else []
    figure.update_yaxes(
        type="log",
        title=translate("devices.bench.axis_bandwidth", lang),
        tickvals=y_ticks or None,
        ticktext=[f"{tick:g}" for tick in y_ticks] or None,
    )
    figure.update_layout(
        height=420,
        showlegend=True,  # even with one line: its name says which copy it measured
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        hovermode="closest",
    )
    return figure


def summary_frame(result: BenchmarkResult, lang: str) -> pd.DataFrame:
    """Per path: the timed code, latency, best bandwidth, the largest copy."""
    rows = []
    for path in result.paths:
        measured = result.for_path(path)
        if not measured:
            continue
        largest = measured[-1]
        returned = largest.call_return_s
        rows.append(
            {
                translate("devices.bench.col_path", lang): path_label(path, lang),
                translate("devices.bench.col_code", lang): PATH_CODE[path],
                translate("devices.bench.col_latency", lang): format_seconds(
                    result.latency_s(path)
                ),
                translate("devices.bench.col_peak", lang): f"{result.peak_gbps(path):.3g} GB/s",
                translate("devices.bench.col_largest", lang): (
                    f"{format_bytes(largest.size_bytes)}: {format_seconds(largest.median_s)}"
                ),
                translate("devices.bench.col_returned", lang): (
                    format_seconds(returned) if returned is not None else "—"
                ),
            }
        )
    return pd.DataFrame(rows)
