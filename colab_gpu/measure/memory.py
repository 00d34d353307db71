"""GPU memory: measure it, clean it up, find the batch size that fits.

On the CPU PyTorch keeps no allocator statistics, so measurements there report None and say so.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..hardware.device import checked_device
from ..hardware.units import MIB


@dataclass
class PeakMemory:
    """Filled in when the ``measure_peak`` block ends: bytes above the starting point, or None on a CPU.

    Taught in lesson 07.
    """

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
    """Measure the peak memory the block allocates on a CUDA device. Used in lesson 06, taught in lesson 07.

    Example:
        >>> with measure_peak("cpu") as peak:
        ...     x = torch.zeros(1000)
        >>> peak.peak_mib is None
        True
    """
    result = PeakMemory(checked_device(device, "cg.measure_peak"))
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


def memory_report(device: str | torch.device) -> dict[str, float | None]:
    """Allocator figures for ``device`` in MiB: allocated, reserved, peak, free and total.

    ``allocated`` is what live tensors use; ``reserved`` is what PyTorch's caching allocator
    holds from the driver (allocated plus cached blocks); ``free``/``total`` come from the
    driver (``mem_get_info``) and include other processes. None on the CPU. The figures lesson 07's plots and
    the GPU suite's reports read.
    """
    device = checked_device(device, "cg.memory_report")  # starts CUDA: before, the allocator answers 0
    if device.type != "cuda":
        return dict.fromkeys(("allocated", "reserved", "peak", "free", "total"))
    free, total = torch.cuda.mem_get_info(device)
    return {
        "allocated": torch.cuda.memory_allocated(device) / MIB,
        "reserved": torch.cuda.memory_reserved(device) / MIB,
        "peak": torch.cuda.max_memory_allocated(device) / MIB,
        "free": free / MIB,
        "total": total / MIB,
    }


def allocator_settings(device: str | torch.device) -> dict | None:
    """The settings the CUDA caching allocator applied (``expandable_segments`` and others), None on a CPU.

    Read from ``torch.cuda.memory._snapshot()["allocator_settings"]``: the way to confirm that
    ``PYTORCH_CUDA_ALLOC_CONF`` took effect, since an unknown or ignored variable is silent.
    Taught in lesson 07.
    """
    device = checked_device(device, "cg.allocator_settings")  # starts CUDA, which parses the settings
    if device.type != "cuda":
        return None
    settings = torch.cuda.memory._snapshot(device).get("allocator_settings")
    return dict(settings) if settings is not None else None


def allocated_timeline(snapshot: dict, device_index: int = 0) -> list[int]:
    """Bytes held by tensors after each allocation and each completed free that ``snapshot`` recorded.

    ``snapshot`` is ``torch.cuda.memory._snapshot()`` taken while ``torch.cuda.memory._record_memory_history()``
    was on; the figures are relative to the moment recording started (blocks allocated before and freed
    during it count as negative).

    Taught in lesson 07.
    """
    traces = snapshot.get("device_traces") or []
    if not 0 <= device_index < len(traces):
        raise ValueError(
            f"The snapshot has traces for {len(traces)} device(s), not for device {device_index}: "
            "record with torch.cuda.memory._record_memory_history() on that GPU first."
        )
    held, timeline = 0, []
    for entry in traces[device_index]:
        if entry["action"] == "alloc":
            held += entry["size"]
        elif entry["action"] == "free_completed":  # "free_requested" may wait for other streams
            held -= entry["size"]
        else:
            continue
        timeline.append(held)
    return timeline


def format_memory(device: str | torch.device) -> str:
    """One line with `memory_report`'s figures (or why there are none). Taught in lesson 07."""
    device = checked_device(device, "cg.format_memory")
    figures = memory_report(device)
    if figures["allocated"] is None:
        return f"{device}: PyTorch keeps allocator statistics for CUDA devices only"
    return ", ".join(f"{name} {value:,.1f} MiB" for name, value in figures.items())


def clear_notebook_references() -> None:
    """Drop what IPython keeps alive behind your back: the output history and the last traceback.

    A cell whose last line evaluates to a tensor stores it in ``Out[n]`` and ``_``; an exception
    keeps its traceback, and with it every local variable of the failing frames, in
    ``sys.last_traceback``. ``del`` on your own name frees neither.

    Taught in lesson 07.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with every notebook kernel
        get_ipython = None
    shell = get_ipython() if get_ipython else None
    if shell is not None and getattr(shell, "displayhook", None) is not None:
        shell.displayhook.flush()  # clears Out and the numbered _N variables
        for namespace in (shell.user_ns, getattr(shell, "user_ns_hidden", {})):
            for name in ("_", "__", "___"):  # flush can leave these behind
                if name in namespace:
                    namespace[name] = ""
            for name in [n for n in namespace if n[:1] == "_" and n[1:].isdigit()]:
                del namespace[name]  # _0 too: cells run without history all count as 0
    previous = getattr(shell, "last_execution_result", None)
    if previous is not None:
        previous.result = None  # the previous cell's displayed value
        previous.error_in_exec = None  # the previous cell's exception, with its traceback
    for formatter in ("InteractiveTB", "SyntaxTB"):  # IPython's traceback printers keep the last one
        if hasattr(getattr(shell, formatter, None), "tb"):
            getattr(shell, formatter).tb = None
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)


def cleanup(device: str | torch.device | None = None, *, notebook: bool = True) -> float | None:
    """Free what can be freed: notebook references, unreachable objects, cached GPU blocks.

    Returns the MiB of reserved GPU memory given back to the driver (None on the CPU). Tensors
    you still hold a reference to are, rightly, not freed: ``del`` them first.

    Taught in lesson 07.
    """
    device = checked_device(device, "cg.cleanup") if device is not None else None
    before = memory_report(device)["reserved"] if device is not None else None
    if notebook:
        clear_notebook_references()
    gc.collect()  # reference cycles (models, closures) are freed only by the collector
    if device is not None and device.type == "cuda":
        torch.cuda.empty_cache()  # hand cached, unused blocks back to the driver
        return before - memory_report(device)["reserved"]
    return None
