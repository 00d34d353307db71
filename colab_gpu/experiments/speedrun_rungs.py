"""The speedrun ladder's rungs (lesson 12): what each rung of one CIFAR-10 training changes, for this device.

`ladder(device)` lists the rungs: each adds one technique from an earlier lesson to the rung below it, as a field of
its `Recipe`, and says why it is skipped where it only pays on a GPU (its technique then stays off above it too).
`ladder_size` is how much each rung trains on this device; `_model`, `_train_loader` and `_optimizer` build what a
recipe trains with. speedrun_ladder.py trains and measures them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..data.augment import AugmentedDeviceLoader, CpuAugmentedImages
from ..data.datasets import ImageData
from ..data.loaders import suggest_num_workers
from ..train.compiling import compile_support
from ..train.models import small_cnn, speed_net
from .sizes import LadderSize, sized


@dataclass(frozen=True)
class Recipe:
    """How one rung trains. Each field is one technique; `ladder` turns them on one rung at a time."""

    batch_size: int = 128
    workers: int = 0  # DataLoader worker processes (lesson 05)
    pinned: bool = False  # page-locked batches: asynchronous non_blocking copies to a GPU (lesson 05)
    resident: bool = False  # uint8 images on the device, cropped and flipped there per batch (lesson 05)
    item_every_step: bool = True  # loss.item() after every step: the host waits for the GPU (lesson 03)
    channels_last: bool = False  # NHWC layout, what tensor-core convolutions want (lesson 06)
    cudnn_benchmark: bool = False  # let cuDNN time its convolution algorithms once per shape (lesson 04)
    precision: str = "fp32"  # "auto": the precision lesson 06 chooses for the device
    schedule: bool = False  # one-cycle learning rate stepped per batch, Nesterov; a fused optimizer on a GPU
    compiled: bool = False  # torch.compile (lesson 11)
    net: str = "small_cnn"  # or "speed_net"
    lr: float = 0.05
    label_smoothing: float = 0.0
    flip_test: bool = False  # test-time augmentation: average the logits of each image and of its mirror


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: what it adds, the recipe it trains with, and why it is skipped here (or "")."""

    number: int
    name: str
    adds: str
    recipe: Recipe
    skip: str = ""


def _model(recipe: Recipe, data: ImageData, width: int, device: torch.device) -> nn.Module:
    channels, classes = data.image_shape[0], len(data.classes)
    model = speed_net(channels, classes, width) if recipe.net == "speed_net" else small_cnn(channels, classes, 32)
    return model.to(device, memory_format=torch.channels_last if recipe.channels_last else torch.contiguous_format)


def _train_loader(recipe: Recipe, data: ImageData, device: torch.device, seed: int, mean, std):
    if recipe.resident:
        return AugmentedDeviceLoader(
            data.train_images,
            data.train_labels,
            recipe.batch_size,
            device=device,
            mean=mean,
            std=std,
            augment=True,
            channels_last=recipe.channels_last,
            seed=seed,
        )
    return DataLoader(
        CpuAugmentedImages(data.train_images, data.train_labels, mean, std),
        recipe.batch_size,
        shuffle=True,
        num_workers=recipe.workers,
        pin_memory=recipe.pinned and device.type == "cuda",
        persistent_workers=recipe.workers > 0,
        generator=torch.Generator().manual_seed(seed),
    )


def _optimizer(model: nn.Module, recipe: Recipe, device: torch.device) -> torch.optim.SGD:
    fused = recipe.schedule and device.type == "cuda"  # one kernel for every parameter's update
    optimizer = torch.optim.SGD(
        model.parameters(), lr=recipe.lr, momentum=0.9, nesterov=recipe.schedule, weight_decay=5e-4, fused=fused or None
    )
    if fused:
        # A fused SGD's first step allocates its momentum uninitialized, and a step GradScaler skips (fp16
        # overflow) leaves it so: start from zeros, which is what a first step computes anyway.
        for parameter in model.parameters():
            optimizer.state[parameter]["momentum_buffer"] = torch.zeros_like(parameter)
    return optimizer


def ladder_size(device: str | torch.device) -> LadderSize:
    return sized("speedrun_ladder", device)


def ladder(device: str | torch.device) -> list[Rung]:
    """The rungs for ``device``, each with its cumulative `Recipe`. Taught in lesson 12."""
    device = torch.device(device)
    size, on_gpu = ladder_size(device), device.type == "cuda"
    workers = suggest_num_workers().num_workers
    if on_gpu:
        support = compile_support(device)
        compile_skip = "" if support.ok else support.reason
    else:
        compile_skip = "compiling the CNN for a CPU takes more than half a minute on two cores (lesson 11)"
    steps = [
        (
            "the seeds' loop",
            "per-image transforms on the CPU, num_workers=0, float32, loss.item() every step",
            {"batch_size": size.batch_size},
            "",
        ),
        (
            "workers + pinned memory",
            f"{workers} DataLoader workers, pin_memory=True, non_blocking copies",
            {"workers": workers, "pinned": True},
            "" if on_gpu else "workers only overlap the GPU's work; here they share its cores",
        ),
        (
            "data on the device",
            "uint8 images kept on the device, cropped and flipped there per batch; no .item() per step",
            {"workers": 0, "pinned": False, "resident": True, "item_every_step": False},
            "",
        ),
        (
            "channels_last + mixed precision",
            "NHWC tensors, cudnn.benchmark and the precision lesson 06 chooses",
            {"channels_last": True, "cudnn_benchmark": True, "precision": "auto"},
            "" if on_gpu else "both pay off on a GPU's tensor cores",
        ),
        (
            "large batch + schedule",
            f"batch {size.large_batch}, one-cycle learning rate per batch, Nesterov"
            + (", fused SGD" if on_gpu else ""),
            {"batch_size": size.large_batch, "schedule": True, "lr": 0.2},
            "",
        ),
        ("torch.compile", "the model compiled (compiling is timed apart)", {"compiled": True}, compile_skip),
        (
            "speed net + recipe",
            "speed_net (its own learning rate), label smoothing 0.2, flipped test images averaged",
            {"net": "speed_net", "lr": 0.05, "label_smoothing": 0.2, "flip_test": True},
            "",
        ),
    ]
    rungs, recipe = [], Recipe()
    for number, (name, adds, changes, skip) in enumerate(steps):
        if not skip:
            recipe = replace(recipe, **changes)
        rungs.append(Rung(number, name, adds, recipe, skip))
    return rungs


def without_levers(rung: Rung) -> list[Rung]:
    """``rung`` with the levers that make kernels cheaper taken off one after the other: compiling ("eager"), then
    mixed precision ("fp32"). Each comes back as a rung of the same number, its name saying what it lacks; levers
    ``rung`` does not use are left out (a CPU's last rung uses none). Lesson 12 trains them beside the ladder's last
    rung: what each lever pays on that step, and in which regime. Not cuDNN's autotuning: in the process that ran
    the rung, cuDNN has already picked its plans for these shapes, and turning the flag off then measures nothing
    (lesson 04's section 5 shows the trap); only a fresh process could time it."""
    variants, recipe, name = [], rung.recipe, rung.name
    for suffix, lever, off, used in (
        ("eager", "torch.compile", {"compiled": False}, recipe.compiled),
        ("fp32", "mixed precision", {"precision": "fp32"}, recipe.precision != "fp32"),
    ):
        if used:
            recipe, name = replace(recipe, **off), f"{name}, {suffix}"
            variants.append(replace(rung, name=name, adds=f"{lever} off", recipe=recipe))
    return variants


def checked_epochs(epochs: object, default: int) -> int:
    """``epochs``, or ``default`` for None; a clear error for 0, a negative number or not a whole number (0 used to
    mean "the default", silently)."""
    if epochs is None:
        return default
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs={epochs!r}: give a whole number of epochs, 1 or more (or leave it out: {default}).")
    return epochs


def check_rung_numbers(numbers: object, exist: list[int]) -> None:
    """A clear error for rung numbers that are not a list of this ladder's rungs (``numbers=6``, ``[99]``)."""
    if numbers is None:
        return
    if isinstance(numbers, int) or not all(isinstance(n, int) for n in numbers):
        raise TypeError(f"numbers={numbers!r}: give a list of rung numbers, e.g. numbers=[0, {exist[-1]}].")
    unknown = sorted(set(numbers) - set(exist))
    if unknown:
        raise ValueError(f"numbers={list(numbers)}: this ladder has no rung {unknown}; its rungs are {exist}.")
