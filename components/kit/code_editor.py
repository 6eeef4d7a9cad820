"""One editor for pasted model code, the same in every room that runs it (the shape explorer,
the module room): a preset picker that loads an example, the code box in a monospace font,
the room's own boxes beside it in one form (nothing runs while the visitor types), a run
button, and, while the job waits in the sandbox's fair line, its place in that line.

The room keeps what is its own: its session keys and link (``components/<room>/state.py``),
its presets' contents (the ``on_preset`` callback loads one), its texts, and what a run does.

>>> editor = CodeEditor(  # doctest: +SKIP
...     source_key=state.SOURCE, label=t("modules.inspect.code"), form_key="modules_form",
...     run_label=t("modules.inspect.run"), preset_key=state.PRESET,
...     preset_options=tuple(state.preset_labels()), on_preset=state.on_preset_change)
>>> submitted, _ = editor.form(fields=lambda: st.text_input("Model", key=state.MODEL))
>>> if submitted:  # doctest: +SKIP
...     editor.run(state.inspect, running=t("modules.inspect.running"),
...                queued=lambda place: t("modules.queued", place=place))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from torchatlas.sandbox.policy import MAX_SOURCE_CHARS

T = TypeVar("T")
# Code in a monospace font, so indentation lines up (Streamlit bundles Source Code Pro).
_MONOSPACE = (
    "<style>.st-key-{key} textarea {{font-family: 'Source Code Pro', ui-monospace, monospace; "
    "font-size: 0.85rem; line-height: 1.45}}</style>"
)


@dataclass(frozen=True)
class CodeEditor:
    """A room's code editor. ``source_key`` is the session key of the code (the room's state
    owns it and its link); ``preset_key`` that of the preset picker, whose ``on_preset``
    callback loads the chosen example into the room's keys. ``beside``: a column to the
    right of the code, for a drawing of it (the shape explorer's coloured listing)."""

    source_key: str
    label: str
    form_key: str
    run_label: str
    help: str | None = None
    height: int = 340
    max_chars: int = MAX_SOURCE_CHARS
    run_icon: str = ":material/play_arrow:"
    run_key: str | None = None
    preset_key: str | None = None
    preset_label: str = ""
    preset_options: tuple[str, ...] = ()
    on_preset: Callable[[], None] | None = None
    beside: bool = False

    def form(self, fields: Callable[[], None] | None = None) -> tuple[bool, DeltaGenerator | None]:
        """Draw the picker, the code box, the room's ``fields`` (more boxes, in the same form)
        and the run button; whether the button was pressed in this run, and the empty place
        beside the code (None without ``beside``)."""
        if self.preset_key is not None:
            st.selectbox(
                self.preset_label,
                options=list(self.preset_options),
                key=self.preset_key,
                on_change=self.on_preset,
            )
        st.markdown(_MONOSPACE.format(key=self.source_key), unsafe_allow_html=True)
        slot: DeltaGenerator | None = None
        with st.form(self.form_key, border=False):
            code_place: DeltaGenerator = st.container()
            if self.beside:
                code_place, listing = st.columns(2)
                slot = listing.empty()  # the room fills it after its run
            code_place.text_area(
                self.label,
                key=self.source_key,
                height=self.height,
                max_chars=self.max_chars,
                help=self.help,
            )
            if fields is not None:
                fields()
            submitted = st.form_submit_button(
                self.run_label, type="primary", icon=self.run_icon, key=self.run_key
            )
        return submitted, slot

    def run(
        self,
        compute: Callable[[Callable[[int], None]], T],
        *,
        queued: Callable[[int], str],
        running: str | None = None,
    ) -> T:
        """``compute(on_queued)``, under a spinner saying ``running`` if given; while its job
        waits for a sandbox worker, ``queued(place)`` (1 = next) shows where it is in line,
        cleared once it starts (place 0) and when it ends. ``on_queued`` is called in the script's
        own thread, so it may write to the page."""
        place = st.empty()

        def on_queued(position: int) -> None:
            if position > 0:
                place.info(queued(position), icon=":material/hourglass_top:")
            else:
                place.empty()

        try:
            if running is None:
                return compute(on_queued)
            with st.spinner(running):
                return compute(on_queued)
        finally:
            place.empty()
