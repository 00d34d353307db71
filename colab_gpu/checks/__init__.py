"""Self-checks for exercises: a clear pass, or a specific hint, never a bare assert.

A lesson calls them as ``cg.checks.<name>`` (``cg.checks.train_loop(...)``). Each prints one line and returns a
``CheckResult`` (true when passed), so an exercise left undone does not crash the notebook; the learner reads the
hint and tries again. Helpers that raise instead are named ``require_*`` (``require_model_on_device``). By topic:
``core`` (the contract: ``that``, ``ok`` and ``fail``; recall exercises), ``first_steps`` (lesson 01),
``first_loop`` (lesson 03), ``evaluation``, ``data``, ``speed``, ``timer``, ``tuning``, ``speedrun``, ``training``,
``memory``, ``budget``, ``sharding``, ``parallel`` and ``regimes`` (the skill exercises, measured on the learner's
runtime; ``timed`` says how they time it).
"""

from .amp import amp_step
from .budget import memory_budget
from .core import guarded, label_validator, on_device
from .data import csv_dataset
from .evaluation import class_accuracy
from .first_loop import train_loop
from .first_steps import created_on, gpu_count
from .memory import evaluation_memory, memory_saving, released
from .parallel import ddp_script, shard
from .regimes import regime
from .sharding import fsdp_shard
from .speed import loader_settings, loader_speed, prediction_speed
from .speedrun import fast_loop
from .timer import timer
from .training import precision_rule
from .transformers import lora_linear
from .tuning import bottleneck_fix, compiles_once, profile_labels

__all__ = [
    "amp_step",
    "bottleneck_fix",
    "class_accuracy",
    "compiles_once",
    "created_on",
    "fast_loop",
    "fsdp_shard",
    "ddp_script",
    "evaluation_memory",
    "gpu_count",
    "csv_dataset",
    "label_validator",
    "loader_settings",
    "loader_speed",
    "lora_linear",
    "memory_budget",
    "memory_saving",
    "on_device",
    "precision_rule",
    "prediction_speed",
    "profile_labels",
    "regime",
    "released",
    "shard",
    "timer",
    "train_loop",
]

# Every check of a learner's answer runs inside `guarded`: an error while it runs is a hint, never a crash of the cell.
for _name in __all__:
    globals()[_name] = guarded(globals()[_name])
