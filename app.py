"""Torch Atlas entry point: page config, navigation, and the shared sidebar.

Navigation is ``st.navigation`` with every room's script registered explicitly. The room
scripts live in ``views/``, not ``pages/``: in Streamlit 1.67 a ``pages/`` folder beside the
entry script puts a freshly started server in legacy multipage mode until some session has run
``st.navigation``, so the very first visitor's deep link (``/strides?lang=ko``) was served
without this file (no language switch, Streamlit's file list as navigation). Checked by
tests/e2e/test_pages.py::test_first_visits_of_a_fresh_server_are_deep_links.

``streamlit run app.py`` finds the ``st.App`` below and serves this same file through it. Its
lifespan runs as the server starts, and the server takes no visitor until it has finished: the
rooms, the sandbox and the default classifier are warm for the first one (without it Streamlit
runs nothing of ours until someone opens a page, and that visitor waits for all of it). Each
visitor's script run executes this file as ``__main__``: the page part.
"""

from __future__ import annotations

import streamlit as st

from components.upkeep import cache_theme_messages, keep_tcp_peers
from components.warm import limit_malloc_arenas, server_lifespan, warm_server

if __name__ != "__main__":  # imported by the server at start-up
    limit_malloc_arenas()  # before the visitors' script threads exist
    keep_tcp_peers()  # every limit counts the real peer; only ATLAS_TRUSTED_PROXIES are believed
    cache_theme_messages()  # each run's theme message built once, not per run
    app = st.App(__file__, lifespan=server_lifespan)
else:  # a visitor's script run
    from components.author.panels import add_view_to_lesson
    from components.classmode.panels import bar as class_bar
    from components.contained import page_guard
    from components.lessons.panels import banner as lesson_banner
    from components.navigation import navigation_sections
    from components.sidebar import language_switch, torch_box
    from components.theme import contrast_styles

    st.set_page_config(
        page_title="Torch Atlas",
        page_icon=":material/explore:",
        layout="wide",
        menu_items={"About": "Torch Atlas — see what PyTorch does."},
    )

    lang = language_switch()
    contrast_styles(lang)  # WCAG AA colours of Streamlit's own elements, in either theme
    # Started at server start already; under a server started some other way (AppTest, an
    # ASGI host that skips lifespans) the first visitors load every room once, in one order.
    warm_server()

    current = st.navigation(navigation_sections())
    torch_box()
    with page_guard():  # a page that fails shows an explained card; the server stays up
        class_bar(current.url_path)  # a class's code, step and question, for its members
        lesson_banner(current.url_path)  # a lesson's step above its room, when the URL names one
        add_view_to_lesson(current.url_path)  # a teacher writing a lesson: this view as a step
        current.run()
