"""Reading a torch.profiler run as a few numbers a learner can act on (lesson 10).

`summarize_profile` turns a finished ``torch.profiler.profile`` (run with a ``schedule`` and ``prof.step()``
once per training step) into a `ProfileSummary`: time per step, the share of each ``record_function`` label,
host reads of device values per step (each one a synchronization on a GPU), operator calls per step, and on a
GPU the kernel launches per step and the share of the step time the GPU was busy. `ProfileSummary.advice`
names the biggest bottleneck and the lesson that fixes it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn

# A host read of a tensor's value (``.item()``, ``float(t)``, ``if t:``, printing a tensor) goes through this op.
# On a GPU, reading a CUDA tensor copies it back and waits for every queued kernel: the read has a synchronizing
# CUDA call under it, and only those are counted. A CPU runtime has no such call, so there every read counts,
# except those PyTorch makes of CPU values on purpose: the optimizer's step counters, a Dataset's labels.
HOST_READ = "aten::_local_scalar_dense"
FRAMEWORK_READS = ("Optimizer.step#", "enumerate(DataLoader)#")
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync")
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
STEP_PREFIX = "ProfilerStep"  # "ProfilerStep#3" in a trace, "ProfilerStep*" in events()


@dataclass(frozen=True)
class Span:
    """One profiled event reduced to what the summary needs: its name, where it ran, and when (microseconds)."""

    name: str
    on_device: bool  # a GPU kernel or copy, rather than a CPU event
    start_us: float
    end_us: float
    top_level_op: bool = False  # an aten operator called from Python, not from inside another operator
    in_framework: bool = False  # inside an optimizer's step() or a DataLoader's next batch
    synchronizes: bool = False  # a synchronizing CUDA call runs inside it

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


def is_device_annotation(event) -> bool:
    """Whether a profiler event is a ``record_function`` label's copy on the GPU timeline, not a kernel.

    With CUDA activities, Kineto also records each label ("data", "forward", ``ProfilerStep#3``...) on the GPU
    timeline ("gpu_user_annotation"), spanning its phase from the first kernel to the last, idle gaps included.
    Counted as a kernel it fills exactly the idle time a launch-bound step has; PyTorch's own tables leave these
    events out of the device totals too (pytorch#130730).
    """
    from torch.autograd import DeviceType

    return event.device_type != DeviceType.CPU and bool(getattr(event, "is_user_annotation", False))


def spans_of(prof) -> list[Span]:
    """The `Span` of every event of a finished ``torch.profiler.profile``, but the labels' GPU copies."""
    from torch.autograd import DeviceType

    spans = []
    for event in prof.events():
        if is_device_annotation(event):
            continue
        ancestors, parent = [], event.cpu_parent
        while parent is not None:
            ancestors.append(parent.name)
            parent = parent.cpu_parent
        top_level = event.name.startswith("aten::") and not (ancestors and ancestors[0].startswith("aten::"))
        in_framework = any(a.startswith(FRAMEWORK_READS) for a in ancestors)
        synchronizes = event.name == HOST_READ and any(_calls(child, SYNCS) for child in event.cpu_children)
        spans.append(
            Span(
                event.name,
                event.device_type != DeviceType.CPU,
                event.time_range.start,
                event.time_range.end,
                top_level,
                in_framework,
                synchronizes,
            )
        )
    return spans


def _calls(event, names: tuple[str, ...]) -> bool:
    """Whether ``event`` or one of the events it contains is one of ``names``."""
    return event.name in names or any(_calls(child, names) for child in event.cpu_children)


def _covered_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of ``intervals``: overlapping kernels (several streams) count once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


@dataclass(frozen=True)
class ProfileSummary:
    """What a profile says about one training step, averaged over the profiled steps. Taught in lesson 10."""

    steps: int
    step_ms: float
    shares: dict[str, float] = field(default_factory=dict)  # record_function label -> fraction of step time
    host_reads_per_step: float = 0.0
    ops_per_step: float = 0.0
    launches_per_step: float | None = None  # GPU only
    gpu_busy: float | None = None  # fraction of the step time some kernel or copy ran; GPU only

    def advice(self) -> str:
        """The biggest bottleneck this summary shows, and the lesson that fixes it."""
        data = self.shares.get("data", 0.0)
        if data >= 0.3:
            return (
                f"the input pipeline: {data:.0%} of each step waits for data. Lesson 05: workers, pinned "
                "memory, or the whole data set on the GPU (cg.DeviceLoader)."
            )
        if self.host_reads_per_step >= 1:
            return (
                f"{self.host_reads_per_step:.0f} host read(s) of a tensor's value per step (.item(), print, "
                "if on a tensor): on a GPU each one stops the CPU until the GPU catches up. Lesson 03: sum on "
                "the device, read once per epoch."
            )
        if self.gpu_busy is not None and self.gpu_busy < 0.5:
            return (
                f"the GPU is idle {1 - self.gpu_busy:.0%} of the step: {self.launches_per_step:g} kernel "
                "launches per step, each too small to keep it busy. Larger batches (lesson 06) or fewer, "
                "fused kernels (lesson 11, torch.compile)."
            )
        busy = f"the GPU is busy {self.gpu_busy:.0%} of the step" if self.gpu_busy is not None else "no waiting"
        return (
            f"{busy}: the computation itself is the cost. Lesson 06: mixed precision and channels_last make "
            "each kernel cheaper."
        )

    def __str__(self) -> str:
        lines = [f"{self.steps} profiled steps, {self.step_ms:.2f} ms per step"]
        lines += [f"  {label:<10} {share:6.1%} of the step" for label, share in self.shares.items()]
        lines.append(f"  host reads of tensor values per step: {self.host_reads_per_step:g}")
        lines.append(f"  operator calls per step: {self.ops_per_step:g}")
        if self.gpu_busy is not None:
            lines.append(
                f"  kernel launches per step: {self.launches_per_step:g}; GPU busy {self.gpu_busy:.0%} of the step"
            )
        lines.append(f"biggest bottleneck: {self.advice()}")
        return "\n".join(lines)


def summarize_spans(
    spans: list[Span], labels: Iterable[str] = ("data", "forward", "backward", "step")
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
    count = len(steps)
    return ProfileSummary(
        steps=count,
        step_ms=step_us / count / 1e3,
        shares={label: share for label, share in shares.items() if share > 0},
        host_reads_per_step=sum(
            s.name == HOST_READ and (s.synchronizes if on_gpu else not s.in_framework) for s in inside
        )
        / count,
        ops_per_step=sum(s.top_level_op and not s.on_device for s in inside) / count,
        launches_per_step=sum(s.name in LAUNCHES for s in inside) / count if on_gpu else None,
        gpu_busy=min(_covered_us(kernels) / (last - first), 1.0) if on_gpu else None,
    )


def summarize_profile(prof, labels: Iterable[str] = ("data", "forward", "backward", "step")) -> ProfileSummary:
    """Reduce a finished ``torch.profiler.profile`` to a `ProfileSummary`. Taught in lesson 10.

    ``labels`` are the ``torch.profiler.record_function`` names whose share of the step is reported.
    """
    return summarize_spans(spans_of(prof), labels)


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
    recorded on a GPU. Read the result with `summarize_profile`, ``key_averages()`` or ``export_chrome_trace``.
    Taught in lesson 10; the bench's "gpu_busy" row runs it too.
    """
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    device = torch.device(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    batches = _forever(loader)
    model.train()
    with profile(
        activities=activities, schedule=schedule(wait=1, warmup=1, active=steps, repeat=1), acc_events=True
    ) as prof:
        for _ in itertools.repeat(None, 2 + steps):
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
            prof.step()
    return prof
