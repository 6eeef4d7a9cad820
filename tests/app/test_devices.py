"""The devices page under AppTest: inventory, a demonstration run, the benchmark, the lock."""

from __future__ import annotations

import json
import threading

import pytest

from components.devices.draw import log_ticks
from tests.app.apptest import open_page, rendered_text
from torchatlas.devices import transfer
from torchatlas.devices.inventory import available_accelerator
from torchatlas.i18n import translate

KIB = 1024


def test_inventory_and_honest_no_accelerator_note() -> None:
    import torch

    at = open_page("views/devices.py")
    assert not at.exception
    text = rendered_text(at)
    assert at.title[0].value == translate("app.rooms.devices.title")
    assert torch.__version__ in text
    assert "0x0" in text  # the live meta tensor's address
    if available_accelerator() is None:
        assert "No accelerator here" in text
    assert translate("devices.bench.not_run") in text


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_run_a_demonstration_shows_live_findings(lang: str) -> None:
    at = open_page("views/devices.py", lang)
    assert translate("devices.demos.tensor_to.predict", lang) in rendered_text(at)
    at.button(key="devices_run_tensor_to").click().run()
    assert not at.exception
    text = rendered_text(at)
    assert translate("devices.findings.same_object.yes", lang) in text
    assert translate("devices.findings.original_changed.yes", lang) in text
    first_table = at.dataframe[0].value
    assert list(first_table.iloc[:, 0]) == ["x"]
    # device and dtype come right after the names: on a phone they stay on screen
    assert list(first_table.columns[2:4]) == [translate("devices.demo.col_device", lang), "dtype"]
    assert first_table.iloc[0, 2] == "cpu"


def test_switching_variant_changes_the_result() -> None:
    at = open_page("views/devices.py")
    at.button_group(key="devices_variant_tensor_to").set_value("other_dtype").run()
    at.button(key="devices_run_tensor_to").click().run()
    text = rendered_text(at)
    assert translate("devices.findings.same_object.no") in text
    assert translate("devices.findings.original_changed.no") in text
    assert any("y = x.to(torch.float64)" in code.value for code in at.code)


def test_exact_exception_text_reaches_the_page() -> None:
    at = open_page("views/devices.py")
    at.button(key="devices_run_mix_devices").click().run()
    assert not at.exception
    messages = [code.value for code in at.code if code.language == "text"]
    assert any("device" in message for message in messages)
    assert translate("devices.findings.fix_worked.yes", device="meta").split("`")[0] in (
        rendered_text(at)
    )


def test_benchmark_runs_draws_and_offers_csv() -> None:
    at = open_page("views/devices.py")
    at.select_slider(key="devices_bench_max").set_value(64 * KIB).run()
    at.button(key="devices_bench_run").click().run()
    # The job runs in the background; the page polls it (a fragment AppTest does not rerun
    # on its own): wait for the job, then rerun as the poll would.
    job = at.session_state["devices_bench_job"]
    assert at.button(key="devices_bench_run").disabled  # one run at a time from this page
    assert job.wait(60)
    at.run()
    assert not at.exception and not at.error
    assert "devices_bench_job" not in at.session_state
    assert at.select_slider(key="devices_bench_max").value == 64 * KIB  # kept while it ran
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    traces = spec["data"]
    assert traces[0]["name"] == translate("devices.bench.paths.cpu_to_cpu")
    assert traces[0]["x"] == [4 * KIB, 16 * KIB, 64 * KIB]
    assert all(y > 0 for y in traces[0]["y"])
    assert spec["layout"]["xaxis"]["type"] == "log" and spec["layout"]["yaxis"]["type"] == "log"
    # Every bandwidth tick is labelled with its full value (not plotly's bare "2" for 20),
    # and the line is named in a legend even when it is the only one.
    y_axis = spec["layout"]["yaxis"]
    assert y_axis["ticktext"] == [f"{tick:g}" for tick in y_axis["tickvals"]]
    assert spec["layout"]["showlegend"] is True
    assert len(at.get("download_button")) == 1
    assert not transfer.is_busy()
    result = at.session_state["devices_bench_result"]
    assert len(result.for_path("cpu_to_cpu")) == 3  # and as many per path with an accelerator
    assert len(result.measurements) == 3 * len(result.paths)


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (
            0.5,
            40,
            [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000],
        ),
        (0.003, 23, [0.0001, 0.001, 0.01, 0.1, 1, 10, 100, 1000]),  # > 9 inside: decades only
        (0, 1, []),
    ],
)
def test_bandwidth_ticks_are_round_and_labelled_in_full(low, high, ticks) -> None:
    assert log_ticks(low, high) == pytest.approx(ticks)


def test_cuda_method_shows_what_this_machine_says() -> None:
    import torch

    at = open_page("views/devices.py")
    at.button_group(key="devices_variant_tensor_to").set_value("cuda_method").run()
    at.button(key="devices_run_tensor_to").click().run()
    assert not at.exception
    assert any(code.value.rstrip().endswith("y = x.cuda()") for code in at.code)
    if not torch.cuda.is_available():
        try:
            torch.arange(4.0).cuda()
        except Exception as exc:  # the page shows torch's own words, whatever they are here
            expected = str(exc)
        messages = [code.value for code in at.code if code.language == "text"]
        assert messages == [expected]
        assert translate("devices.findings.cuda_unavailable.yes").split(":")[0] in (
            rendered_text(at)
        )
    else:
        assert translate("devices.findings.same_object.no") in rendered_text(at)


def test_a_second_benchmark_is_told_to_wait() -> None:
    at = open_page("views/devices.py")
    release = threading.Event()
    started = threading.Event()

    def hold(_progress) -> None:
        started.set()
        release.wait(30)

    small = transfer.BenchmarkConfig(max_bytes=4 * KIB, time_budget_s=20, device="cpu")
    holder = threading.Thread(target=transfer.run_transfer_benchmark, args=(small, hold))
    holder.start()
    try:
        assert started.wait(10)
        at.button(key="devices_bench_run").click().run()
        warnings = [w.value for w in at.warning]
        assert any("Another visitor's benchmark" in w for w in warnings), warnings
    finally:
        release.set()
        holder.join(10)
