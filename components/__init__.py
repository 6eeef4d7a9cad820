"""Streamlit/Plotly renderers. They take plain data from ``torchatlas`` and draw it."""
