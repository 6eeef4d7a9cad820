"""The seven rooms as a class uses them, for bench/classroom.py. Each action finds its widget by
the key the room's own code gives it (``components/<room>/panels.py``), sends what the browser
sends (a widget state in a ``rerun_script``, a fragment's id for a fragment's widget), and is
timed until a finished run shows the action's result (:meth:`Student.act`): an exception
element, an error card, a "busy" warning instead of the result, or a timeout is an error.

Rooms and their actions (each ``room.action`` is one row of the report):
    any room   open      the page's title and a finished run (a new tab, later the sidebar)
    basics     section   the section picker (``basics_section``): the chosen section's input
               types     the left operand's value (``basics_left_value``): the metrics
               broadcasting   the shapes box (``basics_shapes``): the aligned picture
               einsum    the operands' shapes (``basics_einsum_shapes``): the metrics
               indexing  the index expression (``basics_index``): the pictures
               saving    the saved tensor's shape (``basics_save_shape``): the metrics
    strides    click     a point of the tensor chart (a plotly selection: a fragment rerun)
    autograd   example   another example from the menu (``autograd_example``): traced and run
                         backward, the graph drawn (examples that teach an error are left out)
               step      one step of backward (``autograd_next``; ``autograd_reset`` at the end)
               all       backward to the end (``autograd_all``): the graph and the gradients
    modules    section   the part picker (``modules_section``): the part's own widget
               inspect   another preset (``modules_preset``): inspected in the sandbox, metrics
               train     another learning rate (``modules_lr``): the run and its loss curve
               step      the training step's next phase (``modules_next``): the step table
    shapes     analyse   the editor's Analyse button: the report table
    classify   sample    pick another bundled sample photo: its predictions
               upload    the student's own photo (a sample re-encoded per student and round)
    devices    demo      a demonstration's Run button: its result
               bench     the transfer benchmark, polled to its end: its result
"""

from __future__ import annotations

import ast
import asyncio
import io
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.classroom_client import Node, Student, has_key, plotly_click
from torchatlas.rooms import room_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = ROOT / "assets" / "samples"


def mixed_class_rooms() -> tuple[str, ...]:
    """The mixed class's rooms: the registry's, in its order, which is the order students
    are spread over them (student i → i mod 7). Each needs its actions in ROOM_ACTIONS."""
    return room_keys()


ROOMS = mixed_class_rooms()
ROOM_ACTIONS: dict[str, tuple[str, ...]] = {
    "basics": ("types", "broadcasting", "einsum", "indexing", "saving"),
    "strides": ("click",),
    "autograd": ("example", "step", "all"),
    "modules": ("inspect", "train", "step"),
    "shapes": ("analyse",),
    "classify": ("sample", "upload"),
    "devices": ("demo", "bench"),
}
# Actions a student takes on the way to another one (a section picked before its input).
SECTION_ACTIONS = ("basics.section", "modules.section")
ACTION_TIMEOUT_S: dict[str, float] = {
    "open": 90.0,
    "basics.section": 60.0,
    "basics.types": 45.0,
    "basics.broadcasting": 45.0,
    "basics.einsum": 45.0,
    "basics.indexing": 45.0,
    "basics.saving": 45.0,
    "strides.click": 45.0,
    "autograd.example": 60.0,
    "autograd.step": 45.0,
    "autograd.all": 45.0,
    "modules.section": 60.0,
    "modules.inspect": 90.0,
    "modules.train": 60.0,
    "modules.step": 45.0,
    "shapes.analyse": 90.0,
    "classify.sample": 90.0,
    "classify.upload": 120.0,
    "devices.demo": 60.0,
    "devices.bench": 180.0,
}


def every_action(rooms: Sequence[str] = ROOMS) -> list[str]:
    """Every "room.action" a mixed class in these rooms takes (the section pickers too)."""
    actions = [f"{room}.{name}" for room in rooms for name in ROOM_ACTIONS[room]]
    return actions + [a for a in SECTION_ACTIONS if a.split(".")[0] in rooms]


# --------------------------------------------------------------------------- the served code


@dataclass(frozen=True)
class Catalog:
    """What the driver reads from the served checkout instead of guessing: the English
    labels its widgets show (option labels are what a widget state carries), and the
    autograd examples that run without a teaching error (those end in an error card on
    purpose, which the tool would count as an error)."""

    labels: dict[str, str] = field(default_factory=dict)
    autograd_examples: tuple[str, ...] = ()  # their keys, in the menu's order

    def label(self, key: str) -> str | None:
        return self.labels.get(key)


def _flatten(prefix: str, node: object, out: dict[str, str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _flatten(f"{prefix}.{key}", value, out)
    elif isinstance(node, str):
        out[prefix] = node


def clean_examples(source: str) -> tuple[str, ...]:
    """The keys of the examples in ``torchatlas/autograd/examples.py`` given no ``error=``:
    each is a call whose first argument is its key (``_example("mlp", ...)``)."""
    keys = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        first = node.args[0]
        if name not in ("_example", "Example") or not isinstance(first, ast.Constant):
            continue
        if isinstance(first.value, str) and not any(k.arg == "error" for k in node.keywords):
            keys.append(first.value)
    return tuple(keys)


def read_catalog(app_dir: Path = ROOT, lang: str = "en") -> Catalog:
    """The served checkout's English labels and clean autograd examples."""
    labels: dict[str, str] = {}
    for path in sorted((app_dir / "assets" / "translations" / lang).glob("*.json")):
        _flatten(path.stem, json.loads(path.read_text(encoding="utf-8")), labels)
    examples = app_dir / "torchatlas" / "autograd" / "examples.py"
    clean = clean_examples(examples.read_text(encoding="utf-8")) if examples.is_file() else ()
    return Catalog(labels, clean)


@dataclass(frozen=True)
class Outcome:
    """One student's action: how long it took, and the error (None when it succeeded)."""

    action: str  # "room.action", e.g. "shapes.analyse"
    student: int
    round: int
    seconds: float
    error: str | None = None
    skipped: str | None = None  # why it was not measured (e.g. the page answers in the browser)


def student_photo(student: int, round_: int, longest_px: int) -> tuple[str, bytes]:
    """A bundled sample, resized and marked per student and round, re-encoded as JPEG: every
    student's file (and every round's) has its own bytes, so no cache can answer it."""
    from PIL import Image, ImageDraw

    samples = sorted(p for p in SAMPLES_DIR.iterdir() if p.suffix in (".jpg", ".png"))
    source = samples[student % len(samples)]
    with Image.open(source) as opened:
        image = opened.convert("RGB")
    scale = longest_px / max(image.size)
    image = image.resize(
        (max(1, round(image.width * scale)), max(1, round(image.height * scale))),
        Image.Resampling.BICUBIC,
    )
    mark = max(4, longest_px // 40)
    colour = ((student * 53) % 256, (round_ * 97 + 31) % 256, (student * 7 + round_ * 13) % 256)
    ImageDraw.Draw(image).rectangle((0, 0, mark, mark), fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=88)
    return f"student{student:02d}-round{round_ + 1}-{source.stem}.jpg", buffer.getvalue()


# --------------------------------------------------------------------------- rooms and actions


def _trigger(widget_id: str) -> Any:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=widget_id, trigger_value=True)


def _count_in(student: Student, fragment_id: str) -> int:
    return sum(1 for n in student.find() if n.fragment_id == fragment_id)


async def open_room(student: Student, room: str, first: bool, deadline: float) -> Outcome:
    """A first visit (a new tab on the room's link) or, later, the room picked in the sidebar."""
    action = f"{room}.open"
    started = time.perf_counter()
    if first:
        try:
            await asyncio.wait_for(student.connect(), max(1.0, deadline - time.monotonic()))
        except Exception as error:
            seconds = time.perf_counter() - started
            return Outcome(action, student.index, 0, seconds, f"connect failed: {error!r}"[:200])

        async def send() -> None:
            await student.send_rerun(page_name=room, page_hash="", query="", keep_page=False)

    else:
        page_hash = student.pages.get(room, "")

        async def send() -> None:
            await student.send_rerun(
                page_name="" if page_hash else room, page_hash=page_hash, keep_page=False
            )

    def done(since: int) -> bool:
        return any(
            n.kind == "heading" and n.proto.tag == "h1" for n in student.fresh(since)
        ) and student.page_hash == student.pages.get(room, student.page_hash)

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S["open"], deadline)
    if first:
        seconds = time.perf_counter() - started  # a new tab pays for its connection too
    if error is None:  # what an unpressed demo card holds, to know a pressed one
        for node in student.find(kind="button"):
            if "devices_run_" in node.widget_id:
                student.baseline_counts.setdefault(
                    node.fragment_id, _count_in(student, node.fragment_id)
                )
    return Outcome(action, student.index, 0, seconds, error)


async def strides_click(student: Student, round_: int, deadline: float) -> Outcome:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    action = "strides.click"
    charts = (
        student.find(kind="plotly_chart", key="strides_tensor_chart")
        or student.find(kind="plotly_chart", key="strides_storage_chart")
        or student.find(kind="plotly_chart", where=lambda n: bool(n.proto.selection_mode))
    )
    if not charts:
        in_browser = student.find(kind="bidi_component") or student.find(kind="component_instance")
        if in_browser:
            return Outcome(action, student.index, round_, 0.0, skipped="answered in the browser")
        return Outcome(action, student.index, round_, 0.0, "no clickable chart on the page")
    chart = charts[0]
    payload = plotly_click(chart.proto.spec, student.index * 7 + round_ * 3)
    if payload is None:
        return Outcome(action, student.index, round_, 0.0, "the chart has no points")
    state = WidgetState(id=chart.widget_id, string_value=payload)

    async def send() -> None:
        await student.send_rerun([state], fragment_id=chart.fragment_id)

    def done(since: int) -> bool:
        return any(n.fragment_id == chart.fragment_id for n in student.fresh(since))

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S[action], deadline)
    return Outcome(action, student.index, round_, seconds, error)


def _report_present(student: Student, since: int) -> bool:
    return any(n.kind in ("dataframe", "table", "metric") for n in student.fresh(since))


async def shapes_analyse(student: Student, round_: int, deadline: float) -> Outcome:
    action = "shapes.analyse"
    buttons = (
        student.find(
            kind="button",
            where=lambda n: n.proto.is_form_submitter and "shapes" in n.proto.form_id,
        )
        or student.find(kind="button", where=lambda n: n.proto.is_form_submitter)
        or student.find(
            kind="button",
            where=lambda n: (
                "shapes" in n.widget_id
                and any(word in n.widget_id.lower() for word in ("analy", "_run"))
            ),
        )
    )
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no Analyse button on the page")
    button = buttons[0]

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    seconds, error = await student.act(
        send, lambda since: _report_present(student, since), ACTION_TIMEOUT_S[action], deadline
    )
    return Outcome(action, student.index, round_, seconds, error)


def _predictions_present(student: Student, since: int, name: str | None = None) -> bool:
    fresh = student.fresh(since)
    charts = ("plotly_chart", "dataframe")
    shown = any(n.kind in charts and "classify_top_" in n.widget_id for n in fresh)
    shown = shown or any(n.kind == "imgs" for n in fresh)
    if name is None:
        return shown
    # The picture's caption starts with its name ("coffee.jpg · 640 × 480").
    named = any(n.kind == "markdown" and n.text().startswith(name) for n in fresh)
    return shown and named


def sample_picker(student: Student) -> list[Node]:
    return student.find(kind="button_group", key="classify_samples") or student.find(
        kind="button_group", where=lambda n: "sample" in n.widget_id
    )


def sample_choices(student: Student) -> list[str]:
    """The sample pills' labels that are not selected on a first visit."""
    pills = sample_picker(student)
    if not pills:
        return []
    defaults = set(pills[0].proto.default)
    return [o.content for i, o in enumerate(pills[0].proto.options) if i not in defaults]


async def classify_sample(student: Student, round_: int, pick: int, deadline: float) -> Outcome:
    from streamlit.proto.Common_pb2 import StringArray
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    action = "classify.sample"
    pills = sample_picker(student)
    choices = sample_choices(student)
    if not pills or not choices:
        return Outcome(action, student.index, round_, 0.0, "no sample picker on the page")
    label = choices[pick % len(choices)]
    state = WidgetState(id=pills[0].widget_id, string_array_value=StringArray(data=[label]))

    async def send() -> None:
        await student.send_rerun([state], fragment_id=pills[0].fragment_id)

    seconds, error = await student.act(
        send,
        lambda since: _predictions_present(student, since, label),
        ACTION_TIMEOUT_S[action],
        deadline,
    )
    return Outcome(action, student.index, round_, seconds, error)


async def classify_upload(
    student: Student, round_: int, photo: tuple[str, bytes], deadline: float
) -> Outcome:
    action = "classify.upload"
    uploaders = student.find(kind="file_uploader", key="classify_uploads") or student.find(
        kind="file_uploader"
    )
    if not uploaders:
        return Outcome(action, student.index, round_, 0.0, "no file uploader on the page")
    name, data = photo

    async def send() -> None:
        await student.upload(uploaders[0], name, data)

    seconds, error = await student.act(
        send,
        lambda since: _predictions_present(student, since, name),
        ACTION_TIMEOUT_S[action],
        deadline,
    )
    return Outcome(action, student.index, round_, seconds, error)


async def devices_demo(student: Student, round_: int, deadline: float) -> Outcome:
    action = "devices.demo"
    buttons = student.find(kind="button", where=lambda n: "devices_run_" in n.widget_id)
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no demonstration button on the page")
    button = buttons[(student.index + round_) % len(buttons)]
    before = student.baseline_counts.get(button.fragment_id, _count_in(student, button.fragment_id))

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    def done(since: int) -> bool:
        fresh = [n for n in student.fresh(since) if n.fragment_id == button.fragment_id]
        return bool(fresh) and _count_in(student, button.fragment_id) > before

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S[action], deadline)
    return Outcome(action, student.index, round_, seconds, error)


async def devices_bench(student: Student, round_: int, deadline: float) -> Outcome:
    action = "devices.bench"
    buttons = student.find(kind="button", key="devices_bench_run")
    if not buttons:
        return Outcome(action, student.index, round_, 0.0, "no benchmark button on the page")
    button = buttons[0]

    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    def done(since: int) -> bool:
        # The result's download button, sent after the press, with no job still shown running
        # (a page may keep showing an earlier measurement while a new one runs).
        running = student.find(kind="progress") or student.find(
            kind="button", where=lambda n: "bench_stop" in n.widget_id
        )
        return not running and any(
            n.kind == "download_button" and "devices_bench" in n.widget_id
            for n in student.fresh(since)
        )

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S[action], deadline)
    return Outcome(action, student.index, round_, seconds, error)


# --------------------------------------------------------------------------- shared helpers


def widget_state(node: Node, value: str | list[str]) -> Any:
    """The widget state the browser sends for a new value: a select box or text box sends
    a string; pills, segmented controls and select sliders a list of option labels."""
    from streamlit.proto.Common_pb2 import StringArray
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    if isinstance(value, list):
        return WidgetState(id=node.widget_id, string_array_value=StringArray(data=value))
    return WidgetState(id=node.widget_id, string_value=value)


def choose_option(options: Sequence[str], current: object, pick: int) -> str | None:
    """The ``pick``-th option (modulo their number) that is not the one shown now, so the
    change is a real one (its callback runs); None without options."""
    shown = current[0] if isinstance(current, list) and current else current
    others = [o for o in options if o != shown] or list(options)
    return others[pick % len(others)] if others else None


def _fresh(
    student: Student, since: int, kinds: Sequence[str], fragment_id: str | None = None,
    key: str | None = None,
) -> bool:  # fmt: skip
    """Has a run finished after the send drawn an element of these kinds (in this fragment,
    under this key)?"""
    for node in student.fresh(since):
        if node.kind not in kinds:
            continue
        if fragment_id is not None and node.fragment_id != fragment_id:
            continue
        if key is not None and not has_key(node, key):
            continue
        return True
    return False


async def _change(
    student: Student,
    action: str,
    round_: int,
    node: Node,
    value: str | list[str],
    done: Callable[[int], bool],
    deadline: float,
) -> Outcome:
    """Set one widget to ``value`` (rerunning only its fragment, as the browser does) and
    wait for ``done``."""
    state = widget_state(node, value)

    async def send() -> None:
        await student.send_rerun([state], fragment_id=node.fragment_id)

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S[action], deadline)
    return Outcome(action, student.index, round_, seconds, error)


async def _press(
    student: Student,
    action: str,
    round_: int,
    button: Node,
    done: Callable[[int], bool],
    deadline: float,
) -> Outcome:
    async def send() -> None:
        await student.send_rerun([_trigger(button.widget_id)], fragment_id=button.fragment_id)

    seconds, error = await student.act(send, done, ACTION_TIMEOUT_S[action], deadline)
    return Outcome(action, student.index, round_, seconds, error)


def _missing(student: Student, action: str, round_: int, what: str) -> Outcome:
    return Outcome(action, student.index, round_, 0.0, f"no {what} on the page")


async def _section(
    student: Student,
    room: str,
    picker_key: str,
    label: str | None,
    marker_key: str,
    round_: int,
    deadline: float,
) -> Outcome | None:
    """Show a section by its picker (a segmented control) unless its ``marker_key`` widget is
    on the page already; None when nothing had to be done."""
    if student.find(key=marker_key):
        return None
    action = f"{room}.section"
    pickers = student.find(kind="button_group", key=picker_key)
    if not pickers:
        return _missing(student, action, round_, f"section picker ({picker_key})")
    options = [option.content for option in pickers[0].proto.options]
    if label is None or label not in options:
        return Outcome(action, student.index, round_, 0.0, f"no option {label!r} in {options}")
    return await _change(
        student, action, round_, pickers[0], [label],
        lambda since: any(n.epoch >= since for n in student.find(key=marker_key)),
        deadline,
    )  # fmt: skip


# --------------------------------------------------------------------------- tensor basics

# Each section: the widget a student changes, the value it gets (from the student and the
# round, so the class asks different questions), and the element its answer draws.
INDEX_EXPRESSIONS = (  # all valid for the default 3×4 tensor
    "x[1:, ::2]", "x[:, 1]", "x[None, 1:]", "x[..., -1]", "x[:, [0, 2]]", "x[x > 5]",
    "x[x % 2 == 0]", "x[[0, 2], [1, 3]]", "x[1:, None, ..., [0, 2]]",
)  # fmt: skip


@dataclass(frozen=True)
class BasicsInput:
    key: str  # the text box's key (components/basics/panels.py)
    answer: tuple[str, ...]  # element kinds the section's answer draws
    value: Callable[[int, int], str]  # (student, round) → what is typed


BASICS_INPUTS: dict[str, BasicsInput] = {
    # int8 + a Python int: the value stays inside int8's range (a value outside is refused)
    "types": BasicsInput(
        "basics_left_value", ("metric",), lambda s, r: str((s * 37 + r * 11) % 200 - 100)
    ),
    "broadcasting": BasicsInput(
        "basics_shapes", ("html",), lambda s, r: f"({2 + (s + r) % 5}, 1) ({3 + (3 * s + r) % 4},)"
    ),
    # the default equation "...chw,c->...hw" takes any (…, 3, h, w) and (3,)
    "einsum": BasicsInput(
        "basics_einsum_shapes",
        ("metric",),
        lambda s, r: f"({1 + s % 3}, 3, {2 + r % 4}, {3 + s % 5}) (3,)",
    ),
    "indexing": BasicsInput(
        "basics_index",
        ("html",),
        lambda s, r: INDEX_EXPRESSIONS[(s + 3 * r) % len(INDEX_EXPRESSIONS)],
    ),
    "saving": BasicsInput(
        "basics_save_shape", ("metric",), lambda s, r: f"{500 + 100 * ((s + r) % 10)}, 4"
    ),
}


async def basics_section_input(
    student: Student, section: str, round_: int, catalog: Catalog, deadline: float,
    pause: Callable[[], Awaitable[None]],
) -> list[Outcome]:  # fmt: skip
    """Show the section (``basics.section``, when another one is shown), then type in its
    input (``basics.<section>``): the section's fragment reruns and draws its answer."""
    spec = BASICS_INPUTS[section]
    outcomes: list[Outcome] = []
    label = catalog.label(f"basics.sections.{section}")
    switched = await _section(
        student, "basics", "basics_section", label, spec.key, round_, deadline
    )
    if switched is not None:
        outcomes.append(switched)
        if switched.error is not None:
            return outcomes
        await pause()
    action = f"basics.{section}"
    boxes = student.find(kind="text_input", key=spec.key)
    if not boxes:
        return [*outcomes, _missing(student, action, round_, f"{spec.key} box")]
    box = boxes[0]
    text = spec.value(student.index, round_)
    outcomes.append(
        await _change(
            student,
            action,
            round_,
            box,
            text,
            lambda since: _fresh(student, since, spec.answer, box.fragment_id),
            deadline,
        )
    )
    return outcomes


# --------------------------------------------------------------------------- autograd


async def autograd_example(
    student: Student, round_: int, pick: int, catalog: Catalog, deadline: float
) -> Outcome:
    """Another example from the menu: its program is traced, run backward, and drawn."""
    action = "autograd.example"
    menus = student.find(kind="selectbox", key="autograd_example")
    if not menus:
        return _missing(student, action, round_, "example menu (autograd_example)")
    menu = menus[0]
    wanted = [catalog.label(f"autograd.examples.{key}") for key in catalog.autograd_examples]
    options = [o for o in menu.proto.options if o in wanted]
    if not options:
        return Outcome(action, student.index, round_, 0.0, "no example without a teaching error")
    label = choose_option(options, student.current_value(menu), pick)
    assert label is not None
    before = _program(student)

    def done(since: int) -> bool:  # the new program in the box, its graph and step buttons
        return (
            _fresh(student, since, ("graphviz_chart",))
            and bool(student.find(kind="button", key="autograd_next"))
            and _program(student) != before
        )

    return await _change(student, action, round_, menu, label, done, deadline)


def _program(student: Student) -> object:
    boxes = student.find(kind="text_area", key="autograd_program")
    return student.current_value(boxes[0]) if boxes else None


def _step_text(student: Student, fragment_id: str) -> str:
    """What the graph's fragment says about the step shown (its first note)."""
    notes = [n for n in student.find(kind="alert") if n.fragment_id == fragment_id]
    return notes[0].text() if notes else ""


def _graph_redrawn(student: Student, button: Node) -> Callable[[int], bool]:
    """The graph's fragment drew its graph again and now tells of another step."""
    before = _step_text(student, button.fragment_id)
    return lambda since: (
        _fresh(student, since, ("graphviz_chart",), button.fragment_id)
        and _step_text(student, button.fragment_id) != before
    )


async def autograd_step(student: Student, round_: int, deadline: float) -> Outcome:
    """One step of backward (the graph's fragment reruns); at the end, back to the start."""
    action = "autograd.step"
    buttons = [
        b for key in ("autograd_next", "autograd_reset")
        for b in student.find(kind="button", key=key) if not b.proto.disabled
    ]  # fmt: skip
    if not buttons:
        if student.find(kind="button", key="autograd_next"):
            return Outcome(action, student.index, round_, 0.0, skipped="backward has no steps")
        return _missing(student, action, round_, "step buttons (autograd_next)")
    return await _press(
        student, action, round_, buttons[0], _graph_redrawn(student, buttons[0]), deadline
    )


async def autograd_all(student: Student, round_: int, deadline: float) -> Outcome:
    """Backward to the end: the last step's graph and every gradient."""
    action = "autograd.all"
    buttons = student.find(kind="button", key="autograd_all")
    if not buttons:
        return _missing(student, action, round_, "'all steps' button (autograd_all)")
    if buttons[0].proto.disabled:  # at the end already: back to the start first (not counted)
        resets = [
            b for b in student.find(kind="button", key="autograd_reset") if not b.proto.disabled
        ]
        if not resets:
            return Outcome(action, student.index, round_, 0.0, skipped="backward has no steps")
        back = await _press(
            student, action, round_, resets[0], _graph_redrawn(student, resets[0]), deadline
        )
        if back.error is not None:
            return back
        buttons = student.find(kind="button", key="autograd_all")
        if not buttons or buttons[0].proto.disabled:
            return _missing(student, action, round_, "enabled 'all steps' button")
    button = buttons[0]
    redrawn = _graph_redrawn(student, button)  # (reads the step shown before the press)

    def done(since: int) -> bool:  # at the end, the button is off
        return redrawn(since) and any(
            n.proto.disabled for n in student.find(kind="button", key="autograd_all")
        )

    return await _press(student, action, round_, button, done, deadline)


# --------------------------------------------------------------------------- nn.Module


async def modules_inspect(
    student: Student, round_: int, pick: int, catalog: Catalog, deadline: float,
    pause: Callable[[], Awaitable[None]],
) -> list[Outcome]:  # fmt: skip
    """The inspector (``modules.section`` first when another part is shown), then another
    preset: the page inspects it in the sandbox and shows its summary metrics."""
    outcomes: list[Outcome] = []
    label = catalog.label("modules.sections.inspect")
    switched = await _section(
        student, "modules", "modules_section", label, "modules_preset", round_, deadline
    )
    if switched is not None:
        outcomes.append(switched)
        if switched.error is not None:
            return outcomes
        await pause()
    action = "modules.inspect"
    menus = student.find(kind="selectbox", key="modules_preset")
    if not menus:
        return [*outcomes, _missing(student, action, round_, "preset menu (modules_preset)")]
    menu = menus[0]
    label = choose_option(list(menu.proto.options), student.current_value(menu), pick)
    if label is None:
        return [*outcomes, _missing(student, action, round_, "preset")]

    def done(since: int) -> bool:  # the report's summary (its metrics), drawn by this run
        return _fresh(student, since, ("metric",))

    outcomes.append(await _change(student, action, round_, menu, label, done, deadline))
    return outcomes


async def modules_train(
    student: Student, round_: int, pick: int, catalog: Catalog, deadline: float,
    pause: Callable[[], Awaitable[None]],
) -> list[Outcome]:  # fmt: skip
    """The training part (``modules.section`` first), then another learning rate: a new run
    of training steps and its loss curve."""
    outcomes: list[Outcome] = []
    label = catalog.label("modules.sections.train")
    switched = await _section(
        student, "modules", "modules_section", label, "modules_lr", round_, deadline
    )
    if switched is not None:
        outcomes.append(switched)
        if switched.error is not None:
            return outcomes
        await pause()
    action = "modules.train"
    sliders = student.find(kind="slider", key="modules_lr")
    if not sliders:
        return [*outcomes, _missing(student, action, round_, "learning-rate slider (modules_lr)")]
    slider = sliders[0]
    rate = choose_option(list(slider.proto.options), student.current_value(slider), pick)
    if rate is None:
        return [*outcomes, _missing(student, action, round_, "learning rate")]
    outcomes.append(
        await _change(
            student,
            action,
            round_,
            slider,
            [rate],
            lambda since: _fresh(
                student, since, ("plotly_chart",), slider.fragment_id, key="modules_loss_chart"
            ),
            deadline,
        )
    )
    return outcomes


async def modules_step(student: Student, round_: int, deadline: float) -> Outcome:
    """The training step's next phase (forward, loss, backward, step, zero_grad): the phase
    picker moves on and the fragment redraws the step's table (a dataframe without an id:
    found by its fragment)."""
    action = "modules.step"
    buttons = student.find(kind="button", key="modules_next")
    if not buttons:
        return _missing(student, action, round_, "next-phase button (modules_next)")
    button = buttons[0]

    def phase() -> object:
        pickers = student.find(kind="button_group", key="modules_phase")
        return student.current_value(pickers[0]) if pickers else None

    before = phase()

    def done(since: int) -> bool:  # the table redrawn for the next phase
        return _fresh(student, since, ("dataframe",), button.fragment_id) and phase() != before

    return await _press(student, action, round_, button, done, deadline)


# --------------------------------------------------------------------------- one action


async def take_action(
    student: Student,
    room: str,
    name: str,
    round_: int,
    *,
    pick: int,
    photo: tuple[str, bytes] | None,
    catalog: Catalog,
    deadline: float,
    pause: Callable[[], Awaitable[None]],
) -> list[Outcome]:
    """One of the room's actions (``ROOM_ACTIONS``), with the section switch it needs."""
    if room == "basics":
        return await basics_section_input(student, name, round_, catalog, deadline, pause)
    if room == "modules" and name == "inspect":
        return await modules_inspect(student, round_, pick, catalog, deadline, pause)
    if room == "modules" and name == "train":
        return await modules_train(student, round_, pick, catalog, deadline, pause)
    single: dict[tuple[str, str], Callable[[], Awaitable[Outcome]]] = {
        ("strides", "click"): lambda: strides_click(student, round_, deadline),
        ("autograd", "example"): lambda: autograd_example(student, round_, pick, catalog, deadline),
        ("autograd", "step"): lambda: autograd_step(student, round_, deadline),
        ("autograd", "all"): lambda: autograd_all(student, round_, deadline),
        ("modules", "step"): lambda: modules_step(student, round_, deadline),
        ("shapes", "analyse"): lambda: shapes_analyse(student, round_, deadline),
        ("classify", "sample"): lambda: classify_sample(student, round_, pick, deadline),
        ("devices", "demo"): lambda: devices_demo(student, round_, deadline),
        ("devices", "bench"): lambda: devices_bench(student, round_, deadline),
    }
    if (room, name) == ("classify", "upload"):
        assert photo is not None
        return [await classify_upload(student, round_, photo, deadline)]
    if (room, name) not in single:
        raise ValueError(f"unknown action {room}.{name}")
    return [await single[(room, name)]()]
