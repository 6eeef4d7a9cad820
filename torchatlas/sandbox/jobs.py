"""The jobs a worker may run: trusted functions called as ``fn(namespace, **params)``."""

from __future__ import annotations

JOBS: dict[str, str] = {
    "shapes.analyze": "torchatlas.shapes:analyze_namespace",
    "shapes.why_meta": "torchatlas.shapes:why_meta_namespace",
    "sandbox.echo": "torchatlas.sandbox.testing_jobs:echo",  # the sandbox's own test jobs
    "sandbox.meta_forward": "torchatlas.sandbox.testing_jobs:meta_forward",
    "sandbox.allocate": "torchatlas.sandbox.testing_jobs:allocate",
    "sandbox.sleep": "torchatlas.sandbox.testing_jobs:sleep",
    "sandbox.huge_output": "torchatlas.sandbox.testing_jobs:huge_output",
    "sandbox.not_json": "torchatlas.sandbox.testing_jobs:not_json",
    "sandbox.fail": "torchatlas.sandbox.testing_jobs:fail",
    "sandbox.call": "torchatlas.sandbox.testing_jobs:call",
}
