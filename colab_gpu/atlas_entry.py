"""An entry of the error atlas and the atlas's groups (atlas.py gathers the entries). Taught in lesson 09."""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUPS = {
    "setup": "Setup and install",
    "devices": "Moving tensors and models",
    "training": "Training",
    "data": "Data loading and workers",
    "memory": "Memory",
    "precision": "Precision",
    "saving": "Saving and loading",
    "distributed": "Multi-GPU and torchrun",
    "compile": "torch.compile",
    "platform": "Notebook platforms (Colab and Kaggle)",
}


@dataclass(frozen=True, repr=False)
class AtlasEntry:
    """One error of the atlas: its message as printed, how to recognise it, why and the fix. Taught in lesson 09."""

    key: str
    group: str
    message: str  # as PyTorch (or the platform) prints it: lesson 09's heading
    pattern: str  # a regular expression searched in "ExceptionType: message" (or in pasted text)
    cause: str
    fix: str
    read: str  # where the course explains it
    reproduced: bool = True

    def __repr__(self) -> str:
        return f"AtlasEntry({self.key!r})"

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE) is not None

    def format(self) -> str:
        return f"{self.message}\n  Cause: {self.cause}\n  Fix: {self.fix}\n  Read: {self.read}"


def entry(key, group, message, pattern, cause, fix, read, reproduced=True) -> AtlasEntry:
    """An `AtlasEntry`, refused when its group is not one of `GROUPS`."""
    assert group in GROUPS, group
    return AtlasEntry(key, group, message, pattern, cause, fix, read, reproduced)
