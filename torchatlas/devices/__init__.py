"""The devices room's engine: inventory, live demonstrations, and the transfer benchmark.

- :mod:`.inventory`: the torch build, CPU, accelerators and ``meta`` as plain dataclasses.
- :mod:`.demos`: ``.to()`` / ``.cpu()`` / ``.numpy()`` snippets run as shown, with findings
  computed from the live objects.
- :mod:`.transfer`: copy bandwidth and latency per path and size, one run per server.
"""

from torchatlas.devices.demos import (
    DEMONSTRATIONS,
    Demonstration,
    Finding,
    RaisedError,
    Snapshot,
    StepResult,
    demonstration_code,
    run_demonstration,
)
from torchatlas.devices.inventory import Inventory, available_accelerator, take_inventory
from torchatlas.devices.transfer import (
    PATHS,
    SIZES,
    BenchmarkBusy,
    BenchmarkConfig,
    BenchmarkJob,
    BenchmarkResult,
    Measurement,
    Progress,
    machine_size_cap,
    run_transfer_benchmark,
)

__all__ = [
    "DEMONSTRATIONS",
    "PATHS",
    "SIZES",
    "BenchmarkBusy",
    "BenchmarkConfig",
    "BenchmarkJob",
    "BenchmarkResult",
    "Demonstration",
    "Finding",
    "Inventory",
    "Measurement",
    "Progress",
    "RaisedError",
    "Snapshot",
    "StepResult",
    "available_accelerator",
    "demonstration_code",
    "machine_size_cap",
    "run_demonstration",
    "run_transfer_benchmark",
    "take_inventory",
]
