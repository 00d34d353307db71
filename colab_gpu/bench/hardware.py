"""The bench's rows on what the hardware does (lessons 02, 04 and 06): matmul throughput by format, host-to-device
copies, GPU against CPU training steps (each in its measured regime: a launch-bound and a compute-bound MLP, and the
CNN), mixed precision against fp32. Rows that need a GPU are skipped, with the reason, on a CPU runtime.
"""

from __future__ import annotations

import torch

from ..experiments.feeding import copy_bandwidth
from ..experiments.sizes import sized
from ..experiments.workloads import (
    CNN_STEP,
    MLP_STEP,
    Workload,
    amp_workloads,
    matmul_peak,
    time_step,
    training_flops,
    workload_step,
)
from ..measure.profile_summary import ProfileSummary
from ..measure.profiling import profile_step
from ..measure.timing import BenchResult, compare_steps, matmul_tflops
from ..train.models import mlp
from ..train.precision import choose_precision, tf32_mode
from .rows import NEEDS_GPU, Row, skipped


def matmul_rows(device: torch.device) -> list[Row]:
    """Matmul throughput: fp32 (IEEE), TF32 and the tensor-core format, each its peak over three sizes."""
    on_gpu = device.type == "cuda"
    sizes = sized("matmul_sides", device)
    with tf32_mode(False):  # IEEE float32, whatever the caller had set
        fp32 = max(matmul_tflops(n, torch.float32, device) for n in sizes)
    rows = [
        Row(
            "matmul_fp32",
            "matmul fp32 peak (TFLOP/s)",
            str(device),
            "ok",
            round(fp32, 3),
            "TFLOP/s",
            {"sizes": list(sizes)},
        )
    ]
    if not on_gpu:
        return rows + [
            skipped("matmul_tf32", "matmul TF32 vs fp32", device, NEEDS_GPU),
            skipped("matmul_half", "matmul bf16/fp16 vs fp32", device, NEEDS_GPU),
        ]
    with tf32_mode(True):
        tf32 = max(matmul_tflops(n, torch.float32, device) for n in sizes)
    half_dtype = choose_precision(device).dtype or torch.float16
    half = max(matmul_tflops(n, half_dtype, device) for n in sizes)
    return rows + [
        Row(
            "matmul_tf32",
            "matmul TF32 vs fp32",
            str(device),
            "ok",
            round(tf32 / fp32, 2),
            "x",
            {"tf32_tflops": tf32, "fp32_tflops": fp32},
            "TF32 only exists on compute capability >= 8.0",
        ),
        Row(
            "matmul_half",
            f"matmul {str(half_dtype)[6:]} vs fp32",
            str(device),
            "ok",
            round(half / fp32, 2),
            "x",
            {"half_tflops": half, "fp32_tflops": fp32, "dtype": str(half_dtype)},
        ),
    ]


def host_to_device(device: torch.device) -> Row:
    if device.type != "cuda":
        return skipped("h2d", "host-to-device copy, pinned vs pageable", device, NEEDS_GPU)
    pinned = copy_bandwidth(256, device, pinned=True)
    pageable = copy_bandwidth(256, device, pinned=False)
    return Row(
        "h2d",
        "host-to-device copy, pinned vs pageable",
        str(device),
        "ok",
        round(pinned / pageable, 2),
        "x",
        {"pinned_gbps": pinned, "pageable_gbps": pageable, "mib": 256},
    )


#: Compute-bound on any course GPU: 69 GFLOP per training step (torch's FLOP counter: 6 x 6.3 M weights x 2,048 samples,
#: less the first layer's input gradient, which is not computed), milliseconds of math on a data-center GPU for a few
#: dozen kernel launches. Beside it, lesson 03's MLP at batch 256 is launch-bound (mlp_cpu_gpu's gpu_busy on the H100:
#: reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2): the same "GPU vs CPU" question, answered in the two regimes.
BIG_MLP_STEP = Workload("MLP 1024-2048-2048-10, batch 2048", lambda: mlp(1024, hidden=2048), (2048, 1024))
CPU_GPU_STEPS = {
    "mlp_cpu_gpu": ("MLP training step, GPU vs CPU (lesson 03's MLP, batch 256)", MLP_STEP),
    "mlp_big_cpu_gpu": ("MLP training step, GPU vs CPU (a compute-bound MLP, batch 2048)", BIG_MLP_STEP),
    # Not lesson 04's figure: lesson 04 times batch 128 with cuDNN's default TF32, each setting in a fresh process
    # (figure 04.conv_step_gpu_vs_cpu in references.json); this row times batch 256 in IEEE float32 in this process
    # (the H100's row: reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2).
    "cnn_cpu_gpu": (
        "CNN training step, GPU vs CPU (batch 256, IEEE fp32, in process; not lesson 04's setup)",
        CNN_STEP,
    ),
}


def timed_step(workload: Workload, device: torch.device) -> tuple[BenchResult, ProfileSummary | None]:
    """A fresh ``workload`` model's SGD training step in IEEE float32 on random inputs, timed with `compare_steps`
    (K steps per sample, at least 7 samples); on a GPU also profiled, for its regime and its share of this GPU's
    measured fp32 matmul peak (``cg.profile_step``, lesson 10)."""
    with tf32_mode(False):
        step = workload_step(workload, device)
        timing = compare_steps({"step": step}, device=device, warmup=1 if device.type == "cpu" else 3)["step"]
        if device.type != "cuda":
            return timing, None
        peak = matmul_peak(device, "fp32", tf32=False)
        flops = training_flops(workload)
        return timing, profile_step(step, device, flops_per_step=flops, peak_tflops=peak, peak_precision="fp32")


def cpu_vs_gpu_rows(device: torch.device) -> list[Row]:
    """The same training steps on this machine's CPU and on its GPU: lesson 03's MLP (launch-bound on a GPU), a
    compute-bound MLP, and lesson 04's CNN. Each row names the GPU step's measured regime."""
    if device.type != "cuda":
        return [skipped(key, name, device, NEEDS_GPU) for key, (name, _) in CPU_GPU_STEPS.items()]
    rows = []
    for key, (name, workload) in CPU_GPU_STEPS.items():
        on_cpu, _ = timed_step(workload, torch.device("cpu"))
        on_gpu, summary = timed_step(workload, device)
        details = {
            "cpu_s": on_cpu.median,
            "gpu_s": on_gpu.median,
            "gpu_steps_per_sample": on_gpu.steps_per_sample,
            "model": workload.name,
            "batch": workload.shape[0],
            "cpu_threads": torch.get_num_threads(),
            "gpu_regime": summary.regime.name,
            "gpu_busy": summary.gpu_busy,
        }
        if summary.share_of_peak is not None:
            details.update(gpu_tflops=summary.achieved_tflops, share_of_fp32_peak=summary.share_of_peak)
        rows.append(
            Row(
                key, name, str(device), "ok", round(on_cpu.median / on_gpu.median, 1), "x", details, str(summary.regime)
            )
        )
    return rows


SUSTAINED_SECONDS = 5.0  # of back-to-back matmuls before the half-precision peak that a training step is held to


def amp_rows(device: torch.device) -> list[Row]:
    """AMP vs fp32 (TF32 off) on lesson 06's matmul-heavy MLP, and how close AMP training gets to the matmul peak."""
    if device.type != "cuda":
        return [
            skipped("amp", "AMP vs fp32 training step (matmul-heavy MLP)", device, NEEDS_GPU),
            skipped("amp_peak", "AMP MLP training vs half-precision matmul peak", device, NEEDS_GPU),
        ]
    chosen = choose_precision(device)
    workload = amp_workloads(device)["MLP"]
    fp32, fp32_peak = time_step(workload, device, "fp32")
    amp, amp_peak = time_step(workload, device, chosen.name)
    # torch's FLOP counter, not 6 per weight and sample: the first layer's backward computes no input gradient
    # (the inputs need none), which made "6 x params" 3.9% high (0.72 of the peak where 0.69 was right)
    achieved = training_flops(workload) / amp.median / 1e12
    # The peak in the state the step ran in: after seconds of matmuls, as a whole training step keeps the GPU busy
    # (a burst peak of a cold T4 runs at a clock its 70 W cap does not hold: the step would read far below it)
    half = chosen.dtype or torch.float16
    half_peak = max(matmul_tflops(n, half, device, warm_seconds=SUSTAINED_SECONDS) for n in (4096, 8192))
    details = {
        "fp32_s": fp32.median,
        "amp_s": amp.median,
        "fp32_peak_mib": fp32_peak,
        "amp_peak_mib": amp_peak,
        "precision": chosen.name,
        "model": workload.name,
    }
    return [
        Row(
            "amp",
            f"AMP ({chosen.name}) vs fp32 training step (matmul-heavy MLP)",
            str(device),
            "ok",
            round(fp32.median / amp.median, 2),
            "x",
            details,
        ),
        Row(
            "amp_peak",
            f"AMP MLP training vs {chosen.name} matmul peak",
            str(device),
            "ok",
            round(achieved / half_peak, 2),
            "of peak",
            {"training_tflops": achieved, "matmul_peak_tflops": half_peak, "peak_after_s": SUSTAINED_SECONDS},
        ),
    ]
