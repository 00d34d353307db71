"""colab_gpu: the companion package of the course "PyTorch on GPUs, the Colab way".

Every notebook starts with ``import colab_gpu as cg`` and ``device = cg.get_device()``.
Nothing here decides anything at import time: every function takes its device explicitly.
Every public helper's docstring names the lesson that teaches it. Where each lesson's helpers live:

- 01 runtime: ``device`` (get_device), ``runtime`` (the doctor's report), ``capability`` (every hardware rule);
- 02 tensors on the device: ``timing`` (benchmark, speedup: the measuring primitives), ``feeding.copy_bandwidth``,
  ``plots``;
- 03 MLP: ``data``, ``downloads``, ``models``, ``train`` (train_epoch), ``fit_loop`` (fit), ``train_checks``,
  ``history``, ``checkpoint`` (disconnects), ``workloads.time_train_epoch``;
- 04 CNN: ``workloads`` (a training step timed, a conv step in a fresh process);
- 05 feeding: ``loaders`` (workers, pinned memory, DeviceLoader, EncodedImages), ``feeding`` (each measured),
  ``augment.per_sample_flip``;
- 06 mixed precision: ``precision`` (from ``capability``'s rule), ``workloads`` (the AMP experiment's models);
- 07 memory: ``memory``, ``batch_size`` (the largest batch that fits), ``activations`` (what autograd keeps, on
  any device);
- 08 multi-GPU: ``parallel`` (DDP setup, torchrun);
- 09 errors: ``errors`` (shows_error), ``atlas`` (the errors learners meet), ``explain`` (cg.explain and
  ``%load_ext colab_gpu``);
- 10 profiler: ``profiling`` (a step timed, then profiled), ``profile_summary`` (the profile reduced to its numbers),
  ``regimes`` (the regime: input-, launch-, GPU- or CPU-bound, what helps and what cannot), ``step_parts`` (a GPU
  step's host part and GPU part, measured, which the regime weighs), ``profile_events``
  (a profile's events as spans, kernels by kind), ``recorded`` (steps profiled on the course's GPUs),
  ``timing.compare_steps`` (two ways of running a step, timed against each other) and ``timing.copy_gbps`` (the
  memory bandwidth a memory-bound step is compared with);
- 11 compile: ``compiling`` (whether this runtime compiles, compile or fall back to eager, counting graphs);
- 12 capstone: ``speedrun_ladder`` (the rungs, each measured; ``speedrun_ladder.speedrun``, the last one),
  ``augment`` (crops and flips per image on the CPU or per batch on the device);
- 13 your own data: ``archives`` (an archive copied to local disk, file reads timed), ``image_folders`` (an image
  folder split, loaded upright, JPEG decoding),
  ``data.write_image_folder`` (stand-in photos),
  ``finetune`` (pretrained weights or a stated fallback, the transforms);
- 14 transformers: ``capability.attention_backend`` (which attention kernel runs), ``llm_memory`` (what a model
  needs in memory), ``tiny_lm`` (a small decoder with a KV cache), ``lora`` (low-rank adapters), ``hub_models``
  (a pretrained model from the Hugging Face Hub, or a stated offline stand-in);
- 15 past one GPU: ``ledger`` (what a training step holds, part by part, measured), ``hub_models.pretrained_source``
  (a Hub name, or an offline stand-in saved for ``from_pretrained``), ``parallel`` (torchrun, as in lesson 08);
- every lesson: ``checks`` (exercise self-checks, called as ``cg.checks.<name>``: each prints a verdict and
  returns it; helpers that raise are named ``require_*``), ``references`` (predict, then measure), ``plots`` and
  ``figures/``.

Names keep one meaning: a *report* is a dict of facts about this runtime (``runtime_report``, ``memory.memory_report``),
``print_*``/``format_*`` show one, and ``checks.core.that`` is the verdict every self-check ends with.
"""

from . import atlas, checks, feeding, llm_memory, speedrun_ladder, workloads
from .activations import measure_activations
from .archives import copy_and_extract, time_file_reads
from .augment import per_sample_flip, random_crop
from .batch_size import find_max_batch_size
from .capability import attention_backend, cudnn_attention_first, kernels_for
from .checkpoint import atomic_save, default_checkpoint_dir, save_checkpoint
from .compiling import GraphCounter, compile_model, compile_support
from .data import load_digits, make_loaders, seed_everything, write_image_folder
from .device import DeviceNotAvailableError, get_device, synchronize
from .downloads import data_dir, load_cifar10, load_fashion_mnist
from .errors import shows_error
from .explain import explain
from .explain import load_ipython_extension as load_ipython_extension  # %load_ext colab_gpu
from .explain import unload_ipython_extension as unload_ipython_extension
from .feeding import copy_bandwidth, measure_loader, sweep_workers, time_loader_epochs
from .finetune import load_pretrained
from .fit_loop import fit
from .hub_models import load_language_model, pretrained_source
from .image_folders import decode_jpegs, split_image_folder
from .ledger import step_ledger
from .loaders import DeviceLoader, EncodedImages, suggest_num_workers, worker_loader
from .lora import add_lora, merge_lora
from .memory import (
    allocated_timeline,
    allocator_settings,
    cleanup,
    clear_notebook_references,
    format_memory,
    measure_peak,
)
from .models import count_parameters, mlp, small_cnn, speed_net
from .parallel import DistInfo, all_reduce_mean, ddp_setup, ddp_teardown, launch_torchrun, rank0_print
from .plots import bar_seconds, plot_bandwidth, plot_history, plot_memory_timeline, show_figure, show_images
from .precision import choose_precision, restored_backend_settings, set_tf32, tf32_enabled, tf32_mode
from .profiling import ProfileSummary, profile_step, profile_training_steps, summarize_profile
from .recorded import recorded_steps
from .references import compare_with_references
from .runtime import cpu_count, print_runtime_report, runtime_report
from .speedrun_ladder import run_ladder, speedrun
from .timing import benchmark, compare_steps, copy_gbps, format_seconds, speedup
from .tiny_lm import TinyDecoder, generate
from .train import evaluate, predict, train_epoch, train_step
from .workloads import time_conv_step_fresh, time_train_epoch, time_train_step

__version__ = "0.51.1"

# What the lessons call, and nothing else (tests/test_public_api.py): the rest stays importable from its module.
__all__ = [
    "DeviceLoader",
    "DeviceNotAvailableError",
    "DistInfo",
    "EncodedImages",
    "GraphCounter",
    "ProfileSummary",
    "TinyDecoder",
    "add_lora",
    "all_reduce_mean",
    "allocated_timeline",
    "allocator_settings",
    "atlas",
    "atomic_save",
    "attention_backend",
    "bar_seconds",
    "benchmark",
    "checks",
    "choose_precision",
    "cleanup",
    "clear_notebook_references",
    "compare_steps",
    "compare_with_references",
    "compile_model",
    "compile_support",
    "copy_and_extract",
    "copy_bandwidth",
    "copy_gbps",
    "count_parameters",
    "cpu_count",
    "cudnn_attention_first",
    "data_dir",
    "ddp_setup",
    "ddp_teardown",
    "decode_jpegs",
    "default_checkpoint_dir",
    "evaluate",
    "explain",
    "feeding",
    "find_max_batch_size",
    "fit",
    "format_memory",
    "format_seconds",
    "generate",
    "get_device",
    "kernels_for",
    "launch_torchrun",
    "llm_memory",
    "load_cifar10",
    "load_digits",
    "load_fashion_mnist",
    "load_language_model",
    "load_pretrained",
    "make_loaders",
    "measure_activations",
    "measure_loader",
    "measure_peak",
    "merge_lora",
    "mlp",
    "per_sample_flip",
    "plot_bandwidth",
    "plot_history",
    "plot_memory_timeline",
    "predict",
    "pretrained_source",
    "print_runtime_report",
    "profile_step",
    "profile_training_steps",
    "recorded_steps",
    "random_crop",
    "rank0_print",
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
    "step_ledger",
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
    "worker_loader",
    "workloads",
    "write_image_folder",
]
