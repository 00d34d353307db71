"""The regime rule, the course's one home of it (lesson 10): what bounds a step, and which levers pay.

A step is input-bound (it waits for data), launch-bound (the GPU idles while Python and kernel launches keep the host
busy), GPU-bound (the kernels are the cost: near the matmul peak, or far below it in memory-bound element-wise
chains) or, on a CPU runtime, CPU-bound. `regime_of` reads a `colab_gpu.profiling.ProfileSummary`
(``summary.regime``); lessons 04, 05, 10, 11, 12 and 14 print it to explain their own figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from .timing import format_seconds

# The regime rule's thresholds (`ProfileSummary.regime`).
# The share of the step the GPU waits for the "data" label (on a CPU runtime: the label's share) from which the input
# pipeline is the bottleneck. Data fetched while the GPU runs the previous step's kernels costs nothing.
INPUT_BOUND_SHARE = 0.3
LAUNCH_BOUND_BUSY = 0.5  # a GPU busy less than this share of the step waits on the host (Python, launches, syncs)
# Achieved TFLOP/s over the measured matmul peak from which a busy GPU's time is matmul time. The H100 run
# (COURSE_DESIGN.md, "Measuring on a GPU"): AMP MLP training reached 0.67 of the bf16 matmul peak; chains of
# element-wise kernels (GELU, LayerNorm, dropout, an optimizer's per-tensor updates) reach a few percent of it.
NEAR_PEAK = 0.3


@dataclass(frozen=True)
class Regime:
    """What bounds a step, why (with the profile's own numbers), what helps and what cannot. Taught in lesson 10.

    ``name`` is one of "input-bound", "launch-bound", "GPU-bound" or "CPU-bound"; ``str(regime)`` is the one line
    a lesson prints, `ProfileSummary.advice` the whole text.
    """

    name: str
    reason: str
    levers: tuple[str, ...]
    useless: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name}: {self.reason}"


# What helps in each regime, and what cannot (COURSE_DESIGN.md, "Measuring on a GPU").
INPUT_LEVERS = (
    "DataLoader workers and pinned memory (lesson 05)",
    "the whole data set on the GPU, cg.DeviceLoader (lesson 05)",
    "augmentation per batch on the GPU (lesson 05)",
)
INPUT_USELESS = ("a faster model: AMP, TF32, torch.compile, channels_last (the step waits for data, not the model)",)
SYNC_LEVER = "fewer host syncs: sum the loss on the device, read it once per epoch (lesson 03)"
LAUNCH_LEVERS = (
    "a bigger batch: the same launches do more work each (lesson 06)",
    'CUDA graphs: torch.compile(mode="reduce-overhead") replays the compiled model\'s forward and backward as one '
    "launch each; the optimizer and the rest of the step stay eager (lesson 11)",
    "a fused or foreach optimizer, e.g. torch.optim.Adam(..., fused=True): one launch for all parameters",
    SYNC_LEVER,
)
LAUNCH_USELESS = (
    "default torch.compile, AMP, TF32, channels_last and cudnn.benchmark: they make kernels cheaper, "
    "and this step does not wait on kernels",
)
MATMUL_LEVERS = (
    "lower precision: AMP in bf16/fp16, TF32 for fp32 matmuls (lesson 06)",
    "layouts the tensor cores like: channels_last for convolutions, sizes in multiples of 8 (lesson 06)",
)
FUSION_LEVERS = (
    "fusion: default torch.compile fuses chains of element-wise kernels into one (lesson 11)",
    "AMP: 16-bit tensors halve the memory traffic of each element-wise kernel (lesson 06)",
)
GPU_USELESS = (
    "CUDA graphs (reduce-overhead) and fused optimizers: the launches already hide behind busy kernels",
    "more DataLoader workers: the data is not what the step waits for",
)
CPU_LEVERS = (
    "a GPU runtime (Colab: Runtime > Change runtime type > T4 GPU)",
    "less work per step: a smaller model, smaller inputs",
)
CPU_USELESS = (
    "GPU levers: pinned memory, CUDA graphs, cudnn.benchmark, TF32 and AMP (the CPU has no tensor cores to feed)",
)


def regime_of(summary) -> Regime:  # a colab_gpu.profiling.ProfileSummary (which imports this module)
    """What bounds this step: the course's one regime rule (lesson 10).

    Input-bound when the step waits for the "data" label >= 30% of its time (on a GPU: while no kernel runs;
    data fetched while the GPU computes costs nothing); on a GPU, launch-bound when the GPU is busy less than
    half the step, else GPU-bound (near the measured matmul peak, or far below it: memory-bound element-wise
    kernels); on a CPU runtime, CPU-bound.
    """
    step = f"{format_seconds(summary.step_ms / 1e3)} step"
    gpu_reads = summary.gpu_busy is not None and summary.host_reads_per_step >= 1
    if summary.input_wait >= INPUT_BOUND_SHARE:
        if summary.gpu_busy is None:
            reason = f"{summary.input_wait:.0%} of each {step} goes to fetching the next batch."
        else:
            reason = (
                f"the GPU waits {summary.input_wait:.0%} of each {step} for the next batch (busy "
                f"{summary.gpu_busy:.0%} of it)."
            )
        levers = INPUT_LEVERS
        if gpu_reads:
            reason = reason[:-1] + (
                f"; {summary.host_reads_per_step:g} host read(s) per step keep the CPU from preparing it while the "
                "GPU computes."
            )
            levers = (SYNC_LEVER,) + levers
        return Regime("input-bound", reason, levers, INPUT_USELESS)
    if summary.gpu_busy is None:
        reads = ""
        if summary.host_reads_per_step >= 1:
            reads = (
                f" Its {summary.host_reads_per_step:g} host read(s) per step cost nothing here; on a GPU each one "
                "stops the CPU until the GPU catches up (lesson 03)."
            )
        return Regime(
            "CPU-bound",
            f"a CPU runtime: the CPU itself runs the {summary.ops_per_step:g} operators of each {step}.{reads}",
            CPU_LEVERS,
            CPU_USELESS,
        )
    if summary.gpu_busy < LAUNCH_BOUND_BUSY:
        launches = summary.launches_per_step or 0.0
        per_launch = f" ({summary.step_ms * 1e3 / launches:.0f} µs of step per launch)" if launches else ""
        reads = (
            f", and {summary.host_reads_per_step:g} host read(s) per step stop the CPU until the GPU catches up"
            if summary.host_reads_per_step >= 1
            else ""
        )
        return Regime(
            "launch-bound",
            f"the GPU is busy {summary.gpu_busy:.0%} of each {step}: {launches:g} kernel launches per step"
            f"{per_launch} keep it waiting on the host{reads}.",
            LAUNCH_LEVERS,
            LAUNCH_USELESS,
        )
    busy = f"the GPU is busy {summary.gpu_busy:.0%} of each {step}"
    share = summary.share_of_peak
    if share is None:
        reason = (
            f"{busy}; the kernels themselves are the cost (give flops_per_step and peak_tflops to tell "
            "matmul-bound from memory-bound)."
        )
        levers, useless = MATMUL_LEVERS + FUSION_LEVERS[:1], GPU_USELESS
    elif share >= NEAR_PEAK:
        rate = f"{summary.achieved_tflops:.3g} TFLOP/s, {share:.0%} of this GPU's measured matmul peak"
        reason = f"{busy} at {rate}: the matmuls are the cost."
        levers = MATMUL_LEVERS
        useless = GPU_USELESS + ("fusion (default torch.compile): matmuls already run in cuBLAS",)
    else:
        rate = f"{summary.achieved_tflops:.3g} TFLOP/s, {share:.0%} of this GPU's measured matmul peak"
        reason = f"{busy} at only {rate}: the kernels are memory-bound element-wise chains."
        levers, useless = FUSION_LEVERS, GPU_USELESS
    if gpu_reads:  # a busy GPU could have hidden the CPU's next step: each read makes them take turns
        reason = reason[:-1] + (
            f"; its {summary.host_reads_per_step:g} host read(s) per step leave the GPU idle while the CPU "
            "prepares the next step."
        )
        levers = levers + (SYNC_LEVER,)
    return Regime("GPU-bound", reason, levers, useless)
