"""The autograd room's page parts: ``state`` (session keys, URL, cached engine calls),
``panels`` (widgets and output) and ``draw`` (pure builders), over ``torchatlas.autograd``."""
