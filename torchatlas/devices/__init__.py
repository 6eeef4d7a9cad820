"""The devices room's engine: inventory, live demonstrations, and the transfer benchmark.

- :mod:`.inventory`: the torch build, CPU, accelerators and ``meta`` as plain dataclasses.
- :mod:`.demos`: ``.to()`` / ``.cpu()`` / ``.numpy()`` snippets run as shown, with findings
  computed from the live objects.
- :mod:`.transfer`: copy bandwidth and latency per path and size, one run per server at a
  time; :data:`~.transfer.BOARD` shares the latest result and queues the requests.
- :mod:`.errors`: what the engine raises: a code and parameters, the text in the tables.
"""

from torchatlas.devices.demos import (
    DEMONSTRATIONS,
    Demonstration,
    Finding,
    Snapshot,
    SnapshotKind,
    StepResult,
    demonstration_code,
    run_demonstration,
)
from torchatlas.devices.errors import (
    BenchmarkBusy,
    BenchmarkQueueFull,
    DevicesError,
    DevicesValueError,
    ErrorCode,
)
from torchatlas.devices.inventory import Inventory, available_accelerator, take_inventory
from torchatlas.devices.transfer import (
    BOARD,
    PATHS,
    SIZES,
    BenchmarkBoard,
    BenchmarkConfig,
    BenchmarkJob,
    BenchmarkResult,
    Measurement,
    Progress,
    RequestOutcome,
    RunPhase,
    RunStatus,
    SharedResult,
    StopReason,
    Ticket,
    TransferPath,
    machine_size_cap,
    run_transfer_benchmark,
)

__all__ = [
    "BOARD",
    "DEMONSTRATIONS",
    "PATHS",
    "SIZES",
    "BenchmarkBoard",
    "BenchmarkBusy",
    "BenchmarkConfig",
    "BenchmarkJob",
    "BenchmarkQueueFull",
    "BenchmarkResult",
    "Demonstration",
    "DevicesError",
    "DevicesValueError",
    "ErrorCode",
    "Finding",
    "Inventory",
    "Measurement",
    "Progress",
    "RequestOutcome",
    "RunPhase",
    "RunStatus",
    "SharedResult",
    "Snapshot",
    "SnapshotKind",
    "StepResult",
    "StopReason",
    "Ticket",
    "TransferPath",
    "available_accelerator",
    "demonstration_code",
    "machine_size_cap",
    "run_demonstration",
    "run_transfer_benchmark",
    "take_inventory",
]
