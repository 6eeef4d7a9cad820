from __future__ import annotations

from components.rooms import built_rooms
from tests.app.apptest import open_page, rendered_text
from torchatlas.i18n import translate


def test_home_has_the_lessons_card_then_a_card_per_built_room() -> None:
    at = open_page("views/home.py")
    titles = [s.value for s in at.header]
    rooms = [translate(f"app.rooms.{room.key}.title") for room in built_rooms()]
    assert titles == [translate("app.home.lessons_title"), *rooms]


def test_korean_switch_changes_home_and_sidebar() -> None:
    english = rendered_text(open_page("views/home.py", "en"))
    korean_at = open_page("views/home.py", "ko")
    korean = rendered_text(korean_at)
    assert translate("app.home.intro", "ko") in korean
    assert translate("app.sidebar.your_pytorch", "ko") in korean
    assert translate("app.home.intro", "en") not in korean
    assert english != korean


def test_sidebar_reports_this_torch() -> None:
    import torch

    text = rendered_text(open_page("views/home.py"))
    assert f"torch {torch.__version__}" in text
    assert f"{torch.get_num_threads()}" in text
