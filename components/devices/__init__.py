"""The devices room's components: ``state`` (session keys, cached engine calls), ``panels``
(widgets and output, in page order) and ``draw`` (pure text, table and figure builders)."""
