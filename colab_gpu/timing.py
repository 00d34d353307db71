"""Timing GPU code correctly: warm up, synchronize, repeat, report the median.

The measuring primitives of the course live here (lessons, the experiments in workloads.py and the bench all call
them): `benchmark`, `interleaved_medians`, `speedup`, `format_seconds`, `matmul_tflops`. This module imports nothing
of colab_gpu but `device`: everything that times something builds on it, never the other way round.

CUDA calls return as soon as the work is *queued*. ``time.time()`` around them measures the
launch, not the computation. And the first calls pay one-off costs (CUDA context, cuDNN
autotuning, memory allocation), so they must not be counted either. `benchmark` does both.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .device import synchronize


@dataclass(frozen=True)
class BenchResult:
    """Timings of one benchmarked function, in seconds. Taught in lesson 02."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def spread(self) -> float:
        """Interquartile range: how much the middle half of the repeats varied."""
        if len(self.times) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times, n=4, method="inclusive")
        return q3 - q1

    def __str__(self) -> str:
        return f"{format_seconds(self.median)} median (±{format_seconds(self.spread / 2)}, n={len(self.times)})"


def format_seconds(seconds: float) -> str:
    """Format a duration with a unit a human reads at a glance (``'1.23 ms'``). Taught in lesson 02."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def benchmark(
    fn: Callable[[], object],
    *,
    device: str | torch.device,
    warmup: int = 3,
    repeat: int = 10,
) -> BenchResult:
    """Time ``fn()`` on ``device`` the right way.

    Args:
        fn: the work to time, called with no arguments.
        device: the device ``fn`` runs on; it is synchronized before and after each call.
        warmup: untimed calls first (CUDA context, cuDNN autotuning and allocator warm-up).
        repeat: timed calls; the median is robust to the odd slow one.

    Returns:
        A `BenchResult` with every timing, its median and spread.

    Example:
        >>> x = torch.randn(256, 256)
        >>> result = benchmark(lambda: x @ x, device="cpu", repeat=5)
        >>> result.median > 0
        True

    Taught in lesson 02.
    """
    if warmup < 0 or repeat < 1:
        raise ValueError(f"benchmark needs warmup >= 0 and repeat >= 1, got warmup={warmup}, repeat={repeat}.")
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        # Without this the clock stops when the kernels are queued, not when they finish.
        synchronize(device)
        times.append(time.perf_counter() - start)
    return BenchResult(tuple(times))


def interleaved_medians(runs: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    """Median seconds of each callable over ``repeat`` rounds, alternating them so drifts (clocks, heat, a busy
    neighbour) hit all alike. CPU work: callables that queue GPU work must synchronize themselves."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def speedup(slow: BenchResult, fast: BenchResult) -> float:
    """How many times faster ``fast`` is than ``slow`` (ratio of medians). Taught in lesson 02."""
    return slow.median / fast.median


def matmul_tflops(n: int, dtype: torch.dtype, device: torch.device, repeat: int = 10) -> float:
    """Measured TFLOP/s of an n x n x n matrix product (2 n^3 floating-point operations)."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n**3 / benchmark(lambda: a @ b, device=device, repeat=repeat).median / 1e12
