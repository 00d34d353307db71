"""colab_gpu: the companion package of the course "PyTorch on GPUs, the Colab way".

Every notebook starts with ``import colab_gpu as cg`` and ``device = cg.get_device()``.
Nothing here decides anything at import time: every function takes its device explicitly.
Every public helper's docstring names the lesson that teaches it. Where each lesson's helpers live:

- 01 runtime: ``device`` (get_device), ``runtime`` (the doctor's report), ``capability`` (every hardware rule);
- 02 tensors on the device: ``timing`` (benchmark, speedup: the measuring primitives), ``feeding.copy_bandwidth``,
  ``plots``;
- 03 MLP: ``data``, ``models``, ``train`` (fit, train_epoch), ``history``, ``checkpoint`` (disconnects),
  ``workloads.time_train_epoch``;
- 04 CNN: ``workloads`` (a training step timed, a conv step in a fresh process);
- 05 feeding: ``feeding`` (workers, pinned memory, DeviceLoader, and the bench's loader experiments);
- 06 mixed precision: ``precision`` (from ``capability``'s rule), ``workloads`` (the AMP experiment's models);
- 07 memory: ``memory``, ``activations`` (what autograd keeps, on any device);
- 08 multi-GPU: ``parallel`` (DDP setup, torchrun);
- 09 errors: ``errors`` (shows_error), ``atlas`` (the errors learners meet), ``explain`` (cg.explain and
  ``%load_ext colab_gpu``);
- 10 profiler: ``profiling`` (a profile reduced to what to fix, and which lesson fixes it);
- 11 compile: ``compiling`` (whether this runtime compiles, compile or fall back to eager, counting graphs);
- 12 capstone: ``speedrun_ladder`` (the rungs, each measured; ``speedrun_ladder.speedrun``, the last one),
  ``augment`` (crops and flips per image on the CPU or per batch on the device);
- 13 your own data: ``own_data`` (an archive copied to local disk, an image folder split, JPEG decoding),
  ``data.write_image_folder`` (stand-in photos),
  ``finetune`` (pretrained weights or a stated fallback, the transforms);
- every lesson: ``checks`` (exercise self-checks: ``check_*`` print a verdict and return it; helpers that raise
  are named ``require_*``), ``references`` (predict, then measure), ``plots`` and ``figures/``.

Names keep one meaning: a *report* is a dict of facts about this runtime (``runtime_report``, ``memory_report``),
``print_*``/``format_*`` show one, and ``check_that`` is the verdict every self-check ends with.
"""

from . import atlas, finetune, own_data, speedrun_ladder, workloads
from .activations import ActivationMemory, measure_activations
from .atlas import AtlasEntry
from .augment import random_crop
from .capability import kernels_for
from .checkpoint import CheckpointError, atomic_save, default_checkpoint_dir, load_checkpoint, save_checkpoint
from .checks import (
    CheckResult,
    check_amp_step,
    check_bottleneck_fix,
    check_close,
    check_compiles_once,
    check_csv_dataset,
    check_ddp_script,
    check_evaluation_memory,
    check_fast_loop,
    check_label_validator,
    check_loader_settings,
    check_loader_speed,
    check_memory_saving,
    check_on_device,
    check_precision_rule,
    check_prediction_speed,
    check_profile_labels,
    check_released,
    check_shard,
    check_that,
    check_timing,
    check_train_loop,
)
from .compiling import CompileSupport, GraphCounter, compile_model, compile_support
from .data import (
    ImageData,
    data_dir,
    fake_image_data,
    load_cifar10,
    load_digits,
    load_fashion_mnist,
    make_loaders,
    seed_everything,
    write_image_folder,
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
from .errors import ShownError, shows_error
from .explain import explain
from .explain import load_ipython_extension as load_ipython_extension  # %load_ext colab_gpu
from .explain import unload_ipython_extension as unload_ipython_extension
from .feeding import (
    DeviceLoader,
    EncodedImages,
    WorkerAdvice,
    copy_bandwidth,
    measure_loader,
    per_sample_flip,
    suggest_num_workers,
    sweep_workers,
    time_loader_epochs,
    worker_counts,
    worker_loader,
)
from .finetune import finetune_transforms, load_pretrained
from .history import EpochStats, History
from .memory import (
    BatchSizeSearch,
    PeakMemory,
    allocated_timeline,
    allocator_settings,
    cleanup,
    clear_notebook_references,
    find_max_batch_size,
    format_memory,
    measure_peak,
    memory_report,
)
from .models import count_parameters, mlp, small_cnn, speed_net
from .own_data import (
    FileReads,
    FolderSplit,
    copy_and_extract,
    decode_jpegs,
    read_bytes,
    split_image_folder,
    time_file_reads,
)
from .parallel import DistInfo, all_reduce_mean, ddp_setup, ddp_teardown, launch_torchrun, rank0_print
from .plots import (
    bar_seconds,
    figure_names,
    figure_svg,
    plot_bandwidth,
    plot_history,
    plot_memory_timeline,
    show_figure,
    show_images,
)
from .precision import (
    Precision,
    choose_precision,
    make_scaler,
    resolve_precision,
    restored_backend_settings,
    set_tf32,
    tf32_enabled,
    tf32_mode,
)
from .profiling import ProfileSummary, profile_training_steps, summarize_profile
from .references import compare_with_references, reference_figures
from .runtime import (
    advice,
    cpu_count,
    format_runtime_report,
    in_colab,
    in_kaggle,
    notebook_platform,
    print_runtime_report,
    runtime_report,
)
from .speedrun_ladder import run_ladder, speedrun
from .timing import BenchResult, benchmark, format_seconds, speedup
from .train import evaluate, fit, predict, require_model_on_device, train_epoch, train_step
from .workloads import ConvStepTiming, time_conv_step_fresh, time_train_epoch, time_train_step

__version__ = "0.25.0"

__all__ = [
    "ActivationMemory",
    "AtlasEntry",
    "BatchSizeSearch",
    "BenchResult",
    "CheckResult",
    "CheckpointError",
    "CompileSupport",
    "ConvStepTiming",
    "DeviceLoader",
    "DeviceNotAvailableError",
    "DistInfo",
    "EncodedImages",
    "EpochStats",
    "FileReads",
    "FolderSplit",
    "GraphCounter",
    "History",
    "ImageData",
    "PeakMemory",
    "Precision",
    "ProfileSummary",
    "ShownError",
    "WorkerAdvice",
    "advice",
    "all_reduce_mean",
    "allocated_timeline",
    "allocator_settings",
    "atlas",
    "atomic_save",
    "available_devices",
    "bar_seconds",
    "benchmark",
    "check_amp_step",
    "check_bottleneck_fix",
    "check_close",
    "check_compiles_once",
    "check_fast_loop",
    "check_ddp_script",
    "check_evaluation_memory",
    "check_csv_dataset",
    "check_label_validator",
    "check_loader_settings",
    "check_loader_speed",
    "check_memory_saving",
    "check_on_device",
    "check_precision_rule",
    "check_prediction_speed",
    "check_profile_labels",
    "check_released",
    "check_shard",
    "check_that",
    "check_timing",
    "check_train_loop",
    "choose_precision",
    "cleanup",
    "clear_notebook_references",
    "compare_with_references",
    "compile_model",
    "compile_support",
    "copy_and_extract",
    "copy_bandwidth",
    "count_parameters",
    "cpu_count",
    "cuda_device_count",
    "cuda_required",
    "data_dir",
    "ddp_setup",
    "ddp_teardown",
    "decode_jpegs",
    "default_checkpoint_dir",
    "evaluate",
    "explain",
    "fake_image_data",
    "figure_names",
    "figure_svg",
    "find_max_batch_size",
    "finetune",
    "finetune_transforms",
    "fit",
    "format_memory",
    "format_runtime_report",
    "format_seconds",
    "get_device",
    "in_colab",
    "in_kaggle",
    "kernels_for",
    "launch_torchrun",
    "load_checkpoint",
    "load_cifar10",
    "load_digits",
    "load_fashion_mnist",
    "load_pretrained",
    "make_loaders",
    "make_scaler",
    "measure_activations",
    "measure_loader",
    "measure_peak",
    "memory_report",
    "mlp",
    "notebook_platform",
    "own_data",
    "per_sample_flip",
    "plot_bandwidth",
    "plot_history",
    "plot_memory_timeline",
    "predict",
    "print_runtime_report",
    "profile_training_steps",
    "random_crop",
    "rank0_print",
    "read_bytes",
    "reference_figures",
    "require_cuda_if_asked",
    "require_model_on_device",
    "resolve_precision",
    "restored_backend_settings",
    "run_ladder",
    "runtime_report",
    "save_checkpoint",
    "seed_everything",
    "set_tf32",
    "show_figure",
    "show_images",
    "shows_error",
    "small_cnn",
    "speed_net",
    "speedrun",
    "speedrun_ladder",
    "speedup",
    "split_image_folder",
    "suggest_num_workers",
    "summarize_profile",
    "sweep_workers",
    "synchronize",
    "tf32_enabled",
    "tf32_mode",
    "time_conv_step_fresh",
    "time_file_reads",
    "time_loader_epochs",
    "time_train_epoch",
    "time_train_step",
    "train_epoch",
    "train_step",
    "worker_counts",
    "worker_loader",
    "workloads",
    "write_image_folder",
]
