"""The PyTorch this process runs: a compact description (for the sidebar box), and tuning."""

from __future__ import annotations

import ctypes
import threading
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class TorchSummary:
    torch_version: str
    cpu_threads: int
    cuda_available: bool
    cuda_built: str | None  # CUDA version the wheel was built against, None for CPU wheels
    mps_available: bool
    accelerator: str | None  # torch.accelerator's current device type, if any

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def torch_summary() -> TorchSummary:
    accelerator = None
    if torch.accelerator.is_available():
        current = torch.accelerator.current_accelerator()
        accelerator = current.type if current is not None else None
    return TorchSummary(
        torch_version=torch.__version__,
        cpu_threads=torch.get_num_threads(),
        cuda_available=torch.cuda.is_available(),
        cuda_built=torch.version.cuda,
        mps_available=torch.backends.mps.is_available(),
        accelerator=accelerator,
    )


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_allocator_tuned: bool | None = None
_allocator_guard = threading.Lock()


def keep_freed_memory_for_reuse(block_mb: int = 32) -> bool:
    """Ask glibc's malloc to reuse freed blocks of up to ``block_mb`` instead of unmapping them.

    PyTorch's CPU tensors come straight from malloc. With glibc's adaptive defaults, the
    activations of a batched forward pass (several MB each) are handed back to the kernel
    after every pass and page-faulted in again on the next one: ~53,000 faults and a third
    of the forward time for 16 images through EfficientNet-Lite0 here. Fixed thresholds keep
    them in the heap, to be reused; the cost is that the process holds on to its peak.
    Once per process; False where the C library has no ``mallopt`` (macOS, musl).
    """
    global _allocator_tuned
    with _allocator_guard:
        if _allocator_tuned is None:
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (AttributeError, OSError):
                _allocator_tuned = False
            else:
                block = block_mb << 20
                _allocator_tuned = bool(
                    mallopt(_M_MMAP_THRESHOLD, block) and mallopt(_M_TRIM_THRESHOLD, 2 * block)
                )
        return _allocator_tuned
