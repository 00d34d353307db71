"""How fast data reaches the GPU (lessons 02 and 05; the bench's loader rows), every way measured the same way.

- `measure_loader` times an epoch of any loader, synchronized; `sweep_workers` does it for each worker count.
- `time_loader_epochs` times a training epoch of a fresh MLP per loader; `epoch_samples` is its data set's size.
- `copy_bandwidth` measures host-to-device copies, from pageable or pinned memory.
"""

from __future__ import annotations

import time

import torch

from .device import synchronize
from .loaders import worker_loader
from .models import mlp
from .runtime import cpu_count
from .timing import BenchResult, benchmark
from .workloads import time_train_epoch


def measure_loader(loader, device: str | torch.device, *, epochs: int = 1) -> float:
    """Samples per second delivered to ``device`` (batches copied there and synchronized). Taught in lesson 05."""
    device = torch.device(device)
    samples = 0
    start = time.perf_counter()
    for _ in range(epochs):
        for inputs, _labels in loader:
            inputs = inputs.to(device, non_blocking=True)
            samples += len(inputs)
    synchronize(device)
    seconds = time.perf_counter() - start
    if samples == 0:
        raise ValueError("The loader yielded no samples.")
    return samples / seconds


def worker_counts(cores: int) -> list[int]:
    """The ``num_workers`` values worth measuring on ``cores`` cores: 0, a few, and the core count
    (`sweep_workers`'s default, lesson 05)."""
    return sorted({0, 1, 2, min(4, cores), min(8, cores), cores})


def sweep_workers(
    dataset,
    device: torch.device,
    counts: list[int] | None = None,
    *,
    batch_size: int = 128,
    verbose: bool = False,
) -> dict[int, float]:
    """Samples/s that ``dataset`` delivers to ``device`` for each worker count (lesson 05; the bench's row).

    ``counts`` defaults to `worker_counts` of the cores this process may use: 0, a few, and every core. Each count
    gets one warm-up epoch (starting its workers), then one timed epoch."""
    counts = worker_counts(cpu_count()) if counts is None else counts
    rates = {}
    for workers in counts:
        loader = worker_loader(dataset, batch_size, device=device, num_workers=workers)
        measure_loader(loader, device)  # warm-up: starts the workers
        rates[workers] = measure_loader(loader, device)
        if verbose:
            print(f"num_workers={workers:2d}: {rates[workers]:7,.0f} samples/s")
        del loader  # stops its persistent workers
    return rates


def epoch_samples(device: torch.device) -> int:
    """Samples per epoch in the loader experiments: FashionMNIST's 60,000 on a GPU, fewer on a CPU."""
    return 60_000 if torch.device(device).type == "cuda" else 12_000


def time_loader_epochs(loaders: dict[str, object], device: torch.device) -> dict[str, BenchResult]:
    """One epoch of a fresh lesson-03 MLP (784-512-512-10, Adam) per loader, timed (lesson 05; the bench's row)."""

    results = {}
    for name, loader in loaders.items():
        torch.manual_seed(0)
        results[name] = time_train_epoch(mlp(784, hidden=512).to(device), loader, device)
    return results


def copy_bandwidth(megabytes: int, device: str | torch.device, *, pinned: bool, repeat: int = 10) -> float:
    """Host-to-device copy bandwidth in GB/s from pinned or pageable host memory (median of ``repeat``).

    Taught in lesson 02.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"copy_bandwidth measures host-to-GPU copies; {device} is not a GPU.")
    host = torch.empty(megabytes * 2**20, dtype=torch.uint8, pin_memory=pinned)
    result = benchmark(lambda: host.to(device, non_blocking=pinned), device=device, repeat=repeat)
    return host.numel() / result.median / 1e9
