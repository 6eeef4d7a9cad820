from __future__ import annotations

import pytest

from tests.golden import assert_golden, golden_path


def test_a_missing_stored_output_fails(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tests.golden.GOLDEN_DIR", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="no stored output"):
        assert_golden("room/never_stored", "text")


def test_a_changed_output_fails_with_its_diff_and_update_rewrites_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tests.golden.GOLDEN_DIR", tmp_path)
    assert_golden("room/table", "a\nb\n", update=True)
    assert_golden("room/table", "a\nb")  # the final newline is the file's, not the output's
    with pytest.raises(pytest.fail.Exception, match=r"(?s)-b.*\+c"):
        assert_golden("room/table", "a\nc\n")
    assert_golden("room/table", "a\nc\n", update=True)
    assert (tmp_path / "room" / "table.txt").read_text() == "a\nc\n"


def test_names_cannot_leave_the_folder() -> None:
    with pytest.raises(ValueError):
        golden_path("../outside")
