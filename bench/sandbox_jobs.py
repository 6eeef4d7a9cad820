"""Jobs only the sandbox benchmarks run (trusted code inside the worker).

Registered with the benchmarks' own pools; the zygote imports this module by name
(``bench.sandbox_jobs``: the repository root is on its path).
"""

from __future__ import annotations

import time
from typing import Any


def echo(namespace: dict[str, Any], **params: Any) -> dict[str, Any]:
    """The user-defined names and the params (the smallest job: its time is the overhead)."""
    return {"names": sorted(namespace), "params": params}


def sleep(namespace: dict[str, Any], *, seconds: float) -> dict[str, Any]:
    """Hold a slot (and a child, to be measured) for ``seconds``."""
    time.sleep(seconds)
    return {"slept": seconds}


ECHO, SLEEP = "bench.echo", "bench.sleep"
JOBS = {ECHO: echo, SLEEP: sleep}
WARM_UP = [{"source": "import torch\n", "job": ECHO, "params": {}}]
