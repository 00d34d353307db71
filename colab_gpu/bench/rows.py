"""A bench row and the promise some rows carry: what every experiment returns and every report reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..hardware.gpus import REFERENCE_GPUS
from ..measure.references import gpu_label


@dataclass
class Row:
    """One benchmark result: ``ratio`` is the headline (bigger is better unless ``note`` says otherwise)."""

    key: str  # stable identifier, e.g. "amp"
    name: str
    device: str
    status: str  # "ok" or "skipped"
    ratio: float | None = None
    unit: str = ""
    details: dict = field(default_factory=dict)
    note: str = ""
    target: str = ""  # the course's promise for this row on a GPU, when it makes one
    met: bool | None = None  # whether a GPU run met it; None on a CPU or when skipped


@dataclass(frozen=True)
class Target:
    """What the course promises for one bench row on a GPU, and why (the GPU suite's report lists each, met or not).

    ``gpus`` names the GPUs it applies to (the course's labels: "T4", "L4", "A100", "H100"), none: every GPU. Whether
    it is still a prediction for a GPU is not written here but derived: until an imported run of that GPU's class has
    measured the row (scripts/gpu/suite_report.py says so in each report).
    """

    promise: str
    reason: str
    at_least: float | None = None
    at_most: float | None = None
    gpus: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        labels = tuple(REFERENCE_GPUS)
        if isinstance(self.gpus, str):
            raise ValueError(f"Target(gpus={self.gpus!r}) takes a tuple of labels: write gpus=({self.gpus!r},).")
        if not all(label in labels for label in self.gpus):
            raise ValueError(f"Target(gpus=...) takes the course's GPU labels {labels}, got {self.gpus!r}.")

    def met(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)

    def applies_to(self, gpu_name: str) -> bool:
        """Whether this target judges a run on ``gpu_name`` ("Tesla T4", "NVIDIA H100 80GB HBM3")."""
        return not self.gpus or gpu_label(gpu_name) in self.gpus


def target_for(targets: Target | tuple[Target, ...] | None, gpu_name: str) -> Target | None:
    """The first of a row's ``targets`` that applies to ``gpu_name``, None when none does."""
    if targets is None:
        return None
    return next((t for t in (targets if isinstance(targets, tuple) else (targets,)) if t.applies_to(gpu_name)), None)


def skipped(key: str, name: str, device: torch.device, reason: str) -> Row:
    return Row(key, name, str(device), "skipped", note=reason)


NEEDS_GPU = "needs a CUDA GPU; this runtime has none"
