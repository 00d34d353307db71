"""What one training step holds in memory, part by part, measured on any device (lesson 15).

Lesson 14's formulas say what fine-tuning needs before anything is loaded; this measures the same parts on a real
step: the weights, the gradients and the optimizer's state are the storages of the tensors each holds (each storage
counted once, a sharded parameter by its local shard: what this process holds), and the activations are what autograd
kept for the backward pass at its peak (`activations.measure_activations`, which works on a CPU too). Their sum is an
upper bound of the step's peak: the activations are freed as the gradients appear. A GPU adds the CUDA context, the
allocator's reserve and the temporaries (lesson 07's ``measure_peak``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ..hardware.units import MIB
from ..train.activations import measure_activations
from .llm_memory import storage_bytes

PARTS = ("weights", "gradients", "optimizer state", "activations")


@dataclass(frozen=True)
class StepLedger:
    """Bytes of each part of one training step (`PARTS`), and the step's loss. Taught in lesson 15."""

    parts: dict[str, int]
    loss: float

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def __str__(self) -> str:
        parts = " + ".join(f"{name} {value / MIB:,.2f}" for name, value in self.parts.items())
        return f"{parts} = {self.total / MIB:,.2f} MiB"


def local_tensors(tensors: Iterable[torch.Tensor]) -> list[torch.Tensor]:
    """Each tensor as this process holds it: a sharded parameter (FSDP2's DTensor) as its local shard."""
    return [t.to_local() if hasattr(t, "to_local") else t for t in tensors]


def held_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes this process's storages of ``tensors`` occupy, each storage once (a view or a tied weight adds none)."""
    return storage_bytes(local_tensors(tensors))


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor an optimizer keeps between steps (Adam's two moments and its step counts, 8-bit AdamW's codes
    and scales, Adafactor's row and column factors)."""
    return [value for state in optimizer.state.values() for value in state.values() if isinstance(value, torch.Tensor)]


def step_ledger(
    model: nn.Module, optimizer: torch.optim.Optimizer, loss_of: Callable[[nn.Module], torch.Tensor]
) -> StepLedger:
    """Run one training step (``loss_of(model)``, backward, ``optimizer.step()``) and measure what it held, part by
    part; the gradients are zeroed after. ``loss_of`` computes the loss of a fixed batch. Taught in lesson 15.

    Example:
        >>> model = nn.Linear(256, 256, bias=False)
        >>> optimizer = torch.optim.AdamW(model.parameters())
        >>> ledger = step_ledger(model, optimizer, lambda m: m(torch.randn(8, 256)).square().mean())
        >>> ledger.parts["optimizer state"] == 2 * 256 * 256 * 4 + 4  # two fp32 moments and a step count
        True
    """
    if not isinstance(model, nn.Module) or not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"step_ledger(model, optimizer, loss_of) takes an nn.Module and a torch.optim optimizer, got "
            f"{type(model).__name__} and {type(optimizer).__name__}: pass the model you train and its optimizer."
        )
    with measure_activations(model) as saved:
        loss = loss_of(model)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or loss.grad_fn is None:
            raise ValueError(
                "loss_of(model) must return the loss of a batch: a one-number tensor computed from the model's "
                "trainable weights (as F.cross_entropy returns it)."
            )
        loss.backward()
    optimizer.step()
    parameters = list(model.parameters())
    parts = {
        "weights": held_bytes(parameters),
        "gradients": held_bytes(p.grad for p in parameters if p.grad is not None),
        "optimizer state": held_bytes(optimizer_state_tensors(optimizer)),
        "activations": saved.peak_bytes,
    }
    optimizer.zero_grad()
    return StepLedger(parts, loss.item())
