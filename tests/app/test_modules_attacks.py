"""Issue 21 through the nn.Module room's links, as a visitor with only a URL would attack it.

Every computation whose size or values a link chooses runs in a sandbox job: the training run
(model, learning rate, steps, forgotten zero_grad), the pasted model's inspection, and the
uninitialised-memory demo. Each visit must stay contained (no exception, the server's RSS
rises ≤ 200 MB, no heartbeat late by more than 0.5 s, an answer within 3 s) and explain itself
in the room's words. Each test says what the room did before.
"""

from __future__ import annotations

import math

import pytest

import torchatlas.modules as modules
from components.modules import state as room_state
from tests.app.hostile import open_hostile_link, open_page_once
from torchatlas.i18n import translate
from torchatlas.links import encode_source
from torchatlas.modules.memory import looks_like_address

PAGE = "views/modules.py"


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """The room once in every section, so each measurement sees the link's cost, not the
    room's first import, and the sandbox is warm (the first job waits for it)."""
    at = open_page_once(PAGE)
    for section in room_state.SECTIONS:
        at.button_group(key=room_state.SECTION).set_value(section).run()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    """Each link's work is measured, not a cached answer of an earlier test."""
    room_state.REPORTS.clear()
    room_state._TRACES.clear()


def _said(key: str, **params: object) -> str:
    return translate(f"modules.{key}", "en", **params)


def _losses(visit) -> list[float]:
    import json

    charts = visit.at.get("plotly_chart")
    assert charts, "no loss curve"
    return json.loads(charts[0].proto.spec)["data"][0]["y"]


# ---------------------------------------------------------------- training chosen by a link
@pytest.mark.parametrize(
    "query",
    [
        {"nn_train": "mlp", "nn_steps": "500", "nn_lr": "0.001", "nn_forget": "0"},
        {"nn_train": "mlp", "nn_steps": "500", "nn_lr": "0.5", "nn_forget": "1"},
        {"nn_train": "mylinear", "nn_steps": "490", "nn_lr": "2.0", "nn_forget": "1"},
    ],
    ids=["longest", "accumulating", "diverging"],
)
def test_the_heaviest_training_links_run_contained(query: dict[str, str]) -> None:
    """Before: the run chosen by the link ran in the server process (500 recorded steps,
    75,000 numbers, or values overflowing to inf), once per distinct link."""
    visit = open_hostile_link(PAGE, {"nn_section": "train", **query})
    visit.assert_contained()
    trace = modules.train_steps(
        query["nn_train"],
        lr=float(query["nn_lr"]),
        steps=int(query["nn_steps"]),
        forget_zero_grad=query["nn_forget"] == "1",
    )
    shown = _losses(visit)  # the page's curve is torch's run, step for step
    assert len(shown) == len(trace.steps)
    for seen, true in zip(shown, trace.losses, strict=True):
        assert (seen is None and not math.isfinite(true)) or seen == pytest.approx(true)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("nn_steps", "５００"),  # fullwidth digits: isdecimal() but not ASCII
        ("nn_steps", "²"),  # isdigit() but int() fails
        ("nn_steps", "①"),
        ("nn_steps", "1e9"),
        ("nn_steps", "-10"),
        ("nn_steps", "9" * 40),
        ("nn_steps", "15"),  # a whole number the slider does not offer
        ("nn_forget", "１"),
        ("nn_forget", "2"),
        ("nn_lr", "1e308"),
        ("nn_lr", "nan"),
    ],
)
def test_numbers_in_links_are_ascii_and_offered(key: str, text: str) -> None:
    """Before: nn_steps and nn_forget were compared as text only; they are now read with the
    app's strict ASCII rule and must be one of the values the page offers."""
    visit = open_hostile_link(PAGE, {"nn_section": "train", key: text})
    visit.assert_contained()
    visit.assert_refused_with(translate("kit.link.broken", "en", fields=key))
    state = visit.at.session_state
    assert state[room_state.STEPS] == room_state.DEFAULT_STEPS
    assert state[room_state.FORGET] is False and state[room_state.LR] == room_state.DEFAULT_LR


# ---------------------------------------------------------------- pasted models in a link
MODEL = """import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
{body}
"""


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ("        while True:\n            pass\n", "errors.timeout.title"),
        # the memory limit stops it inside __init__: torch's MemoryError, at its line
        ("        self.big = [0] * 10**10\n", "errors.constructor_error.title"),
        (
            "        self.many = [torch.zeros(1) for _ in range(10**8)]\n",
            "errors.timeout.title",
        ),
    ],
    ids=["never-finishes", "memory", "a-hundred-million-tensors"],
)
def test_a_model_that_never_builds_is_refused_in_time(body: str, refusal: str) -> None:
    """Before: the inspection's deadline was 10 s, so a model that never finishes building
    kept its visitor waiting past the issue's 3 s."""
    source = MODEL.format(body=body)
    visit = open_hostile_link(PAGE, {"nn_src": encode_source(source), "nn_model": "Net()"})
    visit.assert_contained()
    visit.assert_refused_with(_said(refusal))


def test_a_nested_shared_list_attribute_is_never_formatted() -> None:
    """A list of shared references (tiny to build, enormous to repr) kept on the model: the
    walk looks at a container's first items by identity and never formats a value."""
    body = "        a = [1]\n        for _ in range(40):\n            a = [a, a, a, a]\n"
    body += "        self.nest = a\n        self.keep = [self.fc, a, self.fc.weight]\n"
    source = MODEL.format(body=body)
    visit = open_hostile_link(PAGE, {"nn_src": encode_source(source), "nn_model": "Net()"})
    visit.assert_contained()
    visit.assert_refused_with(_said("findings.list_aliases.title", name="self.keep"))


# ---------------------------------------------------------------- uninitialised memory
def test_the_memory_link_shows_no_address() -> None:
    """Before: the demo showed raw heap words, the same addresses in every sandbox child."""
    visit = open_hostile_link(PAGE, {"nn_section": "memory"})
    visit.assert_contained()
    report = room_state._FIRST_MEMORY.get("first")
    assert report is not None and report.failure is None
    cells = [v for grid in (report.empty, report.float_tensor) for row in grid for v in row]
    import struct

    shown = [v for v in cells if v is not None]
    for start in range(0, len(cells), 2):
        pair = cells[start : start + 2]
        if None in pair:
            assert pair == [None, None]  # both halves of a masked word
            continue
        word = int.from_bytes(struct.pack("<ff", *pair), "little")
        assert not looks_like_address(word)
    assert len(shown) + 2 * report.masked_words == len(cells)
    visit.assert_refused_with(
        _said(
            "memory.masked",
            masked=report.masked_words,
            words=report.words,
            cell=_said("memory.masked_cell"),
        )
    )


def test_the_visitors_training_never_runs_in_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the page called ``train_steps`` in the server process for whatever the link
    chose. The sandbox's children were forked before this patch, so only a run in this
    process would reach it."""
    import torchatlas.modules.training as training

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a visitor's training ran in the server process")

    monkeypatch.setattr(training, "train_steps", refuse)
    monkeypatch.setattr(modules, "train_steps", refuse)
    visit = open_hostile_link(
        PAGE, {"nn_section": "train", "nn_train": "mlp", "nn_steps": "70", "nn_lr": "0.3"}
    )
    visit.assert_contained()
    assert len(_losses(visit)) == 70
