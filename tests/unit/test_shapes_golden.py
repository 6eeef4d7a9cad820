"""Golden outputs: the shape explorer's table for every preset (torchatlas/presets), as the
engine's analysis gives it through the sandbox (the page's own path). A change in any row's
shapes, parameters, FLOPs or line, or in the error a preset teaches, is a reviewed diff:
refresh with ``python -m pytest tests/unit/test_shapes_golden.py --update-golden``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchatlas.presets import PRESETS
from torchatlas.shapes import ShapeReport, explore, parse_shapes
from torchatlas.shapes.analysis import parse_dtypes


def _shapes(shapes: list[list[int]]) -> str:
    return ", ".join("×".join(map(str, shape)) or "()" for shape in shapes) or "-"


def table_text(report: ShapeReport) -> str:
    """The report as a plain text table: one line per row (indented by depth), then the
    totals, the outputs and the error, if any."""
    lines = [
        f"model: {report.model}",
        f"inputs: {_shapes(report.input_shapes)} ({', '.join(report.input_dtypes)})",
        "layer | type | input | output | params | flops | line",
    ]
    for row in report.layers:
        name = row.name or "(model)"
        mark = "⚠ " if row.failed else ""
        line = "" if row.line is None else str(row.line)
        lines.append(
            f"{'  ' * row.depth}{mark}{name} | {row.type} | {_shapes(row.input_shapes)} | "
            f"{_shapes(row.output_shapes)} | {row.params} | {row.flops} | {line}"
        )
    lines += [
        f"total params: {report.total_params} (trainable {report.trainable_params})",
        f"param bytes: {report.param_bytes}; activation bytes: {report.activation_bytes}",
        f"flops: {report.flops}",
        f"outputs: {_shapes(report.outputs)}",
    ]
    if report.error is not None:
        error = report.error
        params = {key: value for key, value in error.params.items() if key != "detail"}
        lines.append(f"error: {error.kind.value} at line {error.line} {sorted(params.items())}")
    return "\n".join(lines)


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_presets_table_is_the_stored_one(
    key: str, golden: Callable[[str, str], None]
) -> None:
    preset = PRESETS[key]
    report = explore(
        preset.source,
        parse_shapes(preset.shapes),
        input_dtypes=parse_dtypes(preset.dtypes) or None,
        model=preset.model,
        timeout_s=60,
    )
    # Every preset but the one built to teach an error analyses in full.
    assert (report.error is None) == (key != "net_broken"), report.error
    assert report.layers
    golden(f"shapes/preset_{key}", table_text(report))
