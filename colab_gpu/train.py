"""Training loops the lessons share: `train_epoch`, `evaluate` and `fit`.

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
import os
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_checkpoint, save_checkpoint
from .compiling import compile_model
from .device import Batch, same_device
from .history import EpochStats, History
from .precision import Precision, make_scaler, require_scaler_fits, resolve_precision


def require_model_on_device(model: nn.Module, device: str | torch.device) -> None:
    """Raise a clear error when the model's parameters are not on ``device`` (``cg.fit`` calls it; lesson 03)."""
    device = torch.device(device)
    found = {p.device for p in model.parameters()}
    wrong = {d for d in found if not same_device(d, device)}
    if wrong:
        raise ValueError(
            f"The model's parameters are on {', '.join(sorted(map(str, found)))} but training was asked to run "
            f"on {device}. Call model.to({str(device)!r}) before creating the optimizer."
        )


def _check_batch(outputs: torch.Tensor, labels: torch.Tensor) -> None:
    if labels.ndim != 1 or outputs.ndim != 2 or outputs.shape[0] != labels.shape[0]:
        raise ValueError(
            f"Expected model outputs of shape (batch, classes) and labels of shape (batch,), got outputs "
            f"{tuple(outputs.shape)} and labels {tuple(labels.shape)}. Flatten the labels with labels.view(-1) "
            "or check the model's last layer."
        )


#: cross_entropy's default ignore_index: a label that marks "no target" (padding), not a class.
IGNORED_LABEL = -100


def label_range(labels: torch.Tensor) -> tuple[int, int] | None:
    """(lowest, highest) class label in ``labels``, leaving out ``IGNORED_LABEL``; None without class labels.

    Reads the values: on a GPU one synchronization, so `fit` calls it once, not per batch.
    """
    labels = torch.as_tensor(labels)
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool or labels.numel() == 0:
        return None  # probabilities or soft targets: not class indices
    labels = labels[labels != IGNORED_LABEL]
    if labels.numel() == 0:
        return None
    low, high = torch.aminmax(labels.long())
    return int(low), int(high)


def known_labels(loader: Iterable) -> torch.Tensor | None:
    """Every label of ``loader``'s data set where it keeps them in one place, else None.

    A `DeviceLoader`'s ``labels``, a ``TensorDataset``'s second tensor, a torchvision data set's ``targets``.
    """
    labels = getattr(loader, "labels", None)
    dataset = getattr(loader, "dataset", None)
    if labels is None and dataset is not None:
        labels = getattr(dataset, "targets", None)
        if labels is None and isinstance(dataset, torch.utils.data.TensorDataset) and len(dataset.tensors) > 1:
            labels = dataset.tensors[1]
    if labels is None:
        return None
    try:
        return torch.as_tensor(labels)
    except (TypeError, ValueError, RuntimeError):  # targets of another kind (boxes, strings): not checked
        return None


def check_labels_fit(classes: int, labels: tuple[int, int] | None, where: str = "the labels") -> None:
    """Raise a clear error when class labels fall outside the model's ``classes`` outputs.

    Cross-entropy with such a label fails with "IndexError: Target 99 is out of bounds" on a CPU, and on a GPU
    with "CUDA error: device-side assert triggered", which leaves the runtime unusable until a restart.
    """
    if labels is None:
        return
    low, high = labels
    if low < 0 or high >= classes:
        raise ValueError(
            f"{where[0].upper()}{where[1:]} go from {low} to {high}, but the model outputs {classes} classes, so "
            f"cross-entropy needs labels from 0 to {classes - 1}. Make the last layer output {high + 1} classes "
            f"(e.g. nn.Linear(..., {high + 1})), or map the labels to 0..{classes - 1} (labels that start at 1: "
            "subtract 1). Checked before the first step: on a GPU this is 'CUDA error: device-side assert "
            "triggered', which needs a runtime restart."
        )


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
            _check_batch(outputs, labels)
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
    device = torch.device(device)
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
    device = torch.device(device)
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
                _check_batch(outputs, labels)
                loss_sum += loss_fn(outputs, labels).float() * labels.shape[0]
            correct += (outputs.argmax(dim=1) == labels).sum()
            samples += labels.shape[0]
    if samples == 0:
        raise ValueError("The evaluation loader yielded no batches: is the data set empty?")
    total_loss, total_correct = loss_sum.item(), correct.item()
    return EpochStats(total_loss / samples, total_correct / samples, samples, time.perf_counter() - start)


def fit(
    model: nn.Module,
    train_loader: Iterable[Batch],
    test_loader: Iterable[Batch] | None,
    optimizer: torch.optim.Optimizer,
    device: str | torch.device,
    *,
    epochs: int,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    precision: Precision | str | None = None,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    scheduler_step: str = "epoch",
    max_norm: float | None = None,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = True,
    progress: bool = True,
    verbose: bool = True,
    compile: bool = False,
) -> History:
    """Train for ``epochs`` epochs, evaluating after each; return the `History`. Taught in lesson 03.

    Args:
        model: already on ``device``.
        train_loader, test_loader: yield ``(inputs, labels)``; batches are moved to ``device``.
            ``test_loader`` may be None (no evaluation).
        optimizer: built from ``model``'s parameters.
        device: where to compute.
        epochs: number of passes over ``train_loader``.
        loss_fn: defaults to cross-entropy.
        precision: ``"fp32"`` (default), ``"bf16"``, ``"fp16"``, ``"auto"`` (by hardware, see
            `choose_precision`) or a `Precision`. fp16 on a GPU gets a GradScaler unless ``scaler``
            is given.
        scaler: a GradScaler to use (and to save in checkpoints); fp16 only.
        scheduler: a learning-rate scheduler, saved in checkpoints.
        scheduler_step: ``"epoch"`` (default) steps it after each epoch; ``"batch"`` after every
            optimizer step, as ``OneCycleLR(total_steps=epochs * len(train_loader))`` expects.
        max_norm: clip the gradients to this total norm every step (after unscaling in fp16).
        on_epoch_end: called as ``on_epoch_end(epoch, row)`` after each epoch (and its checkpoint).
        checkpoint: a file to write the full training state to after every epoch (atomically:
            see `save_checkpoint`); on Colab put it on Google Drive.
        resume: when ``checkpoint`` exists, continue from it (same final weights as an
            uninterrupted run) instead of starting over. ``epochs`` is the total, not the remainder.
        progress: show a tqdm progress bar per epoch.
        verbose: print one line per epoch.
        compile: train and evaluate through ``torch.compile(model)`` (lesson 11), or in eager mode with a
            one-line reason where this runtime cannot compile (`compile_model`). Checkpoints hold ``model``'s keys.

    Example:
        >>> model = nn.Linear(4, 2)
        >>> batches = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))]
        >>> h = fit(model, batches, None, torch.optim.SGD(model.parameters(), 0.1), "cpu", epochs=2,
        ...         progress=False, verbose=False)
        >>> len(h)
        2
    """
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}.")
    if scheduler_step not in ("epoch", "batch"):
        raise ValueError(f"scheduler_step must be 'epoch' or 'batch', got {scheduler_step!r}.")
    batch_scheduler = scheduler if scheduler_step == "batch" else None
    precision = resolve_precision(precision, device)
    require_scaler_fits(precision, scaler)
    scaler = scaler or make_scaler(precision, device)
    autocast_dtype = precision.dtype
    history = History()
    runner = compile_model(model, device) if compile else model  # shares model's parameters
    loader_generator = getattr(train_loader, "generator", None)
    first_epoch = 1
    if checkpoint is not None and resume and Path(checkpoint).exists():
        saved = load_checkpoint(
            checkpoint, model, optimizer, scaler=scaler, scheduler=scheduler, loader_generator=loader_generator
        )
        history.rows = list(saved["history"])
        first_epoch = saved["epoch"] + 1
        if verbose:
            print(f"resumed from {checkpoint} after epoch {saved['epoch']}")
    # Every label of the data set, read once (where the loader keeps them in one place), so that the first step
    # can check them against the model's outputs; else train_epoch checks each epoch's first batch.
    labels = known_labels(train_loader) if loss_fn is None else None
    labels_seen = label_range(labels) if labels is not None else None
    for epoch in range(first_epoch, epochs + 1):
        train = train_epoch(
            runner,
            train_loader,
            optimizer,
            device,
            loss_fn=loss_fn,
            autocast_dtype=autocast_dtype,
            scaler=scaler,
            scheduler=batch_scheduler,
            max_norm=max_norm,
            progress=progress,
            labels_seen=labels_seen,
            epoch=epoch,
        )
        if scheduler is not None and batch_scheduler is None:
            scheduler.step()
        row = {
            "epoch": epoch,
            "precision": precision.name,
            "train_loss": train.loss,
            "train_acc": train.accuracy,
            "seconds": train.seconds,
            "samples_per_s": train.samples_per_s,
        }
        if test_loader is not None:
            test = evaluate(runner, test_loader, device, loss_fn=loss_fn, autocast_dtype=autocast_dtype)
            row.update(test_loss=test.loss, test_acc=test.accuracy)
        history.rows.append(row)
        if checkpoint is not None:
            save_checkpoint(
                checkpoint,
                model,
                optimizer,
                epoch=epoch,
                scaler=scaler,
                scheduler=scheduler,
                history=history.rows,
                loader_generator=loader_generator,
            )
        if verbose:
            tested = f", test loss {row['test_loss']:.3f}, test acc {row['test_acc']:.1%}" if test_loader else ""
            print(
                f"epoch {epoch}/{epochs}: train loss {train.loss:.3f}, train acc {train.accuracy:.1%}{tested}, "
                f"{train.seconds:.2f} s ({train.samples_per_s:,.0f} samples/s)"
            )
        if on_epoch_end is not None:
            on_epoch_end(epoch, row)
    return history


def predict(model: nn.Module, loader: Iterable[Batch], device: str | torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Predicted classes and true labels for every sample of ``loader``, on the CPU, in order. Taught in lesson 04."""
    device = torch.device(device)
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
