"""What the training loops check before they compute (lesson 03): the model on the device asked for, outputs and
labels of matching shapes, class labels the model has outputs for. Each check raises the error that says what was
asked, what was found and the fix, instead of the error PyTorch gives later (on a GPU, "device-side assert
triggered", which needs a runtime restart).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ..hardware.device import same_device


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


def check_batch(outputs: torch.Tensor, labels: torch.Tensor) -> None:
    """Raise a clear error unless outputs are (batch, classes) and labels (batch,)."""
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
