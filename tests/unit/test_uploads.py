"""torchatlas.uploads.UploadBudget (per session, per server, released when a file is removed or a
session ends or vanishes, thread-safe) and its Streamlit adapter on a real
MemoryUploadedFileManager: refused uploads are stored as empty stubs, removals release."""

from __future__ import annotations

import gc
import threading

import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from components import uploads as adapter
from components import visitor
from torchatlas.classify.images import screen
from torchatlas.uploads import MB, BudgetExceeded, Refusal, UploadBudget


def test_a_session_cannot_hold_more_than_its_budget() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=100 * MB)
    budget.charge("a", "one", 6 * MB)
    with pytest.raises(BudgetExceeded) as over:
        budget.charge("a", "two", 5 * MB)
    assert over.value.code == "session_budget"
    assert over.value.params == {"size_mb": "5.0", "used_mb": "6.0", "limit_mb": "10"}
    assert "Remove files" in over.value.message
    assert budget.used("a") == 6 * MB and budget.held("a", "two") == 0  # nothing changed
    budget.charge("b", "two", 5 * MB)  # another visitor is not affected
    budget.charge("a", "two", 4 * MB)  # what fits still fits
    assert budget.used("a") == 10 * MB and budget.used() == 15 * MB


def test_all_sessions_together_cannot_hold_more_than_the_servers_budget() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=25 * MB)
    budget.charge("a", "f", 10 * MB)
    budget.charge("b", "f", 10 * MB)
    with pytest.raises(BudgetExceeded) as over:
        budget.charge("c", "f", 6 * MB)
    assert over.value.code == "server_budget" and "Wait a minute" in over.value.message
    budget.charge("c", "f", 5 * MB)
    assert budget.used() == 25 * MB


def test_charging_a_file_again_replaces_it_and_shrinking_always_fits() -> None:
    """A page swaps a raw upload for the small copy it keeps: the same key, fewer bytes."""
    budget = UploadBudget(per_session=10 * MB, per_server=10 * MB)
    budget.charge("a", "photo", 9 * MB)
    budget.charge("a", "photo", 1 * MB)
    assert budget.used("a") == 1 * MB
    budget.charge("a", "other", 9 * MB)  # the freed room is there again
    with pytest.raises(BudgetExceeded):
        budget.charge("a", "photo", 2 * MB)  # growth is checked


def test_removing_a_file_or_ending_a_session_releases_it() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=15 * MB)
    budget.charge("a", "one", 4 * MB)
    budget.charge("a", "two", 4 * MB)
    budget.charge("b", "one", 5 * MB)
    assert budget.release("a", "one") == 4 * MB
    assert budget.release("a", "one") == 0  # twice is harmless
    assert budget.used("a") == 4 * MB and budget.used() == 9 * MB
    assert budget.release_session("a") == 4 * MB
    assert budget.used("a") == 0 and budget.used() == 5 * MB
    assert budget.sessions() == ["b"]
    budget.charge("b", "two", 5 * MB)
    budget.charge("c", "one", 5 * MB)  # the server's budget has the room again


def test_refusals_are_remembered_until_the_file_or_session_goes() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=10 * MB)
    budget.charge("a", "junk", 3 * MB)
    budget.refuse("a", "junk", Refusal("not_image", {}, "junk.jpg", 0, "image"))
    assert budget.used("a") == 0  # a refused file holds nothing
    assert budget.refusal("a", "junk").name == "junk.jpg"
    budget.release("a", "junk")
    assert budget.refusal("a", "junk") is None
    budget.refuse("a", "junk", Refusal("session_budget"))
    budget.release_session("a")
    assert budget.refusal("a", "junk") is None and budget.sessions() == []


def test_a_session_whose_owner_is_collected_is_released() -> None:
    """Streamlit forgets a disconnected session after a while without ending it: the budget
    follows the session object's life instead."""

    class SessionObject:
        pass

    budget = UploadBudget(per_session=10 * MB, per_server=10 * MB)
    owner = SessionObject()
    budget.watch("gone", owner)
    budget.watch("gone", owner)  # twice is harmless
    budget.charge("gone", "f", 8 * MB)
    budget.refuse("gone", "g", Refusal("not_image", source="image"))
    del owner
    gc.collect()
    assert budget.used() == 0 and budget.sessions() == []
    budget.charge("next", "f", 10 * MB)


def test_sweep_releases_the_sessions_the_caller_no_longer_knows() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=30 * MB)
    for session in ("a", "b", "c"):
        budget.charge(session, "f", 5 * MB)
    assert budget.sweep(lambda session: session != "b") == ["b"]
    assert budget.sessions() == ["a", "c"] and budget.used() == 10 * MB


def test_concurrent_charges_never_overshoot_the_servers_budget() -> None:
    budget = UploadBudget(per_session=MB, per_server=50 * MB)
    accepted: list[int] = []

    def visitor(number: int) -> None:
        for index in range(20):
            try:
                budget.charge(f"s{number}", str(index), MB // 4)
            except BudgetExceeded:
                continue
            accepted.append(1)

    threads = [threading.Thread(target=visitor, args=(n,)) for n in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.used() == len(accepted) * (MB // 4) <= 50 * MB
    assert all(budget.used(f"s{n}") <= MB for n in range(100))


def test_the_sessions_of_one_client_share_one_budget() -> None:
    """A session costs nothing: a second tab of the same machine adds no budget, a second
    machine is unaffected, and each session still has its own bound within its client's."""
    budget = UploadBudget(per_session=10 * MB, per_server=100 * MB, per_client=15 * MB)
    budget.charge("tab1", "one", 8 * MB, "ip:198.51.100.7")
    with pytest.raises(BudgetExceeded) as over:
        budget.charge("tab2", "one", 8 * MB, "ip:198.51.100.7")
    assert over.value.code == "client_budget"
    assert over.value.params == {"size_mb": "8.0", "used_mb": "8.0", "limit_mb": "15"}
    assert "your network" in over.value.message
    assert budget.used("tab2") == 0 and budget.used_by_client("ip:198.51.100.7") == 8 * MB
    budget.charge("tab2", "one", 7 * MB, "ip:198.51.100.7")  # what is left of the client's
    budget.charge("other", "one", 10 * MB, "ip:203.0.113.9")  # another machine: its own
    with pytest.raises(BudgetExceeded) as over:
        budget.charge("other", "two", 1 * MB, "ip:203.0.113.9")
    assert over.value.code == "session_budget"  # one tab cannot take its client's whole share
    assert budget.clients() == ["ip:198.51.100.7", "ip:203.0.113.9"]
    assert budget.client_of("tab2") == "ip:198.51.100.7"
    assert budget.used() == 25 * MB


def test_releases_return_every_budget_to_zero() -> None:
    budget = UploadBudget(per_session=10 * MB, per_server=100 * MB, per_client=20 * MB)
    budget.charge("a1", "f", 6 * MB, "ip:x")
    budget.charge("a1", "g", 3 * MB, "ip:x")
    budget.charge("a2", "f", 9 * MB, "ip:x")
    budget.charge("b1", "f", 5 * MB, "ip:y")
    budget.charge("a1", "f", 1 * MB)  # shrunk to what the page keeps; the client is known
    assert budget.used_by_client("ip:x") == 13 * MB
    assert budget.release("a1", "g") == 3 * MB
    assert budget.release_session("a2") == 9 * MB
    assert budget.used_by_client("ip:x") == 1 * MB
    budget.refuse("a1", "f", Refusal("not_image", source="image"))  # a refusal frees it too
    assert budget.release_session("b1") == 5 * MB
    assert budget.used() == 0 and budget.clients() == [] and budget.client_of("a1") is None
    assert budget.used_by_client("ip:x") == budget.used_by_client("ip:y") == 0
    budget.release_session("a1")
    assert budget.sessions() == []


def test_a_session_named_later_takes_what_it_holds_to_its_client() -> None:
    """Bytes charged before a session's client was known (its own) move with it when a later
    charge names the client, so releasing them frees the right client."""
    budget = UploadBudget(per_session=10 * MB, per_server=100 * MB, per_client=12 * MB)
    budget.charge("s", "f", 4 * MB)  # no client named: the session is its own
    assert budget.client_of("s") == "session:s"
    budget.charge("t", "f", 8 * MB, "ip:x")
    with pytest.raises(BudgetExceeded) as over:  # with s's 4 MB, ip:x would hold 13 MB
        budget.charge("s", "g", 1 * MB, "ip:x")
    assert over.value.code == "client_budget"
    assert budget.client_of("s") == "session:s"  # a refused charge changes nothing
    budget.release("t", "f")
    budget.charge("s", "g", 1 * MB, "ip:x")
    assert budget.clients() == ["ip:x"] and budget.used_by_client("ip:x") == 5 * MB
    budget.release_session("s")
    assert budget.used() == 0 and budget.clients() == []


def test_a_vanished_session_releases_its_clients_share() -> None:
    class SessionObject:
        pass

    budget = UploadBudget(per_session=10 * MB, per_server=100 * MB, per_client=10 * MB)
    owner = SessionObject()
    budget.watch("gone", owner)
    budget.charge("gone", "f", 8 * MB, "ip:x")
    del owner
    gc.collect()
    assert budget.used_by_client("ip:x") == 0 and budget.clients() == []
    budget.charge("next", "f", 10 * MB, "ip:x")


def test_concurrent_sessions_of_few_clients_never_overshoot_a_clients_budget() -> None:
    budget = UploadBudget(per_session=MB, per_server=100 * MB, per_client=5 * MB)

    def tab(number: int) -> None:
        for index in range(12):
            try:
                budget.charge(f"s{number}", str(index), MB // 4, f"ip:{number % 4}")
            except BudgetExceeded:
                continue

    threads = [threading.Thread(target=tab, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(budget.used_by_client(f"ip:{n}") == 5 * MB for n in range(4))
    assert budget.used() == 20 * MB
    for n in range(40):
        budget.release_session(f"s{n}")
    assert budget.used() == 0 and budget.clients() == []


# --------------------------------------------------------------------------- the Streamlit adapter


def name_clients(monkeypatch: pytest.MonkeyPatch, clients: dict[str, str]) -> None:
    """What each session's script run records when it calls ``visitor()`` (session → client),
    undone after the test."""
    for session, client in clients.items():
        monkeypatch.setitem(visitor._SESSION_CLIENTS, session, client)


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> MemoryUploadedFileManager:
    """A fresh Streamlit upload manager with the budget installed, and a small fresh budget;
    sessions a, b and c are three machines (their scripts said so), the others unnamed."""
    monkeypatch.setattr(adapter, "BUDGET", UploadBudget(per_session=10 * MB, per_server=15 * MB))
    monkeypatch.setattr(adapter, "_screens", {})
    name_clients(monkeypatch, {"a": "ip:10.0.0.1", "b": "ip:10.0.0.2", "c": "ip:10.0.0.3"})
    mgr = MemoryUploadedFileManager("/upload")
    assert adapter.install(mgr) and adapter.install(mgr)  # idempotent
    return mgr


def upload(mgr: MemoryUploadedFileManager, session: str, file_id: str, data: bytes) -> None:
    """What Streamlit's upload handler does once a request's body has arrived."""
    mgr.add_file(session_id=session, file=UploadedFileRec(file_id, f"{file_id}.jpg", "x", data))


def stored(mgr: MemoryUploadedFileManager, session: str, file_id: str) -> bytes | None:
    files = mgr.get_files(session, [file_id])
    return files[0].data if files else None


def test_uploads_over_budget_are_stored_as_empty_stubs(manager: MemoryUploadedFileManager) -> None:
    upload(manager, "a", "one", b"\xff\xd8\xff" + bytes(6 * MB))
    upload(manager, "a", "two", b"\xff\xd8\xff" + bytes(6 * MB))
    upload(manager, "b", "one", b"\xff\xd8\xff" + bytes(6 * MB))
    upload(manager, "c", "one", b"\xff\xd8\xff" + bytes(6 * MB))  # the server is full
    assert len(stored(manager, "a", "one")) > 6 * MB
    assert stored(manager, "a", "two") == b""
    assert adapter.BUDGET.refusal("a", "two").code == "session_budget"
    assert stored(manager, "c", "one") == b""
    assert adapter.BUDGET.refusal("c", "one").code == "server_budget"
    assert manager.get_stats()  # Streamlit's own count agrees: only the kept bytes
    assert adapter.BUDGET.used() == 2 * (6 * MB + 3)


def test_a_sessions_screen_refuses_non_images_as_they_arrive(
    manager: MemoryUploadedFileManager,
) -> None:
    adapter.screen_uploads("a", screen, "image")
    upload(manager, "a", "junk", bytes(8 * MB))
    upload(manager, "a", "photo", b"\xff\xd8\xff" + bytes(100))
    assert stored(manager, "a", "junk") == b""
    refusal = adapter.BUDGET.refusal("a", "junk")
    assert (refusal.code, refusal.source, refusal.name) == ("not_image", "image", "junk.jpg")
    assert adapter.BUDGET.used("a") == 103  # the junk holds nothing
    upload(manager, "b", "junk", bytes(8 * MB))  # no screen for b: only the budget applies
    assert len(stored(manager, "b", "junk")) == 8 * MB


def test_removing_a_file_or_ending_the_session_releases_budget_and_bytes(
    manager: MemoryUploadedFileManager,
) -> None:
    upload(manager, "a", "one", bytes(6 * MB))
    upload(manager, "a", "two", bytes(3 * MB))
    manager.remove_file(session_id="a", file_id="one")  # the × next to the file
    assert stored(manager, "a", "one") is None and adapter.BUDGET.used("a") == 3 * MB
    upload(manager, "a", "three", bytes(6 * MB))  # fits again
    manager.remove_session_files("a")  # Streamlit's cleanup when a session ends
    assert adapter.BUDGET.used() == 0 and manager.file_storage.get("a") is None


def test_taking_a_file_in_drops_its_bytes_and_charges_what_the_page_keeps(
    manager: MemoryUploadedFileManager,
) -> None:
    from streamlit.proto.Common_pb2 import FileURLs
    from streamlit.runtime.uploaded_file_manager import UploadedFile

    upload(manager, "a", "photo", bytes(9 * MB))
    record = manager.get_files("a", ["photo"])[0]
    file = UploadedFile(record, FileURLs())
    del record
    entry = adapter.Entry("photo", "photo.jpg", 9 * MB, file, None)
    session = adapter.SessionUploads("a", manager)
    assert session.admit(entry) is None  # already charged on arrival: no double count
    assert session.take(entry, keep_bytes=MB) is None
    assert stored(manager, "a", "photo") is None and file.getvalue() == b""
    assert adapter.BUDGET.used("a") == MB
    session.forget(keep=[], known=["photo"])  # the visitor removed it from the widget
    assert adapter.BUDGET.used() == 0


def test_sessions_the_runtime_no_longer_knows_are_swept(
    manager: MemoryUploadedFileManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(manager, "gone", "f", bytes(5 * MB))
    upload(manager, "here", "f", bytes(5 * MB))
    monkeypatch.setattr(adapter, "_alive", lambda session: session == "here")
    upload(manager, "here", "g", bytes(MB))  # any upload sweeps first
    assert stored(manager, "gone", "f") is None and adapter.BUDGET.used("gone") == 0
    assert adapter.BUDGET.used() == 6 * MB


def test_two_sessions_of_one_client_share_its_budget_through_the_hook(
    manager: MemoryUploadedFileManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook runs outside any script run: it finds each session's client from what the
    session's script run recorded (``visitor.client_of_session``)."""
    monkeypatch.setattr(
        adapter, "BUDGET", UploadBudget(per_session=8 * MB, per_server=30 * MB, per_client=10 * MB)
    )
    adapter.install(manager)
    name_clients(monkeypatch, {"tab1": "ip:10.0.0.9", "tab2": "ip:10.0.0.9"})
    upload(manager, "tab1", "one", bytes(6 * MB))
    upload(manager, "tab2", "one", bytes(6 * MB))  # the same machine: over its client's 10 MB
    assert stored(manager, "tab2", "one") == b""
    assert adapter.BUDGET.refusal("tab2", "one").code == "client_budget"
    upload(manager, "b", "one", bytes(6 * MB))  # another machine is unaffected
    assert len(stored(manager, "b", "one")) == 6 * MB
    assert adapter.BUDGET.used_by_client("ip:10.0.0.9") == 6 * MB
    manager.remove_file(session_id="tab1", file_id="one")
    upload(manager, "tab2", "two", bytes(6 * MB))  # the client's room is back
    assert len(stored(manager, "tab2", "two")) == 6 * MB
    for session in ("tab1", "tab2", "b"):
        manager.remove_session_files(session)  # Streamlit ends each session
    assert adapter.BUDGET.used() == 0 and adapter.BUDGET.clients() == []
    assert adapter.BUDGET.sessions() == []
    # A session's end also forgets its client: the map of sessions stays bounded.
    assert visitor.client_of_session("tab1") == "session:tab1"


def test_sessions_no_script_run_named_share_one_budget(
    manager: MemoryUploadedFileManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose script never said who it is (a crafted request) is not a client of its
    own: all such sessions share one client's budget."""
    monkeypatch.setattr(
        adapter, "BUDGET", UploadBudget(per_session=8 * MB, per_server=30 * MB, per_client=10 * MB)
    )
    adapter.install(manager)
    upload(manager, "x1", "f", bytes(6 * MB))
    upload(manager, "x2", "f", bytes(6 * MB))
    assert adapter.client_of("x1") == adapter.client_of("x2") == adapter.UNNAMED_CLIENT
    assert stored(manager, "x2", "f") == b""
    assert adapter.BUDGET.refusal("x2", "f").code == "client_budget"
    upload(manager, "a", "f", bytes(6 * MB))  # a named client is not in that pool
    assert len(stored(manager, "a", "f")) == 6 * MB
    for session in ("x1", "x2", "a"):
        manager.remove_session_files(session)
    assert adapter.BUDGET.used() == 0


def test_a_page_with_an_uploader_names_its_client_before_the_uploader() -> None:
    """``session_uploads()`` (called before any uploader is drawn) records who the session
    is, so the hook finds its client when its files arrive."""
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        import streamlit as st

        from components import uploads
        from components import visitor as who
        from components.upkeep import script_run_uploads

        uploads.session_uploads()
        run = script_run_uploads()
        found = who.client_of_session(run.session_id)
        st.session_state["found"] = (run.session_id, found, who.client())

    at = AppTest.from_function(page).run()
    assert not at.exception
    session_id, found, expected = at.session_state["found"]
    assert found == expected  # AppTest has no peer: the session is its own, named client
    assert adapter.client_of(session_id) == expected != adapter.UNNAMED_CLIENT
    visitor.forget_session(session_id)
