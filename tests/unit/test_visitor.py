"""components/visitor.py: a session's client is read from its connection once, with the
server's trusted proxies, and the upload hook finds a session's client without a script run."""

from __future__ import annotations

import pytest

from components import upkeep, visitor
from torchatlas.clients import TrustedProxies


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch):
    """Stand in for the current session's connection (its peer and X-Forwarded-For)."""
    held: dict[str, object] = {"peer": None}

    def peer() -> upkeep.Peer | None:
        return held["peer"]  # type: ignore[return-value]

    monkeypatch.setattr(upkeep, "script_run_peer", peer)
    return held


def test_without_a_connection_the_session_is_its_own_client(connection) -> None:
    assert visitor._read_client("abc") == "session:abc"


def test_a_forged_forwarded_for_is_ignored_without_a_trusted_proxy(connection, monkeypatch):
    monkeypatch.setattr(visitor, "_PROXIES", TrustedProxies())
    connection["peer"] = upkeep.Peer("127.0.0.1", ("6.6.6.6",))
    assert visitor._read_client("abc") == "ip:127.0.0.1"
    connection["peer"] = upkeep.Peer("::ffff:127.0.0.2", ("6.6.6.6",))
    assert visitor._read_client("abc") == "ip:127.0.0.2"


def test_behind_the_configured_proxy_the_header_names_the_client(connection, monkeypatch):
    monkeypatch.setattr(visitor, "_PROXIES", TrustedProxies.parse("127.0.0.1"))
    connection["peer"] = upkeep.Peer("127.0.0.1", ("198.51.100.7",))
    assert visitor._read_client("abc") == "ip:198.51.100.7"
    connection["peer"] = upkeep.Peer("127.0.0.9", ("198.51.100.7",))  # not our proxy
    assert visitor._read_client("abc") == "ip:127.0.0.9"


def test_the_upload_hook_finds_a_sessions_client_and_forgets_it(monkeypatch) -> None:
    monkeypatch.setattr(
        upkeep, "script_run_uploads", lambda: upkeep.ScriptRunUploads("st-1", None, None)
    )
    visitor._remember("ip:127.0.0.2")
    assert visitor.client_of_session("st-1") == "ip:127.0.0.2"
    visitor.forget_session("st-1")
    assert visitor.client_of_session("st-1") == "session:st-1"
    assert visitor.client_of_session("never-ran") == "session:never-ran"


def test_the_session_to_client_map_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(visitor, "_MAX_SESSIONS", 3)
    for number in range(10):
        monkeypatch.setattr(
            upkeep,
            "script_run_uploads",
            lambda number=number: upkeep.ScriptRunUploads(f"s{number}", None, None),
        )
        visitor._remember(f"ip:10.0.0.{number}")
    assert len(visitor._SESSION_CLIENTS) <= 3
    assert visitor.client_of_session("s9") == "ip:10.0.0.9"
    assert visitor.client_of_session("s0") == "session:s0"
    visitor._SESSION_CLIENTS.clear()
