"""The room kit's page parts, in a small script of their own (AppTest.from_function)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _link_page() -> None:
    import streamlit as st

    from components.kit.link_state import RoomLink
    from torchatlas.links import Choice, Int, LinkSpec, Texts

    link = RoomLink(
        LinkSpec(
            "demo",
            "demo_",
            (
                Int("d_n", 3, low=1, high=9),
                Choice("d_kind", "a", options=("a", "b")),
                Texts("d_ops", (".t()",), max_items=3, max_len=10),
            ),
        )
    )
    link.start()
    link.notice()
    st.number_input("n", 1, 9, key=link.key("d_n"))
    st.selectbox("kind", ("a", "b"), key=link.key("d_kind"))
    link.write()


def _query(at: AppTest) -> dict[str, list[str]]:
    return {
        name: [values] if isinstance(values, str) else list(values)
        for name, values in at.query_params.items()
    }


def test_a_link_fills_the_widgets_and_the_widgets_write_the_link() -> None:
    at = AppTest.from_function(_link_page)
    at.query_params.update({"d_n": "7", "d_kind": "b", "lang": "ko"})
    at.run()
    assert at.number_input[0].value == 7 and at.selectbox[0].value == "b"
    assert not at.info
    at.number_input[0].set_value(3).run()  # back to the default: left out of the link
    query = _query(at)
    assert "d_n" not in query and query["d_kind"] == ["b"] and query["lang"] == ["ko"]


def test_a_broken_field_keeps_its_default_and_is_named_once() -> None:
    at = AppTest.from_function(_link_page)
    at.query_params.update({"d_n": "²", "d_kind": "b"})
    at.run()
    assert at.number_input[0].value == 3 and at.selectbox[0].value == "b"
    assert "d_n" in at.info[0].value
    at.run()
    assert not at.info  # told once


def _quiz_page() -> None:
    import streamlit as st

    from components.kit.predict_reveal import predict_reveal
    from torchatlas.quiz import grade_text

    st.session_state["answered"] = predict_reveal(
        "demo_q", prompt="What is 2 + 2?", grade=lambda given: grade_text(given, "4")
    )


def test_predict_then_reveal_keeps_the_first_prediction() -> None:
    at = AppTest.from_function(_quiz_page).run()
    assert not at.success and not at.error
    at.text_input[0].input(" 5 ")
    at.button[0].click().run()
    assert "torch says **4**" in at.error[0].value
    grade = at.session_state["answered"]
    assert (grade.correct, grade.given, grade.expected) == (False, "5", "4")
    at.run()  # a rerun shows the verdict again; no box to change the prediction
    assert not at.text_input and "torch says **4**" in at.error[0].value


def _option_page() -> None:
    """An option question kept by the page itself (``kept``): solo, or ``sealed`` (sent to a
    store that may refuse, revealed when ``revealed`` is set)."""
    import streamlit as st

    from components.kit.predict_reveal import Sealed, predict_option

    def keep(choice: int) -> bool:
        if st.session_state.get("refuse"):
            st.warning("refused")
            return False
        st.session_state["kept"] = choice
        return True

    sealed = None
    if st.session_state.get("sealed"):
        sealed = Sealed(
            revealed=bool(st.session_state.get("revealed")),
            send="Send",
            change="Change",
            sent=lambda kept: f"Sent {kept}",
            hint="Pick and send",
        )
    if predict_option(
        "demo_o",
        options=("a", "b", "c"),
        kept=st.session_state.get("kept"),
        keep=keep,
        verdict=lambda kept: st.info(f"Verdict on {kept}"),
        sealed=sealed,
    ):
        st.session_state["redraws"] = st.session_state.get("redraws", 0) + 1
        st.rerun()


def test_an_option_question_keeps_its_first_pick_and_reveals_it() -> None:
    at = AppTest.from_function(_option_page).run()
    assert at.button(key="demo_o_reveal").disabled, "nothing to reveal before a pick"
    assert not at.info
    at.radio(key="demo_o_given").set_value(1).run()
    at.button(key="demo_o_reveal").click().run()
    assert at.session_state["kept"] == 1 and at.session_state["redraws"] == 1
    assert [i.value for i in at.info] == ["Verdict on 1"]
    radio = at.radio(key="demo_o_given")
    assert radio.value == 1 and radio.disabled, "the first pick stays, fixed"
    assert not [b for b in at.button if b.key == "demo_o_reveal"]


def test_a_sealed_option_question_sends_changes_and_waits_for_the_reveal() -> None:
    at = AppTest.from_function(_option_page)
    at.session_state["sealed"] = True
    at.run()
    assert at.button(key="demo_o_send").label == "Send" and at.caption[0].value == "Pick and send"
    at.radio(key="demo_o_given").set_value(0).run()
    at.button(key="demo_o_send").click().run()
    assert at.session_state["kept"] == 0 and not at.info, "no verdict before the reveal"
    send = at.button(key="demo_o_send")
    assert send.label == "Change" and send.disabled, "the pick sent is not sent again"
    assert at.caption[0].value == "Sent 0"
    at.session_state["refuse"] = True  # the store refuses: the pick it holds stays
    at.radio(key="demo_o_given").set_value(2).run()
    at.button(key="demo_o_send").click().run()
    assert at.session_state["kept"] == 0 and at.warning[0].value == "refused"
    at.session_state["refuse"] = False
    at.button(key="demo_o_send").click().run()
    assert at.session_state["kept"] == 2 and at.session_state["redraws"] == 2
    at.session_state["revealed"] = True
    at.run()
    assert not at.radio and not at.button, "after the reveal: the verdict only"
    assert [i.value for i in at.info] == ["Verdict on 2"]
