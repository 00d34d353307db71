"""colab_gpu: the companion package of the course "PyTorch on GPUs, the Colab way".

Every notebook starts with ``import colab_gpu as cg`` and ``device = cg.get_device()``.
Nothing here decides anything at import time: every function takes its device explicitly.
"""

from .checks import check_close, check_on_device, report
from .device import (
    DeviceNotAvailableError,
    available_devices,
    cuda_device_count,
    cuda_required,
    get_device,
    require_cuda_if_asked,
    synchronize,
)
from .plots import bar_seconds
from .runtime import advice, format_report, in_colab, print_runtime_report, runtime_report
from .timing import BenchResult, benchmark, format_seconds, speedup

__version__ = "0.1.0"

__all__ = [
    "BenchResult",
    "DeviceNotAvailableError",
    "advice",
    "available_devices",
    "bar_seconds",
    "benchmark",
    "check_close",
    "check_on_device",
    "cuda_device_count",
    "cuda_required",
    "format_report",
    "format_seconds",
    "get_device",
    "in_colab",
    "print_runtime_report",
    "report",
    "require_cuda_if_asked",
    "runtime_report",
    "speedup",
    "synchronize",
]
