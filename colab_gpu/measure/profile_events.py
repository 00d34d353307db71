"""A torch.profiler run's events as the spans `colab_gpu.measure.profiling` reads (lesson 10): which ran on the GPU,
which are host reads of a device value (and whose: the learner's or the GradScaler's), which are kernel launches, what
kind of work each kernel is, and how much of a span of time kernels covered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# A host read of a tensor's value (``.item()``, ``float(t)``, ``if t:``, printing a tensor) goes through this op.
# On a GPU, reading a CUDA tensor copies it back and waits for every queued kernel: the read has a synchronizing
# CUDA call under it, and only those are counted. A CPU runtime has no such call, so there every read counts,
# except those PyTorch makes of CPU values on purpose: the optimizer's step counters, a Dataset's labels.
HOST_READ = "aten::_local_scalar_dense"
LOADER_SPAN = "enumerate(DataLoader)#"  # the span PyTorch records around each next(iter(loader)): a batch's wait
FRAMEWORK_READS = ("Optimizer.step#", LOADER_SPAN)
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpyAsync")
# The CUDA calls that make the host wait for the GPU. Any operator the loop calls that runs one is a host wait, as
# a read is: .cpu() and .tolist() (aten::to, aten::_to_copy), boolean-mask indexing (aten::nonzero: the host must
# learn how many elements passed), torch.cuda.synchronize() (cudaDeviceSynchronize), a copy from pageable memory.
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
WAIT_NAMES = {  # what the learner wrote, for the operators a wait shows under
    "aten::to": ".cpu() or .to('cpu') (aten::to)",
    "aten::_to_copy": "a copy to the host (aten::_to_copy)",
    "aten::copy_": "a copy to the host (aten::copy_)",
    "aten::nonzero": "boolean-mask indexing or nonzero() (aten::nonzero)",
    "aten::index": "boolean-mask indexing (aten::index)",
    "cudaDeviceSynchronize": "torch.cuda.synchronize()",
}
# The parts of a step that some levers need (`colab_gpu.measure.regimes`): an optimizer's step (a fused or foreach
# optimizer), convolutions (channels_last, cudnn.benchmark), augmentation in the data phase (augmenting on the GPU).
# A DataLoader with workers runs its dataset in other processes, out of the profile's sight: its augmentation is not
# seen, so that lever is kept there (`HIDDEN_INPUT`).
OPTIMIZER, CONVOLUTIONS, AUGMENTATION, HIDDEN_INPUT = "optimizer step", "convolutions", "augmentation", "input workers"
# And the copies a decode step can do without (lesson 14): a cache grown with torch.cat copies all of it every token
# (a cat is all the profile shows: it may be another one), and key/value heads repeated for the query heads.
GROWN, REPEATED = "grown by cat", "repeated heads"
OPTIMIZER_SPAN = "Optimizer.step#"  # "Optimizer.step#Adam.step": every torch.optim optimizer's step records it
CONVOLUTION_OPS = ("aten::convolution", "aten::_convolution", "aten::cudnn_convolution", "aten::mkldnn_convolution")
AUGMENT_LABEL = "augment"  # a record_function label the learner may put around their own augmentation
AUGMENT_OPS = (  # what torchvision's v2 transforms and cg.random_crop / per_sample_flip run: flips, pads, warps
    "aten::flip", "aten::roll", "aten::rot90", "aten::reflection_pad1d", "aten::reflection_pad2d",
    "aten::replication_pad2d", "aten::grid_sampler_2d", "aten::affine_grid_generator", "aten::_upsample_bilinear2d_aa",
)  # fmt: skip
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
STEP_PREFIX = "ProfilerStep"  # "ProfilerStep#3" in a trace, "ProfilerStep*" in events()
# `colab_gpu.measure.profiling.profile_step` runs GradScaler.step under this label. With fp16, the scaler reads its
# inf/NaN flag with .item() every step before the optimizer's step: a host read that is not the learner's, removed by an
# optimizer built with fused=True (the scaler then hands the flag to it on the device; lesson 12).
SCALER_LABEL = "GradScaler.step"

# What a GPU kernel is busy with, by its name (cuBLAS, cuDNN, CUTLASS and Triton names) and its length. Each kind has
# its own levers (`colab_gpu.measure.regimes`): tensor-core work pays for 16 bits and layouts, element-wise chains for
# fusion, tiny kernels for more work per kernel.
MATMUL = "matmuls and convolutions"
ELEMENTWISE = "element-wise, normalisation and reduction kernels"
TINY = "tiny kernels"
COPIES = "copies"
# A kernel shorter than this is mostly its fixed costs: launch, filling the GPU's multiprocessors, draining the last
# wave. A decode step of a small language model runs hundreds of them (lesson 14); a GPU-bound training step's
# matmuls and element-wise kernels over a whole batch last tens of microseconds or more.
TINY_KERNEL_US = 10.0
# Names of matmul and convolution kernels; the last three are the cuDNN convolutions of a T4 or a V100
# (volta_scudnn_*, turing_fp16_s1688cudnn_*, volta_h884cudnn_*), which name no "conv".
MATMUL_NAMES = (
    "gemm", "gemv", "nvjet", "xmma", "cutlass", "cublas", "tensorop", "splitk", "bmm", "dot_kernel", "convolve",
    "conv1d", "conv2d", "conv3d", "wgrad", "dgrad", "fprop", "winograd", "fft", "flash", "fmha", "attention", "attn",
    "triton_tem", "scudnn", "1688cudnn", "884cudnn",
)  # fmt: skip


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
    in_scaler: bool = False  # inside GradScaler.step (labelled by profile_step)
    host_wait: bool = False  # an operator the loop called (or torch.cuda.synchronize) that waits for the GPU, other
    # than a read of a value (HOST_READ, counted as such)

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
        in_scaler = SCALER_LABEL in ancestors
        synchronizes = event.name == HOST_READ and any(_calls(child, SYNCS) for child in event.cpu_children)
        called = top_level or (event.name in WAITS and not any(a.startswith("aten::") for a in ancestors))
        host_wait = called and _calls(event, WAITS) and not _calls(event, (HOST_READ,))
        spans.append(
            Span(
                event.name,
                event.device_type != DeviceType.CPU,
                event.time_range.start,
                event.time_range.end,
                top_level,
                in_framework,
                synchronizes,
                in_scaler,
                host_wait,
            )
        )
    return spans


def parts_found(inside: list[Span], data_phase: list[tuple[float, float]]) -> tuple[str, ...]:
    """Which of the parts some levers need (`OPTIMIZER`, `CONVOLUTIONS`, `AUGMENTATION`, `HIDDEN_INPUT`, `GROWN`,
    `REPEATED`) the profiled steps' CPU events ``inside`` hold; augmentation counts inside ``data_phase`` (or under
    its label)."""
    names = {s.name for s in inside if not s.on_device}
    augmenting = AUGMENT_LABEL in names or any(
        s.name in AUGMENT_OPS and any(start <= s.start_us < end for start, end in data_phase)
        for s in inside
        if not s.on_device
    )
    found = {
        OPTIMIZER: any(name.startswith(OPTIMIZER_SPAN) for name in names),
        CONVOLUTIONS: bool(names.intersection(CONVOLUTION_OPS)),
        AUGMENTATION: augmenting,
        HIDDEN_INPUT: any(name.startswith(LOADER_SPAN) and "MultiProcessing" in name for name in names),
        GROWN: any(s.name == "aten::cat" and s.top_level_op for s in inside),  # not torch.stack's own cat
        REPEATED: "aten::repeat_interleave" in names,
    }
    return tuple(part for part, here in found.items() if here)


def kernel_category(name: str, duration_us: float) -> str:
    """What a GPU kernel (or copy) named ``name`` that ran ``duration_us`` is busy with: `COPIES`, `TINY`, `MATMUL`
    or `ELEMENTWISE` (everything else: element-wise, normalisation, reductions, indexing). Lesson 10."""
    lowered = name.lower()
    if lowered.startswith(("memcpy", "memset")):
        return COPIES
    if duration_us < TINY_KERNEL_US:
        return TINY
    if any(part in lowered for part in MATMUL_NAMES):
        return MATMUL
    return ELEMENTWISE


def kernel_shares(kernels: Iterable[Span]) -> dict[str, float]:
    """Each `kernel_category`'s share of the kernels' summed time, largest first."""
    totals: dict[str, float] = {}
    for kernel in kernels:
        category = kernel_category(kernel.name, kernel.duration_us)
        totals[category] = totals.get(category, 0.0) + kernel.duration_us
    whole = sum(totals.values())
    if not whole:
        return {}
    return {category: total / whole for category, total in sorted(totals.items(), key=lambda item: -item[1])}


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


def _merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    merged: list[tuple[float, float]] = []
    for start, stop in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _uncovered_us(intervals: Iterable[tuple[float, float]], busy: Iterable[tuple[float, float]]) -> float:
    """How long ``intervals`` last while none of ``busy`` runs: the time the CPU fetched data and the GPU idled."""
    mine, theirs = _merged(intervals), _merged(busy)
    overlap, j = 0.0, 0
    for start, stop in mine:
        while j < len(theirs) and theirs[j][1] <= start:
            j += 1
        k = j
        while k < len(theirs) and theirs[k][0] < stop:
            overlap += min(stop, theirs[k][1]) - max(start, theirs[k][0])
            k += 1
    return sum(stop - start for start, stop in mine) - overlap
