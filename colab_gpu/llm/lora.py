"""LoRA, low-rank adapters (lesson 14): fine-tune a large model by training two small matrices per layer.

A frozen ``nn.Linear`` of weight W (out x in) gets a trainable update B @ A, with A (rank x in) and B (out x rank):
``y = x W^T + (alpha / rank) x A^T B^T``. B starts at zero, so at step 0 the model computes exactly what it did,
and only rank x (in + out) numbers per layer train instead of in x out: gradients and Adam's moments shrink by the
same factor. The scale is alpha / rank so that changing the rank does not change the size of the update (nor the
learning rate that suits it). A and B are kept in fp32 whatever the base layer's dtype (master weights, lesson 06):
in fp16, Adam's ``eps=1e-8`` rounds to 0 and A's first gradient is 0 (B starts at zero), so the first step
computes 0/0. `merge_lora` folds B @ A into W for inference, at no cost per token. PEFT (``peft.LoraConfig``) is
the library that does this in practice, with fp32 adapters too; this is the same arithmetic, in plain PyTorch.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    """``base`` (frozen) plus a trainable low-rank update of ``rank``, scaled by ``alpha / rank``; A and B in fp32 on
    the base layer's device, cast to the input's dtype in ``forward``, which returns the base layer's dtype.
    Lesson 14."""

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
        self.scale = alpha / rank  # the update's size does not change with the rank
        factory = {"device": base.weight.device, "dtype": torch.float32}  # fp32 master weights, even on fp16 layers
        self.A = nn.Parameter(torch.empty(rank, base.in_features, **factory))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear initializes its weight (and PEFT, A)
        self.B = nn.Parameter(torch.zeros(base.out_features, rank, **factory))  # zero: step 0 changes nothing

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        update = x @ self.A.to(x.dtype).T @ self.B.to(x.dtype).T  # as autocast casts fp32 weights
        return out + (update * self.scale).to(out.dtype)

    def merged(self) -> nn.Linear:
        """An ``nn.Linear`` computing the same as this layer: W + (alpha / rank) B @ A in one weight."""
        return merged_linear(self)


def _is_lora(module: nn.Module) -> bool:
    """A LoRA layer as lesson 14 writes one: a frozen ``nn.Linear`` ``base``, tensors ``A`` and ``B``, a ``scale``."""
    parts = [getattr(module, name, None) for name in ("base", "A", "B")]
    return (
        isinstance(parts[0], nn.Linear)
        and all(isinstance(t, torch.Tensor) for t in parts[1:])
        and isinstance(getattr(module, "scale", None), (int, float))
    )


def merged_linear(layer: nn.Module) -> nn.Linear:
    """The ``nn.Linear`` that computes what a LoRA ``layer`` (``base``, ``A``, ``B``, ``scale``) computes:
    W + scale * B @ A, computed in fp32 and rounded once to the base layer's dtype."""
    base = layer.base
    merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None)
    merged = merged.to(device=base.weight.device, dtype=base.weight.dtype)
    with torch.no_grad():
        merged.weight.copy_(base.weight.float() + layer.scale * (layer.B.float() @ layer.A.float()))
        if base.bias is not None:
            merged.bias.copy_(base.bias)
    return merged.requires_grad_(False)


def add_lora(
    model: nn.Module,
    targets: tuple[str, ...] = ("q", "v"),
    rank: int = 8,
    alpha: float = 16.0,
    *,
    layer_class: type[nn.Module] = LoRALinear,
) -> int:
    """Freeze ``model`` and replace, in place, every ``nn.Linear`` whose attribute name is in ``targets`` (the
    attention's query and value projections, as the LoRA paper did) by ``layer_class(linear, rank, alpha)``: the
    package's `LoRALinear` or your own class of the same signature. Returns how many layers it replaced.
    Taught in lesson 14."""
    if isinstance(targets, str):  # ("down") is the string "down": the tuple needs its comma
        raise TypeError(
            f"targets={targets!r} is a string, so every layer named after one of its letters would match: give a "
            f"tuple or list of names, ({targets!r},) with its comma."
        )
    adapted = [name for name, module in model.named_modules() if _is_lora(module)]
    if adapted:  # a re-run cell: freezing again would freeze the adapters the first call added
        raise ValueError(
            f"the model has LoRA adapters already ({', '.join(adapted[:4])}{' ...' if len(adapted) > 4 else ''}): "
            "add_lora ran on it before (a cell run twice?). Build or load the model again, then call add_lora once."
        )
    model.requires_grad_(False)
    wrapped = 0
    for module in list(model.modules()):  # a list: the loop changes the model
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                setattr(module, name, layer_class(child, rank, alpha))
                wrapped += 1
    if not wrapped:
        names = sorted({n for m in model.modules() for n, c in m.named_children() if isinstance(c, nn.Linear)})
        raise ValueError(f"no nn.Linear named {list(targets)} in the model; its linear layers are named {names}.")
    if trainable_parameters(model) == 0:  # the learner's class kept A and B as plain tensors
        raise ValueError(
            f"{layer_class.__name__} replaced {wrapped} layer(s), but the model has nothing left to train: its A and "
            "B are not parameters. Wrap them in nn.Parameter (a tensor .to(...) of a Parameter is a plain tensor)."
        )
    return wrapped


def merge_lora(model: nn.Module) -> int:
    """Replace every LoRA layer in ``model`` (the package's `LoRALinear`, or yours: a module with a ``base``
    ``nn.Linear``, ``A``, ``B`` and ``scale``) by its merged ``nn.Linear``, for inference. Returns how many.
    Taught in lesson 14."""
    merged = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if _is_lora(child):
                setattr(module, name, merged_linear(child))
                merged += 1
    return merged


def trainable_parameters(model: nn.Module) -> int:
    """How many numbers an optimizer of ``model`` would update."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
