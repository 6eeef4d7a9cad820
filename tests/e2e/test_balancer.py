"""Class mode behind a real load balancer: README's nginx configuration
(``deploy/nginx/torchatlas.conf``) in front of two replicas on one PostgreSQL
(``tests/balancer.py``), a teacher and three phones in Chromium, all through nginx.

What it shows:
- affinity: every request of one browser reaches one replica (nginx's access log), by the
  cookie nginx sets (the Korean phone keeps the key nginx gave it) or one the test chose so
  that the phones are on both replicas;
- a replica dies mid-class (SIGKILL, with a question open and answered): its phones'
  pages reconnect by themselves, through nginx, to the other replica (the log shows their
  requests going there), with their own links, still in the class with their answers (the
  teacher's tally unchanged), and they answer the next question;
- the tallies are exact, on the teacher's screen and in the database.

Waits are Playwright ``expect()`` on what the page shows, or on nginx's log; no sleeps.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from components.lessons.draw import option_label
from tests.balancer import COOKIE, Balancer, balancer  # noqa: F401 (the fixture)
from tests.e2e.conftest import assert_no_error, wait_for_app
from tests.e2e.test_classmode import (
    FOLLOW_TIMEOUT_MS,
    LESSON,
    PHONE,
    PROJECTOR,
    Class,
    expect_room,
    expect_tally,
    press,
    start_class,
)
from torchatlas.classmode import ClassStore
from torchatlas.i18n import translate

BUDGET_S = 120.0  # this test's share of CI (fixture included), measured on a 2-core machine
RECONNECT_TIMEOUT_MS = 30_000  # the frontend's own reconnect backs off up to a few seconds


class Browsers(Class):
    """One browser context per person (its own cookies: its own affinity key), all through
    the balancer."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        super().__init__(browser)
        self.base_url = base_url

    def open_at(
        self, path: str, key: str | None, viewport: dict[str, int], lang: str = "en"
    ) -> Page:
        """A new person at ``path``; ``key``: the affinity cookie they already hold (None:
        they arrive without one and nginx gives them one)."""
        cookies = None if key is None else [{"name": COOKIE, "value": key, "url": self.base_url}]
        return self.open(f"{self.base_url}{path}", viewport, lang, cookies=cookies)


@pytest.fixture
def people(balancer: Balancer, browser: Browser) -> Iterator[Browsers]:  # noqa: F811
    group = Browsers(browser, balancer.url)
    yield group
    group.close()


def key_of(page: Page) -> str:
    """The affinity key this page's browser holds."""
    found = [c["value"] for c in page.context.cookies() if c["name"] == COOKIE]
    assert found, f"no {COOKIE} cookie: nginx did not set one"
    return found[0]


def join(page: Page, code: str, nickname: str, lang: str) -> str:
    """Join from the join link's form in ``lang``; the student's own link."""
    nick = page.get_by_label(translate("classmode.join.nickname", lang))
    nick.fill(nickname)
    nick.press("Enter")
    page.get_by_role("button", name=translate("classmode.join.button", lang), exact=True).click()
    bar = translate("classmode.student.bar", lang, code=code, name=nickname)
    expect(page.get_by_text(bar)).to_be_visible(timeout=60_000)
    wait_for_app(page)
    assert "student=" in page.url
    return page.url


def label(step: int, option: int, lang: str) -> str:
    question = LESSON.step(step).question
    return option_label(question.options[option], lang).replace("`", "")


def sent_text(step: int, option: int, lang: str) -> str:
    """The start of "Your answer: …" for this option (the rest says it can still change)."""
    return (
        translate("classmode.question.sent", lang, answer=label(step, option, lang))
        .split(".")[0]
        .replace("`", "")
    )


def answer(page: Page, step: int, option: int, lang: str) -> None:
    box = page.locator(".st-key-classmode_question")
    radio = box.get_by_test_id("stRadio")
    expect(radio).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    radio.get_by_text(label(step, option, lang), exact=True).click()
    wait_for_app(page)
    box.get_by_role("button").click()
    expect(box.get_by_text(sent_text(step, option, lang))).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)


def verdict(step: int, option: int, lang: str) -> str:
    question = LESSON.step(step).question
    right = label(step, question.answer, lang)
    if option == question.answer:
        return translate("classmode.question.right", lang, answer=right).replace("`", "")
    return translate(
        "classmode.question.wrong", lang, answer=right, picked=label(step, option, lang)
    ).replace("`", "")


def test_a_replica_dies_mid_class_behind_nginx(balancer: Balancer, people: Browsers) -> None:  # noqa: F811
    began = time.monotonic()
    # The teacher on replica 0; phones chosen for replica 0 and 1, and one that arrives
    # without a key (nginx gives it one, wherever that lands).
    teacher = people.open_at("/class", balancer.key_for(0, "teacher"), PROJECTOR)
    code, join_link, resume = start_class(teacher, LESSON.title["en"])
    assert join_link.startswith(f"{balancer.url}/class"), join_link  # nginx's address
    langs = ["en", "en", "ko"]
    keys: list[str | None] = [balancer.key_for(0, "phone"), balancer.key_for(1, "phone"), None]
    phones = [
        people.open_at(
            f"/class?class={code}" + ("&lang=ko" if lang == "ko" else ""), key, PHONE, lang
        )
        for key, lang in zip(keys, langs, strict=True)
    ]
    names = ["Ada", "Bo", "민지"]
    links = [join(p, code, n, lang) for p, n, lang in zip(phones, names, langs, strict=True)]
    keys = [key_of(p) for p in phones]
    assert keys[2] not in (None, keys[0], keys[1])  # nginx's own key, one per browser

    # Affinity: each browser's requests all reached one replica, and the phones are on both.
    on = []
    for key in [key_of(teacher), *keys]:
        served = {line.upstreams[-1] for line in balancer.served(key)}
        assert len(served) == 1, (key, served)
        on.append(balancer.index_of(served.pop()))
        assert on[-1] == balancer.replica_of(key)
    teacher_on, phones_on = on[0], on[1:]
    assert teacher_on == 0 and set(phones_on) == {0, 1}, on
    expect_tally(teacher, joined=3)

    # Step 1: everyone follows; the question opens; the phones answer (one wrong).
    press(teacher, "Start the lesson")
    for page in phones:
        expect_room(page, "basics")
    press(teacher, "Open the question")
    right, wrong = LESSON.step(1).question.answer, 0
    assert wrong != right
    picks = [right, wrong, right]
    for page, pick, lang in zip(phones, picks, langs, strict=True):
        answer(page, 1, pick, lang)
    expect_tally(teacher, joined=3, answered=3)

    # Replica 1 dies. Its phones' pages reconnect, through nginx, to replica 0.
    killed_at = time.time()
    balancer.kill(1)
    moved = [i for i, replica in enumerate(phones_on) if replica == 1]
    for i in moved:
        page = phones[i]
        # The reconnect's own requests (health check, then the websocket) reached replica 0.
        limit = time.monotonic() + RECONNECT_TIMEOUT_MS / 1000
        while not any(
            line.at >= killed_at and line.upstreams[-1] == balancer.address(0)
            and line.status < 400
            for line in balancer.served(keys[i])
        ):  # fmt: skip
            assert time.monotonic() < limit, f"phone {i} never reached replica 0"
            page.wait_for_timeout(100)
        expect(page.get_by_test_id("stApp")).to_have_attribute(
            "data-test-connection-state", "CONNECTED", timeout=RECONNECT_TIMEOUT_MS
        )
        wait_for_app(page)
        assert page.url == links[i] or "student=" in page.url, page.url
        # Still in the class, on the step, with the answer sent before the failure.
        bar = translate("classmode.student.bar", langs[i], code=code, name=names[i])
        expect(page.get_by_text(bar)).to_be_visible(timeout=RECONNECT_TIMEOUT_MS)
        box = page.locator(".st-key-classmode_question")
        expect(box.get_by_text(sent_text(1, picks[i], langs[i]))).to_be_visible(
            timeout=RECONNECT_TIMEOUT_MS
        )
    expect_tally(teacher, joined=3, answered=3)  # nothing lost, nobody counted twice

    press(teacher, "Reveal the answer")
    for page, pick, lang in zip(phones, picks, langs, strict=True):
        expect(page.get_by_text(verdict(1, pick, lang))).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)

    # Step 2 on the one replica left: everyone follows and answers; the tally is exact.
    press(teacher, "Next step")
    for page in phones:
        expect_room(page, "strides")
    press(teacher, "Open the question")
    second = LESSON.step(2).question
    picks2 = [second.answer, second.answer, (second.answer + 1) % len(second.options)]
    for page, pick, lang in zip(phones, picks2, langs, strict=True):
        answer(page, 2, pick, lang)
    expect_tally(teacher, joined=3, answered=3)
    press(teacher, "Reveal the answer")
    for page, pick, lang in zip(phones, picks2, langs, strict=True):
        expect(page.get_by_text(verdict(2, pick, lang))).to_be_visible(timeout=FOLLOW_TIMEOUT_MS)
    share = translate("classmode.tally.share_value", "en", percent=67)
    expect(
        teacher.get_by_test_id("stMetric").filter(has_text="Right").get_by_test_id("stMetricValue")
    ).to_have_text(share, timeout=FOLLOW_TIMEOUT_MS)
    assert_no_error(teacher)

    # The database's own count: every answer once, as picked.
    teacher_key = re.search(r"teacher=([\w-]+)", resume)
    assert teacher_key is not None
    store = ClassStore(balancer.db)
    summary = {q.step: q for q in store.summary(code, teacher_key.group(1))}
    for step, chosen in ((1, picks), (2, picks2)):
        options = len(LESSON.step(step).question.options)
        assert summary[step].counts == tuple(chosen.count(i) for i in range(options))
        assert summary[step].answered == 3 and summary[step].joined == 3
    elapsed = time.monotonic() - began
    print(f"\nbalancer test: phones on replicas {phones_on}, replica 1 killed; "
          f"{elapsed:.1f} s after the fixture")  # fmt: skip
