"""Leaving a section and coming back: its inputs, its quiz prediction and its result are as
they were (issue 22, item 10). Streamlit forgets a widget's value when a run does not draw it,
and each section draws only its own widgets; before the room re-owned its inputs, a student
came back to empty value boxes, dtypes reset to ``bool`` and "`` is not a number", or, opened
from a link on another section, to "Nothing to read here"."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.basics.quiz import Section, make_question
from torchatlas.i18n import translate

# Non-default inputs for each section, as a student would type them (widget key → value).
INPUTS: dict[str, dict[str, str]] = {
    "types": {
        "basics_left": "float64",
        "basics_left_value": "0.1",
        "basics_right_kind": "zero_dim",
        "basics_right": "float64",
        "basics_right_value": "0.2",
    },
    "broadcasting": {"basics_shapes": "(4, 1) (3,)"},
    "einsum": {"basics_equation": "bij,bjk->bik", "basics_einsum_shapes": "(2, 2, 3) (2, 3, 4)"},
    "indexing": {"basics_index_shape": "2, 3, 4", "basics_index": "x[..., [0, 2]]"},
    "saving": {
        "basics_save_shape": "100, 8",
        "basics_save_view": "x[::10]",
        "basics_save_dtype": "float64",
    },
}
# The same inputs as a shared link writes them.
URL_KEYS = {
    "basics_left": "b_l",
    "basics_left_value": "b_lv",
    "basics_right_kind": "b_rk",
    "basics_right": "b_r",
    "basics_right_value": "b_rv",
    "basics_shapes": "b_shapes",
    "basics_equation": "b_eq",
    "basics_einsum_shapes": "b_es",
    "basics_index_shape": "b_ishape",
    "basics_index": "b_ix",
    "basics_save_shape": "b_sshape",
    "basics_save_view": "b_sv",
    "basics_save_dtype": "b_sdt",
}
SECTIONS = [section.value for section in Section]


def _set(at: AppTest, key: str, value: str) -> None:
    for kind in ("text_input", "selectbox"):
        found = [widget for widget in getattr(at, kind) if widget.key == key]
        if found:
            found[0].set_value(value).run()
            return
    raise AssertionError(f"no widget {key}")


def _inputs(at: AppTest, keys: list[str]) -> dict[str, str]:
    values = {}
    for kind in ("text_input", "selectbox"):
        for widget in getattr(at, kind):
            if widget.key in keys:
                values[widget.key] = widget.value
    return values


def _result(at: AppTest) -> tuple:
    """Everything the section shows as its answer: metrics, code, the page's text and its
    boxes, and the HTML pictures."""
    boxes = tuple(
        str(box.value) for kind in ("success", "error", "warning", "info") for box in at.get(kind)
    )
    return (
        tuple((m.label, m.value) for m in at.metric),
        tuple(str(code.value) for code in at.code),
        rendered_text(at),
        boxes,
        tuple(element.proto.body for element in at.get("html")),
    )


def _go(at: AppTest, section: str) -> None:
    at.segmented_control(key="basics_section").set_value(section).run()
    assert not at.exception, [e.value for e in at.exception]


def _no_reset_messages(at: AppTest) -> None:
    said = rendered_text(at) + "\n".join(str(w.value) for w in at.warning)
    assert translate("basics.errors.not_a_number", text="") not in said
    assert translate("basics.errors.empty") not in said


def _predict(at: AppTest, section: str) -> str | None:
    """Pick a prediction (not revealed yet) in the section's question; its widget's key."""
    radios = [r for r in at.radio if str(r.key).startswith(f"basics_q_{section}_")]
    if not radios:
        return None
    seed = int(str(radios[0].key).rsplit("_", 2)[1])
    assert make_question(section, seed).choices  # the question the radio asks
    radios[0].set_value(1).run()
    return radios[0].key


@pytest.mark.parametrize("section", SECTIONS)
def test_leave_and_come_back_keeps_inputs_and_result(section: str) -> None:
    at = open_page("views/basics.py", basics_section=section)
    for key, value in INPUTS[section].items():
        _set(at, key, value)
    answer_key = _predict(at, section)
    before_inputs = _inputs(at, list(INPUTS[section]))
    assert before_inputs == INPUTS[section]
    before = _result(at)
    chosen = at.radio(key=answer_key).value if answer_key else None
    for other in SECTIONS:
        if other != section:
            _go(at, other)
            _go(at, section)
            assert _inputs(at, list(INPUTS[section])) == before_inputs, other
            assert _result(at) == before, other
            if answer_key:
                assert at.radio(key=answer_key).value == chosen, other
            _no_reset_messages(at)


@pytest.mark.parametrize("section", SECTIONS)
def test_opened_from_a_link_leave_and_come_back(section: str) -> None:
    """A shared link to this section with its inputs: leave for another section, come back,
    and the link's inputs and result are still there (before: "Nothing to read here")."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params["b_sec"] = section
    for key, value in INPUTS[section].items():
        at.query_params[URL_KEYS[key]] = value
    at.run()
    at.switch_page("views/basics.py").run()
    assert not at.exception
    assert _inputs(at, list(INPUTS[section])) == INPUTS[section]
    first = _result(at)
    for other in SECTIONS:
        if other != section:
            _go(at, other)
            _go(at, section)
            assert _inputs(at, list(INPUTS[section])) == INPUTS[section], other
            assert _result(at) == first, other
            _no_reset_messages(at)


@pytest.mark.parametrize("section", SECTIONS)
def test_opened_from_a_link_on_another_section(section: str) -> None:
    """A link that opens another section but carries this section's inputs: coming to this
    section shows the link's inputs, and they survive a second trip away."""
    start = next(other for other in SECTIONS if other != section)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.session_state["lang"] = "en"
    at.query_params["b_sec"] = start
    for key, value in INPUTS[section].items():
        at.query_params[URL_KEYS[key]] = value
    at.run()
    at.switch_page("views/basics.py").run()
    assert not at.exception
    _go(at, section)
    assert _inputs(at, list(INPUTS[section])) == INPUTS[section]
    _no_reset_messages(at)
    first = _result(at)
    _go(at, start)
    _go(at, section)
    assert _inputs(at, list(INPUTS[section])) == INPUTS[section]
    assert _result(at) == first
    _no_reset_messages(at)
