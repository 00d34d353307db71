"""Self-checks for exercises: a clear pass, or a specific hint, never a bare assert.

Each ``check_*`` prints one line and returns a ``CheckResult`` (true when passed), so an exercise left undone
does not crash the notebook; the learner reads the hint and tries again. Helpers that raise instead are named
``require_*`` (``require_model_on_device``). By topic: ``core`` (the contract, ``check_that``; recall exercises),
``data``, ``speed``, ``training``, ``memory`` and ``parallel`` (the skill exercises, measured on the learner's runtime).
"""

from .core import (
    HINT,
    PASS,
    CheckResult,
    check_close,
    check_label_validator,
    check_on_device,
    check_that,
)
from .data import check_csv_dataset
from .memory import check_evaluation_memory, check_memory_saving, check_released
from .parallel import check_ddp_script, check_shard
from .speed import (
    check_bottleneck_fix,
    check_compiles_once,
    check_fast_loop,
    check_loader_settings,
    check_loader_speed,
    check_prediction_speed,
    check_profile_labels,
    check_timing,
)
from .training import check_amp_step, check_precision_rule, check_train_loop

__all__ = [
    "HINT",
    "PASS",
    "CheckResult",
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
]
