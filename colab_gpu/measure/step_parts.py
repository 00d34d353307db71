"""A GPU step's two parts, measured: the host's (the time to queue one step, timed without the profiler by
`colab_gpu.measure.timing.compare_steps`) and the GPU's (its kernels' time per step, from the profile, and a gap per
launch). `colab_gpu.measure.regimes` decides the regime from them (lesson 10).
"""

from __future__ import annotations

from dataclasses import dataclass

from .timing import format_seconds

KERNEL_GAP_US = 2.0  # between two queued kernels on a GPU: what a queued step adds to its kernels' time per launch
HOST_CLOSE = 0.8  # the host's part from 80% of the GPU's: GPU-bound, but a kernel lever soon stops paying
QUEUE_LAUNCHES = 1024  # CUDA's launch queue: past this many queued launches the host waits for the GPU
QUEUE_FULL_SHARE = 0.95  # both parts at least this share of the step: the host may have waited on a full queue


@dataclass(frozen=True)
class StepParts:
    """A GPU step's two parts, in ms: ``host`` (the host's time to queue one step, timed without the profiler; in
    a loop with host reads, the host work they expose: the step less its kernels) and ``gpu`` (the kernels' time
    plus a gap per launch). ``step`` is the unprofiled step; ``queue_filled`` that the host may have waited on a
    full launch queue, so that its time is the GPU's."""

    host: float
    gpu: float
    kernels: float
    launches: float
    step: float
    queue_filled: bool

    @property
    def queued_gain(self) -> float:
        """How many times faster the step would be queued ahead, costing only its larger part (what removing a
        synced loop's reads can pay at most)."""
        return self.step / max(self.host, self.gpu)

    def text(self) -> str:
        gaps = f" + {self.launches:,.0f} launch gaps" if self.launches else ""
        return (
            f"host {format_seconds(self.host / 1e3)}, GPU {format_seconds(self.gpu / 1e3)} "
            f"(kernels {format_seconds(self.kernels / 1e3)}{gaps})"
        )


def step_parts(summary) -> StepParts | None:
    """The host's and the GPU's part of a GPU step (`StepParts`), or None where they were not measured (a CPU
    runtime; a recorded step without its host part: the busy share decides there)."""
    if summary.gpu_busy is None or summary.kernel_ms is None or summary.host_ms is None:
        return None
    launches = summary.launches_per_step or 0.0
    gpu = summary.kernel_ms + launches * KERNEL_GAP_US / 1e3
    if summary.host_reads_per_step >= 1:  # the host and the GPU take turns: the step is the kernels plus the host
        exposed = max(summary.step_ms - summary.kernel_ms, 0.0)
        return StepParts(exposed, gpu, summary.kernel_ms, launches, summary.step_ms, queue_filled=False)
    k = summary.steps_per_sample or 1
    # A full queue makes the host wait for the GPU: its time is then the step, and the GPU's part is too (within the
    # gaps' guess). Where the GPU's part is clearly shorter than the step, the GPU drained faster than the host
    # queued, and the queue cannot have filled.
    filled = launches * k >= QUEUE_LAUNCHES and min(summary.host_ms, gpu) >= QUEUE_FULL_SHARE * summary.step_ms
    return StepParts(summary.host_ms, gpu, summary.kernel_ms, launches, summary.step_ms, filled)
