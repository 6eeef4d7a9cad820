"""The jobs the shape explorer runs inside a sandbox worker, by name.

Each is a trusted function called as ``fn(namespace, **params)`` on the names the pasted
source defined, returning JSON-able data. :data:`JOBS` is what the sandbox's job registry
should be handed, so that the sandbox needs to know nothing of this room.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchatlas.shapes.analysis import analyze_namespace, why_meta_namespace

ANALYZE = "shapes.analyze"
WHY_META = "shapes.why_meta"

JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    ANALYZE: analyze_namespace,
    WHY_META: why_meta_namespace,
}
