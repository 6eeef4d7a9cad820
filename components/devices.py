"""Renderers for the devices room: inventory cards, demonstration results, the bandwidth chart.

They take the engine's plain dataclasses (no torch calls) and draw them with Streamlit/Plotly.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from components.format import format_bytes, format_seconds
from components.i18n import t
from components.theme import palette
from torchatlas.devices.demos import Demonstration, Snapshot, StepResult
from torchatlas.devices.inventory import Inventory
from torchatlas.devices.transfer import PATH_CODE, BenchmarkResult

# One colour per transfer path, chosen to stay distinct on light and dark backgrounds.
PATH_COLOURS = {
    "cpu_to_cpu": "#ee4c2c",
    "host_to_device_pageable": "#2f7fd8",
    "host_to_device_pinned": "#2ca58d",
    "host_to_device_non_blocking": "#9b59b6",
    "device_to_host": "#e6a100",
    "device_to_device": "#7f8c8d",
}


HOLDS_ICON = ":green[:material/check_circle:]"
FAILS_ICON = ":red[:material/cancel:]"


def _lines(rows: list[tuple[str, str]]) -> None:
    st.markdown("  \n".join(f"{label}: **{value}**" for label, value in rows))


# ---------------------------------------------------------------- inventory


def inventory_cards(found: Inventory) -> None:
    build, cpu, meta = found.build, found.cpu, found.meta
    columns = st.columns(4 if not found.accelerators else 3 + len(found.accelerators[:3]))
    with columns[0].container(border=True):
        st.markdown(f"#### {t('devices.inventory.build')}")
        _lines(
            [
                ("torch", build.torch_version),
                (t("devices.inventory.cuda_built"), build.cuda_version or t("devices.none")),
                ("cuDNN", build.cudnn_version or t("devices.none")),
                *([("ROCm/HIP", build.hip_version)] if build.hip_version else []),
                (t("devices.inventory.compiled_for"), build.compiled_accelerator or "cpu"),
                (t("devices.inventory.cpu_kernels"), build.cpu_capability),
                ("NumPy", build.numpy_version),
            ]
        )
    with columns[1].container(border=True):
        st.markdown(f"#### {t('devices.inventory.cpu')}")
        _lines(
            [
                (t("devices.inventory.model"), cpu.model),
                (t("devices.inventory.cores"), f"{cpu.usable_cores} / {cpu.logical_cores}"),
                (t("devices.inventory.threads"), f"{cpu.torch_threads} (+{cpu.interop_threads})"),
                (t("devices.inventory.memory_free"), format_bytes(cpu.memory_available_bytes)),
                (t("devices.inventory.memory_total"), format_bytes(cpu.memory_total_bytes)),
            ]
        )
    if found.accelerators:
        for column, info in zip(columns[2:-1], found.accelerators, strict=False):
            with column.container(border=True):
                st.markdown(f"#### `{info.device}`")
                rows = [
                    (t("devices.inventory.name"), info.name),
                    (t("devices.inventory.memory_free"), format_bytes(info.free_memory_bytes)),
                    (t("devices.inventory.memory_total"), format_bytes(info.total_memory_bytes)),
                ]
                if info.compute_capability:
                    rows.append((t("devices.inventory.capability"), info.compute_capability))
                if info.multiprocessors:
                    rows.append((t("devices.inventory.multiprocessors"), str(info.multiprocessors)))
                if info.pcie:
                    link = f"PCIe {info.pcie.generation}.0 x{info.pcie.lanes}"
                    nominal = t("devices.inventory.nominal", gbps=f"{info.pcie.nominal_gbps:g}")
                    rows.append((t("devices.inventory.link"), f"{link} ({nominal})"))
                _lines(rows)
        if len(found.accelerators) > 3:
            st.caption(t("devices.inventory.more", count=len(found.accelerators) - 3))
    else:
        with columns[2].container(border=True):
            st.markdown(f"#### {t('devices.inventory.accelerator')}")
            st.markdown(
                t(
                    "devices.inventory.no_accelerator",
                    built_for=build.compiled_accelerator or "cpu",
                )
            )
    with columns[-1].container(border=True):
        st.markdown("#### `meta`")
        shape = " × ".join(map(str, meta.shape))
        st.markdown(
            t(
                "devices.inventory.meta",
                shape=shape,
                dtype=meta.dtype,
                size=format_bytes(meta.nbytes),
                address=hex(meta.storage_address),
                time=format_seconds(meta.created_in_s),
            )
        )


# ---------------------------------------------------------------- demonstrations


class _Labels:
    """Short, stable names for objects and memory blocks within one demonstration, so equal
    labels mean "the very same object" / "the very same memory"."""

    def __init__(self) -> None:
        self.objects: dict[int, str] = {}
        self.blocks: dict[int, str] = {}

    def obj(self, object_id: int, type_name: str) -> str:
        label = self.objects.setdefault(object_id, f"#{len(self.objects) + 1}")
        return f"{type_name} {label}"

    def memory(self, address: int | None) -> str:
        if address is None:
            return "—"
        if address == 0:
            return t("devices.demo.no_memory")
        letter = self.blocks.setdefault(address, chr(ord("A") + len(self.blocks) % 26))
        return f"{letter} · {hex(address)}"


def _rows(shot: Snapshot, labels: _Labels) -> list[dict[str, str]]:
    if shot.kind == "module":
        rows = [
            {
                "variable": shot.name,
                "object": labels.obj(shot.object_id, shot.type_name),
                "device": "—",
                "dtype": "—",
                "memory": "—",
                "values": t("devices.demo.module_row", count=len(shot.parameters)),
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
    values = shot.values if shot.values is not None else t("devices.demo.no_data")
    return [
        {
            "variable": shot.name,
            "object": labels.obj(shot.object_id, shot.type_name),
            "device": shot.device or "—",
            "dtype": shot.dtype or "—",
            "memory": labels.memory(shot.address),
            "values": values,
        }
    ]


def _changed(step: StepResult, previous: dict[str, Snapshot]) -> list[Snapshot]:
    return [shot for shot in step.snapshots if previous.get(shot.name) != shot]


def _table(rows: list[dict[str, str]]) -> None:
    frame = pd.DataFrame(rows).rename(
        columns={
            "variable": t("devices.demo.col_variable"),
            "object": t("devices.demo.col_object"),
            "device": t("devices.demo.col_device"),
            "dtype": "dtype",
            "memory": t("devices.demo.col_memory"),
            "values": t("devices.demo.col_values"),
        }
    )
    st.dataframe(frame, hide_index=True, width="stretch")


def demonstration_result(demo: Demonstration) -> None:
    """Step by step: the line, the exception it raised (exact text), what it changed; then the
    findings computed from the live objects."""
    labels = _Labels()
    previous: dict[str, Snapshot] = {}
    for step in demo.steps:
        st.code(step.code, language="python", wrap_lines=True)
        if step.error is not None:
            st.markdown(t("devices.demo.raised", error=step.error.type_name))
            st.code(step.error.message, language="text", wrap_lines=True)
        changed = _changed(step, previous)
        rows = [row for shot in changed for row in _rows(shot, labels)]
        if rows:
            _table(rows)
        elif step.error is None:
            st.caption(t("devices.demo.nothing_changed"))
        previous = {shot.name: shot for shot in step.snapshots}
    st.markdown(f"**{t('devices.demo.findings')}**")
    st.markdown(
        "\n".join(
            f"- {HOLDS_ICON if finding.holds else FAILS_ICON} "
            + t(
                f"devices.findings.{finding.code}.{'yes' if finding.holds else 'no'}",
                **finding.params,
            )
            for finding in demo.findings
        )
    )
    st.caption(t("devices.demo.legend"))


# ---------------------------------------------------------------- transfer benchmark


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


def bandwidth_chart(result: BenchmarkResult) -> go.Figure:
    colours = palette()
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
                name=t(f"devices.bench.paths.{path}"),
                line={"color": PATH_COLOURS[path], "width": 2},
                customdata=[[format_bytes(m.size_bytes), format_seconds(m.median_s)] for m in rows],
                hovertemplate="%{customdata[0]}: %{y:.3g} GB/s · %{customdata[1]}<extra></extra>",
            )
        )
    for reference in result.references:
        label = t(f"devices.bench.reference.{reference.code}", gbps=f"{reference.gbps:g}",
                  **reference.params)  # fmt: skip
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
        title=t("devices.bench.axis_size"),
        tickvals=sizes,
        ticktext=[format_bytes(size) for size in sizes],
    )
    values = [m.gbps for m in result.measurements] + [r.gbps for r in result.references]
    y_ticks = log_ticks(min(values), max(values)) if values else []
    figure.update_yaxes(
        type="log",
        title=t("devices.bench.axis_bandwidth"),
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


def benchmark_summary(result: BenchmarkResult) -> None:
    rows = []
    for path in result.paths:
        measured = result.for_path(path)
        if not measured:
            continue
        largest = measured[-1]
        rows.append(
            {
                t("devices.bench.col_path"): t(f"devices.bench.paths.{path}"),
                t("devices.bench.col_code"): PATH_CODE[path],
                t("devices.bench.col_latency"): format_seconds(result.latency_s(path)),
                t("devices.bench.col_peak"): f"{result.peak_gbps(path):.3g} GB/s",
                t("devices.bench.col_largest"): (
                    f"{format_bytes(largest.size_bytes)}: {format_seconds(largest.median_s)}"
                ),
                t("devices.bench.col_returned"): format_seconds(largest.call_return_s)
                if largest.call_return_s is not None
                else "—",
            }
        )
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def benchmark_chart(result: BenchmarkResult) -> None:
    st.plotly_chart(bandwidth_chart(result), theme="streamlit", width="stretch")
