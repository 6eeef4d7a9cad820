"""The basics page under AppTest: every section in English and Korean, each section's live
answer against the engine (and so torch), a shared link read and written, the links into the
strides room with their state, and the predict-then-reveal score."""

from __future__ import annotations

import warnings
from html.parser import HTMLParser
from urllib.parse import parse_qs

import pytest
import torch
from streamlit.testing.v1 import AppTest
from torch.utils.flop_counter import FlopCounterMode

from components.basics.draw import derivation_text
from tests.app.apptest import open_page, rendered_text
from torchatlas.basics import derive
from torchatlas.basics.quiz import ERROR_CHOICE, SEED_COUNT, Section, answer, make_question
from torchatlas.i18n import translate

SECTIONS = [s.value for s in Section]


def _open_link(lang: str = "en", **query: str) -> AppTest:
    """A visitor arriving through a shared link (the query string set before the first run)."""
    return open_page("views/basics.py", lang, query=query)


def _said(at: AppTest) -> str:
    """The page's text and its success / error boxes."""
    boxes = [str(box.value) for kind in ("success", "error") for box in getattr(at, kind)]
    return "\n".join([rendered_text(at), *boxes])


def _codes(at: AppTest) -> list[str]:
    return [str(block.value) for block in at.code]


def _links(at: AppTest) -> list:
    return [element.proto for element in at.get("page_link")]


def _strides_state(query_string: str) -> dict[str, object]:
    """What the strides room reads from a link's query (its declaration: defaults that the
    link leaves out included), for the fields a basics link sets."""
    from torchatlas.strides.link import LINK

    read = LINK.read(parse_qs(query_string, keep_blank_values=True))
    assert not read.broken, read.broken
    return {name: read.values[name] for name in ("s_shape", "s_dtype", "s_ops")}


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("section", SECTIONS)
def test_every_section_renders(section: str, lang: str) -> None:
    at = open_page("views/basics.py", lang, basics_section=section)
    assert not at.exception
    text = rendered_text(at)
    assert translate("app.rooms.basics.title", lang) in text
    header = {"broadcasting": "broadcast", "indexing": "index", "saving": "save"}.get(
        section, section
    )
    assert translate(f"basics.{header}.header", lang) in text
    assert translate("basics.quiz.header", lang) in text


def test_types_shows_the_wrapped_value_from_torch() -> None:
    at = open_page("views/basics.py")
    metrics = {m.label: m.value for m in at.metric}
    expected = (torch.tensor([100], dtype=torch.int8) + 1000).item()
    assert metrics[translate("basics.types.metric_result_type")] == "int8"
    assert metrics[translate("basics.types.metric_value")] == str(expected)
    assert metrics[translate("basics.types.metric_exact")] == "1100"
    assert translate("basics.types.outcome.wrapped", dtype="int8") in rendered_text(at)
    # float16 + 1.0 at 2048: rounded
    at.selectbox(key="basics_left").set_value("float16").run()
    assert at.text_input(key="basics_left_value").value == "2048.0"
    at.selectbox(key="basics_right").set_value("float").run()
    at.text_input(key="basics_right_value").set_value("1.0").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("basics.types.metric_result_type")] == "float16"
    assert metrics[translate("basics.types.metric_value")] == "2048.0"
    assert metrics[translate("basics.types.metric_exact")] == "2049"  # exact: every digit
    # a value the dtype cannot hold: torch's refusal, explained, no traceback
    at.selectbox(key="basics_left").set_value("int8").run()
    at.text_input(key="basics_left_value").set_value("1000").run()
    assert not at.exception
    assert "int8" in at.warning[0].value and "overflow" in at.warning[0].value
    # the URL follows the inputs
    assert at.query_params["b_lv"] == "1000"


class _Table(HTMLParser):
    """The rows of the first HTML table on the page, as text cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _promotion_table(at: AppTest) -> dict[str, dict[str, str]]:
    body = next(h.proto.body for h in at.get("html") if "<table" in h.proto.body)
    parser = _Table()
    parser.feed(body)
    header, *rows = parser.rows
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}


def test_types_table_and_kinds() -> None:
    at = open_page("views/basics.py")
    table = _promotion_table(at)
    assert len(table) == 12 and all(len(row) == 12 for row in table.values())
    assert table["int8"]["int64"] == "int64"
    assert table["bfloat16"]["float16"] == "float32"
    at.segmented_control(key="basics_table_kind").set_value("scalar").run()
    table = _promotion_table(at)
    assert list(table["int8"]) == ["bool", "int", "float", "complex"]
    expected = torch.result_type(torch.zeros(1, dtype=torch.int8), 5)
    assert table["int8"]["int"] == str(expected).removeprefix("torch.")
    assert table["bfloat16"]["complex"].endswith("!")  # torch names it; the real op raised
    at.selectbox(key="basics_right_kind").set_value("zero_dim").run()
    assert at.selectbox(key="basics_right").value == "int64"


def test_broadcast_error_fix_and_link_into_strides() -> None:
    at = open_page("views/basics.py", basics_section="broadcasting")
    at.button(key="basics_broadcast_example_weights_wrong").click().run()
    assert not at.exception
    with pytest.raises(RuntimeError) as real:
        torch.zeros(2, 3, 5, 5) + torch.zeros(3)
    assert str(real.value) in _codes(at)
    assert "`a[:, None, None]`" not in rendered_text(at)  # the fix names operand b
    assert "b[:, None, None]" in at.info[0].value
    assert _links(at) == []
    at.button(key="basics_apply_fix").click().run()
    assert at.text_input(key="basics_shapes").value == "(2, 3, 5, 5) (3, 1, 1)"
    assert translate("basics.broadcast.result", shape="(2, 3, 5, 5)") in _said(at)
    links = _links(at)
    assert len(links) == 1 and links[0].page == "strides"
    opened = _strides_state(links[0].query_string)
    assert opened == {"s_shape": "3,1,1", "s_dtype": "float32", "s_ops": (".expand(2, 3, 5, 5)",)}


def test_einsum_examples_and_torch_refusal() -> None:
    at = open_page("views/basics.py", basics_section="einsum")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("basics.einsum.metric_output")] == "(2, 5, 5)"
    assert metrics[translate("basics.einsum.metric_summed")] == "c"
    assert any("total += x0[e0, c, h, w] * x1[c]" in code for code in _codes(at))
    assert translate("basics.einsum.checked") in [s.value for s in at.success]
    at.selectbox(key="basics_einsum_example").set_value("matmul").run()
    assert at.text_input(key="basics_equation").value == "ij,jk->ik"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[translate("basics.einsum.metric_output")] == "(2, 4)"
    at.text_input(key="basics_equation").set_value("ij,jk->iz").run()
    with pytest.raises(RuntimeError) as real:
        torch.einsum("ij,jk->iz", torch.zeros(2, 3), torch.zeros(3, 4))
    assert str(real.value) in _codes(at)
    assert not at.exception


@pytest.mark.parametrize(
    ("expression", "view"),
    [("x[1:, ::2]", True), ("x[:, [0, 2]]", False), ("x[x > 5]", False), ("x[None, 1:]", True)],
)
def test_indexing_view_or_copy_from_storage(expression: str, view: bool) -> None:
    at = open_page("views/basics.py", basics_section="indexing", basics_index=expression)
    assert not at.exception
    x = torch.arange(12).reshape(3, 4)
    keys = {
        "x[1:, ::2]": (slice(1, None), slice(None, None, 2)),
        "x[:, [0, 2]]": (slice(None), [0, 2]),
        "x[x > 5]": x > 5,
        "x[None, 1:]": (None, slice(1, None)),
    }
    key = keys[expression]
    y = x[key]
    shares = y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert shares is view
    verdict = "basics.index.verdict_view" if view else "basics.index.verdict_copy"
    assert translate(verdict, expression=expression) in _said(at)
    facts = translate("basics.index.fact_shape") + f"**: `{tuple(y.shape)}`"
    assert facts in rendered_text(at)
    links = _links(at)
    if expression == "x[x > 5]":
        assert links == []  # the strides room reads no masks
    else:
        query = parse_qs(links[0].query_string)
        assert query["s_shape"] == ["3,4"] and query["s_ops"] == [expression[1:]]


def test_indexing_refuses_code_without_running_it() -> None:
    at = open_page("views/basics.py", basics_section="indexing", basics_index="x[__import__('os')]")
    assert not at.exception
    assert at.warning and "__import__" in at.warning[0].value


def test_saving_measures_the_whole_storage() -> None:
    at = open_page("views/basics.py", basics_section="saving")
    assert not at.exception
    text = rendered_text(at)
    assert "15.6 KiB" in at.warning[0].value  # 1000 × 4 float32: x's whole storage
    assert translate("basics.save.together_yes") in text
    opened = _strides_state(_links(at)[0].query_string)
    assert opened == {"s_shape": "1000,4", "s_dtype": "float32", "s_ops": ("[:2]",)}
    at.selectbox(key="basics_save_dtype").set_value("bfloat16").run()
    assert "BFloat16" in at.warning[-1].value


def test_shared_link_restores_and_url_follows() -> None:
    at = _open_link(b_sec="indexing", b_ishape="2, 3, 4", b_ix="x[..., 1]")
    assert not at.exception
    assert at.text_input(key="basics_index_shape").value == "2, 3, 4"
    assert translate("basics.index.verdict_view", expression="x[..., 1]") in _said(at)
    at.text_input(key="basics_index").set_value("x[[0, 1]]").run()
    assert at.query_params["b_ix"] == "x[[0, 1]]"
    assert at.query_params["b_sec"] == "indexing"
    # back to a default: its key leaves the URL (only this room's keys are touched)
    at.text_input(key="basics_index_shape").set_value("3, 4").run()
    assert "b_ishape" not in at.query_params


def test_korean_link_and_refused_link_values() -> None:
    at = _open_link("ko", b_sec="saving", b_sdt="no_such_dtype", b_sv="x[" + "1" * 300 + "]")
    assert not at.exception
    assert translate("kit.link.broken", "ko", fields="b_sv, b_sdt") in rendered_text(at)
    assert at.selectbox(key="basics_save_dtype").value == "float32"
    assert translate("basics.save.header", "ko") in rendered_text(at)


def _reveal(at: AppTest, section: str, seed: int, choice: str) -> None:
    """Predict ``choice`` (one of the question's choices) and press the kit's Reveal."""
    question = make_question(section, seed)
    at.radio(key=f"basics_q_{section}_{seed}_given").set_value(question.choices.index(choice))
    reveal = [b for b in at.button if b.label == translate("kit.reveal.button")]
    assert len(reveal) == 1
    reveal[0].click().run()


@pytest.mark.parametrize("section", SECTIONS)
def test_quiz_is_graded_by_torch_and_scored(section: str) -> None:
    at = open_page("views/basics.py", basics_section=section)
    question = make_question(section, 1)
    right = answer(question)
    _reveal(at, section, 1, right)
    assert not at.exception
    assert at.success and "torch" in at.success[-1].value
    assert translate("basics.quiz.score", right=1, answered=1) in rendered_text(at)
    at.run()  # the verdict stays, and the question counts once
    assert at.success and translate("basics.quiz.score", right=1, answered=1) in rendered_text(at)
    at.button(key=f"basics_quiz_next_{section}").click().run()
    second = make_question(section, 2)
    wrong = next(choice for choice in second.choices if choice != answer(second))
    _reveal(at, section, 2, wrong)
    assert at.error
    assert translate("basics.quiz.score", right=1, answered=2) in rendered_text(at)


ODD_INPUTS = [
    ("types", "basics_left_value", "nan"),
    ("types", "basics_left_value", "1e400"),
    ("types", "basics_left_value", "1+2j"),
    ("types", "basics_right_value", "-1"),
    ("types", "basics_right_value", "__import__('os')"),
    ("broadcasting", "basics_shapes", "(((("),
    ("broadcasting", "basics_shapes", "(1000000, 1000000) (1000000, 1)"),
    ("broadcasting", "basics_shapes", "(0,) (3,)"),
    ("broadcasting", "basics_shapes", "() ()"),
    ("einsum", "basics_equation", "...->..."),
    ("einsum", "basics_equation", "ij,jk->ik;import os"),
    ("einsum", "basics_einsum_shapes", "(1000000, 1000000) (1000000, 1000000)"),
    ("einsum", "basics_einsum_shapes", "(0, 3) (3, 0)"),
    ("indexing", "basics_index", "x["),
    ("indexing", "basics_index", "x[0:0]"),
    ("indexing", "basics_index_shape", ""),
    ("indexing", "basics_index_shape", "0, 4"),
    ("saving", "basics_save_shape", "0, 4"),
    ("saving", "basics_save_view", "x[5000:]"),
    ("saving", "basics_save_view", "x[x > 1]"),
]


@pytest.mark.parametrize(("section", "key", "text"), ODD_INPUTS)
def test_odd_input_is_explained_never_a_traceback(section: str, key: str, text: str) -> None:
    at = open_page("views/basics.py", basics_section=section)
    at.text_input(key=key).set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]


# ------------------------------------------------------------------ issue 34: sentences of torch's
def test_types_caption_is_read_off_torchs_result() -> None:
    """float16 with a 0-dim complex128 is complex32: the caption says the category is the
    right operand's and the precision the left tensor's (not "its own dtype")."""
    at = open_page("views/basics.py")
    at.selectbox(key="basics_left").set_value("float16").run()
    at.selectbox(key="basics_right_kind").set_value("zero_dim").run()
    at.selectbox(key="basics_right").set_value("complex128").run()
    assert not at.exception
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.ones(1, dtype=torch.float16) + torch.tensor(1j, dtype=torch.complex128)
    assert got.dtype == torch.complex32
    captions = [str(c.value) for c in at.caption]
    expected = derivation_text(derive("float16", "zero_dim", "complex128", "complex32"), "en")
    assert expected in captions
    assert not any("its own dtype" in caption for caption in captions)


def test_a_quiz_question_torch_refuses_is_graded_without_raising() -> None:
    seed = next(s for s in range(SEED_COUNT) if answer(make_question("types", s)) == ERROR_CHOICE)
    at = open_page("views/basics.py", basics_quiz_seed_types=seed)
    assert (
        translate("basics.quiz.choices.error")
        in at.radio(key=f"basics_q_types_{seed}_given").options
    )
    _reveal(at, "types", seed, ERROR_CHOICE)
    assert not at.exception
    assert at.success and translate("basics.quiz.score", right=1, answered=1) in rendered_text(at)


def test_saving_sentence_for_a_slice_that_is_the_whole_dataset() -> None:
    at = open_page("views/basics.py", basics_section="saving")
    at.text_input(key="basics_save_shape").set_value("2, 3").run()
    assert not at.exception
    text = rendered_text(at)
    assert translate("basics.save.slice_whole", tail="-2:", shape="(2, 3)") in text
    assert translate("basics.save.rest_none") in text


def test_einsum_three_operands_work_is_compared_not_assumed() -> None:
    at = open_page("views/basics.py", basics_section="einsum")
    at.selectbox(key="basics_einsum_example").set_value("chain").run()
    assert not at.exception
    # the loops: 2·3·4·5 terms, 2 multiplies and one += each; torch: two matrix products
    a, b, c = torch.ones(2, 3), torch.ones(3, 4), torch.ones(4, 5)
    with FlopCounterMode(display=False) as counter:
        torch.einsum("ij,jk,kl->il", a, b, c)
    loops = 3 * 2 * 3 * 4 * 5
    counted = counter.get_total_flops()
    assert counted < loops
    said = translate("basics.einsum.compare_fewer", difference=f"{loops - counted:,}",
                     total=f"{loops:,}")  # fmt: skip
    assert said in rendered_text(at)
