"""Torch Atlas engine: plain Python + torch, no Streamlit. Usable from a notebook.

Rooms: ``strides`` (tensor storage), ``shapes`` (meta-device explorer, runs pasted
code through ``sandbox``), ``devices``, ``classify`` / ``images``.
"""

__version__ = "0.1.0"
