"""Writing a lesson: ``state`` (the draft, saving, the editing link, import/export), ``panels``
(the author page's widgets) and ``draw`` (pure text builders), over ``torchatlas.lessons`` and
the teachers' lessons in ``torchatlas.classmode.authored``."""
