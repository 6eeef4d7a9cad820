"""The strides room's components: ``state`` (session keys, URL, cached engine calls),
``panels`` (widgets and fragments, in page order) and ``draw`` (pure figure, HTML and text
builders)."""
