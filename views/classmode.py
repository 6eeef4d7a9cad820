"""Class mode: a teacher leads a room full of phones through a lesson (or "follow me").

The page's order only: the Class page (start or join; the teacher's projector view; the
student's view), which draws the page's title where its layout wants it (beside the code's
corner once a lesson runs). The class bar above every page (following, the open question)
is drawn by app.py; everything is in ``components.classmode``.
"""

from __future__ import annotations

from components.classmode import panels

panels.page()
