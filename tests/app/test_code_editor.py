"""The kit's code editor (components/kit/code_editor.py), in a small page of its own."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _editor_page() -> None:
    import streamlit as st

    from components.kit.code_editor import CodeEditor

    examples = {"first": "x = 1\n", "second": "y = 2\n"}

    def load() -> None:
        st.session_state["demo_source"] = examples[st.session_state["demo_preset"]]

    st.session_state.setdefault("demo_source", examples["first"])
    editor = CodeEditor(
        source_key="demo_source",
        label="Code",
        form_key="demo_form",
        run_label="Run",
        run_key="demo_run",
        max_chars=40,
        preset_key="demo_preset",
        preset_label="Example",
        preset_options=tuple(examples),
        on_preset=load,
        beside=True,
    )
    submitted, beside = editor.form(fields=lambda: st.text_input("Model", key="demo_model"))
    if beside is not None:
        beside.caption(f"beside: {st.session_state['demo_source']!r}")
    if submitted:

        def compute(on_queued):
            for place in (3, 2, 1, 0):
                on_queued(place)
            return st.session_state["demo_source"].upper()

        heard = st.session_state.setdefault("demo_heard", [])

        def queued(place: int) -> str:
            heard.append(place)
            return f"place {place}"

        st.session_state["demo_ran"] = editor.run(compute, running="Working", queued=queued)
    st.write(f"ran: {st.session_state.get('demo_ran')}")


def test_the_form_runs_only_when_pressed_with_the_code_and_the_rooms_boxes() -> None:
    at = AppTest.from_function(_editor_page).run()
    assert not at.exception
    assert at.text_area(key="demo_source").value == "x = 1\n"
    assert at.text_input(key="demo_model") is not None
    assert "ran: None" in [element.value for element in at.markdown]
    at.text_input(key="demo_model").set_value("Net()").run()  # typing runs nothing
    assert "ran: None" in [element.value for element in at.markdown]
    at.text_area(key="demo_source").set_value("z = 3\n")
    at.button(key="demo_run").click().run()
    assert "ran: Z = 3" in [element.value for element in at.markdown]
    assert at.text_area(key="demo_source").proto.max_chars == 40
    assert any(caption.value == "beside: 'z = 3\\n'" for caption in at.caption)


def test_a_preset_loads_its_example_into_the_code_box() -> None:
    at = AppTest.from_function(_editor_page).run()
    at.selectbox(key="demo_preset").set_value("second").run()
    assert at.text_area(key="demo_source").value == "y = 2\n"
    at.button(key="demo_run").click().run()
    assert "ran: Y = 2" in [element.value for element in at.markdown]


def test_the_place_in_line_is_cleared_once_the_job_starts() -> None:
    """While the job waits the page says where it is; once it starts and when it ends, the
    place is empty: no stale "queued" note stays under the result."""
    at = AppTest.from_function(_editor_page).run()
    at.button(key="demo_run").click().run()
    assert not at.exception
    assert at.session_state["demo_heard"] == [3, 2, 1]  # the room's words for each place
    assert [info.value for info in at.info] == []


def test_the_code_box_is_monospace() -> None:
    at = AppTest.from_function(_editor_page).run()
    styles = [element.value for element in at.markdown if "<style>" in element.value]
    assert any(".st-key-demo_source textarea" in style and "monospace" in style for style in styles)
