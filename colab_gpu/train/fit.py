"""`fit`: the training loop of lessons 03 onwards as one call, with evaluation, a history, mixed precision,
checkpoints that survive a disconnect and ``torch.compile``. Its steps are train.py's `train_epoch` and `evaluate`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torch import nn

from ..hardware.device import Batch, checked_device
from .checkpoint import load_checkpoint, save_checkpoint
from .compiling import compile_model
from .history import History
from .precision import Precision, make_scaler, require_scaler_fits, resolve_precision
from .steps import evaluate, train_epoch
from .train_checks import known_labels, label_range


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
    device = checked_device(device, "cg.fit")
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
    if runner is not model and verbose:
        for name, loader in (("training", train_loader), ("test", test_loader)):
            note = _last_batch_note(name, loader)
            if note:
                print(note)
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


def _last_batch_note(name: str, loader: object) -> str | None:
    """For a compiled run: the line that says a DataLoader's last batch is smaller, so torch.compile compiles one
    more graph for it (once, at its first epoch), and how to avoid it. None when every batch has the same size."""
    dataset, size = getattr(loader, "dataset", None), getattr(loader, "batch_size", None)
    if dataset is None or not size or getattr(loader, "drop_last", False) or len(dataset) % size == 0:
        return None
    return (
        f"compile: the {name} loader's last batch holds {len(dataset) % size} samples, not {size}: torch.compile "
        "compiles one more graph for it, once (drop_last=True, or torch.compile(model, dynamic=True), avoids it)."
    )
