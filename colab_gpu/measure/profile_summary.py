"""A profile reduced to a few numbers a learner can act on (lesson 10): `ProfileSummary`, built from a profile's
spans by `summarize_spans` (`colab_gpu.measure.profiling` profiles a step and calls it).

The summary keeps the step's time without the profiler beside the profiled one, the labels' shares, host reads per
step (the GradScaler's named apart), operator calls and, on a GPU, kernel launches, kernel time per step, the busy
share and what the kernels are busy with; its ``regime`` is the regime rule's verdict (`colab_gpu.measure.regimes`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from .profile_events import (
    HOST_READ,
    LAUNCHES,
    LOADER_SPAN,
    STEP_PREFIX,
    Span,
    _covered_us,
    _uncovered_us,
    kernel_shares,
    parts_found,
)
from .regimes import Regime, regime_of
from .timing import format_seconds


@dataclass(frozen=True)
class ProfileSummary:
    """What a profile says about one training step, averaged over the profiled steps. Taught in lesson 10.

    ``step_ms`` is the step's time *without* the profiler where it was measured (`profile_step` times the step
    with `compare_steps`, then profiles it), else its profiled time; ``profiled_step_ms`` keeps the profiled one.
    The profiler stretches the host's side of a step (the course's H100 steps in recorded_steps.json: each profiled
    step_ms beside its unprofiled one), not the kernels, so the GPU's
    busy share is the kernels' time per step over the *unprofiled* step. ``achieved_tflops`` is the step's
    floating-point work over its time (when the caller gave the work per step), and ``peak_tflops`` the measured
    matmul peak it is compared with, in the step's precision (``peak_precision``, e.g. "fp16" for an AMP step).
    `regime` reads the whole summary as one of four regimes.
    """

    steps: int
    step_ms: float
    shares: dict[str, float] = field(default_factory=dict)  # record_function label -> fraction of the profiled step
    host_reads_per_step: float = 0.0
    ops_per_step: float = 0.0
    launches_per_step: float | None = None  # GPU only
    gpu_busy: float | None = None  # kernel (and copy) time per step over step_ms, at most 1; GPU only
    input_wait: float = 0.0  # fraction of the step spent in "data" while no kernel ran (CPU runtime: the data share)
    achieved_tflops: float | None = None  # flops per step / step time, when the flops were given
    peak_tflops: float | None = None  # this GPU's measured matmul peak, as given by the caller
    profiled_step_ms: float | None = None  # the step under the profiler, when step_ms was measured without it
    steps_per_sample: int | None = None  # K of the unprofiled timing (`compare_steps`)
    kernel_ms: float | None = None  # kernel and copy time per step on the GPU's timeline; GPU only
    kernel_shares: dict[str, float] = field(default_factory=dict)  # kind of kernel -> share of kernel time
    scaler_reads_per_step: float = 0.0  # of host_reads_per_step, those GradScaler.step made
    peak_precision: str | None = None  # the precision of peak_tflops ("fp32", "tf32", "fp16", "bf16")
    host_ms: float | None = None  # the host's part of the unprofiled step: its time to queue one step (`compare_steps`)
    host_waits: dict[str, float] = field(default_factory=dict)  # other waits for the GPU per step, by operator
    input_from: str | None = None  # where input_wait was read: the "data" label, or the DataLoader's own span
    host_cores: int | None = None  # the CPU cores the step's process could use (`profile_step`), where recorded
    found: tuple[str, ...] | None = None  # the step's parts some levers need (`parts_found`); None: not recorded
    achieved_gbps: float | None = None  # bytes the step moves per step / step time, when the bytes were given
    peak_gbps: float | None = None  # this device's measured copy bandwidth (`copy_gbps`), as given by the caller

    @property
    def share_of_peak(self) -> float | None:
        """Achieved TFLOP/s over the measured matmul peak, when both are known."""
        if self.achieved_tflops is None or not self.peak_tflops:
            return None
        return self.achieved_tflops / self.peak_tflops

    @property
    def share_of_bandwidth(self) -> float | None:
        """Achieved GB/s over the measured copy bandwidth, when both are known: how near its memory's limit a step
        of element-wise work or tiny kernels (a decode step) runs."""
        if self.achieved_gbps is None or not self.peak_gbps:
            return None
        return self.achieved_gbps / self.peak_gbps

    @property
    def busy_clamped(self) -> bool:
        """Whether the kernels' time per step exceeded the unprofiled step (run-to-run noise, or kernels of several
        streams at once), so that ``gpu_busy`` was clamped to 1."""
        return self.kernel_ms is not None and self.kernel_ms > self.step_ms

    def to_record(self) -> dict:
        """The measured numbers as plain JSON types (`from_record` rebuilds the summary): what a GPU run keeps of
        each step it profiled, so that the regime rule can be replayed on the CPU."""
        record = asdict(self)
        for derived in ("gpu_busy", "achieved_tflops", "achieved_gbps"):
            del record[derived]
        record["flops_per_step"] = self.achieved_tflops * 1e12 * self.step_ms * 1e-3 if self.achieved_tflops else None
        record["bytes_per_step"] = self.achieved_gbps * 1e9 * self.step_ms * 1e-3 if self.achieved_gbps else None
        return record

    @classmethod
    def from_record(cls, record: dict) -> ProfileSummary:
        """The summary of a recorded step (`to_record`): the busy share and the TFLOP/s computed again from its
        kernels' time, step time and work, as `summarize_spans` computes them."""
        fields = dict(record)
        flops, moved = fields.pop("flops_per_step", None), fields.pop("bytes_per_step", None)
        kernel_ms, step_ms = fields.get("kernel_ms"), fields["step_ms"]
        fields["gpu_busy"] = min(kernel_ms / step_ms, 1.0) if kernel_ms is not None else None
        fields["achieved_tflops"] = flops / (step_ms * 1e-3) / 1e12 if flops else None
        fields["achieved_gbps"] = moved / (step_ms * 1e-3) / 1e9 if moved else None
        if fields.get("found") is not None:  # JSON has lists
            fields["found"] = tuple(fields["found"])
        return cls(**fields)

    @property
    def regime(self) -> Regime:
        """What bounds this step: the course's one regime rule (lesson 10; `colab_gpu.measure.regimes`)."""
        return regime_of(self)

    def advice(self) -> str:
        """The regime's whole text: what bounds the step, what helps (with the lesson that teaches it), what cannot."""
        regime = self.regime
        return f"{regime} What helps: {'; '.join(regime.levers)}. What cannot help here: {'; '.join(regime.useless)}."

    def __str__(self) -> str:
        return f"{self.measurements()}\nregime: {self.advice()}"

    def measurements(self) -> str:
        """The measured numbers alone, without the verdict: what lesson 10's exercise gives a learner to read."""
        return "\n".join(self._lines())

    def _lines(self) -> list[str]:
        step = format_seconds(self.step_ms / 1e3)
        if self.profiled_step_ms is None:
            lines = [f"{self.steps} profiled steps, {step} per step (under the profiler, which stretches it)"]
        else:
            k = f" (K={self.steps_per_sample} steps per sample)" if self.steps_per_sample else ""
            lines = [
                f"{self.steps} profiled steps; a step takes {step} without the profiler{k}, "
                f"{format_seconds(self.profiled_step_ms / 1e3)} under it"
            ]
        lines += [f"  {label:<10} {share:6.1%} of the profiled step" for label, share in self.shares.items()]
        reads = f"  host reads of tensor values per step: {self.host_reads_per_step:g}"
        if self.scaler_reads_per_step >= 1:
            reads += f" ({self.scaler_reads_per_step:g} of them the GradScaler's)"
        if self.host_waits:
            reads += f" (waits for the GPU in {', '.join(f'{name} {n:g}' for name, n in self.host_waits.items())})"
        lines.append(reads)
        if self.ops_per_step:  # a step recorded from a lesson's printed figures has no count of its operators
            lines.append(f"  operator calls per step: {self.ops_per_step:,.0f}")
        if self.gpu_busy is not None:
            clamp = " (the kernels' time exceeded the step: clamped)" if self.busy_clamped else ""
            kernels = format_seconds((self.kernel_ms or 0) / 1e3)
            launches = (
                "" if self.launches_per_step is None else f"kernel launches per step: {self.launches_per_step:,.0f}; "
            )
            lines.append(f"  {launches}kernels {kernels} per step: GPU busy {self.gpu_busy:.0%} of the step{clamp}")
            if self.host_ms is not None:
                queued = format_seconds(self.host_ms / 1e3)
                lines.append(f"  the host queues a step in {queued} (its part, timed without the profiler)")
            if self.kernel_shares:
                kinds = ", ".join(f"{kind} {share:.0%}" for kind, share in self.kernel_shares.items())
                lines.append(f"  the kernels' time: {kinds}")
            if self.input_from or self.input_wait:
                source = f" (read from {self.input_from})" if self.input_from else ""
                lines.append(f"  the GPU waits for data {self.input_wait:.0%} of the step{source}")
            elif self.found is not None:  # profiled here, and no data phase found in it
                lines.append("  no 'data' label and no DataLoader in the step: its wait for data was not measured")
        if self.achieved_tflops is not None:
            precision = f" {self.peak_precision}" if self.peak_precision else ""
            peak = ""
            if self.share_of_peak:
                peak = f", {self.share_of_peak:.0%} of this GPU's measured{precision} matmul peak"
            lines.append(f"  {self.achieved_tflops:.3g} TFLOP/s{peak}")
        if self.achieved_gbps is not None:
            share = self.share_of_bandwidth
            peak = f", {share:.0%} of this device's measured copy bandwidth" if share else ""
            lines.append(f"  {self.achieved_gbps:.3g} GB/s moved{peak}")
        return lines


def summarize_spans(
    spans: list[Span],
    labels: Iterable[str] = ("data", "forward", "backward", "step"),
    *,
    flops_per_step: float | None = None,
    peak_tflops: float | None = None,
    peak_precision: str | None = None,
    unprofiled_step_ms: float | None = None,
    steps_per_sample: int | None = None,
    unprofiled_host_ms: float | None = None,
    host_cores: int | None = None,
    bytes_per_step: float | None = None,
    peak_gbps: float | None = None,
) -> ProfileSummary:
    """The `ProfileSummary` of ``spans`` (`spans_of`), counting only what happened inside the profiled steps; with
    ``unprofiled_step_ms`` (the same step timed without the profiler) the busy share, the input wait and TFLOP/s are
    against it (the input wait at most the GPU's idle share: the profiler stretches the host's fetching, never the
    kernels). ``host_cores``: the CPU cores the step's process could use (the input levers' order depends on it).
    ``bytes_per_step`` (what the step reads and writes: a decode step's weights and cache) and ``peak_gbps`` (the
    measured copy bandwidth, `colab_gpu.measure.timing.copy_gbps`) add the achieved GB/s and its share of that
    bandwidth."""
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
    kernels = [s for s in inside if s.on_device]
    intervals = [(s.start_us, s.end_us) for s in kernels]
    on_gpu = bool(kernels) or any(s.name in LAUNCHES for s in inside)
    labelled = [(s.start_us, s.end_us) for s in inside if s.name == "data" and not s.on_device]
    loader = [(s.start_us, s.end_us) for s in inside if s.name.startswith(LOADER_SPAN) and not s.on_device]
    # The usual learner's loop labels nothing: the DataLoader's own span is then its data phase.
    data, input_from = (labelled, "the 'data' label") if labelled else (loader, "the DataLoader's own span")
    if not data:
        input_from = None
    count = len(steps)
    profiled_ms = step_us / count / 1e3
    step_ms = unprofiled_step_ms or profiled_ms
    kernel_ms = _covered_us(intervals) / count / 1e3 if on_gpu else None
    waited_us = _uncovered_us(data, intervals)  # fetching data while no kernel ran
    input_wait = waited_us / step_us
    if on_gpu and unprofiled_step_ms:  # the wait against the step timed without the profiler, as the busy share is
        idle = max(1 - kernel_ms / step_ms, 0.0)  # the GPU cannot wait for data longer than it idles
        input_wait = min(waited_us / count / 1e3 / step_ms, idle)
    # On a GPU only reads that wait for it count; on a CPU, those that are not PyTorch's own reads of CPU values.
    reads = [s for s in inside if s.name == HOST_READ and (s.synchronizes if on_gpu else not s.in_framework)]
    waits: dict[str, float] = {}
    for span in inside:
        if span.host_wait and not span.on_device:
            waits[span.name] = waits.get(span.name, 0.0) + 1 / len(steps)
    return ProfileSummary(
        steps=count,
        step_ms=step_ms,
        shares={label: share for label, share in shares.items() if share > 0},
        host_reads_per_step=len(reads) / count + sum(waits.values()),
        host_waits=waits,
        ops_per_step=sum(s.top_level_op and not s.on_device for s in inside) / count,
        launches_per_step=sum(s.name in LAUNCHES for s in inside) / count if on_gpu else None,
        gpu_busy=min(kernel_ms / step_ms, 1.0) if on_gpu else None,
        input_wait=input_wait,
        input_from=input_from,
        achieved_tflops=flops_per_step / (step_ms * 1e-3) / 1e12 if flops_per_step else None,
        peak_tflops=peak_tflops,
        profiled_step_ms=profiled_ms if unprofiled_step_ms else None,
        steps_per_sample=steps_per_sample if unprofiled_step_ms else None,
        host_ms=unprofiled_host_ms if unprofiled_step_ms and on_gpu else None,
        kernel_ms=kernel_ms,
        kernel_shares=kernel_shares(kernels),
        scaler_reads_per_step=sum(s.in_scaler for s in reads) / count,
        peak_precision=peak_precision,
        host_cores=host_cores,
        found=parts_found(inside, labelled + loader),
        achieved_gbps=bytes_per_step / (step_ms * 1e-3) / 1e9 if bytes_per_step else None,
        peak_gbps=peak_gbps,
    )


def label_coverage(spans: list[Span], labels: Iterable[str]) -> float:
    """The share of a typical profiled step that ``labels`` cover: the median over the steps of each step's labelled
    time over its length. A total over the steps would let one step in which the host was taken away between two
    labels (another program on a shared 2-core runtime) decide: the labels then "covered" 28% of a step they wrap."""
    labels = set(labels)
    steps = [s for s in spans if s.name.startswith(STEP_PREFIX) and not s.on_device and s.duration_us > 0]
    if not steps:
        return 0.0
    covers = []
    for step in steps:
        inside = [
            (s.start_us, s.end_us)
            for s in spans
            if s.name in labels and not s.on_device and step.start_us <= s.start_us <= step.end_us
        ]
        covers.append(min(1.0, _covered_us(inside) / step.duration_us))
    return statistics.median(covers)
