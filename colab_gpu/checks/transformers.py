"""Checks of lesson 14's exercise: a LoRA linear layer written by the learner, measured on this runtime."""

from __future__ import annotations

import torch
from torch import nn

from ..llm_memory import storage_bytes
from .core import CheckResult, fail, ok


def _adam_moment_bytes(model: nn.Module, inputs: torch.Tensor) -> int:
    # One Adam step on what trains: its two moments are allocated for every trainable number.
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model(inputs).square().mean().backward()
    optimizer.step()
    return storage_bytes(t for state in optimizer.state.values() for k, t in state.items() if k != "step")


def _problem(layer_class: type, rank: int, alpha: float) -> str | None:
    """What is wrong with ``layer_class`` on a small layer, or None."""
    torch.manual_seed(0)
    base = nn.Linear(32, 24)
    x = torch.randn(5, 32)
    layer = layer_class(base, rank, alpha)
    A, B = getattr(layer, "A", None), getattr(layer, "B", None)
    if not isinstance(A, nn.Parameter) or not isinstance(B, nn.Parameter):
        return "give the layer two nn.Parameter attributes, self.A and self.B."
    if any(p.requires_grad for p in base.parameters()):
        return "the base layer still trains: freeze it (base.requires_grad_(False)) so only A and B learn."
    if A.shape != (rank, 32) or B.shape != (24, rank):
        return (
            f"A should be (rank, in) = ({rank}, 32) and B (out, rank) = (24, {rank}); "
            f"got A {tuple(A.shape)} and B {tuple(B.shape)}."
        )
    trainable = sum(p.numel() for p in layer.parameters() if p.requires_grad)
    if trainable != rank * (32 + 24):
        return f"{trainable} numbers train; LoRA trains rank x (in + out) = {rank * (32 + 24)}: only A and B."
    if not torch.allclose(layer(x), base(x), atol=1e-6):
        return "at step 0 the output differs from the base layer's: start B at zero (A random), so B @ A = 0."
    with torch.no_grad():
        A.normal_(), B.normal_()
    expected = base(x) + (alpha / rank) * (x @ A.T @ B.T)
    if not torch.allclose(layer(x), expected, rtol=1e-4, atol=1e-4):
        return (
            "with trained A and B the output should be base(x) + (alpha / rank) * x @ A.T @ B.T: "
            "check the order and the scale."
        )
    layer(x).sum().backward()
    if A.grad is None or B.grad is None:
        return "A and B get no gradient: use them in forward, without .detach() or torch.no_grad()."
    half = layer_class(nn.Linear(32, 24).to(torch.bfloat16), rank, alpha)  # a layer of a model loaded in 16 bits
    if {half.A.dtype, half.B.dtype} != {torch.bfloat16}:
        return (
            "on a 16-bit layer (a model loaded in fp16 or bf16) A and B must be 16-bit too: create them with "
            "dtype=base.weight.dtype, as well as device=base.weight.device."
        )
    elsewhere = layer_class(nn.Linear(32, 24, device="meta"), rank, alpha)  # "meta": a device other than the CPU
    if {elsewhere.A.device.type, elsewhere.B.device.type} != {"meta"}:
        return (
            "A and B must be created on the base layer's device (device=base.weight.device): on a GPU, adapters "
            "left on the CPU make forward fail."
        )
    return None


def lora_linear(
    layer_class: object, device: str | torch.device = "cpu", *, rank: int = 8, alpha: float = 16.0
) -> CheckResult:
    """Check a learner's ``layer_class(base, rank, alpha)``: the frozen ``base`` nn.Linear plus a trainable
    ``self.B @ self.A`` scaled by ``alpha / rank``, B starting at zero. Then measure what it saves on ``device``:
    trainable numbers and Adam's memory against full fine-tuning of a 2048 x 2048 projection (a 1B model's).
    Taught in lesson 14."""
    if not isinstance(layer_class, type):
        return fail(f"pass your class (LoRALinear, not LoRALinear(...)), got {type(layer_class).__name__}.")
    try:
        problem = _problem(layer_class, 4, 8.0)
    except Exception as err:  # the learner's code: any error is a hint, not a crash of the notebook
        return fail(f"your layer raised {type(err).__name__}: {err}")
    if problem:
        return fail(problem)
    device = torch.device(device)
    torch.manual_seed(0)
    inputs = torch.randn(16, 2048, device=device)
    full = nn.Linear(2048, 2048, bias=False).to(device)
    full_bytes = _adam_moment_bytes(full, inputs)
    adapted = layer_class(nn.Linear(2048, 2048, bias=False).to(device), rank, alpha)  # the adapters on its device
    lora_bytes = _adam_moment_bytes(adapted, inputs)
    trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    return ok(
        f"rank {rank} on a 2048 x 2048 projection trains {trainable:,} of {2048 * 2048:,} numbers "
        f"({trainable / 2048**2:.1%}); Adam keeps {lora_bytes / 2**20:.2f} MiB instead of {full_bytes / 2**20:.0f} "
        f"MiB ({full_bytes / lora_bytes:.0f}x less) on {device}."
    )
