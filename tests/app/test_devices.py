"""The devices page under AppTest: inventory, a demonstration run, the benchmark shared by the
server's visitors (its latest result for everyone, a press during a run joins it)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from components.devices.draw import log_ticks
from components.format import format_bytes
from tests.app.apptest import open_page, rendered_text
from torchatlas.devices import transfer
from torchatlas.devices.inventory import available_accelerator
from torchatlas.i18n import translate

KIB = 1024


@pytest.fixture(autouse=True)
def empty_board():
    """The board is the server's (this process's): each test starts with none of the others'
    results or runs."""
    transfer.BOARD.reset()
    yield
    transfer.BOARD.reset()


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
    at.select_slider(key="devices_bench_max").set_value(str(64 * KIB)).run()
    at.button(key="devices_bench_run").click().run()
    # The job runs in the background; the page polls it (a fragment AppTest does not rerun
    # on its own): wait for the job, then rerun as the poll would.
    job = at.session_state["devices_bench_job"]
    assert at.button(key="devices_bench_run").disabled  # one run at a time from this page
    assert transfer.BOARD.wait(job.run_id, 60)
    at.run()
    assert not at.exception and not at.error
    assert "devices_bench_job" not in at.session_state
    assert at.select_slider(key="devices_bench_max").value == str(64 * KIB)  # kept while it ran
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
    result = transfer.BOARD.latest().result  # the server's, not the session's
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


def _chart_x(at) -> list[int]:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]


def test_a_second_session_sees_the_first_sessions_result_and_its_age(monkeypatch) -> None:
    first = open_page("views/devices.py")
    first.select_slider(key="devices_bench_max").set_value(str(16 * KIB)).run()
    first.button(key="devices_bench_run").click().run()
    # A 16 KiB run can end within the press's own page run (which then forgets its ticket):
    # wait on the board, not on the session's ticket.
    deadline = time.monotonic() + 60
    while transfer.BOARD.latest() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert transfer.BOARD.latest() is not None, first.session_state
    measured_at = transfer.BOARD.clock()
    monkeypatch.setattr(transfer.BOARD, "clock", lambda: measured_at + 125)
    second = open_page("views/devices.py", "ko")  # never pressed "run"
    assert not second.exception and not second.warning
    text = rendered_text(second)
    assert translate("devices.bench.not_run", "ko") not in text
    age = translate("devices.bench.age.minutes", "ko", count=2)
    expected = translate("devices.bench.measured", "ko", age=age, max_size="16 KiB", budget="5")
    assert expected in text
    assert _chart_x(second) == [4 * KIB, 16 * KIB]
    assert len(second.get("download_button")) == 1
    # Pressing "run" with the same settings soon after: that result, said so, no new run.
    runs = transfer.BOARD.latest().run_id
    monkeypatch.setattr(transfer.BOARD, "clock", lambda: measured_at + 10)
    second.select_slider(key="devices_bench_max").set_value(str(16 * KIB)).run()
    second.button(key="devices_bench_run").click().run()
    assert "devices_bench_job" not in second.session_state
    assert transfer.BOARD.latest().run_id == runs
    said = translate("devices.bench.recent", "ko", age="X", seconds=20).split("X")[0]

    def notes(at) -> list[str]:
        return [info.value for info in at.info if info.value.startswith(said)]

    assert notes(second) and "20" in notes(second)[0], [info.value for info in second.info]
    assert "20" in notes(second.run())[0]  # said on every rerun until it is stale…
    monkeypatch.setattr(transfer.BOARD, "clock", lambda: measured_at + 40)
    assert notes(second.run()) == []  # …then a press measures again, and the note is gone


def test_a_press_during_a_run_shows_its_progress_not_an_error(monkeypatch) -> None:
    """While one visitor's run measures, a second visitor's press joins it (the same
    settings) or waits behind it (others): progress and their place, never a refusal; "stop"
    belongs to the starter alone; and everyone gets the run's result."""
    finish = threading.Event()
    # The run waiting behind is held until both watchers have read the first run's result:
    # once it ends, it is the server's latest measurement and a rerun would show it instead.
    finish_later = threading.Event()
    real = transfer._measure_all

    def slow(config, progress, should_stop):
        progress(transfer.Progress(0, 3, transfer.TransferPath.CPU_TO_CPU, 4 * KIB, 0.0))
        gate = finish if config.max_bytes <= 16 * KIB else finish_later
        while not gate.wait(0.01) and not should_stop():
            pass
        return real(config, progress, should_stop)

    monkeypatch.setattr(transfer, "_measure_all", slow)
    starter = open_page("views/devices.py")
    starter.select_slider(key="devices_bench_max").set_value(str(16 * KIB)).run()
    starter.button(key="devices_bench_run").click().run()
    run_id = starter.session_state["devices_bench_job"].run_id
    deadline = time.monotonic() + 20
    while transfer.BOARD.status(run_id, "").progress is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)

    joiner = open_page("views/devices.py")
    elsewhere = translate("devices.bench.running_elsewhere", max_size="16 KiB", budget="5")
    assert elsewhere in rendered_text(joiner)  # told before pressing
    joiner.select_slider(key="devices_bench_max").set_value(str(16 * KIB)).run()
    joiner.button(key="devices_bench_run").click().run()
    assert not joiner.exception and not joiner.error and not joiner.warning
    assert joiner.session_state["devices_bench_job"].run_id == run_id
    text = rendered_text(joiner)
    assert translate("devices.bench.running_joined", max_size="16 KiB", budget="5") in text
    progress = joiner.get("progress")
    assert len(progress) == 1 and "0/3" in progress[0].proto.text
    # Only the starter may stop the run; the joiner may stop watching.
    assert not joiner.button(key="devices_bench_leave").disabled
    assert not any(b.key == "devices_bench_stop" for b in joiner.button)
    assert any(b.key == "devices_bench_stop" for b in starter.run().button)

    waiter = open_page("views/devices.py")  # other settings: in line behind it
    waiter.select_slider(key="devices_bench_max").set_value(str(64 * KIB)).run()
    waiter.button(key="devices_bench_run").click().run()
    assert not waiter.exception and not waiter.error and not waiter.warning
    queued = translate("devices.bench.queued", max_size="64 KiB", budget="5", ahead=1)
    assert queued in rendered_text(waiter)
    assert len(waiter.get("progress")) == 1  # the run ahead, as its starter sees it

    finish.set()
    assert transfer.BOARD.wait(run_id, 60)
    charts = [_chart_x(page.run()) for page in (starter, joiner)]
    assert charts == [[4 * KIB, 16 * KIB]] * 2  # the same result for both
    assert not joiner.warning and "devices_bench_job" not in joiner.session_state
    finish_later.set()
    assert transfer.BOARD.wait(waiter.session_state["devices_bench_job"].run_id, 60)
    assert _chart_x(waiter.run()) == [4 * KIB, 16 * KIB, 64 * KIB]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_page_says_the_largest_copy_and_why(lang: str) -> None:
    """The cap is the server's memory shared by the class, not the machine's size: said on
    the page, with the largest size and the budget it comes from."""
    at = open_page("views/devices.py", lang)
    said = translate(
        "devices.bench.size_limit",
        lang,
        largest=format_bytes(transfer.MAX_BYTES),
        budget=format_bytes(transfer.MEMORY_BUDGET_BYTES),
    )
    assert said in rendered_text(at)
    assert "64 MiB" in said and "128 MiB" in said
