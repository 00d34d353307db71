"""The bench's rows for lessons 12 and 13: whole trainings, timed end to end.

- `ladder_row`: lesson 12's ladder, rung 0 against the last rung, seconds per epoch on CIFAR-10-shaped data.
- `finetune_epoch_row`: one fine-tuning epoch of ResNet-18 on a folder of JPEG files, decoded by DataLoader workers,
  in the precision lesson 06 chooses.
"""

from __future__ import annotations

import tempfile
import time

import torch
from torch import nn

from ..data import load_digits, write_image_folder
from ..finetune import finetune_transforms
from ..image_folders import split_image_folder
from ..loaders import suggest_num_workers, worker_loader
from ..precision import choose_precision, make_scaler
from ..speedrun_ladder import cifar_sized, ladder, ladder_size, run_rung
from ..train import train_epoch
from .rows import Row


def ladder_row(device: str | torch.device) -> Row:
    """The bench's row: seconds per epoch of rung 0 and of the last rung, side by side, on CIFAR-10-shaped data.

    Offline (the bench downloads nothing) the data are scikit-learn's digits at 3x32x32, repeated to CIFAR-10's
    50,000 training images on a GPU: the speed is CIFAR-10's, accuracy is not measured here.
    """
    device = torch.device(device)
    size, rungs = ladder_size(device), ladder(device)
    data = cifar_sized(load_digits(32, 3), size.train_images)
    first, last = (run_rung(rung, data, device, epochs=3, width=size.width) for rung in (rungs[0], rungs[-1]))
    return Row(
        "speedrun",
        "speedrun ladder: last rung vs the seeds' loop (seconds per epoch)",
        str(device),
        "ok",
        round(first.seconds_per_epoch / last.seconds_per_epoch, 2),
        "x",
        {
            "rung0_s": first.seconds_per_epoch,
            "last_s": last.seconds_per_epoch,
            "images": first.images,
            "last_rung": rungs[-1].name,
            "skipped_here": [r.number for r in rungs if r.skip],
        },
    )


def _bench_sizes(device: torch.device) -> tuple[int, int, int]:
    # (image size, images per class, batch size): ImageNet's 224 and about a thousand images on a GPU; a CPU
    # runtime times a small epoch at 64 pixels.
    return (224, 342, 64) if device.type == "cuda" else (64, 32, 32)


def time_finetune_epochs(model: nn.Module, loader, device: torch.device, *, epochs: int = 2) -> list[float]:
    """Seconds of each of ``epochs`` training epochs of ``model`` (all layers) in the precision lesson 06 chooses."""
    precision = choose_precision(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = make_scaler(precision, device)
    return [
        train_epoch(
            model, loader, optimizer, device, autocast_dtype=precision.dtype, scaler=scaler, progress=False
        ).seconds
        for _ in range(epochs)
    ]


def finetune_epoch_row(device: str | torch.device) -> Row:
    """Images per second of one fine-tuning epoch (ResNet-18, every layer trained, channels_last) on a folder of
    JPEG files decoded and augmented by DataLoader workers. The first epoch starts the workers and loads the kernels;
    the second is the one reported. Random weights: the bench downloads nothing, and the speed is the same."""
    from torchvision.models import resnet18

    device = torch.device(device)
    size, per_class, batch_size = _bench_sizes(device)
    workers = suggest_num_workers().num_workers
    with tempfile.TemporaryDirectory() as folder:
        split = split_image_folder(
            write_image_folder(folder, per_class=per_class, size=size), finetune_transforms(size)[0], val_fraction=0.01
        )
        loader = worker_loader(split.train, batch_size, device=device, num_workers=workers)
        torch.manual_seed(0)
        model = resnet18(num_classes=len(split.classes)).to(device, memory_format=torch.channels_last)
        epoch_s = time_finetune_epochs(model, loader, device)[-1]
        start = time.perf_counter()
        for _ in loader:  # the same epoch without the model: is the epoch bound by decoding?
            pass
        loader_s = time.perf_counter() - start
    images = len(split.train)
    return Row(
        "finetune",
        "one fine-tuning epoch, ResNet-18 on JPEG files (images/s)",
        str(device),
        "ok",
        round(images / epoch_s, 1),
        "images/s",
        {
            "epoch_s": round(epoch_s, 3),
            "loader_only_s": round(loader_s, 3),
            "images": images,
            "size": size,
            "batch_size": batch_size,
            "workers": workers,
            "precision": choose_precision(device).name,
        },
    )
