"""The bench's rows on what the hardware does (lessons 02, 04 and 06): matmul throughput by format, host-to-device
copies, GPU against CPU training steps, mixed precision against fp32. Rows that need a GPU are skipped, with the
reason, on a CPU runtime.
"""

from __future__ import annotations

import torch

from ..feeding import copy_bandwidth
from ..precision import choose_precision, tf32_mode
from ..timing import matmul_tflops
from ..workloads import CNN_STEP, MLP_STEP, amp_workloads, time_step
from .rows import NEEDS_GPU, Row, skipped


def matmul_rows(device: torch.device) -> list[Row]:
    """Matmul throughput: fp32 (IEEE), TF32 and the tensor-core format, each its peak over three sizes."""
    on_gpu = device.type == "cuda"
    sizes = (2048, 4096, 8192) if on_gpu else (256, 512, 1024)
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


def cpu_vs_gpu_rows(device: torch.device) -> list[Row]:
    """The same MLP and CNN training steps on this machine's CPU and on its GPU."""
    if device.type != "cuda":
        return [
            skipped("mlp_cpu_gpu", "MLP training step, GPU vs CPU", device, NEEDS_GPU),
            skipped("cnn_cpu_gpu", "CNN training step, GPU vs CPU", device, NEEDS_GPU),
        ]
    rows = []
    for key, name, workload in (
        ("mlp_cpu_gpu", "MLP training step, GPU vs CPU", MLP_STEP),
        ("cnn_cpu_gpu", "CNN training step, GPU vs CPU", CNN_STEP),
    ):
        on_cpu, _ = time_step(workload, torch.device("cpu"))
        on_gpu, _ = time_step(workload, device)
        rows.append(
            Row(
                key,
                name,
                str(device),
                "ok",
                round(on_cpu.median / on_gpu.median, 1),
                "x",
                {
                    "cpu_s": on_cpu.median,
                    "gpu_s": on_gpu.median,
                    "model": workload.name,
                    "batch": workload.shape[0],
                    "cpu_threads": torch.get_num_threads(),
                },
            )
        )
    return rows


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
    batch, params = workload.shape[0], sum(p.numel() for p in workload.make_model().parameters())
    achieved = 6 * batch * params / amp.median / 1e12  # forward 2 FLOPs per weight and sample, backward 4
    half_peak = max(matmul_tflops(n, chosen.dtype or torch.float16, device) for n in (4096, 8192))
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
            {"training_tflops": achieved, "matmul_peak_tflops": half_peak},
        ),
    ]
