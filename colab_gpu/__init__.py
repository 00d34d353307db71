"""colab_gpu: the companion package of the course "PyTorch on GPUs, the Colab way".

Every notebook starts with ``import colab_gpu as cg`` and ``device = cg.get_device()``.
Nothing here decides anything at import time: every function takes its device explicitly.
Every public helper's docstring names the lesson that teaches it.

Its folders are its layers, lowest first; a module imports only its own layer or lower ones (tests/test_imports.py):

- ``hardware/``: ``device`` (get_device, the one door every device goes through), ``capability`` (every hardware
  rule), ``gpus`` (the course's GPUs, one table), ``machine`` (the platform, CPU cores, RAM, driver), ``units``;
- ``measure/``: ``timing`` (the course's timing methods), ``memory``, ``profiling`` with ``profile_events`` and
  ``profile_summary``, the regime rule (``regimes``, ``levers``, ``step_parts``), ``recorded`` and ``references`` (the
  course GPUs' figures), ``host``, ``plots``, ``json_files``;
- ``data/``: ``datasets``, ``downloads``, ``loaders`` (workers, pinned memory, DeviceLoader), ``augment``,
  ``archives``, ``image_folders``;
- ``train/``: ``models``, ``steps`` (train_step, train_epoch, evaluate), ``fit``, ``history``, ``checkpoint``,
  ``precision``, ``compiling``, ``batch_size``, ``activations``, ``parallel`` (DDP, torchrun), ``finetune``;
- ``llm/``: ``llm_memory``, ``tiny_lm``, ``lora``, ``hub_models``, ``ledger`` (lessons 14 and 15);
- ``experiments/``: ``workloads`` (training steps timed), ``feeding`` (each way of feeding the GPU, measured),
  ``speedrun_ladder`` (lesson 12);
- ``errors/``: ``atlas`` (the errors learners meet, one table), ``explain`` (cg.explain, ``%load_ext colab_gpu``),
  ``showing`` (cg.shows_error);
- on top: ``checks/`` (the exercises' self-checks, ``cg.checks.<name>``: each prints a verdict and returns it;
  helpers that raise are named ``require_*``), ``doctor`` (the runtime report), ``bench/`` (course tooling, which
  ``import colab_gpu`` does not load) and ``cli``.

Where each lesson's helpers live:

- 01 runtime: ``hardware.device`` (get_device), ``doctor`` (the runtime report), ``hardware.capability`` (every
  hardware rule), ``hardware.machine``;
- 02 tensors on the device: ``measure.timing`` (benchmark, speedup: the measuring primitives),
  ``experiments.feeding.copy_bandwidth``, ``measure.plots``;
- 03 MLP: ``data.datasets``, ``data.downloads``, ``train.models``, ``train.steps`` (train_epoch), ``train.fit``,
  ``train.train_checks``, ``train.history``, ``train.checkpoint`` (disconnects), ``experiments.workloads``;
- 04 CNN: ``experiments.workloads`` (a training step timed, a conv step in a fresh process);
- 05 feeding: ``data.loaders`` (workers, pinned memory, DeviceLoader, EncodedImages), ``experiments.feeding`` (each
  measured), ``data.augment.per_sample_flip``;
- 06 mixed precision: ``train.precision`` (from ``hardware.capability``'s rule), ``experiments.workloads`` (the AMP
  experiment's models);
- 07 memory: ``measure.memory``, ``train.batch_size`` (the largest batch that fits), ``train.activations`` (what
  autograd keeps, on any device);
- 08 multi-GPU: ``train.parallel`` (DDP setup, torchrun);
- 09 errors: ``errors.showing`` (shows_error), ``errors.atlas`` (the errors learners meet), ``errors.explain``
  (cg.explain and ``%load_ext colab_gpu``);
- 10 profiler: ``measure.profiling`` (a step timed, then profiled), ``measure.profile_summary`` (the profile reduced to
  its numbers), ``measure.regimes`` (the regime: input-, launch-, GPU- or CPU-bound, what helps and what cannot),
  ``measure.step_parts`` (a GPU step's host part and GPU part, measured), ``measure.levers``,
  ``measure.profile_events`` (a profile's events as spans, kernels by kind), ``measure.recorded`` (steps profiled on
  the course's GPUs), ``measure.timing.compare_steps`` and ``measure.timing.copy_gbps``;
- 11 compile: ``train.compiling`` (whether this runtime compiles, compile or fall back to eager, counting graphs);
- 12 capstone: ``experiments.speedrun_ladder`` (the rungs, each measured), ``data.augment`` (crops and flips per
  image on the CPU or per batch on the device);
- 13 your own data: ``data.archives`` (an archive copied to local disk, file reads timed), ``data.image_folders`` (an
  image folder split, loaded upright, JPEG decoding), ``data.datasets.write_image_folder`` (stand-in photos),
  ``train.finetune`` (pretrained weights or a stated fallback, the transforms);
- 14 transformers: ``hardware.capability.attention_backend`` (which attention kernel runs), ``llm.llm_memory`` (what a
  model needs in memory), ``llm.tiny_lm`` (a small decoder with a KV cache), ``llm.lora`` (low-rank adapters),
  ``llm.hub_models`` (a pretrained model from the Hugging Face Hub, or a stated offline stand-in);
- 15 past one GPU: ``llm.ledger`` (what a training step holds, part by part, measured),
  ``llm.hub_models.pretrained_source`` (a Hub name, or an offline stand-in saved for ``from_pretrained``),
  ``train.parallel`` (torchrun, as in lesson 08);
- every lesson: ``checks`` (the self-checks), ``measure.references`` (predict, then measure), ``measure.plots`` and
  ``figures/``.

The learner's face is ``__all__`` (and ``dir(cg)``): the helpers the lessons call, and as a third tier the modules
they reach into (``cg.workloads``, ``cg.feeding``, ``cg.speedrun_ladder``, ``cg.llm_memory``, ``cg.atlas``,
``cg.checks``). Everything else is imported from its module, one import path per name.

Names keep one meaning: a *report* is a dict of facts about this runtime (``runtime_report``,
``measure.memory.memory_report``), ``print_*``/``format_*`` show one, and ``checks.core.that`` is the verdict every
self-check ends with.
"""

from . import checks
from .data.archives import copy_and_extract, time_file_reads
from .data.augment import per_sample_flip, random_crop
from .data.datasets import load_digits, make_loaders, seed_everything, write_image_folder
from .data.downloads import data_dir, load_cifar10, load_fashion_mnist
from .data.image_folders import decode_jpegs, split_image_folder
from .data.loaders import DeviceLoader, EncodedImages, suggest_num_workers, worker_loader
from .doctor import print_runtime_report, runtime_report
from .errors import atlas
from .errors.explain import explain
from .errors.explain import load_ipython_extension as load_ipython_extension  # %load_ext colab_gpu
from .errors.explain import unload_ipython_extension as unload_ipython_extension
from .errors.showing import shows_error
from .experiments import feeding, speedrun_ladder, workloads
from .experiments.feeding import copy_bandwidth, measure_loader, sweep_workers, time_loader_epochs
from .experiments.speedrun_ladder import run_ladder, speedrun
from .experiments.workloads import time_conv_step_fresh, time_train_epoch, time_train_step
from .hardware.capability import attention_backend, cudnn_attention_first, kernels_for
from .hardware.device import DeviceNotAvailableError, get_device, synchronize
from .hardware.machine import cpu_count
from .llm import llm_memory
from .llm.hub_models import load_language_model, pretrained_source
from .llm.ledger import step_ledger
from .llm.lora import add_lora, merge_lora
from .llm.tiny_lm import TinyDecoder, generate
from .measure.memory import (
    allocated_timeline,
    allocator_settings,
    cleanup,
    clear_notebook_references,
    format_memory,
    measure_peak,
)
from .measure.plots import bar_seconds, plot_bandwidth, plot_history, plot_memory_timeline, show_figure, show_images
from .measure.profile_summary import ProfileSummary
from .measure.profiling import profile_step, profile_training_steps, summarize_profile
from .measure.recorded import recorded_steps
from .measure.references import compare_with_references
from .measure.timing import benchmark, compare_steps, copy_gbps, format_seconds, speedup
from .train.activations import measure_activations
from .train.batch_size import find_max_batch_size
from .train.checkpoint import atomic_save, default_checkpoint_dir, save_checkpoint
from .train.compiling import GraphCounter, compile_model, compile_support
from .train.finetune import load_pretrained
from .train.fit import fit
from .train.models import count_parameters, mlp, small_cnn, speed_net
from .train.parallel import DistInfo, all_reduce_mean, ddp_setup, ddp_teardown, launch_torchrun, rank0_print
from .train.precision import choose_precision, restored_backend_settings, set_tf32, tf32_enabled, tf32_mode
from .train.steps import evaluate, predict, train_epoch, train_step

__version__ = "0.52.0"

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


def __dir__() -> list[str]:
    """``dir(cg)`` and tab completion show the learner's face, not the layer folders (PEP 562)."""
    return sorted(__all__)
