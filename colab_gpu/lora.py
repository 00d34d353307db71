"""LoRA, low-rank adapters (lesson 14): fine-tune a large model by training two small matrices per layer.

A frozen ``nn.Linear`` of weight W (out x in) gets a trainable update B @ A, with A (rank x in) and B (out x rank):
``y = x W^T + (alpha / rank) x A^T B^T``. B starts at zero, so at step 0 the model computes exactly what it did,
and only rank x (in + out) numbers per layer train instead of in x out: gradients and Adam's moments shrink by the
same factor. `merge_lora` folds B @ A into W for inference, at no cost per token. PEFT (``peft.LoraConfig``) is the
library that does this in practice; this is the same arithmetic, in plain PyTorch.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    """``base`` (frozen) plus a trainable low-rank update of ``rank``, scaled by ``alpha / rank``. Lesson 14."""

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}.")
        if not 1 <= rank <= min(base.in_features, base.out_features):
            raise ValueError(
                f"rank must be between 1 and min(in, out) = {min(base.in_features, base.out_features)} for this "
                f"layer, got {rank}: LoRA's point is a rank far below that (8 or 16)."
            )
        self.base = base.requires_grad_(False)
        self.scale = alpha / rank
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.A = nn.Parameter(torch.empty(rank, base.in_features, **factory))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear initializes its weight (and PEFT, A)
        self.B = nn.Parameter(torch.zeros(base.out_features, rank, **factory))  # zero: step 0 changes nothing

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.A.T @ self.B.T) * self.scale

    def merged(self) -> nn.Linear:
        """An ``nn.Linear`` computing the same as this layer: W + (alpha / rank) B @ A in one weight."""
        layer = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        layer = layer.to(device=self.base.weight.device, dtype=self.base.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(self.base.weight + self.scale * (self.B @ self.A))
            if self.base.bias is not None:
                layer.bias.copy_(self.base.bias)
        return layer.requires_grad_(False)


def add_lora(model: nn.Module, targets: tuple[str, ...] = ("q", "v"), rank: int = 8, alpha: float = 16.0) -> int:
    """Freeze ``model`` and wrap every ``nn.Linear`` whose attribute name is in ``targets`` (the attention's query
    and value projections, as the LoRA paper did) in a `LoRALinear`. Returns how many layers it wrapped.
    Taught in lesson 14."""
    model.requires_grad_(False)
    wrapped = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, LoRALinear(child, rank, alpha))
                wrapped += 1
    if not wrapped:
        names = sorted({n for m in model.modules() for n, c in m.named_children() if isinstance(c, nn.Linear)})
        raise ValueError(f"no nn.Linear named {list(targets)} in the model; its linear layers are named {names}.")
    return wrapped


def merge_lora(model: nn.Module) -> int:
    """Replace every `LoRALinear` in ``model`` by its merged ``nn.Linear`` (for inference). Returns how many.
    Taught in lesson 14."""
    merged = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, LoRALinear):
                setattr(module, name, child.merged())
                merged += 1
    return merged


def trainable_parameters(model: nn.Module) -> int:
    """How many numbers an optimizer of ``model`` would update."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
