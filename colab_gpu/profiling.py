"""Reading a torch.profiler run as a few numbers a learner can act on (lesson 10).

`summarize_profile` turns a finished ``torch.profiler.profile`` (run with a ``schedule`` and ``prof.step()``
once per training step) into a `ProfileSummary`: time per step, the share of each ``record_function`` label,
host reads of device values per step (each one a synchronization on a GPU), operator calls per step, and on a
GPU the kernel launches per step and the share of the step time the GPU was busy; given the step's floating-point
work and this GPU's measured matmul peak, also the TFLOP/s it achieved against that peak.

This module is the one home of the *regime rule* (`ProfileSummary.regime`, a `Regime`): a step is input-bound,
launch-bound, GPU-bound or (on a CPU runtime) CPU-bound, and which levers pay depends on which. `profile_step`
profiles any step (a training step, a decode step) and returns its summary; lessons 04, 05, 10, 11, 12 and 14 call
it to explain their own figures on the learner's runtime.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

from .device import synchronize
from .profile_events import (  # noqa: F401 (the profile's vocabulary, read here too)
    HOST_READ,
    LAUNCHES,
    STEP_PREFIX,
    SYNCS,
    Span,
    _covered_us,
    _uncovered_us,
    is_device_annotation,
    spans_of,
)
from .regimes import INPUT_BOUND_SHARE, Regime, regime_of  # noqa: F401 (Regime: its public home is here too)
from .timing import format_seconds


@dataclass(frozen=True)
class ProfileSummary:
    """What a profile says about one training step, averaged over the profiled steps. Taught in lesson 10.

    ``achieved_tflops`` is the step's floating-point work over its time (when the caller gave the work per step),
    and ``peak_tflops`` the measured matmul peak of this GPU it is compared with (the caller's measurement, e.g.
    ``cg.timing.matmul_tflops`` in the step's precision). `regime` reads the whole summary as one of four regimes.
    """

    steps: int
    step_ms: float
    shares: dict[str, float] = field(default_factory=dict)  # record_function label -> fraction of step time
    host_reads_per_step: float = 0.0
    ops_per_step: float = 0.0
    launches_per_step: float | None = None  # GPU only
    gpu_busy: float | None = None  # fraction of the step time some kernel or copy ran; GPU only
    input_wait: float = 0.0  # fraction of the step spent in "data" while no kernel ran (CPU runtime: the data share)
    achieved_tflops: float | None = None  # flops per step / step time, when the flops were given
    peak_tflops: float | None = None  # this GPU's measured matmul peak, as given by the caller

    @property
    def share_of_peak(self) -> float | None:
        """Achieved TFLOP/s over the measured matmul peak, when both are known."""
        if self.achieved_tflops is None or not self.peak_tflops:
            return None
        return self.achieved_tflops / self.peak_tflops

    @property
    def regime(self) -> Regime:
        """What bounds this step: the course's one regime rule (lesson 10; `colab_gpu.regimes`)."""
        return regime_of(self)

    def advice(self) -> str:
        """The regime's whole text: what bounds the step, what helps (with the lesson that teaches it), what cannot."""
        regime = self.regime
        return f"{regime} What helps: {'; '.join(regime.levers)}. What cannot help here: {'; '.join(regime.useless)}."

    def __str__(self) -> str:
        lines = [f"{self.steps} profiled steps, {format_seconds(self.step_ms / 1e3)} per step"]
        lines += [f"  {label:<10} {share:6.1%} of the step" for label, share in self.shares.items()]
        lines.append(f"  host reads of tensor values per step: {self.host_reads_per_step:g}")
        lines.append(f"  operator calls per step: {self.ops_per_step:g}")
        if self.gpu_busy is not None:
            lines.append(
                f"  kernel launches per step: {self.launches_per_step:g}; GPU busy {self.gpu_busy:.0%} of the step"
            )
            if "data" in self.shares:
                lines.append(f"  the GPU waits for data {self.input_wait:.0%} of the step")
        if self.achieved_tflops is not None:
            peak = f", {self.share_of_peak:.0%} of this GPU's measured matmul peak" if self.share_of_peak else ""
            lines.append(f"  {self.achieved_tflops:.3g} TFLOP/s{peak}")
        lines.append(f"regime: {self.advice()}")
        return "\n".join(lines)


def summarize_spans(
    spans: list[Span],
    labels: Iterable[str] = ("data", "forward", "backward", "step"),
    *,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
) -> ProfileSummary:
    """The `ProfileSummary` of ``spans`` (`spans_of`), counting only what happened inside the profiled steps."""
    steps = [s for s in spans if s.name.startswith(STEP_PREFIX) and not s.on_device]
    if not steps:
        raise ValueError(
            "The profile has no recorded training steps. Profile with schedule=torch.profiler.schedule("
            "wait=1, warmup=1, active=3, repeat=1) (without repeat=1 the schedule starts a new, empty "
            "cycle), call prof.step() at the end of every step, run more steps than wait + warmup + "
            "active, and read the profile after the `with` block ends."
        )
    first, last = min(s.start_us for s in steps), max(s.end_us for s in steps)
    inside = [s for s in spans if first <= s.start_us <= last]
    step_us = sum(s.duration_us for s in steps)
    shares = {
        label: sum(s.duration_us for s in inside if s.name == label and not s.on_device) / step_us for label in labels
    }
    kernels = [(s.start_us, s.end_us) for s in inside if s.on_device]
    on_gpu = bool(kernels) or any(s.name in LAUNCHES for s in inside)
    data = [(s.start_us, s.end_us) for s in inside if s.name == "data" and not s.on_device]
    count = len(steps)
    step_ms = step_us / count / 1e3
    return ProfileSummary(
        steps=count,
        step_ms=step_ms,
        shares={label: share for label, share in shares.items() if share > 0},
        host_reads_per_step=sum(
            s.name == HOST_READ and (s.synchronizes if on_gpu else not s.in_framework) for s in inside
        )
        / count,
        ops_per_step=sum(s.top_level_op and not s.on_device for s in inside) / count,
        launches_per_step=sum(s.name in LAUNCHES for s in inside) / count if on_gpu else None,
        gpu_busy=min(_covered_us(kernels) / (last - first), 1.0) if on_gpu else None,
        input_wait=_uncovered_us(data, kernels) / step_us,
        achieved_tflops=flops_per_step / (step_ms * 1e-3) / 1e12 if flops_per_step else None,
        peak_tflops=peak_tflops,
    )


def summarize_profile(
    prof,
    labels: Iterable[str] = ("data", "forward", "backward", "step"),
    *,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
) -> ProfileSummary:
    """Reduce a finished ``torch.profiler.profile`` to a `ProfileSummary`. Taught in lesson 10.

    ``labels`` are the ``torch.profiler.record_function`` names whose share of the step is reported;
    ``flops_per_step`` (the step's floating-point operations) and ``peak_tflops`` (this GPU's measured matmul
    peak) add the achieved TFLOP/s and its share of the peak.
    """
    return summarize_spans(spans_of(prof), labels, flops_per_step=flops_per_step, peak_tflops=peak_tflops)


def profile_step(
    step: Callable[[], object],
    device: str | torch.device,
    *,
    steps: int = 5,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
) -> ProfileSummary:
    """Profile ``steps`` calls of ``step`` (one whole training or inference step each) and return their summary.

    One call is skipped and one warms up first (``torch.profiler.schedule(wait=1, warmup=1, active=steps)``);
    CUDA activity is recorded on a GPU; ``prof.step()`` follows every call. The device is synchronized after the
    warm-up and after the last call only: in between, the CPU queues ahead of the GPU as a training loop does,
    and the profiled time is that of ``steps`` whole steps, their kernels included. Label the input part of
    ``step`` with ``torch.profiler.record_function("data")`` for the input-bound rule to see it. Read ``.regime``
    of the result.

    Args:
        step: one whole step, called with no arguments.
        device: the device it runs on.
        steps: profiled calls (after the skipped and the warm-up one).
        flops_per_step: the step's floating-point operations (e.g. 6 x parameters x samples for an MLP's training
            step), for the achieved TFLOP/s.
        peak_tflops: this GPU's measured matmul peak in the step's precision (``cg.timing.matmul_tflops``).

    Example:
        >>> layer = torch.nn.Linear(32, 32)
        >>> summary = profile_step(lambda: layer(torch.randn(8, 32)).sum().backward(), "cpu", steps=2)
        >>> summary.steps, summary.regime.name
        (2, 'CPU-bound')

    Taught in lesson 10; lessons 04, 05, 11, 12 and 14 call it to name the regime of their own figures.
    """
    if steps < 1:
        raise ValueError(f"profile_step needs steps >= 1 profiled calls, got steps={steps}.")
    prof = _profile_calls(step, torch.device(device), steps)
    return summarize_profile(prof, flops_per_step=flops_per_step, peak_tflops=peak_tflops)


def _profile_calls(step: Callable[[], object], device: torch.device, steps: int):
    """The finished profile of ``steps`` calls of ``step`` after one skipped and one warm-up call, with
    ``prof.step()`` after each; the device synchronized after the warm-up (no queued work runs into the first
    profiled step) and after the last call (its kernels end inside it), never in between."""
    from torch.profiler import ProfilerActivity, profile, schedule

    # Kineto, the profiler's C++ library, logs every profile to stderr ("profiler_start", and on a CPU runtime
    # "gpuGetDeviceCount failed"): chatter in a learner's notebook. It reads this once, before the first profile.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(
        activities=activities, schedule=schedule(wait=1, warmup=1, active=steps, repeat=1), acc_events=True
    ) as prof:
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

    device = torch.device(device)
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
