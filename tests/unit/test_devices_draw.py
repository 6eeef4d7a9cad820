"""The devices room's pure builders (``components.devices.draw``), called without Streamlit:
tables, findings, the chart and error texts from engine dataclasses, in both languages."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components.devices import draw
from components.theme import DARK
from torchatlas.devices import demos, transfer
from torchatlas.devices.errors import BenchmarkBusy, ErrorCode, unexpected
from torchatlas.devices.inventory import CpuInfo
from torchatlas.devices.transfer import KIB, BenchmarkResult, Measurement, Reference, TransferPath
from torchatlas.i18n import translate

ROOT = Path(__file__).resolve().parents[2]


def _result(*paths: TransferPath, references: tuple[Reference, ...] = ()) -> BenchmarkResult:
    sizes = (4 * KIB, 16 * KIB)
    rows = tuple(
        Measurement(path, size, size / 1e9, size / 1e9, 5, 1) for path in paths for size in sizes
    )
    return BenchmarkResult(None, sizes, paths, rows, True, None, 1.0, 5.0, references)


def test_draw_never_imports_streamlit() -> None:
    tree = ast.parse((ROOT / "components" / "devices" / "draw.py").read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert "streamlit" not in imported


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_chart_names_each_path_in_the_readers_language(lang: str) -> None:
    pcie = Reference("pcie", 31.5, transfer.PCIE_PATHS, {"generation": "4", "lanes": "16"})
    result = _result(TransferPath.CPU_TO_CPU, TransferPath.DEVICE_TO_HOST, references=(pcie,))
    figure = draw.bandwidth_chart(result, DARK, lang)
    assert [trace.name for trace in figure.data] == [
        translate("devices.bench.paths.cpu_to_cpu", lang),
        translate("devices.bench.paths.device_to_host", lang),
    ]
    assert figure.data[0].line.color == draw.PATH_COLOURS[TransferPath.CPU_TO_CPU]
    line = figure.layout.shapes[0]
    assert line.y0 == 31.5 and line.line.color == DARK.muted  # the palette, not a fixed colour
    assert figure.layout.annotations[0].text == translate(
        "devices.bench.reference.pcie", lang, gbps="31.5", generation="4", lanes="16"
    )
    assert figure.layout.xaxis.title.text == translate("devices.bench.axis_size", lang)


def test_summary_has_one_row_per_measured_path() -> None:
    result = _result(TransferPath.CPU_TO_CPU)
    frame = draw.summary_frame(result, "ko")
    assert list(frame.columns)[:2] == [
        translate("devices.bench.col_path", "ko"),
        translate("devices.bench.col_code", "ko"),
    ]
    assert frame.iloc[0, 1] == "cpu_dst.copy_(cpu_src)"
    assert len(frame) == 1


def test_step_tables_label_shared_memory_with_one_letter() -> None:
    demo = demos.tensor_to("same_device", accelerator=None)  # y is x: one object, one block
    tables = draw.step_tables(demo, "en")
    assert len(tables) == len(demo.steps)
    first, moved = tables[0], tables[1]
    memory = translate("devices.demo.col_memory")
    assert list(first.iloc[:, 0]) == ["x"]
    assert list(moved.iloc[:, 0]) == ["y"]  # only what the step changed
    assert moved[memory][0] == first[memory][0] and moved[memory][0].startswith("A · 0x")
    copied = draw.step_tables(demos.tensor_to("copy", accelerator=None), "en")[1]
    assert copied[memory][0].startswith("B · 0x")  # a copy is another block


def test_step_tables_say_when_nothing_changed() -> None:
    demo = demos.module_to("dtype", accelerator=None)
    tables = draw.step_tables(demo, "ko")
    assert tables[3] is None  # "model.device" raised and changed nothing
    assert demo.steps[3].error is not None


def test_findings_are_ticked_by_what_held() -> None:
    demo = demos.tensor_to("other_dtype", accelerator=None)
    lines = draw.findings_markdown(demo, "en").splitlines()
    assert len(lines) == len(demo.findings)
    assert lines[0] == f"- {draw.FAILS_ICON} " + translate("devices.findings.same_object.no")


def test_an_error_keeps_its_code_and_any_other_exception_its_own_words() -> None:
    assert unexpected(BenchmarkBusy(7), ErrorCode.BENCH_FAILED).text("ko") == translate(
        "devices.errors.busy", "ko", seconds=7
    )
    text = unexpected(OSError("disk gone"), ErrorCode.BENCH_FAILED).text("en")
    assert text == translate("devices.errors.bench_failed", detail="OSError: disk gone")


def test_progress_text() -> None:
    assert draw.progress_text(None, "en") == translate("devices.bench.preparing")
    progress = transfer.Progress(1, 4, TransferPath.CPU_TO_CPU, 16 * KIB, 0.5)
    assert draw.progress_text(progress, "en") == "1/4 measured · now CPU → CPU, 16 KiB · 0.5 s"


def test_an_unnamed_cpu_is_unknown_in_the_readers_language() -> None:
    text = draw.cpu_lines(CpuInfo(None, 2, 2, 2, 1, None, None), "ko")
    model, unknown = (translate(f"devices.inventory.{key}", "ko") for key in ("model", "unknown"))
    assert f"{model}: **{unknown}**" in text


@pytest.mark.parametrize(
    ("age_s", "key", "count"),
    [(0.0, "now", None), (4.9, "now", None), (42.7, "seconds", 42), (125, "minutes", 2),
     (7300, "hours", 2)],
)  # fmt: skip
def test_a_measurements_age_in_whole_units(age_s, key, count) -> None:
    for lang in ("en", "ko"):
        params = {} if count is None else {"count": count}
        assert draw.age_text(age_s, lang) == translate(f"devices.bench.age.{key}", lang, **params)
    assert draw.age_text(125, "en") == "2 min ago"


def test_the_shared_result_names_its_age_and_settings() -> None:
    config = transfer.BenchmarkConfig(max_bytes=16 * KIB, time_budget_s=7)
    shared = transfer.SharedResult(_result(TransferPath.CPU_TO_CPU), config, 3, 130.0, 11)
    text = draw.measured_text(shared, "en")
    assert text.startswith("Measured 2 min ago by this server") and "16 KiB" in text
    assert "7 s" in text
    assert draw.recent_text(shared, "ko") == translate(
        "devices.bench.recent", "ko", age=translate("devices.bench.age.minutes", "ko", count=2),
        seconds=11,
    )  # fmt: skip


def test_a_watched_run_says_whose_it_is_and_the_place_in_line() -> None:
    config = transfer.BenchmarkConfig(max_bytes=64 * KIB, time_budget_s=5)
    params = {"max_size": "64 KiB", "budget": "5"}
    phase = transfer.RunPhase
    mine = transfer.RunStatus(1, phase.RUNNING, config, mine=True)
    joined = transfer.RunStatus(1, phase.RUNNING, config, mine=False)
    waiting = transfer.RunStatus(2, phase.QUEUED, config, mine=True, ahead=2)
    assert draw.run_status_text(mine, "en") == translate("devices.bench.running_mine", **params)
    assert draw.run_status_text(joined, "en") == translate("devices.bench.running_joined", **params)
    assert draw.run_status_text(waiting, "ko") == translate(
        "devices.bench.queued", "ko", ahead=2, **params
    )
