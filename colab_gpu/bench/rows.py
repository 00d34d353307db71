"""A bench row and the promise some rows carry: what every experiment returns and every report reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


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
    """What the course promises for one bench row on a GPU, and why (the GPU suite's report lists each, met or not)."""

    promise: str
    reason: str
    at_least: float | None = None
    at_most: float | None = None

    def met(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)


def skipped(key: str, name: str, device: torch.device, reason: str) -> Row:
    return Row(key, name, str(device), "skipped", note=reason)


NEEDS_GPU = "needs a CUDA GPU; this runtime has none"
