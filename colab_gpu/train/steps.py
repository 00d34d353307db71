"""Training loops the lessons share: `train_step`, `train_epoch`, `evaluate`, `predict` (and fit.py's `fit`, built
on them).

Written for speed on a GPU:
- the loss and the correct count are summed on the device and read once per epoch (a
  ``.item()`` per step would stall the GPU every step). In fp32 and bf16 that is the epoch's
  only host-device synchronization, besides one read of the labels before the first step
  (checked against the model's outputs: `fit` reads the whole data set's once, where the loader
  keeps them in one place; `train_epoch` alone reads its first batch's). fp16 with a GradScaler
  adds one per step: ``scaler.step`` reads whether any gradient overflowed (``found_inf.item()``)
  to decide whether to skip the step, unless the optimizer is fused
  (``torch.optim.Adam(..., fused=True)``), which checks on the device;
- batches are copied with ``non_blocking=True``, asynchronous when the loader pins memory;
- hooks for later lessons: mixed precision, checkpoints, ``torch.compile`` (``fit(compile=True)``).

Batches are moved to ``device`` by these functions; the model must already be there (else a clear error).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext

import torch
from torch import nn

from ..hardware.device import Batch, checked_device
from .history import EpochStats
from .train_checks import check_batch, check_labels_fit, label_range, require_model_on_device


def _autocast(device: torch.device, dtype: torch.dtype | None):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def _progress(loader: Iterable, enabled: bool, desc: str):
    if not enabled:
        return loader
    from tqdm.auto import tqdm

    return tqdm(loader, desc=desc, leave=False)


def train_step(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    autocast_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    check_shapes: bool = True,
    max_norm: float | None = None,
    labels_seen: tuple[int, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimization step on a batch already on the model's device; return (loss, outputs).

    The loss stays a device tensor: reading it (``.item()``) is the caller's choice, and a
    synchronization. ``max_norm`` clips the gradients' total norm, after ``scaler.unscale_`` so
    that the true gradients are clipped (lesson 06). ``labels_seen``: the (lowest, highest) label
    (`label_range`), checked against the model's outputs before the loss (`check_labels_fit`).
    """
    loss_fn = loss_fn or nn.functional.cross_entropy
    with _autocast(inputs.device, autocast_dtype):
        outputs = model(inputs)
        if check_shapes:
            check_batch(outputs, labels)
        check_labels_fit(outputs.shape[-1], labels_seen)
        loss = loss_fn(outputs, labels)
    optimizer.zero_grad(set_to_none=True)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if max_norm is not None:
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return loss.detach(), outputs.detach()


def train_epoch(
    model: nn.Module,
    loader: Iterable[Batch],
    optimizer: torch.optim.Optimizer,
    device: str | torch.device,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    autocast_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    max_norm: float | None = None,
    progress: bool = True,
    labels_seen: tuple[int, int] | None = None,
    epoch: int | None = None,
) -> EpochStats:
    """Train ``model`` for one pass over ``loader``; return mean loss, accuracy, samples, seconds (lesson 03).

    ``scheduler``, when given, is stepped after every batch (schedules such as ``OneCycleLR``
    count optimizer steps, not epochs).

    Two checks cost no synchronization per step. Before the first step's loss, the labels are checked against
    the model's outputs: ``labels_seen`` (the whole data set's `label_range`, which `fit` reads once), else the
    first batch's. At the end, a NaN or infinite loss raises ``FloatingPointError`` naming the first bad batch
    (and ``epoch``, when given): training on would only spread the NaN through every weight.

    Example:
        >>> model = nn.Linear(4, 2)
        >>> batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
        >>> stats = train_epoch(model, batches, torch.optim.SGD(model.parameters(), 0.1), "cpu", progress=False)
        >>> stats.samples
        8
    """
    device = checked_device(device, "cg.train_epoch")
    require_model_on_device(model, device)
    model.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    samples = 0
    losses = []  # each step's loss, kept on the device: read only when the epoch's sum is not finite
    start = time.perf_counter()
    for step, (inputs, labels) in enumerate(_progress(loader, progress, "train")):
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        first = step == 0
        if first and labels_seen is None and loss_fn is None:
            labels_seen = label_range(labels)  # one read, before any GPU kernel can assert on a bad label
        loss, outputs = train_step(
            model,
            inputs,
            labels,
            optimizer,
            loss_fn=loss_fn,
            autocast_dtype=autocast_dtype,
            scaler=scaler,
            check_shapes=first,
            max_norm=max_norm,
            labels_seen=labels_seen if first and loss_fn is None else None,
        )
        if scheduler is not None:
            scheduler.step()
        # Summed on the device: no synchronization until the epoch ends.
        loss_sum += loss * labels.shape[0]
        correct += (outputs.argmax(dim=1) == labels).sum()
        samples += labels.shape[0]
        losses.append(loss)
    if samples == 0:
        raise ValueError("The training loader yielded no batches: is the data set empty?")
    total_loss, total_correct = loss_sum.item(), correct.item()  # the epoch's one synchronization
    if not math.isfinite(total_loss):  # a NaN or inf loss anywhere makes the sum NaN or inf
        _raise_nonfinite(losses, epoch)
    return EpochStats(total_loss / samples, total_correct / samples, samples, time.perf_counter() - start)


def _raise_nonfinite(losses: list[torch.Tensor], epoch: int | None) -> None:
    values = torch.stack(losses).float().tolist()
    batch = next(i for i, value in enumerate(values) if not math.isfinite(value))
    where = f"epoch {epoch}, batch {batch}" if epoch is not None else f"batch {batch} of this epoch"
    raise FloatingPointError(
        f"The training loss became {values[batch]} at {where} (counting from 0). The usual causes: inputs or labels "
        "that contain NaN or inf (check torch.isfinite(inputs).all() on your data), a learning rate too high, or "
        "float16 without a GradScaler (lesson 06). The model's weights may hold NaN now: fix the cause, then "
        "rebuild the model or reload a checkpoint."
    )


def evaluate(
    model: nn.Module,
    loader: Iterable[Batch],
    device: str | torch.device,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> EpochStats:
    """Mean loss and accuracy of ``model`` on ``loader``, in eval mode without autograd. Taught in lesson 04."""
    device = checked_device(device, "cg.evaluate")
    require_model_on_device(model, device)
    loss_fn = loss_fn or nn.functional.cross_entropy
    model.eval()  # dropout off, batch norm uses its running statistics
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    samples = 0
    start = time.perf_counter()
    with torch.inference_mode():  # no graph is recorded: faster and lighter than no_grad
        for inputs, labels in loader:
            inputs = inputs.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with _autocast(device, autocast_dtype):
                outputs = model(inputs)
                check_batch(outputs, labels)
                loss_sum += loss_fn(outputs, labels).float() * labels.shape[0]
            correct += (outputs.argmax(dim=1) == labels).sum()
            samples += labels.shape[0]
    if samples == 0:
        raise ValueError("The evaluation loader yielded no batches: is the data set empty?")
    total_loss, total_correct = loss_sum.item(), correct.item()
    return EpochStats(total_loss / samples, total_correct / samples, samples, time.perf_counter() - start)


def predict(model: nn.Module, loader: Iterable[Batch], device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted classes and true labels for every sample of ``loader``, on the CPU, in order. Taught in lesson 04."""
    device = checked_device(device, "cg.predict")
    require_model_on_device(model, device)
    model.eval()
    predictions, truths = [], []
    with torch.inference_mode():
        for inputs, labels in loader:
            predictions.append(model(inputs.to(device, non_blocking=True)).argmax(dim=1))
            truths.append(labels)
    if not predictions:
        raise ValueError("predict got a loader with no batches: is the data set empty?")
    return torch.cat(predictions).cpu(), torch.cat(truths).cpu()
