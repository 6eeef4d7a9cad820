"""Lessons: ``state`` (the lesson and step in the URL, answers, opening a step in its room),
``panels`` (the banner above a room, the lessons list, the summary) and ``draw`` (pure
builders), over ``torchatlas.lessons``."""
