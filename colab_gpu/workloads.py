"""The course's experiments: timing a training step, an epoch and a conv step in a fresh process, and the models and
batch sizes the lessons and the bench time (lessons 03, 04, 06 and 11; the bench's rows in colab_gpu.bench)."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch
from torch import nn

from .device import synchronize
from .memory import measure_peak
from .models import mlp, small_cnn
from .precision import make_scaler, resolve_precision, restored_backend_settings, set_tf32
from .timing import BenchResult, benchmark
from .train import _autocast, train_epoch, train_step


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
    device = torch.device(device)
    # spawn, not fork: a forked child of a process that already used CUDA cannot use CUDA.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        first, times = pool.submit(
            _conv_step_child, str(device), width, tuple(shape), classes, channels_last, cudnn_benchmark, repeat
        ).result()
    return ConvStepTiming(first, BenchResult(times))


@dataclass(frozen=True)
class Workload:
    """A model and a batch shape whose training step an experiment times (lesson 06 times the same ones)."""

    name: str
    make_model: Callable[[], nn.Module]
    shape: tuple[int, ...]


def time_step(
    workload: Workload,
    device: torch.device,
    precision: str = "fp32",
    *,
    tf32: bool = False,
    channels_last: bool = False,
) -> tuple[BenchResult, float | None]:
    """Step time and peak MiB (GPU only) of a fresh ``workload`` model on random inputs (lesson 06; bench rows).

    ``tf32=False`` measures IEEE float32; ``channels_last`` puts the model and the batch in that layout."""
    model, inputs, labels = _prepared(workload, device, channels_last)
    return time_train_step(model, inputs, labels, precision=precision, tf32=tf32, repeat=_repeats(inputs.device))


def _prepared(workload: Workload, device: torch.device, channels_last: bool = False):
    """A fresh, seeded ``workload`` model on ``device`` with its random batch and labels."""
    device = torch.device(device)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(0)
    inputs = torch.randn(*workload.shape, device=device).contiguous(memory_format=layout)
    labels = torch.randint(0, 10, (workload.shape[0],), device=device)
    return workload.make_model().to(device, memory_format=layout), inputs, labels


def _repeats(device: torch.device) -> int:
    return 5 if device.type == "cuda" else 3


@dataclass(frozen=True)
class CompiledStep:
    """A compiled training step: the first call (capture and compile, seconds), then its steady step time."""

    mode: str
    first_call_s: float
    step: BenchResult
    peak_mib: float | None


def time_compiled_step(
    workload: Workload, device: torch.device, mode: str = "default", precision: str = "fp32", *, tf32: bool = False
) -> CompiledStep:
    """The first call and the steady step time of ``torch.compile(model, mode=mode)`` (lesson 11; bench rows).

    Compare ``step`` with `time_step` of the same workload and settings: same model, batch and SGD step, eager.
    The first call (forward and backward, in ``precision``) compiles both; the steps after it reuse them.
    """
    model, inputs, labels = _prepared(workload, device)
    compiled = torch.compile(model, mode=None if mode == "default" else mode)
    with restored_backend_settings():
        set_tf32(tf32)  # the settings the steps are timed with: the first call compiles for them
        synchronize(inputs.device)
        start = time.perf_counter()
        with _autocast(inputs.device, resolve_precision(precision, inputs.device).dtype):
            loss = nn.functional.cross_entropy(compiled(inputs), labels)
        loss.backward()
        synchronize(inputs.device)
        first_call_s = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    step, peak = time_train_step(
        compiled, inputs, labels, precision=precision, tf32=tf32, repeat=_repeats(inputs.device)
    )
    return CompiledStep(mode, first_call_s, step, peak)


def hand_loop_epoch(model: nn.Module, loader: Iterable, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """The minimal training loop: no metrics, no checks. The baseline `fit` is compared with."""
    model.train()
    for inputs, labels in loader:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    synchronize(device)


MLP_STEP = Workload("MLP 784-512-512-10", lambda: mlp(784, hidden=512), (256, 1, 28, 28))
CNN_STEP = Workload("small CNN, width 32", lambda: small_cnn(3, 10, width=32), (256, 3, 32, 32))
#: Launch-bound: eight narrow layers on 32 samples, microseconds of math per kernel (CUDA graphs' best case).
TINY_STEP = Workload("tiny MLP 64-64x8, batch 32", lambda: mlp(64, hidden=64, depth=8), (32, 64))


def amp_workloads(device: torch.device) -> dict[str, Workload]:
    """Lesson 06's two models: a matmul-heavy MLP (tensor cores' best case) and the CNN; small on a CPU."""
    if torch.device(device).type == "cuda":
        return {
            "MLP": Workload("MLP 1024-4096x3, batch 8192", lambda: mlp(1024, hidden=4096, depth=3), (8192, 1024)),
            "CNN": CNN_STEP,
        }
    return {
        "MLP": Workload("MLP 256-512x3, batch 256", lambda: mlp(256, hidden=512, depth=3), (256, 256)),
        "CNN": Workload("small CNN, width 16, batch 32", lambda: small_cnn(3, 10, width=16), (32, 3, 32, 32)),
    }


def compile_workloads(device: torch.device) -> dict[str, Workload]:
    """Lesson 11's models for compiled vs eager: the MLP and the CNN on a GPU; on a CPU the MLP only, smaller
    (compiling the CNN's forward and backward for a CPU takes more than half a minute on two cores)."""
    if torch.device(device).type == "cuda":
        return {"MLP": MLP_STEP, "CNN": CNN_STEP}
    return {"MLP": Workload("MLP 784-256-256-10, batch 128", lambda: mlp(784, hidden=256), (128, 1, 28, 28))}
