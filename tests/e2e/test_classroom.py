"""A small class in real browsers: five students in the shape explorer press Analyse at once.

They analyse ResNet-50, each with a different batch size, so no answer can come from another
student's cached report: five script runs and five sandbox jobs are under way together. Every
student must get their own result; none may see an error or "the sandbox is busy" (a student
whose job waits is told their place in line instead). bench/classroom.py measures the same
with 30 protocol-level clients; this keeps the browser path honest.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import assert_no_error, wait_for_app
from tests.e2e.test_shapes import _open, _sandbox_installed

pytestmark = pytest.mark.skipif(
    not _sandbox_installed(),
    reason="torchatlas.sandbox is not installed yet: the page cannot analyse pasted code",
)

STUDENTS = 5


def test_five_students_press_analyse_at_once(app_page) -> None:
    pages = [_open(app_page, "shapes", query="m_preset=resnet50") for _ in range(STUDENTS)]
    batches = [101 + number for number in range(STUDENTS)]
    for page, batch in zip(pages, batches, strict=True):
        page.get_by_role("textbox", name="Input shapes").fill(f"{batch}×3×224×224")
    # All presses first, then all waits: the five jobs are in flight together.
    for page in pages:
        page.get_by_role("button", name="Analyse shapes").click(no_wait_after=True)
    for page, batch in zip(pages, batches, strict=True):
        expect(page.get_by_text(f"{batch} × 1000").first).to_be_attached(timeout=120_000)
        wait_for_app(page)
        assert_no_error(page)
        errors = page.locator("[data-testid='stAlertContentError']")
        assert errors.count() == 0, errors.first.inner_text()
        assert page.get_by_text("busy", exact=False).count() == 0
        # Only the student's own batch: never another student's report.
        for other in batches:
            if other != batch:
                assert page.get_by_text(f"{other} × 1000").count() == 0
