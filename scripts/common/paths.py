"""Where things are in the repository, and which commit it is: the one home of ROOT for both systems.

Imports nothing outside the standard library, so the GPU suite's tools that run before anything is installed
(`make gpu-wheels`, `make gpu-kaggle`) can read it too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # scripts/common/paths.py: two folders below the repository
BUILD = ROOT / "build"  # make course's output, the GPU suite's work folder
NOTEBOOKS = ROOT / "notebooks"
STUDENT = NOTEBOOKS / "student"
REPORTS = ROOT / "reports"
GPU_REPORTS = REPORTS / "gpu"  # the imported GPU runs (make import-gpu-run)
sys.path.insert(0, str(ROOT))  # the tools import colab_gpu from this checkout, not an installed copy

COMMIT_FILE = Path(__file__).with_name("COMMIT")  # "$Format:%H$"; `git archive` writes the commit (.gitattributes)
COMMIT_ENV = "COLAB_GPU_COMMIT"  # scripts/gpu/gpu_runner.py sets it from --sha where the tree has neither git nor that
SHA = re.compile(r"[0-9a-f]{40}")


def git_commit(root: Path = ROOT) -> str | None:
    """The full sha of the commit this tree is (a GPU run's report, the site's CPU label); None when unknown.

    In order: ``COLAB_GPU_COMMIT`` (the GPU runner's --sha), ``git rev-parse HEAD``, then scripts/common/COMMIT, which
    a `git archive` tarball carries filled in (export-subst): a GPU node may have no git, or a tree without .git.
    """
    if SHA.fullmatch(os.environ.get(COMMIT_ENV, "").strip()):
        return os.environ[COMMIT_ENV].strip()
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
        if done.returncode == 0 and SHA.fullmatch(done.stdout.strip()):
            return done.stdout.strip()
    except FileNotFoundError:  # no git on this machine
        pass
    stamped = (root / COMMIT_FILE.relative_to(ROOT)).read_text().strip() if COMMIT_FILE.exists() else ""
    return stamped if SHA.fullmatch(stamped) else None
