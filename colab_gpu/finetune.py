"""Fine-tuning a pretrained torchvision model on your own images (lesson 13).

- `load_pretrained` builds a torchvision model with its pretrained weights, or with random weights and one
  printed line where they cannot be downloaded (CI, an offline laptop).
- `finetune_transforms` are the v2 transforms for training and validation at the weights' normalization.
- `finetune_epoch_row` is the bench's row: one fine-tuning epoch of ResNet-18 on a folder of JPEG files,
  decoded by DataLoader workers, in the precision lesson 06 chooses.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from .bench_rows import Row
from .data import download_problem, download_timeout, write_image_folder
from .feeding import suggest_num_workers, worker_loader
from .own_data import split_image_folder
from .precision import choose_precision, make_scaler
from .train import train_epoch

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # what torchvision's ImageNet weights were trained with
IMAGENET_STD = (0.229, 0.224, 0.225)


def load_pretrained(builder: Callable[..., nn.Module], weights, **kwargs) -> tuple[nn.Module, bool]:
    """``builder(weights=weights)``, and True; or, where the weights cannot be downloaded, ``builder(weights=None)``
    (the same architecture, random weights) with one printed line, and False. Taught in lesson 13.

    Example: ``model, pretrained = load_pretrained(torchvision.models.resnet18, ResNet18_Weights.DEFAULT)``.
    """
    try:
        with download_timeout():
            return builder(weights=weights, **kwargs), True
    except (OSError, RuntimeError) as err:  # no network (URLError is an OSError), or a truncated download
        print(
            f"{weights} could not be loaded ({download_problem(err)}): {builder.__name__} starts from random "
            "weights here, so the accuracies below are not fine-tuning's (they need the download: Colab, or "
            "Kaggle with Settings > Internet on)."
        )
        return builder(weights=None, **kwargs), False


def finetune_transforms(
    size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD, *, flip: bool = True
):
    """(training, validation) v2 transforms for PIL images or uint8 tensors. Taught in lesson 13.

    Training: a random crop of 50-100% of the image resized to ``size`` and, with ``flip``, a random mirror
    (right for photos of objects, wrong for text and digits). Validation: resize the short side to ``size``,
    take the centre. Both end as float32 normalized with the pretrained weights' ``mean`` and ``std``.
    """
    from torchvision.transforms import v2

    to_float = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(mean), list(std))]
    train = v2.Compose(
        [
            v2.RandomResizedCrop(size, scale=(0.5, 1.0), antialias=True),
            *([v2.RandomHorizontalFlip()] if flip else []),
            *to_float,
        ]
    )
    val = v2.Compose([v2.Resize(size, antialias=True), v2.CenterCrop(size), *to_float])
    return train, val


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
