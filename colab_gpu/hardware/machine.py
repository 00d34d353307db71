"""The machine this runs on, as facts: the platform (Colab, Kaggle, local), its CPU cores and model, RAM, the NVIDIA
driver and cuDNN. The doctor's report (`colab_gpu.doctor`) gathers them with the GPUs' rules and advises.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from .capability import CUDNN_DROPS_BELOW, cudnn_supports
from .device import COLAB_GPU_MENU, cuda_device_count
from .units import GIB

CPUINFO = Path("/proc/cpuinfo")


def in_colab() -> bool:
    """True when running inside a Google Colab runtime (the report's platform; lesson 13 tests it in plain Python)."""
    return "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ


def in_kaggle() -> bool:
    """True inside a Kaggle notebook (Kaggle sets KAGGLE_KERNEL_RUN_TYPE in its kernels; lesson 13 tests it)."""
    return "KAGGLE_KERNEL_RUN_TYPE" in os.environ


def notebook_platform() -> str:
    """Where this runs: "Colab", "Kaggle" or "local" (any other Jupyter or terminal), for the runtime report."""
    return "Colab" if in_colab() else "Kaggle" if in_kaggle() else "local"


def tpu_hint() -> str | None:
    """A hint when this runtime has a TPU (PyTorch here uses GPUs, not TPUs), else None."""
    if os.environ.get("COLAB_TPU_ADDR") or os.environ.get("TPU_NAME") or os.path.exists("/dev/accel0"):
        return (
            f"This runtime has a TPU. This course uses CUDA GPUs: {COLAB_GPU_MENU} (TPUs need torch_xla, not "
            "covered here)."
        )
    return None


def apple_gpu_available() -> bool:
    """True on an Apple-silicon Mac whose PyTorch can use its GPU (the ``mps`` device), which the course does not use:
    its GPU sections measure CUDA (pinned memory, CUDA events and graphs, fp16 with a GradScaler, Triton)."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


MPS_ADVICE = (
    "This Mac's Apple GPU (PyTorch's 'mps' device) is not used by the course: its GPU sections measure CUDA "
    "(pinned memory, CUDA events and graphs, fp16 with a GradScaler, Triton kernels for torch.compile), so every "
    "lesson computes on the CPU here, at the CPU sizes. In your own code, torch.device('mps') runs most "
    "operators on the Apple GPU."
)


def cpu_count() -> int:
    """CPU cores this process may use (the affinity mask, not the host's total). Taught in lesson 05."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_model() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) CPU @ 2.20GHz" on Colab), or what the platform says where Linux's
    /proc/cpuinfo is absent."""
    if CPUINFO.exists():
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def cpu_mhz() -> float | None:
    """The first core's current clock in MHz, from /proc/cpuinfo (None elsewhere)."""
    if CPUINFO.exists():
        for line in CPUINFO.read_text(errors="replace").splitlines():
            if line.startswith("cpu MHz"):
                return round(float(line.split(":", 1)[1]), 0)
    return None


def ram_gib() -> float | None:
    """Total RAM of this machine in GiB, or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    except (AttributeError, ValueError, OSError):
        return None


def nvidia_driver_version() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None when the tool is absent."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def cudnn_version() -> tuple[int | None, str | None]:
    """(cuDNN's version, None), or (None, why) when PyTorch refuses to load it for the visible GPUs.

    cuDNN 9.11 and later drop GPUs below compute capability 7.5 (a P100, a V100), and PyTorch then raises
    "cuDNN version ... is not compatible with devices with SM < 7.5" from ``torch.backends.cudnn.version()``
    and from the first convolution. It raises once: the next call answers. So the rule decides, not the exception.
    """
    if not torch.backends.cudnn.is_available():
        return None, None
    try:
        version = torch.backends.cudnn.version()
    except RuntimeError as err:
        return None, str(err).split(". ")[0]
    oldest = min((torch.cuda.get_device_capability(i) for i in range(cuda_device_count())), default=None)
    if version is not None and oldest is not None and not cudnn_supports(version, oldest):
        major, minor = CUDNN_DROPS_BELOW[1]
        return None, f"cuDNN version {version} is not compatible with devices with SM < {major}.{minor}"
    return version, None
