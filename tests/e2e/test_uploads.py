"""Upload budgets in a real browser (issue 17): two visitors each pick five 100 MB junk files
named .jpg and one photo in the classification room. Both see a message for every junk file,
the photo is classified, and the server's resident memory afterwards grows by no more than
200 MB over a visitor who uploaded nothing.

The server is the session's shared one (conftest's ``app_server``); its process is found by the
port it listens on, and its memory read from ``/proc/<pid>/status``.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from PIL import Image

from tests.e2e.conftest import assert_no_error, wait_for_app
from torchatlas.classify import sample_bytes
from torchatlas.i18n import translate

JUNK_FILES = 5
JUNK_MB = 100
GROWTH_LIMIT_MB = 200
PHOTO = "my-coffee.jpg"


def listening_pid(port: int) -> int:
    """The process that listens on ``port`` (from /proc/net/tcp*, then its socket's inode)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            descriptors = list((entry / "fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(descriptor) in inodes:
                    return int(entry.name)
            except OSError:
                continue
    raise LookupError(f"no process listens on port {port}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise LookupError("no VmRSS")


def settled_rss_mb(pid: int, seconds: float = 3.0) -> float:
    """Resident memory once freed buffers are gone: the lowest of a few readings."""
    readings = []
    for _ in range(int(seconds / 0.5)):
        readings.append(rss_mb(pid))
        time.sleep(0.5)
    return min(readings)


@pytest.fixture(scope="module")
def junk(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Five files of random bytes named .jpg. Two start like a JPEG, so they get past the first
    glance and through the budget to the decoder; the others are refused as they arrive."""
    folder = tmp_path_factory.mktemp("junk")
    files = []
    for index in range(JUNK_FILES):
        path = folder / f"junk-{index}.jpg"
        with path.open("wb") as out:
            if index < 2:
                out.write(b"\xff\xd8\xff\xe0")
            for _ in range(JUNK_MB):
                out.write(os.urandom(1_000_000))
        files.append(path)
    return files


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("photo") / PHOTO
    Image.open(io.BytesIO(sample_bytes("coffee"))).save(path, "JPEG", quality=90)
    return path


def body_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def wait_for_texts(page, texts: list[str], timeout_ms: int = 240_000) -> None:
    page.wait_for_function(
        "texts => { const main = document.querySelector(\"[data-testid='stMain']\");"
        " return main && texts.every(text => main.innerText.includes(text)); }",
        arg=texts,
        timeout=timeout_ms,
    )
    wait_for_app(page)


def test_two_visitors_uploading_junk_do_not_take_the_servers_memory(
    app_page, app_server: str, junk: list[Path], photo: Path
) -> None:
    pid = listening_pid(urlparse(app_server).port)
    idle = app_page("classify")  # a visitor who uploads nothing: the model is loaded and warm
    wait_for_texts(idle, [translate("classify.pipeline.before_after")])
    before = settled_rss_mb(pid)

    visitors = [app_page("classify", height=2600) for _ in range(2)]
    for page in visitors:  # both pick their files before either is done
        page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files([*junk, photo])
    names = [f"{path.name}:" for path in junk]
    for page in visitors:
        wait_for_texts(page, [*names, f"{PHOTO} · "])
    after = settled_rss_mb(pid)
    growth = after - before
    print(f"\nserver VmRSS: {before:.0f} MB with one idle visitor, {after:.0f} MB after two "
          f"visitors uploaded {JUNK_FILES} × {JUNK_MB} MB junk + a photo each: "
          f"{growth:+.0f} MB")  # fmt: skip

    for page in visitors:
        assert_no_error(page)
        alerts = page.locator("[data-testid='stAlert']")
        for path in junk:
            message = alerts.filter(has_text=f"{path.name}:").inner_text()
            assert len(message) > len(path.name) + 40, message  # a reason, not just a name
        text = body_text(page)
        assert "espresso · " in text, text[:3000]  # the photo was classified
    # random bytes are refused as they arrive, before the page ever sees them
    refused_at_once = translate("classify.errors.not_image")
    assert any(
        refused_at_once in text
        for text in visitors[0].locator("[data-testid='stAlert']").all_inner_texts()
    )
    assert growth <= GROWTH_LIMIT_MB, f"server memory grew by {growth:.0f} MB"

    # Removing the photo (×) forgets it; the junk messages stay until their files go too.
    page = visitors[0]
    chip = page.locator("[data-testid='stFileChip']").filter(has_text=PHOTO)
    chip.locator("[data-testid='stFileChipDeleteBtn']").click()
    page.wait_for_function(
        "name => !document.querySelector(\"[data-testid='stMain']\").innerText.includes(name)",
        arg=f"{PHOTO} · ",
        timeout=60_000,
    )
    wait_for_app(page)
    assert_no_error(page)
    assert f"{junk[0].name}:" in body_text(page)
