"""Checkpoints that survive a Colab disconnect: complete training state, written atomically.

A checkpoint holds the model, the optimizer, the GradScaler, the learning-rate scheduler, the
epoch, the history so far and every random number generator (Python, NumPy, PyTorch CPU and CUDA, and the data loader's
shuffling generator), so a resumed run continues exactly where the interrupted one stopped.

Writes go to a temporary file in the same folder, are flushed to disk, then renamed over the
old checkpoint: a crash (or a disconnect) mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

FORMAT = "colab_gpu.train.checkpoint/1"
DRIVE = Path("/content/drive/MyDrive")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: missing, unreadable, or from another model. Taught in lesson 03."""


def default_checkpoint_dir(name: str = "checkpoints") -> Path:
    """Google Drive when it is mounted in Colab (survives disconnects), else a local folder.

    Mount Drive first in Colab: ``from google.colab import drive; drive.mount("/content/drive")``.

    Taught in lesson 03.
    """
    base = DRIVE / "colab_gpu" if DRIVE.is_dir() else Path.cwd()
    return base / name


def rng_state(loader_generator: torch.Generator | None = None) -> dict[str, Any]:
    """Every random generator's state, so a resumed run draws the same numbers."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    if loader_generator is not None:
        state["loader"] = loader_generator.get_state()
    return state


def set_rng_state(state: dict[str, Any], loader_generator: torch.Generator | None = None) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())  # generator states are CPU byte tensors
    if state["cuda"] and torch.cuda.is_available():
        # One state per GPU of the machine that saved it: a checkpoint from Kaggle's two T4s
        # resumed on Colab's one restores the first (set_rng_state_all would raise IndexError).
        for index, gpu_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(gpu_state.cpu(), index)
    if loader_generator is not None and "loader" in state:
        loader_generator.set_state(state["loader"].cpu())


def atomic_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary file beside ``path``, fsync, then rename over ``path``: a crash mid-write leaves
    the previous file whole. Checkpoints (lesson 03) and the weights lesson 13 keeps are written with it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them official
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one, never half
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    epoch: int,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    history: list[dict] | None = None,
    loader_generator: torch.Generator | None = None,
) -> Path:
    """Write the full training state after ``epoch`` epochs, atomically. Returns the path. Taught in lesson 03."""
    return atomic_save(
        {
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "format": FORMAT,
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "history": history or [],
            "rng": rng_state(loader_generator),
        },
        path,
    )


def _read(path: Path, map_location) -> dict:
    if not path.exists():
        raise CheckpointError(
            f"No checkpoint at {path}. Start from scratch, or check the folder "
            f"(in Colab: is Google Drive mounted?). Files there: "
            f"{sorted(p.name for p in path.parent.glob('*'))[:10] if path.parent.exists() else []}"
        )
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as err:
        raise CheckpointError(
            f"{path} is not a readable checkpoint (truncated or corrupted: {err}). "
            "Delete it and resume from an older one, or start from scratch."
        ) from err
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} was not written by colab_gpu.save_checkpoint (format "
            f"{state.get('format') if isinstance(state, dict) else type(state).__name__!r})."
        )
    return state


def _check_same_model(path: Path, model: nn.Module, saved: dict[str, torch.Tensor]) -> None:
    current = model.state_dict()
    missing = sorted(set(current) - set(saved))
    unexpected = sorted(set(saved) - set(current))
    shapes = [
        f"{k}: saved {tuple(saved[k].shape)}, model {tuple(current[k].shape)}"
        for k in sorted(set(saved) & set(current))
        if saved[k].shape != current[k].shape
    ]
    if missing or unexpected or shapes:
        details = "; ".join(
            part
            for part in (
                f"missing {missing[:5]}" if missing else "",
                f"unexpected {unexpected[:5]}" if unexpected else "",
                f"different shapes {shapes[:5]}" if shapes else "",
            )
            if part
        )
        raise CheckpointError(
            f"{path} was saved from a different model ({details}). Build the same architecture "
            "before loading, or start from scratch."
        )


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    loader_generator: torch.Generator | None = None,
    restore_rng: bool = True,
) -> dict:
    """Restore a checkpoint into ``model`` (and optimizer, scaler, scheduler, RNGs); return ``{"epoch", "history"}``.

    The file is read onto the CPU and each state is then put where PyTorch expects it: weights and
    optimizer moments on the parameters' device (by ``load_state_dict``), but Adam's ``step``
    counters stay CPU tensors (reading them on the GPU would synchronize every step). So a
    checkpoint written on a GPU loads on a CPU and the other way round.

    Raises:
        CheckpointError: the file is missing, truncated, not a checkpoint, or from another model.

    ``fit(..., checkpoint=path)`` calls it to resume after a disconnect (lesson 03).
    """
    path = Path(path)
    # map_location="cpu", not the model's device: optimizer.load_state_dict moves what belongs on the
    # GPU and leaves the step counters where PyTorch keeps them (on the CPU unless fused/capturable).
    state = _read(path, map_location="cpu")
    _check_same_model(path, model, state["model"])
    model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        set_rng_state(state["rng"], loader_generator)
    return {"epoch": state["epoch"], "history": state["history"]}
