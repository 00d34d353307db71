"""Timing GPU code correctly: warm up, synchronize, repeat, report the median.

The measuring primitives of the course live here (lessons and ``bench`` both call them): `benchmark`,
`interleaved_medians`, `matmul_tflops`, and the training-step, epoch and fresh-process conv-step timers.

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
from torch import nn

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


def time_train_step(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    precision: str = "fp32",
    tf32: bool | None = None,
    repeat: int = 5,
) -> tuple[BenchResult, float | None]:
    """Median time of one SGD training step in ``precision``, and its peak MiB (GPU only). Lessons 02-06.

    ``tf32``: True/False switches TF32 on/off for the measurement only; None (default) keeps the
    caller's settings. Either way the caller's TF32 and cuDNN settings are the same afterwards.
    The model is used as given (already on the device of ``inputs``), in training mode whatever mode it was
    left in: a training step of a model that `fit` or `evaluate` left in eval mode would time BatchNorm on its
    running statistics and no dropout, not training. Its mode is put back afterwards.
    """
    from .memory import measure_peak
    from .precision import make_scaler, resolve_precision, restored_backend_settings, set_tf32
    from .train import train_step

    device = inputs.device
    chosen = resolve_precision(precision, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = make_scaler(chosen, device)
    was_training = model.training
    with restored_backend_settings():
        if tf32 is not None:
            set_tf32(tf32)

        def step() -> None:
            train_step(model, inputs, labels, optimizer, autocast_dtype=chosen.dtype, scaler=scaler)

        model.train()
        try:
            step()  # warm-up outside the peak measurement
            with measure_peak(device) as peak:
                step()
            return benchmark(step, device=device, repeat=repeat), peak.peak_mib
        finally:
            model.train(was_training)


def time_train_epoch(model: nn.Module, loader, device: str | torch.device, *, repeat: int = 3) -> BenchResult:
    """Median time of one training epoch of ``model`` (Adam) over ``loader``, after one warm-up epoch.

    Taught in lesson 03.
    """
    from .train import train_epoch

    device = torch.device(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    return benchmark(
        lambda: train_epoch(model, loader, optimizer, device, progress=False), device=device, warmup=1, repeat=repeat
    )


@dataclass(frozen=True)
class ConvStepTiming:
    """A CNN training step timed in a fresh process: its first step (one-off costs) and the steady state.

    Taught in lesson 04.
    """

    first_step_s: float  # cuDNN/cuBLAS loading (CUDA started with the model) and, with cudnn.benchmark, autotuning
    steady: BenchResult


def _conv_step_child(
    device: str,
    width: int,
    shape: tuple[int, ...],
    classes: int,
    channels_last: bool,
    cudnn_benchmark: bool,
    repeat: int,
) -> tuple[float, tuple[float, ...]]:
    # Runs in a spawned process: nothing cached by the caller (cuDNN plans, autotuning) exists here.
    from .models import small_cnn
    from .train import train_step

    torch.backends.cudnn.benchmark = cudnn_benchmark
    torch.manual_seed(0)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = small_cnn(shape[1], classes, width=width).to(device, memory_format=layout)
    inputs = torch.randn(*shape, device=device).contiguous(memory_format=layout)
    labels = torch.randint(0, classes, (shape[0],), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> None:
        train_step(model, inputs, labels, optimizer)

    first = benchmark(step, device=device, warmup=0, repeat=1).median  # the one-off costs, synchronized
    return first, benchmark(step, device=device, warmup=2, repeat=repeat).times


def time_conv_step_fresh(
    device: str | torch.device,
    *,
    width: int,
    shape: tuple[int, ...],
    classes: int = 10,
    channels_last: bool = False,
    cudnn_benchmark: bool = False,
    repeat: int = 10,
) -> ConvStepTiming:
    """Time a `small_cnn` training step on random ``shape`` inputs in a fresh Python process. Lesson 04.

    Why a fresh process: cuDNN caches the plan it picked for each convolution shape, and that
    cache is keyed without the ``cudnn.benchmark`` flag. Timed one after the other in one
    process, the "benchmark on" run reuses the "off" run's plans and the comparison measures
    nothing. A spawned child (about 2-5 s to start) begins with empty caches.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    device = torch.device(device)
    # spawn, not fork: a forked child of a process that already used CUDA cannot use CUDA.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        first, times = pool.submit(
            _conv_step_child, str(device), width, tuple(shape), classes, channels_last, cudnn_benchmark, repeat
        ).result()
    return ConvStepTiming(first, BenchResult(times))
