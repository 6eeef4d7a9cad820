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


# --------------------------------------------------------------------------- the Streamlit adapter


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> MemoryUploadedFileManager:
    """A fresh Streamlit upload manager with the budget installed, and a small fresh budget."""
    monkeypatch.setattr(adapter, "BUDGET", UploadBudget(per_session=10 * MB, per_server=15 * MB))
    monkeypatch.setattr(adapter, "_screens", {})
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
