"""AppTest of the strides room: chain in, steps out, selection, shared links, panels."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from components.strides.state import CACHE_BYTES, ROOM_CACHE
from tests.app.apptest import APP, TIMEOUT_S, open_page, rendered_text
from torchatlas.cache import deep_size
from torchatlas.i18n import translate
from torchatlas.strides import MAX_CHAIN_TEXT, MAX_INDEX_TEXT, MAX_OP_TEXT, MAX_SHAPE_TEXT
from torchatlas.strides.examples import EXAMPLES
from torchatlas.strides.quiz import MAX_ANSWER_TEXT, grade, make_question


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_default_chain_renders_storage_tensor_history_and_code() -> None:
    at = open_page("views/strides.py")
    assert not at.exception and not at.error
    text = rendered_text(at)
    assert "Tensor storage & strides" in text
    assert "View: shares storage S1" in text  # .view(2, 6) of the contiguous() copy
    assert "| stride (elements) | `(6, 1)` |" in text  # .view(2, 6)
    specs = chart_specs(at)
    assert len(specs) == 2  # the storage strip and the logical tensor
    code = at.code[0].value
    assert "y1 = x.t()" in code and "y2 = y1.contiguous()" in code and "y3 = y2.view(2, 6)" in code
    history = at.get("html")[0].proto.body
    assert "y1 = x.t()" in history and "View: shares storage S0" in history
    assert ">Op history</h2>" in history  # the heading travels inside the history's HTML
    # Heading, the step's view/copy line and the caption are one markdown element.
    assert "## Storage\n\n**View: shares storage S1" in text
    assert code.startswith("# The PyTorch code for this chain.")
    assert "Copy: new storage S1 (48 bytes allocated)" in history


def test_chain_edits_update_steps_and_url() -> None:
    at = open_page("views/strides.py")
    at.text_input(key="strides_shape").set_value("4, 6")
    at.text_area(key="strides_ops").set_value("[1:, ::2]\n[..., 0]")
    at.run()
    assert not at.exception
    text = rendered_text(at)
    assert "| size | `(3,)` |" in text and "| storage_offset | `6` |" in text
    assert at.query_params["s_shape"] == "4, 6"  # as typed
    assert at.query_params["s_ops"] == ["[1:, ::2]", "[..., 0]"]
    assert "lang" not in at.query_params


def test_shared_link_restores_the_state() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params["s_shape"] = "3,1"
    at.query_params["s_dtype"] = "float16"
    at.query_params["s_ops"] = [".expand(3, 4)", ".t()"]
    at.run()
    at.switch_page("views/strides.py").run()
    assert not at.exception
    assert at.session_state["strides_shape"] == "3,1"
    assert at.session_state["strides_dtype"] == "float16"
    assert at.session_state["strides_ops"] == ".expand(3, 4)\n.t()"
    text = rendered_text(at)
    assert "| stride (elements) | `(0, 1)` |" in text and "| stride (bytes) | `(0, 2)` |" in text


def test_failing_op_is_explained_without_a_traceback() -> None:
    at = open_page("views/strides.py", strides_shape="3, 4", strides_ops=".t()\n.view(-1)")
    assert not at.exception
    message = at.error[0].value
    assert (
        "`.view(-1)` cannot be a view" in message
        and "Use reshape (which will copy here)" in message
    )
    assert "PyTorch said: view size is not compatible" in rendered_text(at)
    # the steps before the failing op are still shown
    assert "| stride (elements) | `(1, 4)` |" in rendered_text(at)


def test_unsafe_text_is_refused_politely() -> None:
    at = open_page("views/strides.py", strides_ops="__import__('os').system('true')")
    assert not at.exception
    assert "is not one of the ops this room knows" in at.error[0].value
    at = open_page("views/strides.py", strides_shape="2, x")
    assert "is not a shape" in at.error[0].value


def test_selected_element_lights_its_storage_cell() -> None:
    # y1 = x.t() of a (3, 4) tensor: element [1, 2] reads cell 0 + 1·1 + 2·4 = 9
    at = open_page(
        "views/strides.py",
        strides_shape="3, 4",
        strides_ops=".t()",
        strides_selection=(1, "element", 5),
    )
    assert not at.exception
    assert "`y1[1, 2]` reads storage cell" in at.success[0].value
    assert "= 0 + 1·1 + 2·4 = **9**" in at.success[0].value
    storage, _ = chart_specs(at)
    lit_cells = [trace for trace in storage["data"] if trace["name"] == "lit"]
    assert len(lit_cells) == 1 and lit_cells[0]["customdata"] == {"dtype": "u2", "bdata": "CQA="}
    # the same cell seen from x: x[2, 1] reads cell 9 as well
    at.session_state["strides_step"] = 0
    at.run()
    assert "Cell **9** (value 9) is read by 1 element(s): x[2, 1]" in rendered_text(at)


def test_expand_lights_every_reader_of_a_cell() -> None:
    at = open_page(
        "views/strides.py",
        strides_shape="3",
        strides_ops=".unsqueeze(0)\n.expand(4, 3)",
        strides_selection=(2, "cell", 1),
    )
    text = rendered_text(at)
    assert "is read by 4 element(s): y2[0, 1], y2[1, 1], y2[2, 1], y2[3, 1]" in text


def test_large_tensor_is_summarised_with_exact_numbers() -> None:
    at = open_page("views/strides.py", strides_shape="100, 100", strides_ops=".t()")
    assert not at.exception
    assert "This step has 10,000 elements or cells" in rendered_text(at)
    assert "| stride (elements) | `(1, 100)` |" in rendered_text(at)
    assert chart_specs(at) == []


def test_write_through_panel() -> None:
    at = open_page(
        "views/strides.py",
        strides_shape="3",
        strides_ops=".unsqueeze(0)\n.expand(4, 3)",
        strides_panel="Write-through",
    )
    at.text_input(key="strides_write_text").set_value("[0, 1] = 9")
    at.button[[b.label for b in at.button].index("Apply write")].click().run()
    assert not at.exception
    text = rendered_text(at)
    assert "The write showed through in: x, y1." in text
    at.text_input(key="strides_write_text").set_value("add_(1)")
    at.button[[b.label for b in at.button].index("Apply write")].click().run()
    assert "More than one element of this tensor reads the same storage cell" in at.error[0].value
    assert "refers to a single memory location" in rendered_text(at)


def _reveal(at: AppTest, key: str) -> None:
    next(b for b in at.button if b.proto.form_id == f"{key}_form").click().run()


def test_quiz_grades_with_live_torch() -> None:
    """Each kind of question, predicted right and wrong: the verdict is torch's answer, as
    PyTorch computes it for the question's chain, with what PyTorch reports below."""
    for seed in (1, 2, 5, 9):  # new_stride, view_or_copy, view_works, which_cell
        question = make_question(seed)
        right = grade(question, "").expected
        key = f"strides_quiz_{seed}_float32"
        for answer in (right, "7, 7, 7"):
            at = open_page("views/strides.py", strides_panel="Predict, then reveal",
                           strides_seed=seed)  # fmt: skip
            assert not at.exception
            words = ("view", "copy", "same", "error", "yes", "no")
            choices = {translate(f"strides.quiz.choices.{w}"): w for w in words}
            if question.kind in ("view_or_copy", "view_works"):
                radio = at.radio(key=f"{key}_given")
                shown = list(radio.options)  # as the page shows them
                words = [choices[text] for text in shown]
                assert right in words  # torch's answer is always offered
                picked = words.index(right) if answer == right else 1 - min(words.index(right), 1)
                radio.set_value(picked)
                expected = translate(f"strides.quiz.choices.{right}")
            else:
                at.text_input(key=f"{key}_given").input(answer)
                expected = right
            _reveal(at, key)
            assert not at.exception
            if answer == right:
                assert at.success[0].value == translate("kit.reveal.right", expected=expected)
            else:
                assert f"torch says **{expected}**" in at.error[0].value
            assert "PyTorch" in rendered_text(at)


def test_korean_page() -> None:
    at = open_page("views/strides.py", lang="ko")
    assert not at.exception and not at.error
    assert "저장소" in rendered_text(at)


def test_example_menu_and_add_op() -> None:
    at = open_page("views/strides.py")
    at.selectbox(key="strides_example").set_value("expand_stride_zero").run()
    assert at.session_state["strides_ops"] == ".unsqueeze(0)\n.expand(4, 3)"
    assert "| stride (elements) | `(0, 1)` |" in rendered_text(at)
    at.selectbox(key="strides_add_op").set_value(".contiguous()").run()  # picking appends
    assert at.session_state["strides_ops"].endswith(".expand(4, 3)\n.contiguous()")
    assert at.selectbox(key="strides_add_op").value is None  # ready for the next op
    assert "Copy: new storage S1 (48 bytes allocated)" in rendered_text(at)
    assert not at.exception


# ---------------------------------------------------------------------------- bounds


def test_over_long_text_is_refused_with_a_clear_error() -> None:
    # Scripts and links reach the page without the boxes' max_chars: the parsers refuse.
    at = open_page("views/strides.py", strides_shape="2, " * 1000)
    assert not at.exception
    assert "The shape is 3,000 characters long; type at most 80" in at.error[0].value
    at = open_page("views/strides.py", strides_ops=".t()\n" * 10_000)
    assert not at.exception
    assert "The op chain is 50,000 characters long" in at.error[0].value
    at = open_page("views/strides.py", lang="ko", strides_ops=".t()\n" * 10_000)
    assert "연산 체인이 50,000자입니다" in at.error[0].value


def test_text_boxes_carry_their_limits() -> None:
    at = open_page("views/strides.py", strides_panel="Write-through", strides_typing=True)
    assert at.text_input(key="strides_shape").proto.max_chars == MAX_SHAPE_TEXT
    assert at.text_area(key="strides_ops").proto.max_chars == MAX_CHAIN_TEXT
    assert at.text_input(key="strides_write_text").proto.max_chars == MAX_OP_TEXT
    assert at.text_input(key="strides_typed_element").proto.max_chars == MAX_INDEX_TEXT
    seed = next(s for s in range(1, 100) if make_question(s).kind in ("new_stride", "which_cell"))
    at = open_page("views/strides.py", strides_panel="Predict, then reveal", strides_seed=seed)
    key = f"strides_quiz_{seed}_float32"
    answer = at.text_input(key=f"{key}_given")
    assert answer.proto.max_chars == MAX_ANSWER_TEXT
    at.session_state[f"{key}_given"] = "1, " * 100  # past the box, by script
    at.run()
    _reveal(at, key)
    assert not at.exception  # the box cut it to its limit (grade() refuses longer ones)
    assert "torch says" in at.error[0].value


def test_typed_index_is_read_within_its_box() -> None:
    at = open_page("views/strides.py", strides_typing=True)
    at.text_input(key="strides_typed_element").set_value("1, " * 40).run()  # cut to 80
    assert not at.exception
    assert "is not an index of a tensor of size (2, 6)" in rendered_text(at)
    at.text_input(key="strides_typed_element").set_value("[1, 2]").run()
    assert "`y3[1, 2]` reads storage cell" in at.success[0].value
    at.text_input(key="strides_typed_element").set_value("(1, 0)").run()
    assert "`y3[1, 0]` reads storage cell" in at.success[0].value


def _shared(query: dict[str, object]) -> AppTest:
    at = open_page("views/strides.py", query=query)
    assert not at.exception
    return at


def test_a_link_field_holding_more_than_the_room_writes_is_not_used() -> None:
    """Each field is read on its own: the one holding more than the room ever writes keeps
    its default and is named; the others are used."""
    default = EXAMPLES["transpose_contiguous"]
    at = _shared({"s_shape": "2," * 100, "s_ops": [".t()"]})
    assert translate("kit.link.broken", fields="s_shape") in [i.value for i in at.info]
    assert at.session_state["strides_shape"] == "3, 4"
    assert at.session_state["strides_ops"] == ".t()"
    at = _shared({"s_shape": "3,4", "s_ops": [".t()" * 100] * 24})
    assert translate("kit.link.broken", fields="s_ops") in [i.value for i in at.info]
    assert at.session_state["strides_shape"] == "3,4"
    assert at.session_state["strides_ops"] == "\n".join(default.ops)


def test_heavy_shared_links_stay_within_the_byte_budget() -> None:
    """A handful of distinct links to the heaviest chains the room draws (64×64 float64,
    24 ops): the room's cache evicts by bytes and never holds more than its budget, measured
    entry by entry."""
    ROOM_CACHE.clear()
    before = ROOM_CACHE.stats()
    for variant in range(8):
        ops = [".t()", ".contiguous()"] * 11 + [f"[{variant}:]", ".clone()"]
        at = _shared({"s_shape": "64,64", "s_dtype": "float64", "s_ops": ops})
        assert not at.error
        assert ROOM_CACHE.nbytes <= CACHE_BYTES
    stats = ROOM_CACHE.stats()
    assert stats.evictions > before.evictions  # these links did not all fit: the oldest went
    measured = {key: deep_size((key, ROOM_CACHE.get(key))) for key in ROOM_CACHE}
    assert sum(measured.values()) <= CACHE_BYTES
    for key, size in measured.items():  # no entry grew after it was measured
        assert size <= ROOM_CACHE.size_of(key), key[0]
    heaviest = max(size for key, size in measured.items() if key[0] == "steps")
    assert 4 * 2**20 < heaviest < 16 * 2**20  # per-element lists only as far as drawn


# ---------------------------------------------------------------------------- every dtype


def test_bool_start_tensor_renders_end_to_end() -> None:
    at = open_page(
        "views/strides.py", strides_shape="2, 3", strides_dtype="bool", strides_ops=".t()"
    )
    assert not at.exception and not at.error
    assert {"bool", "complex64", "complex128"} <= set(at.selectbox(key="strides_dtype").options)
    text = rendered_text(at)
    assert "| dtype · element size | `bool` · 1 B |" in text
    assert "bool holds only False and True, so cell 0 starts False" in text
    storage, tensor = chart_specs(at)
    texts = [text for trace in storage["data"] for text in trace.get("text") or []]
    assert texts[:2] == ["F", "T"] and set(texts) == {"F", "T"}
    assert {text for trace in tensor["data"] for text in trace.get("text") or []} == {"F", "T"}
    at.session_state["strides_selection"] = (1, "cell", 0)  # cell 0 holds False
    at.run()
    assert "Cell **0** (value F) is read by 1 element(s): y1[0, 0]" in rendered_text(at)


def test_complex_start_tensor_and_its_real_view() -> None:
    at = open_page(
        "views/strides.py",
        strides_shape="3",
        strides_dtype="complex64",
        strides_ops=".view(torch.float32)",
    )
    assert not at.exception and not at.error
    text = rendered_text(at)  # the last step: the same bytes read as real, imaginary, …
    assert "| dtype · element size | `float32` · 4 B |" in text
    assert "View: shares storage S0" in text and "| size | `(6,)` |" in text
    at.session_state["strides_step"] = 0
    at.run()
    assert "| dtype · element size | `complex64` · 8 B |" in rendered_text(at)
    storage, _ = chart_specs(at)
    assert [text for trace in storage["data"] for text in trace.get("text") or []] == [
        "0+0j", "1+0j", "2+0j"
    ]  # fmt: skip


def test_a_shared_link_keeps_a_bool_dtype() -> None:
    at = _shared({"s_shape": "2,2", "s_dtype": "bool", "s_ops": [".t()"]})
    assert at.session_state["strides_dtype"] == "bool"
    assert "`bool` · 1 B" in rendered_text(at)


def test_writes_into_bool_make_sense_or_are_refused_in_both_languages() -> None:
    for lang, tab, button, refused in (
        ("en", "Write-through", "Apply write", "an in-place write keeps the tensor's dtype, bool"),
        ("ko", "쓰기 전파", "쓰기 적용", "제자리 쓰기는 텐서의 dtype인 bool"),
    ):
        at = open_page(
            "views/strides.py",
            lang=lang,
            strides_shape="2, 3",
            strides_dtype="bool",
            strides_ops=".t()",
            strides_panel=tab,
        )
        at.text_input(key="strides_write_text").set_value("fill_(0)")
        at.button[[b.label for b in at.button].index(button)].click().run()
        assert not at.exception and not at.error
        assert "y1.fill_(0)" in at.code[-1].value
        at.text_input(key="strides_write_text").set_value("add_(1)")
        at.button[[b.label for b in at.button].index(button)].click().run()
        assert not at.exception
        assert refused in at.error[0].value and "`add_(1)`" in at.error[0].value


def test_an_empty_step_is_drawn_without_a_traceback() -> None:
    at = open_page("views/strides.py", strides_shape="3", strides_ops="[5:]")
    assert not at.exception and not at.error
    assert "| size | `(0,)` |" in rendered_text(at)


def test_quiz_follows_the_rooms_dtype() -> None:
    at = open_page(
        "views/strides.py",
        strides_panel="Predict, then reveal",
        strides_seed=3,
        strides_dtype="bool",
    )
    assert not at.exception
    assert at.code[-1].value.startswith("x = torch.arange(...).to(torch.bool).reshape(")
    at = open_page("views/strides.py", strides_panel="Predict, then reveal", strides_seed=3)
    assert at.code[-1].value.startswith("x = torch.arange(...).reshape(")
