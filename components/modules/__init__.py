"""The nn.Module room's components: ``state`` (session keys, URL, cached engine calls),
``panels`` (widgets and output), ``draw`` (pure builders)."""
