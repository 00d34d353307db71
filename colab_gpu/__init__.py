"""colab_gpu: the companion package of the course "PyTorch on GPUs, the Colab way".

Every notebook starts with ``import colab_gpu as cg`` and ``device = cg.get_device()``.
Nothing here decides anything at import time: every function takes its device explicitly.
"""

from .bench import time_train_epoch, time_train_step
from .checkpoint import CheckpointError, default_checkpoint_dir, load_checkpoint, save_checkpoint
from .checks import (
    check_accuracy,
    check_close,
    check_label_validator,
    check_loader_settings,
    check_on_device,
    check_precision_rule,
    check_released,
    check_shard,
    report,
)
from .data import (
    ImageData,
    fake_image_data,
    load_cifar10,
    load_digits,
    load_fashion_mnist,
    make_loaders,
    seed_everything,
)
from .device import (
    DeviceNotAvailableError,
    available_devices,
    cuda_device_count,
    cuda_required,
    get_device,
    require_cuda_if_asked,
    synchronize,
)
from .feeding import (
    DeviceLoader,
    EncodedImages,
    WorkerAdvice,
    copy_bandwidth,
    measure_loader,
    per_sample_flip,
    suggest_num_workers,
    worker_loader,
)
from .memory import (
    PeakMemory,
    cleanup,
    clear_notebook_references,
    find_max_batch_size,
    format_memory,
    measure_peak,
    memory_report,
)
from .models import count_parameters, mlp, small_cnn
from .parallel import DistInfo, all_reduce_mean, ddp_setup, ddp_teardown, launch_torchrun, rank0_print
from .plots import bar_seconds, plot_history, show_images
from .precision import Precision, choose_precision, make_scaler, resolve_precision, set_tf32, tf32_enabled
from .runtime import advice, cpu_count, format_report, in_colab, print_runtime_report, runtime_report
from .timing import BenchResult, benchmark, format_seconds, speedup
from .train import EpochStats, History, check_model_device, evaluate, fit, predict, train_epoch, train_step

__version__ = "0.1.0"

__all__ = [
    "BenchResult",
    "CheckpointError",
    "DeviceLoader",
    "DeviceNotAvailableError",
    "DistInfo",
    "EncodedImages",
    "EpochStats",
    "History",
    "ImageData",
    "PeakMemory",
    "Precision",
    "WorkerAdvice",
    "advice",
    "all_reduce_mean",
    "available_devices",
    "bar_seconds",
    "benchmark",
    "check_accuracy",
    "check_close",
    "check_label_validator",
    "check_loader_settings",
    "check_model_device",
    "check_on_device",
    "check_precision_rule",
    "check_released",
    "check_shard",
    "choose_precision",
    "cleanup",
    "clear_notebook_references",
    "copy_bandwidth",
    "count_parameters",
    "cpu_count",
    "cuda_device_count",
    "cuda_required",
    "ddp_setup",
    "ddp_teardown",
    "default_checkpoint_dir",
    "evaluate",
    "fake_image_data",
    "find_max_batch_size",
    "fit",
    "format_memory",
    "format_report",
    "format_seconds",
    "get_device",
    "in_colab",
    "launch_torchrun",
    "load_checkpoint",
    "load_cifar10",
    "load_digits",
    "load_fashion_mnist",
    "make_loaders",
    "make_scaler",
    "measure_loader",
    "measure_peak",
    "memory_report",
    "mlp",
    "per_sample_flip",
    "plot_history",
    "predict",
    "print_runtime_report",
    "rank0_print",
    "report",
    "require_cuda_if_asked",
    "resolve_precision",
    "runtime_report",
    "save_checkpoint",
    "seed_everything",
    "set_tf32",
    "show_images",
    "small_cnn",
    "speedup",
    "suggest_num_workers",
    "synchronize",
    "tf32_enabled",
    "time_train_epoch",
    "time_train_step",
    "train_epoch",
    "train_step",
    "worker_loader",
]
