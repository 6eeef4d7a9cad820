"""Where a lesson link puts a visitor, declared once like a room's link (read and checked by
:mod:`torchatlas.links`): ``lesson`` (a built-in lesson's id, or ``u_<code>`` for a teacher's
own), ``step`` (1-based) and ``end=1`` (the lesson's summary).

These names sit in the address bar beside the room's own fields while a step's room is open
(the room's link leaves them alone), so the lessons page and the banner above a room read
them on every run, not only on a session's first.

>>> PLACE.read({"lesson": "views", "step": "3"}).values
{'lesson': 'views', 'step': 3, 'end': False}
>>> PLACE.read({"lesson": "views", "step": "3; drop"}).broken
('step',)
"""

from __future__ import annotations

from torchatlas.lessons.loader import MAX_STEPS
from torchatlas.links import Flag, Int, LinkSpec, Text

URL_LESSON, URL_STEP, URL_END = "lesson", "step", "end"
MAX_LESSON_ID = 39  # longer than any built-in id or teacher's code: never looked up

PLACE = LinkSpec(
    "lessons",
    "lessons_link_",
    (
        Text(URL_LESSON, "", max_len=MAX_LESSON_ID),
        Int(URL_STEP, 0, low=1, high=MAX_STEPS),  # 0 (left out): the overview or summary
        Flag(URL_END, False),
    ),
)
