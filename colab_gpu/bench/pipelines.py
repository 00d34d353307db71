"""The bench's rows for lessons 12 and 13: whole trainings, timed end to end.

- `ladder_row`: lesson 12's ladder, every rung that runs here, the fastest against rung 0, images/s on CIFAR-10-shaped
  data.
- `finetune_epoch_row`: one fine-tuning epoch of ResNet-18 on a folder of JPEG files, decoded by DataLoader workers,
  in the precision lesson 06 chooses.
"""

from __future__ import annotations

import tempfile

import torch
from torch import nn

from ..data.datasets import cifar_sized, load_digits, write_image_folder
from ..data.image_folders import split_image_folder
from ..data.loaders import suggest_num_workers, worker_loader
from ..experiments.sizes import sized
from ..experiments.speedrun_ladder import run_rung
from ..experiments.speedrun_rungs import ladder, ladder_size
from ..measure.timing import timed_call
from ..train.finetune import finetune_transforms
from ..train.precision import choose_precision, make_scaler
from ..train.steps import train_epoch
from .rows import Row

#: Rung 0 is timed on this many images: it is input-bound (per-image Python), so its images/s is the same on any
#: number of them, and a whole CIFAR-10 epoch of it takes seconds even on an H100 (lesson 12 in
#: reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2).
RUNG0_IMAGES = 10_000
BENCH_EPOCHS = 2  # per rung: the first starts workers, autotunes cuDNN; the second is timed


def ladder_row(device: str | torch.device) -> Row:
    """The bench's row: images/s of every rung of lesson 12's ladder that runs here, side by side on CIFAR-10-shaped
    data; its figure is the fastest rung's against rung 0's (bench/__init__.py says why not the last rung's).

    Offline (the bench downloads nothing) the data are scikit-learn's digits at 3x32x32, repeated to CIFAR-10's
    50,000 training images on a GPU: the speed is CIFAR-10's, accuracy is not measured here. It trains 2 epochs a
    rung and rung 0 on a fifth of the images, a fraction of lesson 12's ladder (5 epochs a rung, rung 0 on every
    image), whose time on the H100 is in reports/gpu/2026-11-26-nvidia-h100-80gb-hbm3-cb233b2.
    """
    device = torch.device(device)
    size, rungs = ladder_size(device), ladder(device)
    data = cifar_sized(load_digits(32, 3), size.train_images)
    results = {
        rung.number: run_rung(
            rung,
            data.limit(train=RUNG0_IMAGES) if rung.number == 0 else data,
            device,
            epochs=BENCH_EPOCHS,
            width=size.width,
        )
        for rung in rungs
        if not rung.skip
    }
    base = results[0].images_per_s
    fastest = max(results.values(), key=lambda r: r.images_per_s)
    last = results[max(results)]
    return Row(
        "speedrun",
        "speedrun ladder: the fastest rung vs the seeds' loop (images/s)",
        str(device),
        "ok",
        round(fastest.images_per_s / base, 2),
        "x",
        {
            "images_per_s": {number: round(r.images_per_s) for number, r in results.items()},
            "fastest_rung": fastest.rung.number,
            "last_rung_ratio": round(last.images_per_s / base, 2),
            "images": len(data.train_images),
            "rung0_images": results[0].images,
            "epochs": BENCH_EPOCHS,
            "skipped_here": [r.number for r in rungs if r.skip],
        },
        note=f"fastest: rung {fastest.rung.number} ({fastest.rung.name}); the last rung "
        f"{last.images_per_s / base:.1f}x rung 0",
    )


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
    size, per_class, batch_size = sized("image_folder", device)
    workers = suggest_num_workers().num_workers
    with tempfile.TemporaryDirectory() as folder:
        split = split_image_folder(
            write_image_folder(folder, per_class=per_class, size=size), finetune_transforms(size)[0], val_fraction=0.01
        )
        loader = worker_loader(split.train, batch_size, device=device, num_workers=workers)
        torch.manual_seed(0)
        model = resnet18(num_classes=len(split.classes)).to(device, memory_format=torch.channels_last)
        epoch_s = time_finetune_epochs(model, loader, device)[-1]
        _, loader_s = timed_call(lambda: sum(1 for _ in loader), device)  # no model: is the epoch bound by decoding?
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
