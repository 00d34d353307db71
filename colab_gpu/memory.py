"""GPU memory: measure the peak of a block of code.

On the CPU PyTorch keeps no allocator statistics, so measurements there report None and say so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

MIB = 2**20


@dataclass
class PeakMemory:
    """Filled in when the ``measure_peak`` block ends: bytes above the starting point, or None on a CPU."""

    device: torch.device
    start_bytes: int | None = None
    peak_bytes: int | None = None

    @property
    def peak_mib(self) -> float | None:
        """Peak allocated during the block minus what was allocated when it began, in MiB."""
        if self.peak_bytes is None or self.start_bytes is None:
            return None
        return (self.peak_bytes - self.start_bytes) / MIB

    def __str__(self) -> str:
        if self.peak_mib is None:
            return f"peak memory not tracked on {self.device} (PyTorch keeps allocator statistics for CUDA only)"
        return f"peak {self.peak_mib:,.1f} MiB above the start on {self.device}"


@contextmanager
def measure_peak(device: str | torch.device) -> Iterator[PeakMemory]:
    """Measure the peak memory the block allocates on a CUDA device.

    Example:
        >>> with measure_peak("cpu") as peak:
        ...     x = torch.zeros(1000)
        >>> peak.peak_mib is None
        True
    """
    result = PeakMemory(torch.device(device))
    if result.device.type != "cuda":
        yield result
        return
    torch.cuda.synchronize(result.device)
    torch.cuda.reset_peak_memory_stats(result.device)
    result.start_bytes = torch.cuda.memory_allocated(result.device)
    try:
        yield result
    finally:
        torch.cuda.synchronize(result.device)
        result.peak_bytes = torch.cuda.max_memory_allocated(result.device)
