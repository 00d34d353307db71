"""The course's experiments: timing a training step, an epoch and a conv step in a fresh process, and the models and
batch sizes the lessons and the bench time (lessons 03, 04, 06 and 11; the bench's rows in colab_gpu.bench)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import torch
from torch import nn

from ..hardware.device import checked_device, synchronize
from ..measure.memory import measure_peak
from ..measure.timing import MIN_SAMPLES, BenchResult, benchmark, compare_steps, matmul_tflops
from ..train.compiling import CompileComparison, compile_support, first_call, first_line
from ..train.models import mlp, residual_mlp, small_cnn
from ..train.precision import Precision, make_scaler, resolve_precision, restored_backend_settings, set_tf32, tf32_mode
from ..train.steps import train_epoch, train_step
from .sizes import sized


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
    device = checked_device(device, "cg.time_train_epoch")
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
) -> tuple[float, tuple[float, ...], int]:
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
    # A step of a few ms: K steps per sample between two synchronizations, as a training loop queues them.
    steady = compare_steps({"step": step}, device=device, samples=max(repeat, MIN_SAMPLES), warmup=2)["step"]
    return first, steady.times, steady.steps_per_sample


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

    The first step is timed alone (its one-off costs); the steady steps with `compare_steps`, K steps per sample
    between two synchronizations, ``repeat`` samples (at least 7).

    Why a fresh process: cuDNN caches the plan it picked for each convolution shape, and that
    cache is keyed without the ``cudnn.benchmark`` flag. Timed one after the other in one
    process, the "benchmark on" run reuses the "off" run's plans and the comparison measures
    nothing. A spawned child (about 2-5 s to start) begins with empty caches.
    """
    device = checked_device(device, "cg.time_conv_step_fresh")
    # spawn, not fork: a forked child of a process that already used CUDA cannot use CUDA.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        first, times, k = pool.submit(
            _conv_step_child, str(device), width, tuple(shape), classes, channels_last, cudnn_benchmark, repeat
        ).result()
    return ConvStepTiming(first, BenchResult(times, k))


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
    return sized("step_repeats", device)


def workload_step(
    workload: Workload, device: torch.device, precision: Precision | str = "fp32", compile_mode: str | None = None
) -> Callable[[], object]:
    """One SGD training step of a fresh, seeded ``workload`` model per call, in ``precision``, through
    ``torch.compile(mode=compile_mode)`` when a mode is given: what `compare_compiled` times and ``cg.profile_step``
    profiles to name the step's regime. Lesson 11."""
    model, inputs, labels = _prepared(workload, device)
    if compile_mode is not None:
        model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
    chosen = resolve_precision(precision, inputs.device)
    optimizer, scaler = torch.optim.SGD(model.parameters(), lr=1e-3), make_scaler(chosen, inputs.device)
    return lambda: train_step(model, inputs, labels, optimizer, autocast_dtype=chosen.dtype, scaler=scaler)


def compare_compiled(
    workload: Workload, device: torch.device, modes: tuple[str, ...] = ("default",), precision: Precision | str = "fp32"
) -> CompileComparison:
    """``workload``'s training step eager and compiled in each of ``modes``, timed against each other with
    `compare_steps`; each mode's first call (from nothing compiled: ``torch._dynamo.reset()``); one step's peak (GPU).

    A mode that cannot run here is left out with the reason instead of raising: no compiler or Triton
    (`compile_support`), CUDA graphs without a GPU, an error at the first call (Triton on a T4). float32 matmuls may
    use TF32 where the GPU has it, eager and compiled alike, as lesson 06 trains (Inductor warns when it compiles
    them with TF32 off); the caller's settings come back afterwards. Lesson 11; the bench's compile rows.
    """
    device = torch.device(device)
    chosen = resolve_precision(precision, device)
    support = compile_support(device)
    torch._dynamo.reset()
    steps, first_call_s, peak_mib, failed, cache_hits = {}, {}, {}, {}, {}
    with restored_backend_settings():
        set_tf32(True)  # the first calls compile for the settings the steps are timed with
        for mode in ("eager", *modes):
            no_graphs = mode == "reduce-overhead" and device.type != "cuda"
            if mode != "eager" and (not support or no_graphs):
                failed[mode] = "CUDA graphs replay CUDA kernels: they need a CUDA GPU." if no_graphs else support.reason
                continue
            step = workload_step(workload, device, chosen, None if mode == "eager" else mode)
            try:  # for a compiled mode: capture and compile, from Inductor's cache where it has the graphs
                first_call_s[mode], hits = first_call(step, device)
            except Exception as error:  # noqa: BLE001 - any failure to compile means: train eagerly, and say why
                failed[mode] = f"it failed at its first call ({first_line(error)})"
                continue
            cache_hits.update({mode: hits} if mode != "eager" else {})
            with measure_peak(device) as peak:
                step()
            steps[mode], peak_mib[mode] = step, peak.peak_mib
        timed = compare_steps(steps, device=device)
    return CompileComparison(workload.name, chosen.name, timed, first_call_s, peak_mib, failed, cache_hits)


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


MLP_STEP = Workload("MLP 784-512-512-10, batch 256", lambda: mlp(784, hidden=512), (256, 1, 28, 28))
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


def fusion_workload(device: torch.device) -> Workload:
    """Lesson 11's GPU-bound model (the bench's "compile" row): `residual_mlp` blocks, whose element-wise chains eager
    mode runs one memory-bound kernel per operator, on a batch that keeps the GPU busy (the kernels, not a step's
    ~150 launches, take the time): 2^20 rows from 40 GiB, 2^19 from 12 GiB (a T4), else 2^17. Width 64 keeps even its
    matmuls memory-bound, far below any GPU's matmul peak. On a CPU: one block, batch 256 (compiling is slow there)."""
    device = torch.device(device)
    if device.type != "cuda":
        return Workload("residual MLP, 1 block of width 64, batch 256", lambda: residual_mlp(64, 1), (256, 64))
    gib = torch.cuda.get_device_properties(device).total_memory / 2**30
    rows = 2**20 if gib >= 40 else 2**19 if gib >= 12 else 2**17
    return Workload(f"residual MLP, 4 blocks of width 64, batch {rows:,}", lambda: residual_mlp(64, 4), (rows, 64))


def training_flops(workload: Workload) -> float:
    """Floating-point operations of one training step of ``workload``: its matmuls and convolutions, forward and
    backward, as ``torch.utils.flop_counter`` counts them on the meta device (no memory, no time). Lesson 11."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = workload.make_model()
        inputs, labels = torch.randn(workload.shape), torch.zeros(workload.shape[0], dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        nn.functional.cross_entropy(model(inputs), labels).backward()
    return float(counter.get_total_flops())


def matmul_peak(device: torch.device, precision: Precision | str = "fp32", *, tf32: bool = True) -> float | None:
    """This GPU's measured matmul TFLOP/s in ``precision`` (the best of n = 4096 and 8192; float32 with TF32 when
    ``tf32``): what ``cg.profile_step`` compares a step's achieved TFLOP/s with. None on a CPU. Lesson 11."""
    device = checked_device(device, "cg.workloads.matmul_peak")
    if device.type != "cuda":
        return None
    dtype = resolve_precision(precision, device).dtype or torch.float32
    with tf32_mode(tf32):
        return max(matmul_tflops(n, dtype, device) for n in (4096, 8192))
