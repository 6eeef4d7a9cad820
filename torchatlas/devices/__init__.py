"""The devices room's engine: inventory, live demonstrations, and the transfer benchmark.

- :mod:`.inventory`: the torch build, CPU, accelerators and ``meta`` as plain dataclasses.
- :mod:`.demos`: ``.to()`` / ``.cpu()`` / ``.numpy()`` snippets run as shown, with findings
  computed from the live objects.
- :mod:`.transfer`: copy bandwidth and latency per path and size, one run per server.
- :mod:`.errors`: what the engine raises: a code and parameters, the text in the tables.
"""

from torchatlas.devices.demos import (
    DEMONSTRATIONS,
    Demonstration,
    Finding,
    RaisedError,
    Snapshot,
    SnapshotKind,
    StepResult,
    demonstration_code,
    run_demonstration,
)
from torchatlas.devices.errors import BenchmarkBusy, DevicesError, DevicesValueError, ErrorCode
from torchatlas.devices.inventory import Inventory, available_accelerator, take_inventory
from torchatlas.devices.transfer import (
    PATHS,
    SIZES,
    BenchmarkConfig,
    BenchmarkJob,
    BenchmarkResult,
    Measurement,
    Progress,
    StopReason,
    TransferPath,
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
    "DevicesError",
    "DevicesValueError",
    "ErrorCode",
    "Finding",
    "Inventory",
    "Measurement",
    "Progress",
    "RaisedError",
    "Snapshot",
    "SnapshotKind",
    "StepResult",
    "StopReason",
    "TransferPath",
    "available_accelerator",
    "demonstration_code",
    "machine_size_cap",
    "run_demonstration",
    "run_transfer_benchmark",
    "take_inventory",
]
