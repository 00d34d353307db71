"""Profiling a step with torch.profiler and reading it as a few numbers a learner can act on (lesson 10).

`summarize_profile` turns a finished ``torch.profiler.profile`` (run with a ``schedule`` and ``prof.step()``
once per training step) into a `ProfileSummary` (`colab_gpu.measure.profile_summary`): time per step, the share of each
``record_function`` label, host reads of device values per step, operator calls per step, and on a GPU the kernel
launches, the kernels' time and the share of the step the GPU was busy; given the step's floating-point work and
this GPU's measured matmul peak, also the TFLOP/s it achieved against that peak.

`profile_step` times any step without the profiler, then profiles it, and returns its summary, whose ``regime`` is
the regime rule's verdict (`colab_gpu.measure.regimes`: input-, launch-, GPU- or CPU-bound, and which levers pay);
lessons 04, 05, 10, 11, 12 and 14 call it to explain their own figures on the learner's runtime.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from ..hardware.device import checked_device, synchronize
from ..hardware.machine import cpu_count
from .profile_events import (
    SCALER_LABEL,
    spans_of,
)
from .profile_summary import ProfileSummary, summarize_spans
from .timing import compare_steps

# When this names a file (the GPU suite sets it for each lesson and for the bench), `profile_step` appends each
# summary's record to it, one JSON line per profiled step: a GPU run's profiles, committed with the run and replayed
# by the regime tests on the CPU (tests/test_regimes.py).
PROFILES_ENV = "COLAB_GPU_PROFILES"


def summarize_profile(
    prof,
    labels: Iterable[str] = ("data", "forward", "backward", "step"),
    *,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
    peak_precision: str | None = None,
    unprofiled_step_ms: float | None = None,
    unprofiled_host_ms: float | None = None,
    bytes_per_step: float | None = None,
    peak_gbps: float | None = None,
) -> ProfileSummary:
    """Reduce a finished ``torch.profiler.profile`` to a `ProfileSummary`. Taught in lesson 10.

    ``labels`` are the ``torch.profiler.record_function`` names whose share of the step is reported;
    ``flops_per_step`` (the step's floating-point operations, e.g. from ``torch.utils.flop_counter``) and
    ``peak_tflops`` (this GPU's measured matmul peak in the step's precision, named by ``peak_precision``) add the
    achieved TFLOP/s and its share of the peak. ``unprofiled_step_ms``, the same step timed without the profiler,
    is what the GPU's busy share divides by; without it, the profiled step (stretched by the profiler) is.
    ``unprofiled_host_ms``, the host's time to queue one such step (the clock before the final synchronize), is the
    host's part the regime rule weighs against the kernels' (`colab_gpu.measure.step_parts`). ``bytes_per_step`` and
    ``peak_gbps`` (``cg.copy_gbps``) add the GB/s a memory-bound step moves and its share of the copy bandwidth.
    """
    if not hasattr(prof, "events"):
        raise TypeError(
            f"summarize_profile needs the profiler itself (the `prof` of `with profile(...) as prof:`), got "
            f"{type(prof).__name__}. Pass prof, not prof.key_averages() or prof.events()."
        )
    return summarize_spans(
        spans_of(prof),
        labels,
        flops_per_step=flops_per_step,
        peak_tflops=peak_tflops,
        peak_precision=peak_precision,
        unprofiled_step_ms=unprofiled_step_ms,
        unprofiled_host_ms=unprofiled_host_ms,
        host_cores=cpu_count(),  # the profile ran here: the input levers' order depends on this host's cores
        bytes_per_step=bytes_per_step,
        peak_gbps=peak_gbps,
    )


def profile_step(
    step: Callable[[], object],
    device: str | torch.device,
    *,
    steps: int = 5,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
    peak_precision: str | None = None,
    bytes_per_step: float | None = None,
    peak_gbps: float | None = None,
) -> ProfileSummary:
    """Time ``step`` without the profiler, then profile ``steps`` calls of it, and return their summary.

    The step is measured twice because the profiler stretches it: first timed with `compare_steps` (K calls
    between two synchronizations, so the CPU queues ahead as a training loop does), then profiled, one call
    skipped and one warming up first (``torch.profiler.schedule(wait=1, warmup=1, active=steps)``), CUDA activity
    recorded on a GPU, ``prof.step()`` after every call and the device synchronized only after the warm-up and the
    last call. The busy share is the profile's kernel time per step over the unprofiled step. GradScaler.step runs
    under its own label, so the scaler's host read is named apart from the loop's own. Label the input part of
    ``step`` with ``torch.profiler.record_function("data")`` for the input-bound rule to see it. Read ``.regime``
    of the result.

    Args:
        step: one whole step, called with no arguments.
        device: the device it runs on.
        steps: profiled calls (after the skipped and the warm-up one).
        flops_per_step: the step's floating-point operations, counted with ``torch.utils.flop_counter``
            (lesson 10), for the achieved TFLOP/s.
        peak_tflops: this GPU's measured matmul peak in the step's precision (``cg.workloads.matmul_peak``).
        peak_precision: that precision's name, for the text ("fp32", "fp16" ...).
        bytes_per_step: the bytes the step reads and writes (a decode step: its weights and its cache), for the
            achieved GB/s (lesson 14).
        peak_gbps: this device's measured copy bandwidth (``cg.copy_gbps``).

    Example:
        >>> layer = torch.nn.Linear(32, 32)
        >>> summary = profile_step(lambda: layer(torch.randn(8, 32)).sum().backward(), "cpu", steps=2)
        >>> summary.steps, summary.regime.name
        (2, 'CPU-bound')

    Taught in lesson 10; lessons 04, 05, 11, 12 and 14 call it to name the regime of their own figures.
    """
    if not callable(step):
        raise TypeError(
            f"profile_step needs the step as a function to call, got a {type(step).__name__}. Wrap it: "
            "cg.profile_step(lambda: my_step(), device)."
        )
    if steps < 1:
        raise ValueError(f"profile_step needs steps >= 1 profiled calls, got steps={steps}.")
    device = checked_device(device, "cg.profile_step")
    timing = compare_steps({"step": step}, device=device, warmup=1)["step"]
    prof = _profile_calls(step, device, steps)
    summary = summarize_spans(
        spans_of(prof),
        flops_per_step=flops_per_step,
        peak_tflops=peak_tflops,
        peak_precision=peak_precision,
        unprofiled_step_ms=timing.median * 1e3,
        steps_per_sample=timing.steps_per_sample,
        unprofiled_host_ms=timing.host_median * 1e3,
        host_cores=cpu_count(),
        bytes_per_step=bytes_per_step,
        peak_gbps=peak_gbps,
    )
    _keep_record(summary, step, device)
    return summary


def _keep_record(summary: ProfileSummary, step: Callable[[], object], device: torch.device) -> None:
    """Append the summary's record, with its step's name, device and verdict, to the file `PROFILES_ENV` names."""
    path = os.environ.get(PROFILES_ENV)
    if not path:
        return
    regime = summary.regime
    entry = {
        "step": getattr(step, "__qualname__", type(step).__name__),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "regime": regime.name,
        "kernels": regime.kernels,
        "record": summary.to_record(),
    }
    with open(path, "a", encoding="utf-8") as profiles:
        profiles.write(json.dumps(entry) + "\n")


@contextmanager
def _scaler_steps_labelled():
    """Run every GradScaler.step under the `SCALER_LABEL` label while profiling, so that the read of its inf/NaN
    flag (fp16: every step, before the optimizer's step) is named as the scaler's, not the learner's."""
    from torch.profiler import record_function

    scaler = torch.amp.GradScaler
    original = scaler.step

    @functools.wraps(original)
    def step(self, *args, **kwargs):
        with record_function(SCALER_LABEL):
            return original(self, *args, **kwargs)

    scaler.step = step
    try:
        yield
    finally:
        scaler.step = original


def _profile_calls(step: Callable[[], object], device: torch.device, steps: int):
    """The finished profile of ``steps`` calls of ``step`` after one skipped and one warm-up call, with
    ``prof.step()`` after each; the device synchronized after the warm-up (no queued work runs into the first
    profiled step) and after the last call (its kernels end inside it), never in between."""
    from torch.profiler import ProfilerActivity, profile, schedule

    # Kineto, the profiler's C++ library, logs every profile to stderr ("profiler_start", and on a CPU runtime
    # "gpuGetDeviceCount failed"): chatter in a learner's notebook. It reads this once, before the first profile.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with (
        _scaler_steps_labelled(),
        profile(
            activities=activities, schedule=schedule(wait=1, warmup=1, active=steps, repeat=1), acc_events=True
        ) as prof,
    ):
        for call in range(2 + steps):
            step()
            if call in (1, 1 + steps):
                synchronize(device)
            prof.step()
    return prof


def _forever(loader: Iterable) -> Iterator:
    """The loader's batches, starting over at the end (a profile may want more steps than one epoch has)."""
    while True:
        yield from loader


def profile_training_steps(
    model: nn.Module,
    loader: Iterable,
    optimizer: torch.optim.Optimizer,
    device: str | torch.device,
    *,
    steps: int = 5,
    read_loss_every_step: bool = False,
):
    """Profile ``steps`` labelled training steps (after one skipped and one warm-up step); return the profiler.

    Each step is split into ``record_function`` regions "data", "forward", "backward" and "step"; with
    ``read_loss_every_step`` the loop also reads the loss with ``.item()`` (lesson 03's mistake). CUDA activity is
    recorded on a GPU, and the steps are profiled as `profile_step` profiles any step. Read the result with
    `summarize_profile`, ``key_averages()`` or ``export_chrome_trace``. Taught in lesson 10; the bench's
    "gpu_busy" row runs it too.
    """
    from torch.profiler import record_function

    device = checked_device(device, "cg.profile_training_steps")
    batches = _forever(loader)
    model.train()

    def step() -> None:
        with record_function("data"):
            inputs, labels = next(batches)
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with record_function("forward"):
            loss = nn.functional.cross_entropy(model(inputs), labels)
        with record_function("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("step"):
            optimizer.step()
        if read_loss_every_step:
            loss.item()

    return _profile_calls(step, device, steps)
