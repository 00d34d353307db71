"""The largest batch that fits in GPU memory: `find_max_batch_size` (lesson 07).

It doubles the batch until a step runs out of memory, then bisects the edge. On a GPU its limit comes from the free
memory and the memory one sample needs, measured between two batches (`colab_gpu.measure.memory` measures and cleans
up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..hardware.device import checked_device
from ..hardware.units import MIB
from ..measure.memory import cleanup, measure_peak, memory_report

#: The search's limit where no allocator statistics tell what fits (a CPU, or a limit you do not give).
FALLBACK_LIMIT = 2**16
#: How PyTorch's CPU allocator says it ran out of memory ("DefaultCPUAllocator: can't allocate memory: you tried to
#: allocate ...", "not enough memory").
CPU_OUT_OF_MEMORY = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator")


@dataclass(frozen=True)
class BatchSizeSearch:
    """What `find_max_batch_size` found. Use ``suggested``: ``largest_fit`` sits on the out-of-memory edge.

    When no batch ran out of memory, ``largest_fit`` is the search's ``limit``, not an edge, and ``suggested`` is
    None: nothing says how far below the edge it lies. Taught in lesson 07.
    """

    largest_fit: int  # the largest batch size that ran
    first_oom: int | None  # the smallest size that ran out of memory (None: ``limit`` was reached first)
    suggested: int | None  # largest_fit less the safety margin, a multiple of 8; None without an out-of-memory edge
    margin: float
    tries: int
    limit: int | None = None  # the largest size the search would try (None: an out-of-memory error came first)
    per_sample_bytes: float | None = None  # GPU memory one more sample needs, measured (None: limit given, a CPU)
    free_bytes: float | None = None  # the free GPU memory the limit was derived from
    on_cpu: bool = False  # searched on a CPU: the machine's RAM, not a GPU's memory, set the figure

    def __str__(self) -> str:
        if self.first_oom is not None:
            text = (
                f"largest batch that ran: {self.largest_fit:,} (first out-of-memory at {self.first_oom:,}, "
                f"{self.tries} tries); suggested: {self.suggested:,}, {self.margin:.0%} below, because memory use "
                "varies from step to step (fragmentation, cuDNN workspaces, a longer sequence) and a batch on the "
                "edge fails later"
            )
        elif self.per_sample_bytes is not None:
            text = (
                f"no out-of-memory error up to batch {self.largest_fit:,}, the search's limit ({self.tries} tries): "
                "not an edge, so nothing is suggested. The limit is twice what the free memory holds at the memory "
                "per sample measured, so this step's memory grows more slowly with the batch than it did at first: "
                "it is not what limits this batch size"
            )
        else:
            text = (
                f"no out-of-memory error up to batch {self.largest_fit:,}, the search's limit ({self.tries} tries): "
                "not an edge, so nothing is suggested; raise limit= to search further"
            )
        if self.on_cpu:
            text += (
                "\nOn a CPU the batch shares the machine's RAM with everything else and no allocator statistics say "
                "what fits: this is not a GPU's limit. Run the search on the GPU you will train on."
            )
        if self.per_sample_bytes is not None:
            text += (
                f"\nmemory per sample: {self.per_sample_bytes / 2**10:,.1f} KiB (measured as the batch grew); free: "
                f"{self.free_bytes / MIB:,.0f} MiB; the search's limit: {self.limit:,}, twice the batch that fits in it"
            )
        return text


#: The search derives its limit once a batch has grown the step's memory by this much: far above the allocator's
#: rounding of each tensor (at most a few MiB), far below any GPU's memory.
MEASURED_GROWTH = 64 * MIB
#: Where memory has not grown by ``MEASURED_GROWTH`` even at this batch size, memory does not limit the batch.
UNMEASURED_LIMIT = 2**24


def _limit_from_memory(device: torch.device, grown: dict[int, int], start: int, good: int) -> tuple[float, float, int]:
    """(bytes per sample, free bytes, limit): twice the batch that the free memory holds at the memory per sample
    measured between batch sizes ``start`` and ``good``. One batch alone cannot tell the memory that grows with
    the batch (activations) from the memory that does not (weights, gradients, workspaces)."""
    per_sample = max(0.0, (grown[good] - grown[start]) / (good - start))
    figures = memory_report(device)
    free = (figures["free"] + figures["reserved"] - figures["allocated"]) * MIB  # the driver's and the cache's
    return per_sample, free, good if per_sample == 0 else max(good, int(2 * free / per_sample))


def find_max_batch_size(
    try_batch: Callable[[int], object],
    device: str | torch.device,
    *,
    start: int = 1,
    limit: int | None = None,
    resolution: float = 1 / 16,
    margin: float = 0.1,
) -> BatchSizeSearch:
    """Search the largest batch size for which ``try_batch(batch_size)`` runs without running out of memory.

    Doubles from ``start`` until the first out-of-memory error (or ``limit``), then bisects between
    the last size that fitted and the first that did not, until they are within ``resolution``
    (a fraction of the size: 1/16 stops after about four bisections instead of ~16, and each try
    at a large batch is a full training step). After every try the memory is cleaned up, so the
    search leaves the device as it found it. Returns the edge and a ``suggested`` size ``margin``
    below it; when no size ran out of memory up to the limit, there is no edge and nothing is suggested.

    ``limit=None`` (the default) derives the limit on a GPU from the memory, so that the doubling passes the edge on
    any GPU, 15 GB or 80: each try's peak is measured, and once a batch has grown the step's memory by
    ``MEASURED_GROWTH`` above ``start``'s, the limit is twice the batch that the free memory holds at the memory one
    more sample needed between the two (one batch alone cannot tell the memory that grows with the batch from the
    weights, gradients and workspaces that do not). On a CPU, which keeps no allocator statistics, the limit is
    ``FALLBACK_LIMIT``. Taught in lesson 07.

    Example:
        >>> def step(batch_size):
        ...     if batch_size > 1000:
        ...         raise torch.OutOfMemoryError("pretend")
        >>> found = find_max_batch_size(step, "cpu", start=64)
        >>> 1000 * 15 / 16 <= found.largest_fit <= 1000, found.suggested <= 0.9 * found.largest_fit
        (True, True)

    Raises:
        ValueError: bad bounds, resolution or margin.
        RuntimeError: even ``start`` does not fit, or the step allocates nothing on the GPU.
    """
    if isinstance(try_batch, nn.Module) or not callable(try_batch):
        raise TypeError(
            f"find_max_batch_size needs try_batch, a function of the batch size that builds a batch of that size "
            f"and runs one training step on it, not a {type(try_batch).__name__}. For example: "
            "def try_batch(n): x = torch.randn(n, 784, device=device); model(x).sum().backward()"
        )
    device = checked_device(device, "cg.find_max_batch_size")
    if start < 1 or (limit is not None and limit < start):
        raise ValueError(f"find_max_batch_size needs 1 <= start <= limit, got start={start}, limit={limit}.")
    if not 0 < resolution < 1 or not 0 <= margin < 1:
        raise ValueError(
            f"find_max_batch_size needs 0 < resolution < 1 and 0 <= margin < 1, got "
            f"resolution={resolution}, margin={margin}."
        )
    tries = 0
    grown: dict[int, int] = {}  # batch size -> peak bytes its try allocated above the start (GPU only)

    def fits(batch_size: int) -> bool:
        nonlocal tries
        tries += 1
        try:
            with measure_peak(device) as peak:
                try_batch(batch_size)
        except (torch.OutOfMemoryError, MemoryError):
            return False
        except RuntimeError as err:  # the CPU's allocator says it in a plain RuntimeError
            if device.type == "cpu" and any(words in str(err) for words in CPU_OUT_OF_MEMORY):
                return False
            raise
        finally:
            cleanup(device, notebook=False)
        if peak.peak_bytes is not None and peak.start_bytes is not None:
            grown[batch_size] = peak.peak_bytes - peak.start_bytes
        return True

    if not fits(start):
        raise RuntimeError(
            f"Even batch_size={start} runs out of memory on {device}: use a smaller model, "
            "mixed precision (lesson 06) or activation checkpointing."
        )
    derive = limit is None and start in grown  # a GPU measured the first try: the limit comes from the memory
    ceiling = limit if limit is not None else (None if derive else FALLBACK_LIMIT)
    per_sample = free = None
    good, bad = start, None
    while bad is None:
        if derive and ceiling is None and good > start:
            if grown[good] == 0:
                raise RuntimeError(
                    f"try_batch({start}) and try_batch({good}) allocated no memory on {device}, so no batch size "
                    f"can run out of it: create the batch and run the model on {device} inside try_batch, or "
                    "pass limit= to search anyway."
                )
            if grown[good] - grown[start] >= MEASURED_GROWTH or good >= UNMEASURED_LIMIT:
                per_sample, free, ceiling = _limit_from_memory(torch.device(device), grown, start, good)
        if ceiling is not None and good >= ceiling:
            break
        candidate = good * 2 if ceiling is None else min(good * 2, ceiling)
        if fits(candidate):
            good = candidate
        else:
            bad = candidate
    while bad is not None and bad - good > max(1, int(resolution * good)):
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    suggested = None
    if bad is not None:
        suggested = int(good * (1 - margin))
        suggested = min(good, max(start, suggested - suggested % 8 if suggested >= 8 else suggested))
    return BatchSizeSearch(
        largest_fit=good,
        first_oom=bad,
        suggested=suggested,
        margin=margin,
        tries=tries,
        limit=ceiling,
        per_sample_bytes=per_sample,
        free_bytes=free,
        on_cpu=device.type == "cpu",
    )
