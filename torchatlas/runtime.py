"""A compact description of the PyTorch this process runs (for the sidebar box)."""

from __future__ import annotations

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
