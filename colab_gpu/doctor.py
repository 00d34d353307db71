"""What runtime am I on? The doctor's report: the machine, the GPUs and the advice that follows from them.

`runtime_report()` returns a plain dict (easy to test, easy to save next to results);
`format_runtime_report()` turns it into the text that `print_runtime_report()` and
`python -m colab_gpu doctor` print. It sits on top of the layers: the precision each GPU trains in comes from
the training layer's rule (`colab_gpu.train.precision.choose_precision`).
"""

from __future__ import annotations

import platform
from typing import Any

import torch

from .hardware.capability import COLAB_VCPUS, gpu_capability, worker_rule
from .hardware.device import ENABLE_GPU_HINT, KAGGLE_GPU_MENU, cuda_device_count
from .hardware.machine import (
    MPS_ADVICE,
    apple_gpu_available,
    cpu_count,
    cpu_mhz,
    cpu_model,
    cudnn_version,
    in_colab,
    notebook_platform,
    nvidia_driver_version,
    ram_gib,
    tpu_hint,
)
from .hardware.units import GIB
from .train.precision import choose_precision


def gpu_report(index: int = 0) -> dict[str, Any]:
    """Properties of CUDA GPU ``index``: name, compute capability, memory, precision, kernels in this build."""
    props = torch.cuda.get_device_properties(index)
    gpu = gpu_capability(index)
    precision = choose_precision(torch.device("cuda", index))  # derived from the same capability rules
    return {
        "index": index,
        "name": gpu.name,
        "compute_capability": gpu.cc,
        "total_memory_gib": round(props.total_memory / GIB, 2),
        "multiprocessors": props.multi_processor_count,
        # is_bf16_supported() without the flag says True on a T4, which only emulates bf16.
        "bf16_native": gpu.bf16_native,
        "tf32": gpu.tf32,
        "precision": precision.name,
        "precision_reason": precision.reason,
        "kernels_in_this_torch": gpu.kernels_in(torch.cuda.get_arch_list()),
    }


_PRECISION_ROW = {
    "bf16": "bf16 autocast",
    "fp16": "fp16 autocast + GradScaler",
    "fp32": "none: float32 (no tensor cores)",
}

_PRECISION_ADVICE = {
    "bf16": "use bf16 autocast (no GradScaler needed) and enable TF32 for float32 matmuls.",
    "fp16": "use fp16 autocast with torch.amp.GradScaler('cuda'); bf16 is only emulated here and TF32 does not exist.",
    "fp32": "train in float32: without tensor cores mixed precision gains little.",
}


def runtime_report() -> dict[str, Any]:
    """Collect what this runtime offers, as a JSON-friendly dict.

    Example:
        >>> report = runtime_report()
        >>> report["cuda_available"] in (True, False)
        True

    Taught in lesson 01.
    """
    gpus = [gpu_report(i) for i in range(cuda_device_count())]
    cudnn, cudnn_problem = cudnn_version()
    ram = ram_gib()
    return {
        "in_colab": in_colab(),
        "platform": notebook_platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_available": bool(gpus),
        "gpu_count": len(gpus),
        "gpus": gpus,
        "cuda_runtime": torch.version.cuda,
        "cudnn": cudnn,
        "cudnn_problem": cudnn_problem,
        "driver": nvidia_driver_version() if gpus else None,
        "cpu_count": cpu_count(),
        "cpu_model": cpu_model(),
        "cpu_mhz": cpu_mhz(),
        "ram_gib": round(ram, 1) if ram is not None else None,
        "tpu_hint": tpu_hint(),
        "apple_gpu": apple_gpu_available(),
    }


def advice(report: dict[str, Any]) -> list[str]:
    """Concrete advice for the runtime described by ``report``. Taught in lesson 01."""
    tips = []
    if report.get("tpu_hint"):
        tips.append(report["tpu_hint"])
    if not report["cuda_available"]:
        tips.append(f"No CUDA GPU is visible: lessons run on the CPU, slowly. {ENABLE_GPU_HINT}")
        if report.get("apple_gpu"):
            tips.append(MPS_ADVICE)
    for gpu in report["gpus"]:
        gpu_name = f"{gpu['name']} (compute capability {gpu['compute_capability']})"
        if gpu.get("kernels_in_this_torch") is False:
            fix = (
                f"switch the notebook to {KAGGLE_GPU_MENU} (T4s are supported)"
                if report.get("platform") == "Kaggle"
                else "choose a newer GPU, or install a PyTorch build that still has kernels for it (a cu126 wheel), "
                "or use the CPU"
            )
            tip = (
                f"{gpu_name}: this PyTorch ({report['torch']}) has no kernels for it (built for "
                f"{', '.join(torch.cuda.get_arch_list())}), so the first CUDA operation fails with 'no kernel "
                f"image is available for execution on the device': {fix}."
            )
        else:
            tip = f"{gpu_name}: {_PRECISION_ADVICE[gpu['precision']]}"
        if tip not in tips:  # two T4s need the advice once
            tips.append(tip)
    if report.get("cudnn_problem"):
        tips.append(
            f"{report['cudnn_problem']}: convolutions will fail with this PyTorch. Use a T4 or newer GPU, "
            "or a PyTorch build with an older cuDNN."
        )
    if report["gpu_count"] >= 2:
        tips.append(
            f"{report['gpu_count']} GPUs: one process per GPU with DistributedDataParallel (torchrun "
            f"--nproc-per-node={report['gpu_count']}, lesson 08); plain PyTorch code uses only the first."
        )
    if report["cpu_count"] <= COLAB_VCPUS:  # few cores: the worker count matters (lesson 05)
        workers, why = worker_rule(report["cpu_count"])
        tips.append(f"use at most {workers} DataLoader workers: {why}")
    return tips


def format_runtime_report(report: dict[str, Any]) -> str:
    """Render ``report`` (from `runtime_report`) as aligned text with advice at the end: what `print_runtime_report`
    prints (lesson 01) and ``python -m colab_gpu doctor`` shows."""
    rows = [
        ("Platform", report.get("platform", "Colab" if report["in_colab"] else "local")),
        ("Python", report["python"]),
        ("PyTorch", report["torch"]),
        ("CUDA build", report["cuda_runtime"] or "none (CPU-only build)"),
        ("cuDNN", report["cudnn"] or "n/a"),
        ("NVIDIA driver", report["driver"] or "n/a"),
        (
            "CPU",
            f"{report.get('cpu_model', 'unknown')}"
            + (f", {report['cpu_mhz']:.0f} MHz" if report.get("cpu_mhz") else ""),
        ),
        ("CPU cores", report["cpu_count"]),
        ("RAM", f"{report['ram_gib']} GiB" if report["ram_gib"] is not None else "unknown"),
        ("GPUs", report["gpu_count"]),
    ]
    for gpu in report["gpus"]:
        rows += [
            (f"GPU {gpu['index']}", gpu["name"]),
            ("  compute capability", gpu["compute_capability"]),
            ("  total memory", f"{gpu['total_memory_gib']} GiB"),
            ("  native bf16", "yes" if gpu["bf16_native"] else "no"),
            ("  mixed precision", _PRECISION_ROW[gpu["precision"]]),  # choose_precision's rule, as doctor advises
            ("  TF32", "yes" if gpu["tf32"] else "no"),
            ("  kernels in this PyTorch", {True: "yes", False: "NO", None: "unknown"}[gpu["kernels_in_this_torch"]]),
        ]
    width = max(len(key) for key, _ in rows)
    lines = [f"{key:<{width}}  {value}" for key, value in rows]
    lines += ["", "Advice:"] + [f"- {tip}" for tip in advice(report)]
    return "\n".join(lines)


def print_runtime_report() -> dict[str, Any]:
    """Print the runtime report with advice; return the dict. Warns, never fails, on a CPU. Taught in lesson 01."""
    report = runtime_report()
    print(format_runtime_report(report))
    return report
