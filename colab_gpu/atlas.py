"""The error atlas: the messages learners meet when PyTorch meets a GPU, each with its cause, fix and lesson.

One source of truth: lesson 09 prints each entry from here (its headings are the entries' messages, a test
checks it), and `explain` recognises an error by the same entries' patterns. ``reproduced`` says that
lesson 09 raises the error (on every runtime, or on a GPU for a GPU-only one) and checks it against its entry,
so its test fails when PyTorch changes the wording; the others are quoted from PyTorch's source (or the
platform's page) for the versions the course supports.
Taught in lesson 09.
"""

from __future__ import annotations

from . import atlas_first_steps, atlas_going_further, atlas_reported
from .atlas_entry import GROUPS, AtlasEntry

#: Every entry, in lesson 09's order: its groups, then each group's entries as written.
ENTRIES: tuple[AtlasEntry, ...] = atlas_first_steps.ENTRIES + atlas_going_further.ENTRIES + atlas_reported.ENTRIES

__all__ = ["ENTRIES", "GROUPS", "AtlasEntry"]
