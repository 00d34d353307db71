"""The regime rule, the course's one home of it (lesson 10): what bounds a step, and which levers pay.

A step is input-bound (it waits for data), launch-bound (the GPU idles while Python and kernel launches keep the host
busy), GPU-bound (the kernels are the cost; what they are busy with says which lever: matmuls and convolutions,
element-wise chains, or many tiny kernels) or, on a CPU runtime, CPU-bound. `regime_of` reads a
`colab_gpu.measure.profiling.ProfileSummary` (``summary.regime``); lessons 04, 05, 10, 11, 12 and 14 print it to explain
their own figures.

Why this rule. In a loop that queues its work ahead (no host reads), a step costs about max(H, G + n·g): H the
host's part (Python, dispatch, kernel launches, the batch), G the kernels' time, n launches and g the few
microseconds between two queued kernels. Both are measured: H is the host's time to queue one step, timed without
the profiler (`colab_gpu.measure.timing.compare_steps` reads the clock before its final synchronize; the profiler
stretches the host, never the kernels), G the kernels' time in the profile (`colab_gpu.measure.step_parts`).
The larger part is the cost: H > G + n·g is launch-bound (a host lever pays up to step / (G + n·g), a kernel lever
nothing), else GPU-bound (a kernel lever pays up to step / H: "close behind" from H at 80% of the GPU's part). No fixed
busy cut can say this: the busy share where the host starts to limit is k/(k+g) for kernels of k µs, 0.8 only for ~5 µs
kernels; the course's own steps (15-230 µs kernels) are host-limited at 80-90% busy. With host reads the CPU and
the GPU take turns: the step is G plus the host work the reads expose (the step less its kernels), named by the larger
of the two; without the reads it would cost about that larger part, and fewer syncs comes first where that pays at least
1.1x. Where the host's part was not measured (a step recorded from a lesson's printed figures), or a full launch queue
made the host wait for the GPU, the busy share decides as before: under 80% launch-bound, from 80% GPU-bound, under 90%
with the host close behind. The course's H100 steps, with their busy shares over the unprofiled step, are recorded in
recorded_steps.json (from reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-835455f); tests/test_regimes.py asserts the
rule's verdict on each.
"""

from __future__ import annotations

from dataclasses import dataclass

from .levers import (
    CPU_LEVERS,
    CPU_USELESS,
    GPU_USELESS,
    INPUT_USELESS,
    KERNEL_LEVERS,
    KERNEL_USELESS,
    LAUNCH_LEVERS,
    LAUNCH_USELESS,
    decode_levers,
    for_the_step,
    input_levers,
    reads_text,
    sync_levers,
)
from .profile_events import ELEMENTWISE, MATMUL, TINY, TINY_KERNEL_US
from .step_parts import HOST_CLOSE, StepParts, step_parts
from .timing import format_seconds

# The regime rule's thresholds (`ProfileSummary.regime`; the module's docstring derives them).
# The share of the step the GPU waits for the "data" label (on a CPU runtime: the label's share) from which the input
# pipeline is the bottleneck. Data fetched while the GPU runs the previous step's kernels costs nothing.
INPUT_BOUND_SHARE = 0.3
LAUNCH_BOUND_BUSY = 0.8  # below: the GPU idles a fifth of the step or more, waiting on the host
HOST_CLOSE_BUSY = 0.9  # from LAUNCH_BOUND_BUSY to this: GPU-bound, with the host close behind
# Achieved TFLOP/s over the measured matmul peak (in the step's precision) from which matmuls run near the peak. The
# H100's AMP MLP training step runs well above it (the bench's amp_peak row:
# reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2); lesson 04's CNN in fp32 cuDNN convolutions far below.
NEAR_PEAK = 0.3


@dataclass(frozen=True)
class Regime:
    """What bounds a step, why (with the profile's own numbers), what helps and what cannot. Taught in lesson 10.

    ``name`` is one of "input-bound", "launch-bound", "GPU-bound" or "CPU-bound"; ``str(regime)`` is the one line
    a lesson prints, `ProfileSummary.advice` the whole text. ``kernels`` names what a GPU-bound step's kernels are
    busy with (a `colab_gpu.measure.profile_events` kind: matmuls and convolutions, element-wise chains, tiny kernels).
    ``lever_names`` and ``useless_names`` are the levers' short names (`LEVER_NAMES`), in the order of the texts.
    """

    name: str
    reason: str
    levers: tuple[str, ...]
    useless: tuple[str, ...]
    kernels: str | None = None
    lever_names: tuple[str, ...] = ()
    useless_names: tuple[str, ...] = ()
    useless_entries: tuple[tuple[tuple[str, ...], str], ...] = ()

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"

    def why_useless(self, lever: str) -> str | None:
        """Why the lever of short name ``lever`` (`LEVER_NAMES`) cannot help this step, or None when it is not
        among those that cannot."""
        return next((text for names, text in self.useless_entries if lever in names), None)


def _regime(summary, name: str, reason: str, levers, useless, kernels: str | None = None) -> Regime:
    """A `Regime` from lever entries fitted to the step (`for_the_step`): their texts, and their short names in
    order, each once."""

    def names(entries) -> tuple[str, ...]:
        return tuple(dict.fromkeys(short for shorts, _ in entries for short in shorts))

    levers, useless = for_the_step(summary, levers, useless)
    texts = tuple(text for _, text in levers), tuple(text for _, text in useless)
    return Regime(name, reason, *texts, kernels, names(levers), names(useless), tuple(useless))


def regime_of(summary) -> Regime:  # a colab_gpu.measure.profiling.ProfileSummary (which imports this module)
    """What bounds this step: the course's one regime rule (lesson 10; the module's docstring derives it).

    Input-bound when the step waits for the "data" label >= 30% of its time (on a GPU: while no kernel runs;
    data fetched while the GPU computes costs nothing); on a GPU, launch-bound when the host's part of the step is
    longer than the GPU's (`step_parts`; where the host's part was not measured, when the kernels fill less than
    80% of the step timed without the profiler), else GPU-bound, with the levers of what the kernels are busy with;
    on a CPU runtime, CPU-bound.
    """
    if not hasattr(summary, "gpu_busy"):
        raise TypeError(
            f"regime_of reads a profile's summary, got a {type(summary).__name__}: "
            "cg.summarize_profile(prof).regime, or cg.profile_step(step, device).regime."
        )
    step = f"{format_seconds(summary.step_ms / 1e3)} step"
    if summary.input_wait >= INPUT_BOUND_SHARE:
        return _input_bound(summary, step)
    if summary.gpu_busy is None:
        reads = ""
        if summary.host_reads_per_step >= 1:
            reads = (
                f" Its {summary.host_reads_per_step:g} host read(s) per step cost nothing here; on a GPU each one "
                "stops the CPU until the GPU catches up (lesson 03)."
            )
        return _regime(
            summary,
            "CPU-bound",
            f"a CPU runtime: the CPU itself runs the {summary.ops_per_step:,.0f} operators of each {step}.{reads}",
            CPU_LEVERS,
            CPU_USELESS,
        )
    parts = step_parts(summary)
    if parts is not None and summary.host_reads_per_step >= 1:
        return _synced(summary, step, parts)
    if parts is not None and not parts.queue_filled:
        return _queued(summary, step, parts)
    busy = f"the GPU is busy {summary.gpu_busy:.0%} of each {step}"
    if parts is not None:  # the host waited on a full launch queue: its time is the GPU's, the busy share decides
        busy += f" (the launch queue filled: {parts.launches:,.0f} launches x K={summary.steps_per_sample})"
    if summary.gpu_busy < LAUNCH_BOUND_BUSY:
        launches = summary.launches_per_step or 0.0
        per_launch = f" ({summary.step_ms * 1e3 / launches:.0f} µs of step per launch)" if launches else ""
        reads = reads_text(summary, "stop the CPU until the GPU catches up")
        return _regime(
            summary,
            "launch-bound",
            f"{busy}: the host's work, {launches:,.0f} kernel launches per step{per_launch}, takes longer than the "
            f"kernels{reads}.",
            sync_levers(summary) + LAUNCH_LEVERS,
            LAUNCH_USELESS,
        )
    return _gpu_bound(summary, busy)


def _input_bound(summary, step: str) -> Regime:
    if summary.gpu_busy is None:
        reason = f"{summary.input_wait:.0%} of each {step} goes to fetching the next batch."
    else:
        reason = (
            f"the GPU waits {summary.input_wait:.0%} of each {step} for the next batch (busy {summary.gpu_busy:.0%} "
            "of it)."
        )
    levers, few_cores = input_levers(summary.host_cores)
    reason = reason[:-1] + few_cores + "."
    if summary.gpu_busy is not None and summary.host_reads_per_step >= 1:
        reason = reason[:-1] + reads_text(summary, "keep the CPU from preparing it while the GPU computes") + "."
        levers = sync_levers(summary) + levers
    return _regime(summary, "input-bound", reason, levers, INPUT_USELESS)


def _gpu_bound(summary, busy: str, close_behind: str | None = None, synced: bool = False) -> Regime:
    """A GPU-bound step's regime. ``synced``: ``busy`` already says what the host reads cost (`_synced`), and
    fewer syncs comes first among the levers where it pays."""
    kind, what = _busy_with(summary)
    reason = f"{busy}, {what}"
    if summary.share_of_peak is not None:
        peak = f"{summary.peak_precision} matmul peak" if summary.peak_precision else "matmul peak"
        near = "" if summary.share_of_peak >= NEAR_PEAK else "only "
        reason += f", at {near}{summary.achieved_tflops:.3g} TFLOP/s, {summary.share_of_peak:.0%} of this GPU's {peak}"
    if summary.share_of_bandwidth is not None and kind != MATMUL:  # memory-bound work: bytes, not FLOP/s, say it
        reason += (
            f", moving {summary.achieved_gbps:.3g} GB/s, {summary.share_of_bandwidth:.0%} of this GPU's measured "
            "copy bandwidth"
        )
    if close_behind is None and summary.gpu_busy < HOST_CLOSE_BUSY:
        close_behind = "a faster kernel pays only until the GPU's part falls to the host's"
    if close_behind:
        reason += f"; the host is close behind: {close_behind}"
    if kind is None:  # kernels of unknown kinds (a recorded step without them): the levers of both big kinds
        levers, useless = KERNEL_LEVERS[MATMUL][:1] + KERNEL_LEVERS[ELEMENTWISE][:1], GPU_USELESS
    else:
        levers, useless = decode_levers(summary, kind, KERNEL_LEVERS[kind]), KERNEL_USELESS[kind] + GPU_USELESS
    if summary.peak_precision in SIXTEEN_BITS:  # a step already in 16 bits: that lever is spent
        levers = tuple(entry for entry in levers if "16-bit" not in entry[0])
        useless = ((("16-bit",), f"16-bit precision: the step already runs in {summary.peak_precision}"), *useless)
    # A busy GPU could have hidden the CPU's next step: each read makes them take turns.
    if synced:
        syncs_pay = step_parts(summary).queued_gain >= SYNC_PAYS
        levers = sync_levers(summary) + levers if syncs_pay else levers + sync_levers(summary)
    elif summary.host_reads_per_step >= 1:
        reason += reads_text(summary, "leave the GPU idle while the CPU prepares the next step")
        levers = levers + sync_levers(summary)
    return _regime(summary, "GPU-bound", reason + ".", levers, useless, kind)


def _busy_with(summary) -> tuple[str | None, str]:
    """What a GPU-bound step's kernels are busy with, and the words that say it: the largest kind of the profile's
    kernels; for a step recorded without its kernels' kinds, matmuls when the work done at the peak rate fills
    most of the kernels' time (they cannot have run faster than the peak), else unknown (None)."""
    if summary.kernel_shares:
        kind, share = next(iter(summary.kernel_shares.items()))  # largest first
        what = f"{share:.0%} of the kernels' time in {kind}"
        if kind == TINY:
            what += f" (each under {TINY_KERNEL_US:g} µs: too little work to fill the GPU)"
        return kind, what
    if summary.share_of_peak is not None and summary.kernel_ms:
        at_peak = min(summary.share_of_peak * summary.step_ms / summary.kernel_ms, 1.0)
        if at_peak >= 0.5:
            return MATMUL, f"at least {at_peak:.0%} of the kernels' time in {MATMUL} (their work at the peak rate)"
    return None, "in kernels of kinds this profile did not record"


SIXTEEN_BITS = ("fp16", "bf16")  # a step measured in these precisions has no 16-bit lever left
SYNC_PAYS = 1.1  # a synced loop's reads come first among the levers when removing them can pay this much


def _queued(summary, step: str, parts: StepParts) -> Regime:
    """A loop that queues its work ahead: the step costs about the larger part."""
    if parts.host > parts.gpu:
        return _regime(
            summary,
            "launch-bound",
            f"{parts.text()} per {step}: the host takes longer to queue a step than the GPU takes to run it, so the "
            f"GPU waits; a host lever pays up to {parts.step / parts.gpu:.2f}x, a kernel lever nothing.",
            LAUNCH_LEVERS,
            LAUNCH_USELESS,
        )
    close = None
    if parts.host >= HOST_CLOSE * parts.gpu:
        close = f"a faster kernel pays at most {parts.step / parts.host:.2f}x, then the host's part limits"
    return _gpu_bound(summary, f"{parts.text()} per {step}: the GPU's part is the cost", close or "")


def _synced(summary, step: str, parts: StepParts) -> Regime:
    """A loop with host reads: the CPU and the GPU take turns, and the step is the kernels plus the host work the
    reads expose; queued ahead instead, it would cost about the larger of the two."""
    pays = parts.queued_gain
    reads = reads_text(summary, "make the CPU and the GPU take turns").removeprefix("; ")
    reason = (
        f"{reads}: each {step} is the kernels' {format_seconds(parts.gpu / 1e3)} plus "
        f"{format_seconds(parts.host / 1e3)} of host work they expose; without the reads it would cost about the "
        f"larger of the two (up to {pays:.2f}x faster)"
    )
    if parts.host > parts.gpu:
        syncs = sync_levers(summary)
        levers = syncs + LAUNCH_LEVERS if pays >= SYNC_PAYS else LAUNCH_LEVERS + syncs
        return _regime(summary, "launch-bound", reason + ".", levers, LAUNCH_USELESS)
    return _gpu_bound(summary, reason + "; the GPU's part is the larger", "", synced=True)


def rule_row(summary) -> str:
    """The row of the regime rule this step's numbers fall in, said with its numbers (the hint of lesson 10's
    exercise when the regime answered is not the step's)."""
    if summary.input_wait >= INPUT_BOUND_SHARE:
        return f"the step waits for its data {summary.input_wait:.0%} of its time, at least {INPUT_BOUND_SHARE:.0%}."
    if summary.gpu_busy is None:
        return "it ran on a CPU runtime: no GPU waits for anything, the CPU does the math."
    parts = step_parts(summary)
    if parts is not None and summary.host_reads_per_step >= 1:
        larger = "the host's" if parts.host > parts.gpu else "the GPU's"
        return (
            f"with host reads the CPU and the GPU take turns: {parts.text()} per step, and {larger} part is the larger."
        )
    if parts is not None and not parts.queue_filled:
        if parts.host > parts.gpu:
            return f"{parts.text()} per step: the host's part is longer than the GPU's, so the GPU waits."
        return f"{parts.text()} per step: the GPU's part is the longer, so the kernels are the cost."
    busy = f"the GPU is busy {summary.gpu_busy:.0%} of the step timed without the profiler"
    if summary.gpu_busy < LAUNCH_BOUND_BUSY:
        return f"{busy}, under {LAUNCH_BOUND_BUSY:.0%}: the host's part of the step is longer than the kernels'."
    close = " (the host is close behind)" if summary.gpu_busy < HOST_CLOSE_BUSY else ""
    return f"{busy}, at least {LAUNCH_BOUND_BUSY:.0%}: the kernels are the cost{close}."
