"""The shape explorer room: ``state`` (session, URL, cached calls), ``panels`` (the page's
parts, in order) and ``draw`` (pure builders of tables, figures and HTML)."""
