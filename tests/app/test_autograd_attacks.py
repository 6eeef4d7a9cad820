"""Issue 21 through the autograd room's links, as a visitor would open them: each class of
attack that touches this room, in variants of our own, must leave the server's memory and
other sessions alone (``assert_contained``) and get an explained refusal in the room's words.

The program runs in a sandbox child; the in-server parser and the engine's own checks (which
also run inside the child) give the refusals. A link's numbers are read strictly."""

from __future__ import annotations

import pytest

from tests.app.hostile import open_hostile_link, open_page_once
from torchatlas.i18n import translate

PAGE = "views/autograd.py"


@pytest.fixture(scope="module", autouse=True)
def warm_page() -> None:
    open_page_once(PAGE)


def _program(text: str, **extra: str) -> dict[str, str]:
    return {"a_prog": text, **extra}


def _stopped(line: int, code: str, **params: object) -> str:
    return translate(f"autograd.errors.{code}", line=line, **params)


# ----------------------------------------------------------------- class 1: repr freeze


def test_a_list_of_shared_references_is_shown_bounded_and_the_graph_still_drawn() -> None:
    # 5**24 numbers unfolded: repr() of it would never finish
    program = (
        "box = [0.5, 1.5]\nfor i in range(8):\n    for j in range(3):\n"
        "        box = [box, box, box, box, box]\n"
        "w = rand(2, requires_grad=True)\nloss = (w * 3).sum()\n"
    )
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(translate("autograd.graph.header"))
    others = [c.value for c in visit.at.caption if "`box` =" in c.value]
    assert others and len(others[0]) < 300  # the other names' line, bounded


def test_a_list_of_shared_references_used_as_a_size_is_refused() -> None:
    program = (
        "box = [2, 3]\nfor i in range(9):\n    for j in range(2):\n"
        "        box = [box, box, box]\n"
        "w = rand(3, requires_grad=True)\nv = w.reshape(box)\n"
    )
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(translate("autograd.program.stopped", line=6))
    error = " ".join(e.value for e in visit.at.error)
    assert "Line 6:" in error and len(error) < 800


# ----------------------------------------------------------------- class 2: empty, then big


def test_a_reduction_over_an_empty_dimension_is_refused_before_it_allocates() -> None:
    program = "e = ones(0)\nf = e.reshape(0, 3000, 2500)\ng = f.sum((0,), keepdim=True)\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(_stopped(3, "too_big", numel="7,500,000", limit=4096))


def test_a_mean_over_an_empty_dimension_of_a_created_tensor_is_refused() -> None:
    program = "e = zeros(2048, 0, 2048, requires_grad=True)\ng = torch.mean(e, 1)\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(_stopped(2, "too_big", numel="4,194,304", limit=4096))


# ----------------------------------------------------------------- class 3: keywords


def test_a_tensor_passed_by_keyword_is_checked_like_any_other() -> None:
    program = "p = rand(2500, 1)\nq = rand(1, 2500)\nr = torch.pow(p, exponent=q)\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(_stopped(3, "too_big", numel="6,250,000", limit=4096))


# ----------------------------------------------------------------- class 3: comparisons


def test_a_comparison_in_an_if_is_checked_before_it_runs() -> None:
    program = "p = rand(1, 3500)\nq = rand(3500, 1)\nif p <= q:\n    s = 1\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(_stopped(3, "too_big", numel="12,250,000", limit=4096))


# ----------------------------------------------------------------- class 4: huge numbers


def test_a_huge_literal_is_refused_in_the_rooms_words() -> None:
    program = "w = rand(3, requires_grad=True)\nk = w * 73786976294838206464\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(_stopped(2, "number_too_big", what="73786976294838206464"))


def test_a_huge_computed_index_is_refused_in_the_rooms_words() -> None:
    program = "n = 3 ** 20\nm = n * n * n\nw = rand(4)\nv = w[m]\n"
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(translate("autograd.program.stopped", line=2))
    assert "64-bit" in " ".join(e.value for e in visit.at.error)


# ----------------------------------------------------------------- class 4: link numbers


@pytest.mark.parametrize(
    ("query", "broken"),
    [
        ({"a_ex": "mlp", "a_seed": "³", "a_step": "4"}, "a_seed"),
        ({"a_ex": "mlp", "a_seed": "7", "a_step": "⑤"}, "a_step"),
        ({"a_ex": "mlp", "a_seed": "١٢", "a_step": "2"}, "a_seed"),  # Arabic-Indic digits
        ({"a_ex": "mlp", "a_seed": "184467440737095516160000", "a_step": "1"}, "a_seed"),
        ({"a_ex": "mlp", "a_seed": "5", "a_step": "-3"}, "a_step"),
        ({"a_ex": "mlp", "a_seed": ["1", "2²"], "a_step": "1"}, "a_seed"),  # the last counts
    ],
)
def test_link_numbers_that_are_not_plain_digits_get_the_broken_link_notice(
    query: dict[str, str | list[str]], broken: str
) -> None:
    visit = open_hostile_link(PAGE, query)
    visit.assert_contained()
    notices = [i.value for i in visit.at.info]
    assert translate("kit.link.broken", fields=broken) in notices, notices
    visit.assert_refused_with(translate("autograd.graph.header"))  # the room still works


@pytest.mark.parametrize("root", ["②", "ｗ" * 50, "w.grad", ""])
def test_a_root_that_is_not_a_name_is_a_broken_link(root: str) -> None:
    visit = open_hostile_link(PAGE, {"a_ex": "mlp", "a_root": root})
    visit.assert_contained()
    visit.assert_refused_with(translate("kit.link.broken", fields="a_root"))


def test_a_root_the_program_does_not_have_is_told() -> None:
    visit = open_hostile_link(PAGE, {"a_ex": "mlp", "a_root": "nowhere", "a_step": "3"})
    visit.assert_contained()
    visit.assert_refused_with(translate("autograd.program.root_missing", root="nowhere",
                                        used="loss"))  # fmt: skip


# ----------------------------------------------------------------- class 5: tensor literal


def test_a_tensor_literal_of_shared_sublists_is_refused_quickly() -> None:
    program = (
        "a = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]\n"
        "b = [" + ", ".join(["a"] * 32) + "]\n"
        "c = [b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b]\n"
        "d = [" + ", ".join(["c"] * 800) + "]\n"
        "t = tensor(d, requires_grad=True)\n"
    )
    visit = open_hostile_link(PAGE, _program(program))
    visit.assert_contained()
    visit.assert_refused_with(translate("autograd.program.stopped", line=5))
