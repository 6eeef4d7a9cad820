"""What this process can compute on: the torch build, the CPU, every accelerator, and ``meta``.

The sidebar's "your PyTorch" box (``torchatlas.runtime``) is the short version; this is the
full inventory for the devices room. Everything is read live from torch and the OS.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from torchatlas.runtime import torch_summary

# PCIe signalling per lane (GT/s, as Linux writes it in sysfs) → generation and line-code
# efficiency. Gen 1–2 use 8b/10b, Gen 3–5 128b/130b, Gen 6 FLIT mode (242 payload bytes of 256).
PCIE_GENERATIONS: dict[float, tuple[int, float]] = {
    2.5: (1, 8 / 10),
    5.0: (2, 8 / 10),
    8.0: (3, 128 / 130),
    16.0: (4, 128 / 130),
    32.0: (5, 128 / 130),
    64.0: (6, 242 / 256),
}
SYSFS_PCI = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class BuildInfo:
    torch_version: str
    cuda_version: str | None  # the CUDA toolkit this wheel was built with
    cudnn_version: str | None
    hip_version: str | None
    mps_built: bool
    compiled_accelerator: str | None  # the accelerator type the wheel targets, usable or not
    cpu_capability: str  # the SIMD level torch's CPU kernels dispatch to (AVX2, AVX512, ...)
    numpy_version: str


@dataclass(frozen=True)
class CpuInfo:
    model: str | None  # None when neither the OS nor Python can name it
    logical_cores: int
    usable_cores: int  # what this process may run on (containers and taskset limit it)
    torch_threads: int
    interop_threads: int
    memory_total_bytes: int | None
    memory_available_bytes: int | None


@dataclass(frozen=True)
class PcieLink:
    generation: int
    lanes: int
    nominal_gbps: float  # one direction, after line coding; real copies reach less


@dataclass(frozen=True)
class AcceleratorInfo:
    device: str  # "cuda:0", "mps:0", ...
    name: str
    total_memory_bytes: int | None
    free_memory_bytes: int | None
    compute_capability: str | None  # CUDA's "major.minor"; None where the idea does not apply
    multiprocessors: int | None
    pcie: PcieLink | None


@dataclass(frozen=True)
class MetaInfo:
    """A live meta-device tensor: full shape and dtype, no memory."""

    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # what the tensor would occupy on a real device
    storage_address: int  # always 0: nothing was allocated
    created_in_s: float


@dataclass(frozen=True)
class Inventory:
    build: BuildInfo
    cpu: CpuInfo
    accelerators: tuple[AcceleratorInfo, ...]
    meta: MetaInfo

    @property
    def has_accelerator(self) -> bool:
        return bool(self.accelerators)


def available_accelerator() -> torch.device | None:
    """The accelerator this process can really use (CUDA, MPS, XPU, ...), or None.

    ``current_accelerator()`` alone reports what the wheel was *built* for: a CUDA wheel on a
    machine without a GPU still answers ``cuda``. ``check_available=True`` asks the driver too.
    """
    current = torch.accelerator.current_accelerator(check_available=True)
    if current is None:
        return None
    return torch.device(current.type, torch.accelerator.current_device_index())


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    text = _read(Path("/proc/meminfo")) or ""
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


def _cgroup_room() -> int | None:
    """Bytes left under a cgroup v2 memory limit (Streamlit Cloud and Docker set one)."""
    limit = _read(Path("/sys/fs/cgroup/memory.max"))
    used = _read(Path("/sys/fs/cgroup/memory.current"))
    if not limit or not used or not limit.isdigit() or not used.isdigit():
        return None
    return max(0, int(limit) - int(used))


def host_memory() -> tuple[int | None, int | None]:
    """(total, available) host memory in bytes; available honours a container limit."""
    info = _meminfo()
    total = info.get("MemTotal")
    available = info.get("MemAvailable")
    if total is None or available is None:
        try:
            page = os.sysconf("SC_PAGE_SIZE")
            total = total or os.sysconf("SC_PHYS_PAGES") * page
            available = available or os.sysconf("SC_AVPHYS_PAGES") * page
        except (ValueError, OSError, AttributeError):
            pass
    room = _cgroup_room()
    if room is not None:
        available = room if available is None else min(available, room)
    return total, available


def _cpu_model() -> str | None:
    for line in (_read(Path("/proc/cpuinfo")) or "").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or None


def cpu_info() -> CpuInfo:
    logical = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    total, available = host_memory()
    return CpuInfo(
        model=_cpu_model(),
        logical_cores=logical,
        usable_cores=usable,
        torch_threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
        memory_total_bytes=total,
        memory_available_bytes=available,
    )


def build_info() -> BuildInfo:
    summary = torch_summary()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    compiled = torch.accelerator.current_accelerator()
    return BuildInfo(
        torch_version=summary.torch_version,
        cuda_version=summary.cuda_built,
        cudnn_version=_cudnn_text(cudnn),
        hip_version=torch.version.hip,
        mps_built=torch.backends.mps.is_built(),
        compiled_accelerator=compiled.type if compiled is not None else None,
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        numpy_version=np.__version__,
    )


def _cudnn_text(version: int | None) -> str | None:
    # cuDNN 9 encodes 9.24.0 as 92400 (major*10000 + minor*100 + patch); cuDNN 8 used *1000.
    if version is None:
        return None
    if version >= 90000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"


def pcie_link(bus_address: str, sysfs: Path = SYSFS_PCI) -> PcieLink | None:
    """The PCIe link of one device from Linux sysfs, e.g. ``0000:17:00.0``; None if unknown."""
    folder = sysfs / bus_address
    speed = _read(folder / "max_link_speed")  # "16.0 GT/s PCIe"
    width = _read(folder / "current_link_width") or _read(folder / "max_link_width")
    if not speed or not width:
        return None
    try:
        rate = float(speed.split()[0])
        lanes = int(width)
    except (ValueError, IndexError):
        return None
    if rate not in PCIE_GENERATIONS or lanes <= 0:
        return None
    generation, efficiency = PCIE_GENERATIONS[rate]
    return PcieLink(generation, lanes, round(rate * lanes * efficiency / 8, 1))


def _cuda_info(index: int) -> AcceleratorInfo:
    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(index)
    bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return AcceleratorInfo(
        device=f"cuda:{index}",
        name=props.name,
        total_memory_bytes=total,
        free_memory_bytes=free,
        compute_capability=None if torch.version.hip else f"{props.major}.{props.minor}",
        multiprocessors=props.multi_processor_count,
        pcie=pcie_link(bus),
    )


def _generic_info(device_type: str, index: int) -> AcceleratorInfo:
    free: int | None
    total: int | None
    try:
        free, total = torch.accelerator.get_memory_info(index)
    except (RuntimeError, NotImplementedError, AttributeError):
        free = total = None
    if device_type == "mps":
        # Apple GPUs share the system memory; what torch may use is its recommended maximum.
        total = total or torch.mps.recommended_max_memory()
    name = platform.processor() if device_type == "mps" else device_type
    return AcceleratorInfo(
        device=f"{device_type}:{index}",
        name=name or device_type,
        total_memory_bytes=total,
        free_memory_bytes=free,
        compute_capability=None,
        multiprocessors=None,
        pcie=None,
    )


def accelerators() -> tuple[AcceleratorInfo, ...]:
    current = available_accelerator()
    if current is None:
        return ()
    found = []
    for index in range(torch.accelerator.device_count()):
        if current.type == "cuda":
            found.append(_cuda_info(index))
        else:
            found.append(_generic_info(current.type, index))
    return tuple(found)


def meta_info(shape: tuple[int, ...] = (1024, 1024, 1024)) -> MetaInfo:
    started = time.perf_counter()
    tensor = torch.empty(shape, device="meta")
    elapsed = time.perf_counter() - started
    return MetaInfo(
        shape=tuple(tensor.shape),
        dtype=str(tensor.dtype).removeprefix("torch."),
        nbytes=tensor.nbytes,
        storage_address=tensor.untyped_storage().data_ptr(),
        created_in_s=elapsed,
    )


def take_inventory() -> Inventory:
    return Inventory(
        build=build_info(), cpu=cpu_info(), accelerators=accelerators(), meta=meta_info()
    )
