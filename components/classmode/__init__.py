"""Class mode: ``state`` (the process's class store, who this session is in a class, links and
following), ``panels`` (the Class page and the class bar above every page) and ``draw`` (the
projected code, QR and tally chart; no Streamlit), over the engine in ``torchatlas.classmode``."""
