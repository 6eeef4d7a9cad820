"""One room registry (issue 37): a room is declared once, in ``torchatlas/rooms.py``, and
everything that lists rooms is derived from it or checked against it here: the import
contracts' room lists in ``.importlinter``, the sandbox's job table, the bench's class. A
throw-away room declared from a fixture (``tests/fixtures/throwaway_room``) through the
registry alone shows up in navigation, the home page, the links, the contracts check and the
bench's room list."""

from __future__ import annotations

import configparser
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import classroom_rooms
from tests.app.apptest import open_page
from torchatlas import i18n, rooms, sandboxed
from torchatlas.rooms import Room, link_into, room_links

ROOT = Path(__file__).resolve().parents[2]
LINTER = ROOT / ".importlinter"


@dataclass(frozen=True)
class RoomList:
    """One module list of one contract, and the modules each room must have in it.

    ``exact``: the list is the rooms' modules and nothing else (an independence contract);
    otherwise it may hold more (what is no room, such as ``torchatlas.presets``)."""

    contract: str
    option: str
    exact: bool

    def expected(self, declared: tuple[Room, ...]) -> set[str]:
        by_contract = {
            "sandbox-knows-no-room": lambda r: {r.engine},
            "rooms-engines-independent": lambda r: {r.engine},
            "rooms-pages-independent": lambda r: {r.pages},
            "rooms-know-no-tour": lambda r: {r.engine, r.pages},
            "draw-is-pure": lambda r: {f"{r.pages}.draw"},
        }
        return set().union(*(by_contract[self.contract](room) for room in declared))


ROOM_LISTS = (
    RoomList("sandbox-knows-no-room", "forbidden_modules", exact=False),
    RoomList("rooms-engines-independent", "modules", exact=True),
    RoomList("rooms-pages-independent", "modules", exact=True),
    RoomList("rooms-know-no-tour", "source_modules", exact=True),
    RoomList("draw-is-pure", "source_modules", exact=False),
)


def read_contracts(text: str) -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read_string(text)
    return config


def contract_drift(config: configparser.ConfigParser, declared: tuple[Room, ...]) -> list[str]:
    """Every room module a contract's list misses (and, for an exact list, every module it
    holds that is no room's), as one line each; empty when the contracts match the rooms."""
    drift = []
    for room_list in ROOM_LISTS:
        section = f"importlinter:contract:{room_list.contract}"
        listed = set(config[section][room_list.option].split())
        expected = room_list.expected(declared)
        for module in sorted(expected - listed):
            drift.append(f"{room_list.contract}.{room_list.option} misses {module}")
        if room_list.exact:
            for module in sorted(listed - expected):
                drift.append(f"{room_list.contract}.{room_list.option} lists {module}: no room")
    return drift


def test_every_contract_lists_exactly_the_registrys_rooms() -> None:
    config = read_contracts(LINTER.read_text(encoding="utf-8"))
    assert contract_drift(config, rooms.rooms()) == []


def test_a_room_left_out_of_a_contract_is_found() -> None:
    """The sandbox contract once left out two rooms with sandbox jobs: the check names them."""
    text = LINTER.read_text(encoding="utf-8")
    drifted = text.replace("    torchatlas.autograd\n    torchatlas.basics\n", "", 1)
    assert drifted != text
    assert contract_drift(read_contracts(drifted), rooms.rooms()) == [
        "sandbox-knows-no-room.forbidden_modules misses torchatlas.autograd",
        "sandbox-knows-no-room.forbidden_modules misses torchatlas.basics",
    ]


def test_the_sandbox_job_table_is_the_registrys_rooms_with_jobs() -> None:
    with_jobs = [room.engine for room in rooms.rooms() if room.jobs]
    assert [module.rsplit(".", 1)[0] for module in sandboxed.job_modules()] == [
        *with_jobs,
        "torchatlas.lessons",  # not a room: the lessons' code questions
    ]
    for room in rooms.rooms():  # a room has a jobs module exactly when it declares jobs
        assert (ROOT / room.engine.replace(".", "/") / "jobs.py").is_file() == room.jobs


def test_every_room_has_its_engine_pages_view_and_texts() -> None:
    for room in rooms.rooms():
        for package in (room.engine, room.pages):
            assert (ROOT / package.replace(".", "/") / "__init__.py").is_file(), package
        assert room.built, room.view
        for lang in i18n.LANGUAGES:
            for text in ("title", "promise"):
                assert i18n.has_key(f"app.rooms.{room.key}.{text}", lang), (room.key, lang)


# ------------------------------------------------------------------- a throw-away room
THROWAWAY = Room(
    "throwaway",
    "app.section.tensors",
    ":material/delete:",
    engine="tests.fixtures.throwaway_room",
    pages="tests.fixtures.throwaway_room",
    view="tests/fixtures/throwaway_room/view.py",
)
TITLES = {"en": "Throw-away room", "ko": "버리는 방"}


@pytest.fixture
def throwaway_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Room]:
    """The registry with one more room, and its title and promise in both languages (a
    copy of the translations with the two texts added): all a new room declares outside
    its own packages."""
    translations = tmp_path / "translations"
    shutil.copytree(i18n.TRANSLATIONS_DIR, translations)
    for lang, title in TITLES.items():
        path = translations / lang / "app.json"
        texts = json.loads(path.read_text(encoding="utf-8"))
        texts["rooms"]["throwaway"] = {"title": title, "promise": f"{title}: a test's room."}
        path.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(i18n, "TRANSLATIONS_DIR", translations)
    monkeypatch.setattr(rooms, "ROOMS", (*rooms.ROOMS, THROWAWAY))
    i18n.table.cache_clear()
    yield THROWAWAY
    monkeypatch.undo()
    i18n.table.cache_clear()


def test_a_throwaway_room_is_in_links_contracts_and_the_bench(throwaway_room: Room) -> None:
    assert room_links()["throwaway"].room == "throwaway"
    assert link_into("throwaway", {"tw_n": 7}) == {"tw_n": "7"}
    assert throwaway_room.key in classroom_rooms.mixed_class_rooms()
    # The contracts check asks for the new room's modules in every room list.
    config = read_contracts(LINTER.read_text(encoding="utf-8"))
    assert contract_drift(config, rooms.rooms()) == [
        "sandbox-knows-no-room.forbidden_modules misses tests.fixtures.throwaway_room",
        "rooms-engines-independent.modules misses tests.fixtures.throwaway_room",
        "rooms-pages-independent.modules misses tests.fixtures.throwaway_room",
        "rooms-know-no-tour.source_modules misses tests.fixtures.throwaway_room",
        "draw-is-pure.source_modules misses tests.fixtures.throwaway_room.draw",
    ]
    assert sandboxed.job_modules()[-1] == "torchatlas.lessons.jobs"  # it declares no jobs


@pytest.mark.parametrize("lang", sorted(TITLES))
def test_a_throwaway_room_is_in_navigation_and_on_the_home_page(
    throwaway_room: Room, lang: str
) -> None:
    home = open_page("views/home.py", lang)
    assert not home.exception, [e.value for e in home.exception]
    assert TITLES[lang] in [header.value for header in home.header]
    # Navigation registered its view: opened by its path, with a link, it runs.
    at = open_page(throwaway_room.view, lang, query={"tw_n": "7"})
    assert not at.exception, [e.value for e in at.exception]
    assert [title.value for title in at.title] == [TITLES[lang]]
    assert "n = 7" in [text.value for text in at.markdown]
