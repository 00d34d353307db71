"""``VisibleImageFolder``: torchvision's ImageFolder without the folders that are never classes (lesson 13).

A module of its own because it imports torchvision, the lessons' extra (``import colab_gpu`` does not need it), and
defined at module level so that DataLoader workers started by spawn or forkserver (macOS, Windows, Python 3.14) can
unpickle a data set that uses it.
"""

from __future__ import annotations

import os
from pathlib import Path

from torchvision.datasets import ImageFolder

from .archives import folder_listing, is_ignored


class VisibleImageFolder(ImageFolder):
    """ImageFolder without hidden folders (.ipynb_checkpoints) and macOS's __MACOSX as classes. Lesson 13."""

    def find_classes(self, directory):
        classes = sorted(e.name for e in os.scandir(directory) if e.is_dir() and not is_ignored(e.name))
        if not classes:
            raise FileNotFoundError(
                f"No class folders in {directory}: {folder_listing(Path(directory))} ImageFolder "
                "expects root/<class>/<image>.jpg, one folder per class."
            )
        return classes, {name: i for i, name in enumerate(classes)}
