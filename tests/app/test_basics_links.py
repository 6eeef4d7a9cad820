"""Random and hostile values for every query parameter of the basics room (issue 21, item 3):
whatever a link carries, the page answers without an uncaught exception and without the
app's unexpected-error card (tests/app/conftest.py fails a run that needed it)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app.apptest import open_page
from torchatlas.basics.link import LINK

URL_KEYS = list(LINK.names)
HOSTILE = st.sampled_from(
    [
        "", " ", "²", "①", "٣", "-0", "1e400", "nan", "-inf", str(2**64), str(-(2**70)),
        "9" * 45, "(((", "[[[]]]", "x[" * 30, "x[::0]", "x[None]*9", "(0, 999999, 999999)",
        "(999999,) * 6", "..." * 20, "ij->", "x[x]", "x[[" + "0," * 40 + "]]", "1+2j",
        "True", "__import__('os')", "\x00", "\u202e", "✓" * 300,
    ]
)  # fmt: skip
VALUES = st.one_of(
    HOSTILE, st.text(max_size=60), st.from_regex(r"\(?[0-9, ]{0,20}\)?", fullmatch=True)
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(query=st.dictionaries(st.sampled_from(URL_KEYS), VALUES, min_size=1, max_size=5))
def test_any_link_is_answered_without_an_exception(query: dict[str, str]) -> None:
    from components.contained import RECENT_UNEXPECTED

    at = open_page("views/basics.py", query=query)
    assert not at.exception, (query, [e.value for e in at.exception])
    assert list(RECENT_UNEXPECTED) == [], query
