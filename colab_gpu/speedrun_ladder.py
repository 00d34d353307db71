"""The speedrun ladder (lesson 12): one CIFAR-10 training made faster one technique at a time, each measured.

`ladder(device)` (speedrun_rungs.py) lists the rungs: each adds one technique from an earlier lesson to the rung
below it, and says why it is skipped where it only pays on a GPU (its technique then stays off above it too).
`run_rung` trains
one rung's `Recipe` for a fixed number of epochs and measures seconds per epoch (the median of the epochs after
the first, which pays for starting workers and, from rung 3 on a GPU, cuDNN's autotuning), images/s and test
accuracy. `speedrun` is the last rung as one call. The techniques are the published ones (GPU-resident data,
GPU augmentation, channels_last, half precision, large batches with a per-batch schedule, label smoothing,
test-time flips).
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import DataLoader

from .augment import AugmentedDeviceLoader, CpuAugmentedImages, FlipAveraged
from .data import ImageData
from .device import synchronize
from .models import small_cnn, speed_net
from .precision import make_scaler, resolve_precision, restored_backend_settings
from .speedrun_rungs import Recipe, Rung, ladder, ladder_size
from .train import evaluate, train_epoch


@dataclass
class RungResult:
    """What one rung measured: every epoch's seconds, the images per epoch, the test accuracy at the end."""

    rung: Rung
    epoch_seconds: list[float] = field(default_factory=list)
    images: int = 0
    test_acc: float | None = None
    warmup_s: float = 0.0  # compiling, before the timed epochs

    @property
    def seconds_per_epoch(self) -> float:
        return statistics.median(self.epoch_seconds[1:] or self.epoch_seconds)

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds_per_epoch


def seeds_epoch(model: nn.Module, loader, optimizer: torch.optim.Optimizer, device: torch.device) -> int:
    """Rung 0 and 1's loop, as tutorials write it: the running loss read with .item() after every step."""
    model.train()
    running, images = 0.0, 0
    for inputs, labels in loader:
        inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()  # waits for the GPU to finish this step before the next batch is even fetched
        images += len(labels)
    return images


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


def _warm_up_compiled(compiled: nn.Module, model: nn.Module, loader, precision, device: torch.device) -> float:
    """Compile before the clock starts: two throwaway steps, then the initial weights back (airbench does this)."""
    start, initial = time.perf_counter(), copy.deepcopy(model.state_dict())
    two_batches = (batch for _, batch in zip(range(2), loader, strict=False))
    train_epoch(
        compiled,
        two_batches,
        torch.optim.SGD(model.parameters(), lr=0.0),
        device,
        autocast_dtype=precision.dtype,
        progress=False,
    )
    model.load_state_dict(initial)  # batch norm's running statistics included
    return time.perf_counter() - start


def run_rung(
    rung: Rung, data: ImageData, device: str | torch.device, *, epochs: int, width: int = 64, seed: int = 0
) -> RungResult:
    """Train a fresh model with ``rung.recipe`` for ``epochs`` epochs; measure every epoch and the test accuracy.

    Taught in lesson 12.
    """
    device, recipe = torch.device(device), rung.recipe
    if rung.skip:
        raise ValueError(f"Rung {rung.number} ({rung.name}) is skipped on {device}: {rung.skip}.")
    torch.manual_seed(seed)
    mean, std = data.normalization()  # once: a float copy of every training image
    model = _model(recipe, data, width, device)
    loader = _train_loader(recipe, data, device, seed, mean, std)
    precision = resolve_precision(recipe.precision, device)
    trained = torch.compile(model) if recipe.compiled else model
    result = RungResult(rung)
    with restored_backend_settings():
        torch.backends.cudnn.benchmark = recipe.cudnn_benchmark
        if recipe.compiled:
            result.warmup_s = _warm_up_compiled(trained, model, loader, precision, device)
        optimizer = _optimizer(model, recipe, device)
        scheduler = (
            torch.optim.lr_scheduler.OneCycleLR(
                optimizer, recipe.lr, total_steps=epochs * len(loader), pct_start=0.25, anneal_strategy="linear"
            )
            if recipe.schedule
            else None
        )
        loss_fn, scaler = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing), make_scaler(precision, device)
        for _ in range(epochs):
            start = time.perf_counter()
            if recipe.item_every_step:
                result.images = seeds_epoch(trained, loader, optimizer, device)
            else:
                result.images = train_epoch(
                    trained,
                    loader,
                    optimizer,
                    device,
                    loss_fn=loss_fn,
                    scaler=scaler,
                    autocast_dtype=precision.dtype,
                    scheduler=scheduler,
                    progress=False,
                ).samples
            synchronize(device)
            result.epoch_seconds.append(time.perf_counter() - start)
        test = evaluation_loader(data, device, mean, std, channels_last=recipe.channels_last)
        result.test_acc = evaluate(
            FlipAveraged(model) if recipe.flip_test else model, test, device, autocast_dtype=precision.dtype
        ).accuracy
    return result


def evaluation_loader(data: ImageData, device: torch.device, mean, std, *, channels_last: bool = False):
    """``data``'s test images on ``device``, normalized with the training images' ``mean`` and ``std``, not
    augmented: what every rung, and lesson 12's fast loop, is evaluated on."""
    batch = min(1024, len(data.test_images))
    return AugmentedDeviceLoader(
        data.test_images,
        data.test_labels,
        batch,
        device=device,
        mean=mean,
        std=std,
        augment=False,
        channels_last=channels_last,
    )


def cifar_sized(data: ImageData, images: int) -> ImageData:
    """``data`` with its training images repeated to ``images`` (an offline fallback timed at CIFAR-10's size)."""
    if images <= len(data.train_images):
        return data
    index = torch.arange(images) % len(data.train_images)
    return ImageData(
        f"{data.name}, repeated to {images:,} training images",
        data.train_images[index],
        data.train_labels[index],
        data.test_images,
        data.test_labels,
        data.classes,
        data.fallback,
    )


def run_ladder(
    data: ImageData,
    device: str | torch.device,
    *,
    epochs: int | None = None,
    numbers: list[int] | None = None,
    verbose: bool = True,
) -> list[RungResult]:
    """Train every rung that runs on ``device`` (or those in ``numbers``), printing a line per rung.

    Skipped rungs come back with no epochs and their reason in ``rung.skip``. Taught in lesson 12.
    """
    device, size = torch.device(device), ladder_size(device)
    results = []
    for rung in ladder(device):
        if numbers is not None and rung.number not in numbers:
            continue
        if rung.skip:
            results.append(RungResult(rung))
            if verbose:
                print(f"rung {rung.number} {rung.name}: skipped here, {rung.skip}")
            continue
        result = run_rung(rung, data, device, epochs=epochs or size.epochs, width=size.width)
        results.append(result)
        if verbose:
            compiled = f", compiling {result.warmup_s:.1f} s before" if result.warmup_s else ""
            print(
                f"rung {rung.number} {rung.name}: {result.seconds_per_epoch:.2f} s/epoch, "
                f"{result.images_per_s:,.0f} images/s, test accuracy {result.test_acc:.1%}{compiled}",
                flush=True,
            )
    return results


def speedrun(
    data: ImageData, device: str | torch.device, *, epochs: int | None = None, verbose: bool = True
) -> RungResult:
    """Train with the ladder's last rung, the fastest recipe this course knows for ``device``, for ``epochs``
    (by default `ladder_size`'s ``speedrun_epochs`` for the device).

    Example (on a GPU, with CIFAR-10 downloaded):
        >>> result = speedrun(load_cifar10(), "cuda")  # doctest: +SKIP
        >>> print(f"{sum(result.epoch_seconds):.1f} s, {result.test_acc:.1%}")  # doctest: +SKIP

    Taught in lesson 12.
    """
    device, size = torch.device(device), ladder_size(device)
    epochs = epochs or size.speedrun_epochs
    result = run_rung(ladder(device)[-1], data, device, epochs=epochs, width=size.width)
    if verbose:
        print(
            f"speedrun on {device}: {epochs} epochs in {sum(result.epoch_seconds):.1f} s of training "
            f"({result.seconds_per_epoch:.2f} s/epoch), test accuracy {result.test_acc:.1%}"
        )
    return result
