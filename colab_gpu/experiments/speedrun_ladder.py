"""The speedrun ladder (lesson 12): one CIFAR-10 training made faster one technique at a time, each measured.

`ladder(device)` (speedrun_rungs.py) lists the rungs: each adds one technique from an earlier lesson to the rung
below it, and says why it is skipped where it only pays on a GPU (its technique then stays off above it too).
`run_rung` trains one rung's `Recipe` for a fixed number of epochs and measures seconds per epoch (the median of the
epochs after the first, which pays for starting workers and, from rung 3 on a GPU, cuDNN's autotuning), images/s and
test accuracy, and on request profiles a few of its steps for its regime (lesson 10's rule: which levers can pay).
`speedrun` is the last rung as one call. The techniques are the published ones (GPU-resident data,
GPU augmentation, channels_last, half precision, large batches with a per-batch schedule, label smoothing,
test-time flips).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, repeat

import torch
from torch import nn

from ..data.augment import FlipAveraged, evaluation_loader
from ..data.datasets import ImageData
from ..hardware.device import checked_device
from ..measure.profile_summary import ProfileSummary
from ..measure.profiling import profile_step
from ..measure.regimes import Regime
from ..measure.timing import timed_call, typical
from ..train.precision import make_scaler, resolve_precision, restored_backend_settings
from ..train.steps import evaluate, train_epoch, train_step
from .speedrun_rungs import (
    Recipe,
    Rung,
    _model,
    _optimizer,
    _train_loader,
    check_rung_numbers,
    checked_epochs,
    ladder,
    ladder_size,
    without_levers,
)


@dataclass
class RungResult:
    """What one rung measured: every epoch's seconds, the images per epoch, the test accuracy at the end."""

    rung: Rung
    epoch_seconds: list[float] = field(default_factory=list)
    images: int = 0
    test_acc: float | None = None
    warmup_s: float = 0.0  # compiling, before the timed epochs
    profile: ProfileSummary | None = None  # a few of its steps profiled after training (`run_rung(profile=True)`)

    @property
    def regime(self) -> Regime | None:
        """What bounds this rung's step on this runtime (lesson 10's rule), when it was profiled."""
        return self.profile.regime if self.profile is not None else None

    @property
    def seconds_per_epoch(self) -> float:
        return typical(self.epoch_seconds[1:] or self.epoch_seconds)

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


def _warm_up_compiled(compiled: nn.Module, model: nn.Module, loader, precision, device: torch.device) -> float:
    """Compile before the clock starts: two throwaway steps, then the initial weights back (airbench does this)."""
    initial = copy.deepcopy(model.state_dict())
    two_batches = (batch for _, batch in zip(range(2), loader, strict=False))
    throwaway = torch.optim.SGD(model.parameters(), lr=0.0)
    _, seconds = timed_call(
        lambda: train_epoch(compiled, two_batches, throwaway, device, autocast_dtype=precision.dtype, progress=False),
        device,
    )
    model.load_state_dict(initial)  # batch norm's running statistics included
    return seconds


def _rung_step(trained: nn.Module, loader, optimizer, recipe: Recipe, precision, loss_fn, scaler, device):
    """One training step of a rung as its epochs run it, its batch's fetching labelled "data" (for `profile_step`).
    The schedule is not stepped: it ended with the last epoch."""
    from torch.profiler import record_function

    batches = chain.from_iterable(repeat(loader))  # the loader's batches, epoch after epoch

    def step() -> None:
        with record_function("data"):
            inputs, labels = next(batches)
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        if recipe.item_every_step:  # seeds_epoch's step
            loss = nn.functional.cross_entropy(trained(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()
        else:
            train_step(
                trained,
                inputs,
                labels,
                optimizer,
                loss_fn=loss_fn,
                autocast_dtype=precision.dtype,
                scaler=scaler,
                check_shapes=False,
            )

    return step


PROFILED_STEPS = 5  # per rung, after its epochs: the regime of its step


def run_rung(
    rung: Rung,
    data: ImageData,
    device: str | torch.device,
    *,
    epochs: int,
    width: int = 64,
    seed: int = 0,
    profile: bool = False,
    verbose: bool = False,
) -> RungResult:
    """Train a fresh model with ``rung.recipe`` for ``epochs`` epochs; measure every epoch and the test accuracy.

    With ``profile``, a few more of its steps are then profiled (`profile_step`), for the regime of this rung on
    this runtime (``result.regime``): a lever that makes kernels cheaper pays only on a GPU-bound rung. With
    ``verbose``, one line grows as the rung runs: its compiling, each epoch's seconds as it ends (rung 0 takes
    minutes on a T4), then its figures.

    Taught in lesson 12.
    """
    device, recipe = torch.device(device), rung.recipe
    if rung.skip:
        raise ValueError(f"Rung {rung.number} ({rung.name}) is skipped on {device}: {rung.skip}.")

    say = partial(print, end="", flush=True) if verbose else lambda *text, end="": None
    say(f"rung {rung.number} {rung.name}:")
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
            say(f" compiling {result.warmup_s:.1f} s;")
        optimizer = _optimizer(model, recipe, device)
        scheduler = (
            torch.optim.lr_scheduler.OneCycleLR(
                optimizer, recipe.lr, total_steps=epochs * len(loader), pct_start=0.25, anneal_strategy="linear"
            )
            if recipe.schedule
            else None
        )
        loss_fn, scaler = nn.CrossEntropyLoss(label_smoothing=recipe.label_smoothing), make_scaler(precision, device)
        one_epoch = (
            partial(seeds_epoch, trained, loader, optimizer, device)
            if recipe.item_every_step
            else lambda: (
                train_epoch(
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
            )
        )
        for _ in range(epochs):
            result.images, seconds = timed_call(one_epoch, device)
            result.epoch_seconds.append(seconds)
            say(f"{' epochs of' if len(result.epoch_seconds) == 1 else ''} {result.epoch_seconds[-1]:.1f}")
        say(f" s; {result.seconds_per_epoch:.2f} s/epoch, {result.images_per_s:,.0f} images/s,")
        test = evaluation_loader(data, device, mean, std, channels_last=recipe.channels_last)
        result.test_acc = evaluate(
            FlipAveraged(model) if recipe.flip_test else model, test, device, autocast_dtype=precision.dtype
        ).accuracy
        say(f" test accuracy {result.test_acc:.1%}")
        if profile:  # after the accuracy: these steps train on, and nothing reads the model afterwards
            step = _rung_step(trained, loader, optimizer, recipe, precision, loss_fn, scaler, device)
            result.profile = profile_step(step, device, steps=PROFILED_STEPS)
            say(f"; {result.regime.name}")
    say("", end="\n")
    return result


def run_ladder(
    data: ImageData,
    device: str | torch.device,
    *,
    epochs: int | None = None,
    numbers: list[int] | None = None,
    verbose: bool = True,
    profile: bool = False,
) -> list[RungResult]:
    """Train every rung that runs on ``device`` (or those in ``numbers``), printing a line per rung that grows as
    the rung runs (each epoch's seconds as it ends, then the rung's figures).

    Skipped rungs come back with no epochs and their reason in ``rung.skip``. With ``profile``, each rung's step is
    profiled after its epochs, and its line ends with its regime (``result.regime``). Rung 0's result is kept for
    `checks.fast_loop` (lesson 12's exercise), which compares with it. Taught in lesson 12.
    """
    device = checked_device(device, "cg.run_ladder")
    size = ladder_size(device)
    epochs = checked_epochs(epochs, size.epochs)
    rungs = ladder(device)
    check_rung_numbers(numbers, [rung.number for rung in rungs])
    results = []
    for rung in rungs:
        if numbers is not None and rung.number not in numbers:
            continue
        if rung.skip:
            results.append(RungResult(rung))
            if verbose:
                print(f"rung {rung.number} {rung.name}: skipped here, {rung.skip}")
            continue
        result = run_rung(rung, data, device, epochs=epochs, width=size.width, profile=profile, verbose=verbose)
        results.append(result)
        if rung.number == 0:
            remember_rung0(data, device, result)
    return results


_RUNG0: list[tuple[ImageData, torch.device, RungResult]] = []  # the last rung 0 measured by run_ladder or the check


def remember_rung0(data: ImageData, device: str | torch.device, result: RungResult) -> None:
    """Keep ``result``, rung 0 trained on ``data`` (this very object) on ``device``, for `measured_rung0`."""
    _RUNG0[:] = [(data, torch.device(device), result)]


def measured_rung0(data: ImageData, device: str | torch.device) -> RungResult | None:
    """Rung 0's result on ``data`` (the same object) and ``device`` from this session's `run_ladder`, or None: what
    lesson 12's check compares with when the learner passes no baseline (a learner who watched the ladder on a
    projector has none)."""
    device = torch.device(device)
    return next((result for kept, on, result in _RUNG0 if kept is data and on.type == device.type), None)


def speedrun(
    data: ImageData, device: str | torch.device, *, epochs: int | None = None, verbose: bool = True
) -> RungResult:
    """Train with the ladder's last rung for ``device`` (every lever on: not always the fastest variant, which lesson
    12 measures lever by lever) for ``epochs`` (by default `ladder_size`'s ``speedrun_epochs`` for the device).

    Example (on a GPU, with CIFAR-10 downloaded):
        >>> result = speedrun(load_cifar10(), "cuda")  # doctest: +SKIP
        >>> print(f"{sum(result.epoch_seconds):.1f} s, {result.test_acc:.1%}")  # doctest: +SKIP

    Taught in lesson 12.
    """
    device = checked_device(device, "cg.speedrun")
    size = ladder_size(device)
    epochs = checked_epochs(epochs, size.speedrun_epochs)
    result = run_rung(ladder(device)[-1], data, device, epochs=epochs, width=size.width)
    if verbose:
        print(
            f"speedrun on {device}: {epochs} epochs in {sum(result.epoch_seconds):.1f} s of training "
            f"({result.seconds_per_epoch:.2f} s/epoch), test accuracy {result.test_acc:.1%}"
        )
    return result


def run_without_levers(
    rung: Rung, data: ImageData, device: str | torch.device, *, epochs: int, width: int = 64
) -> list[RungResult]:
    """Train `without_levers` of ``rung`` (compile off, then mixed precision too), each profiled,
    and return their results: set beside ``rung``'s own, they show what each lever pays on its step. Empty where
    ``rung`` uses none (a CPU runtime skips the rungs that add them). Taught in lesson 12."""
    return [run_rung(v, data, device, epochs=epochs, width=width, profile=True) for v in without_levers(rung)]
