"""Where the reader's eyes go: small browser-side helpers for pages read on phones and
projectors (lessons, class mode).

- :func:`scroll_to`: bring an element (a container's ``key``) to the top of the screen, once
  per ``once`` token in a browser tab: a question that opens while a student has scrolled
  down, a lesson step that opens with the page still scrolled where the last one ended.
- :func:`readable_styles`: the questions' options at phone size (16 px text, 44 px rows) and
  Korean lines broken between words, never inside one (part of every page's one style sheet,
  :func:`components.theme.contrast_styles`).
- :func:`close_sidebar_script`: a phone's sidebar, left open after picking a page from it,
  no longer covers the page (once per ``once`` token; run it with :func:`scripts`).
- :func:`set_cookie` / :func:`clear_cookie`: a value this browser keeps for the server to read
  on its next visit (``st.context.cookies``): the teacher's hold on a class across reloads.

Each helper is one ``st.html`` with a script (``unsafe_allow_javascript``: the scripts are this
module's own text; the only values put in them are JSON-encoded); :func:`scripts` puts several
in one element (each element is a message and server work in every run of every phone).
Streamlit runs a script when its element is new or changed, and again when a page switch
mounts it afresh, so each script remembers its ``once`` token in ``window`` and does nothing
the second time: a poll or a rerun that draws the same element never scrolls a reader away
from where they are.
The scripts' elements are hidden (``display: none``): they take no room in the page.
"""

from __future__ import annotations

import json

import streamlit as st

# The element container of a script this module draws: hidden, so it adds no gap to the page.
_HIDE_SELF = (
    "<style>[data-testid='stElementContainer']:has(.atlas-focus-script)"
    "{display:none}</style><span class='atlas-focus-script'></span>"
)
PHONE_MAX_PX = 640  # narrower than this: a phone (Streamlit's own breakpoint is similar)
# The app's own heading bar sits over the top of the scrolled page: leave room for it.
SCROLL_MARGIN = "4.5rem"


def scripts(*bodies: str) -> None:
    """Run the scripts ``bodies`` (this module's ``*_script`` texts) from one hidden element."""
    joined = "".join(f"<script>{body}</script>" for body in bodies)
    st.html(f"{_HIDE_SELF}{joined}", unsafe_allow_javascript=True)


def _once(kind: str, token: str) -> str:
    """A guard: the script's rest runs once per ``kind`` of script and ``token`` in this
    browser tab (each kind keeps its own tokens: a scroll never uses up a sidebar's turn)."""
    return (
        "const done = (window.__atlasOnce = window.__atlasOnce || {});"
        f"const token = {json.dumps(f'{kind}:{token}')};"
        "if (done[token]) return; done[token] = true;"
    )


def scroll_to(key: str, once: str) -> None:
    """Scroll the container drawn with ``key`` (``st.container(key=...)``) to the top of the
    screen, once per ``once`` in this tab. It waits (up to 5 s) for the container to be drawn,
    then for two frames of layout, so a page still building below it does not move it."""
    scripts(scroll_to_script(key, once))


def scroll_to_script(key: str, once: str) -> str:
    """The script of :func:`scroll_to`, for :func:`scripts`."""
    selector = json.dumps(f".st-key-{key}")
    return (
        "(() => {" + _once("scroll", once) + "let tries = 0;"
        "const go = () => {"
        f"  const el = document.querySelector({selector});"
        "  if (!el) { if (++tries < 50) setTimeout(go, 100); return; }"
        f"  el.style.scrollMarginTop = {json.dumps(SCROLL_MARGIN)};"
        "  requestAnimationFrame(() => requestAnimationFrame("
        "    () => el.scrollIntoView({block: 'start', behavior: 'instant'})));"
        "};"
        "go();"
        "})();"
    )


def close_sidebar_script(once: str) -> str:
    """For :func:`scripts`: on a phone, close the sidebar if it is open (once per ``once``):
    picking a page from it leaves it over the page otherwise."""
    return (
        "(() => {"
        f"if (window.innerWidth >= {PHONE_MAX_PX}) return;"
        + _once("sidebar", once)
        + "const bar = "
        "document.querySelector(\"[data-testid='stSidebar']\");"
        "if (!bar || bar.getAttribute('data-collapsed') !== 'false') return;"
        "const close = bar.querySelector(\"[data-testid='stSidebarCollapseButton'] button\")"
        " || bar.querySelector(\"[data-testid='stSidebarHeader'] button\");"
        "if (close) close.click();"
        "})();"
    )


def set_cookie(name: str, value: str, max_age_s: int) -> None:
    """Keep ``name=value`` in this browser for ``max_age_s`` seconds, for this site only
    (``SameSite=Strict``, ``Secure`` over HTTPS): the server reads it from the next
    connection's request (``st.context.cookies``)."""
    scripts(
        "(() => {"
        f"const secure = location.protocol === 'https:' ? '; Secure' : '';"
        f"document.cookie = {json.dumps(name)} + '=' + encodeURIComponent({json.dumps(value)})"
        f" + '; path=/; max-age={int(max_age_s)}; SameSite=Strict' + secure;"
        "})();"
    )


def clear_cookie(name: str) -> None:
    """Forget cookie ``name`` in this browser."""
    scripts(
        "(() => {"
        f"document.cookie = {json.dumps(name)} + '=; path=/; max-age=0; SameSite=Strict';"
        "})();"
    )


# Options of a question (the kit's predict_reveal / predict_option, keyed ``<question>_given``:
# a lesson's banner, class mode's question, a room's quiz): at least 16 px text, code
# included, and 44 px rows, the size a thumb can hit and a phone's reader can read.
_READABLE = """
[class*='_given'] [role='radiogroup'] label {
  min-height: 44px; align-items: center; padding: 0.2rem 0;
}
[class*='_given'] [role='radiogroup'] label p,
[class*='_given'] [role='radiogroup'] label code { font-size: 1rem; line-height: 1.4; }
"""
# Korean is written with spaces between words: a line breaks there, never inside a word
# ("교사는", not "교/사는"); a word longer than its line may still break (break-word).
# Streamlit sets ``word-break: break-word`` on its own paragraphs and headings, so the rule
# names every element inside the page and the sidebar (inheriting from the page's box is not
# enough), and wins over Streamlit's class selectors whatever order the sheets load in.
_KOREAN = """
[data-testid='stMain'], [data-testid='stMain'] *,
[data-testid='stSidebar'], [data-testid='stSidebar'] * {
  word-break: keep-all !important; overflow-wrap: break-word !important;
}
"""


def readable_styles(lang: str) -> str:
    """Questions' options at phone size, and, in Korean, lines broken between words only: the
    rules, for the page's one style element."""
    return _READABLE + (_KOREAN if lang == "ko" else "")
