"""The image classification room: ``state`` (session keys, URL state, cached engine calls and
uploads), ``panels`` (widgets and output), ``draw`` (figures, tables and HTML, no Streamlit),
over the engine in ``torchatlas.classify``."""
