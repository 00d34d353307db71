"""Checks of lesson 14's exercise: a LoRA linear layer written by the learner, measured on this runtime."""

from __future__ import annotations

import torch
from torch import nn

from ..hardware.device import checked_device
from ..llm.ledger import optimizer_state_tensors
from ..llm.llm_memory import storage_bytes
from .core import CheckResult, fail, ok

NOT_A_PARAMETER = (
    "self.{name} is a plain tensor, not an nn.Parameter of the layer, so no optimizer sees it. "
    ".to() on an nn.Parameter returns a plain tensor: pass device=/dtype= when you create it, "
    "nn.Parameter(torch.zeros(..., device=base.weight.device, dtype=torch.float32))."
)
FP16_NAN = (
    "after one AdamW step on an fp16 layer, A or B is not finite: in fp16 Adam's eps=1e-8 rounds to 0, and A's "
    "first gradient is 0 (B starts at zero), so its update is 0/0 = NaN. Keep A and B in fp32, as master weights "
    "(lesson 06; PEFT does the same): create them with dtype=torch.float32 on the base layer's device, and cast "
    "them to x.dtype in forward."
)


def _adam_state_bytes(model: nn.Module, inputs: torch.Tensor) -> int:
    # One Adam step on what trains: its two moments (and a step count) are allocated for every trainable tensor.
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model(inputs).float().square().mean().backward()
    optimizer.step()
    return storage_bytes(optimizer_state_tensors(optimizer))


def _adapters(layer: object) -> tuple[nn.Parameter, nn.Parameter] | str:
    """(A, B) when they are parameters of ``layer``; otherwise the hint."""
    if not isinstance(layer, nn.Module):
        return "make your class an nn.Module (class MyLoRALinear(nn.Module)), calling super().__init__() first."
    A, B = getattr(layer, "A", None), getattr(layer, "B", None)
    if not isinstance(A, torch.Tensor) or not isinstance(B, torch.Tensor):
        return "give the layer two nn.Parameter attributes, self.A and self.B."
    registered = [p for p in layer.parameters()]
    for name, tensor in (("A", A), ("B", B)):
        if not isinstance(tensor, nn.Parameter) or not any(p is tensor for p in registered):
            return NOT_A_PARAMETER.format(name=name)
    return A, B


def _seeded(layer_class: type, base: nn.Linear, rank: int, alpha: float) -> bool:
    """Whether a new layer's A comes from the random generator: the same seed gives the same A, another seed another.
    What torch.empty leaves in memory can look random, but follows no seed."""
    starts = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        starts.append(_adapters(layer_class(base, rank, alpha))[0].detach().clone())
    return torch.equal(starts[0], starts[1]) and not torch.equal(starts[0], starts[2])


def _problem(layer_class: type, rank: int, alpha: float) -> str | None:
    """What is wrong with ``layer_class`` on small fp32 layers (a CPU's, a "meta" device's), or None."""
    torch.manual_seed(0)
    base = nn.Linear(32, 24)
    x = torch.randn(5, 32)
    layer = layer_class(base, rank, alpha)
    adapters = _adapters(layer)
    if isinstance(adapters, str):
        return adapters
    A, B = adapters
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
    layer.eval()  # the same output every call, also with dropout on the adapters' input
    with torch.no_grad():
        if not torch.allclose(layer(x), base(x), atol=1e-6):
            return "at step 0 the output differs from the base layer's: start B at zero (A random), so B @ A = 0."
        if not A.abs().sum() > 0:
            return (
                "A starts at zero: with A and B both zero, neither gets a gradient (each one's goes through the "
                "other) and the layer never trains. Start A random (nn.init.kaiming_uniform_(self.A, "
                "a=math.sqrt(5))) and B at zero."
            )
        if not (A.isfinite().all() and A.abs().max() <= 10 and A.float().std() > 1e-6) or not _seeded(
            layer_class, base, rank, alpha
        ):
            return (
                "A holds what torch.empty left in memory, not a random start: initialize it "
                "(nn.init.kaiming_uniform_(self.A, a=math.sqrt(5)), as nn.Linear does its weight)."
            )
        A.normal_(), B.normal_()
        expected = base(x) + (alpha / rank) * (x @ A.to(x.dtype).T @ B.to(x.dtype).T)
        if not torch.allclose(layer(x), expected, rtol=1e-4, atol=1e-4):
            return (
                "with trained A and B the output should be base(x) + (alpha / rank) * x @ A.T @ B.T: "
                "check the order and the scale."
            )
    if getattr(layer, "scale", None) != alpha / rank:
        return "keep the scale as an attribute, self.scale = alpha / rank: merging (cg.merge_lora) reads it."
    layer.train()
    layer(x).sum().backward()
    if A.grad is None or B.grad is None:
        return "A and B get no gradient: use them in forward, without .detach() or torch.no_grad()."
    elsewhere = layer_class(nn.Linear(32, 24, device="meta"), rank, alpha)  # "meta": a device other than the CPU
    adapters = _adapters(elsewhere)
    if isinstance(adapters, str):
        return adapters
    if {t.device.type for t in adapters} != {"meta"}:
        return (
            "A and B must be created on the base layer's device (device=base.weight.device): on a GPU, adapters "
            "left on the CPU make forward fail."
        )
    return _half_problem(layer_class, rank, alpha)


def _half_problem(layer_class: type, rank: int, alpha: float) -> str | None:
    """What is wrong with ``layer_class`` on an fp16 layer (a model loaded in fp16, as on a T4), or None."""
    torch.manual_seed(0)
    base = nn.Linear(32, 24).to(torch.float16)
    x = torch.randn(5, 32, dtype=torch.float16)
    layer = layer_class(base, rank, alpha)
    adapters = _adapters(layer)
    if isinstance(adapters, str):
        return adapters
    A, B = adapters
    if not {A.dtype, B.dtype} <= {torch.float32, torch.float16}:
        return (
            f"on an fp16 layer A and B are {A.dtype} and {B.dtype}: keep them in fp32 (master weights), "
            "dtype=torch.float32."
        )
    layer.eval()
    with torch.no_grad():
        A.normal_(), B.normal_()
        try:
            out = layer(x)
        except RuntimeError as err:
            return (
                f"on an fp16 layer (a model loaded in fp16) your forward raised: {err}. Cast A and B to the "
                "input's dtype in forward (self.A.to(x.dtype)), as autocast casts fp32 weights."
            )
        if out.dtype != torch.float16:
            return (
                f"for an fp16 input your layer returns {out.dtype}: return the base layer's dtype (cast the update "
                f"to x.dtype before adding it), or every layer after this one computes in {out.dtype}."
            )
        wide = x.float()
        expected = nn.functional.linear(wide, base.weight.float(), base.bias.float())
        expected = expected + (alpha / rank) * (wide @ A.float().T @ B.float().T)
        if not torch.allclose(out.float(), expected, rtol=1e-2, atol=1e-2 * expected.abs().max().item()):
            return (
                "on an fp16 layer the output should be base(x) + (alpha / rank) * x @ A.T @ B.T too, rounded to "
                "fp16: check what forward casts."
            )
    torch.manual_seed(0)
    fresh = layer_class(nn.Linear(32, 24).to(torch.float16), rank, alpha)  # B at zero again: a first step
    A, B = _adapters(fresh)
    optimizer = torch.optim.AdamW([A, B], lr=1e-3)
    fresh(x).float().square().mean().backward()
    optimizer.step()
    with torch.no_grad():
        if not (A.isfinite().all() and B.isfinite().all() and fresh(x).isfinite().all()):
            return FP16_NAN
    return None


def lora_linear(
    layer_class: object, device: str | torch.device = "cpu", *, rank: int = 8, alpha: float = 16.0
) -> CheckResult:
    """Check a learner's ``layer_class(base, rank, alpha)``: the frozen ``base`` nn.Linear plus a trainable
    ``self.B @ self.A`` scaled by ``self.scale = alpha / rank``, B starting at zero, A and B parameters in fp32
    (or the base's dtype) on the base's device, an fp16 layer returning fp16 and surviving an AdamW step. Then
    measure what it saves on ``device``: trainable numbers and Adam's memory against full fine-tuning of a
    2048 x 2048 projection (a 1B model's). Taught in lesson 14."""
    device = checked_device(device, "cg.checks.lora_linear")
    if not isinstance(layer_class, type):
        return fail(f"pass your class (LoRALinear, not LoRALinear(...)), got {type(layer_class).__name__}.")
    try:  # the learner's code, every step of it: any error is a hint, not a crash of the notebook
        problem = _problem(layer_class, 4, 8.0)
        if problem:
            return fail(problem)
        torch.manual_seed(0)
        inputs = torch.randn(16, 2048, device=device)
        full = nn.Linear(2048, 2048, bias=False, device=device)
        full_bytes = _adam_state_bytes(full, inputs)
        adapted = layer_class(nn.Linear(2048, 2048, bias=False, device=device), rank, alpha)  # on its device
        lora_bytes = _adam_state_bytes(adapted, inputs)
    except Exception as err:
        return fail(f"your layer raised {type(err).__name__}: {err}")
    trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    return ok(
        f"rank {rank} on a 2048 x 2048 projection trains {trainable:,} of {2048 * 2048:,} numbers "
        f"({trainable / 2048**2:.1%}); Adam keeps {lora_bytes / 2**20:.2f} MiB instead of {full_bytes / 2**20:.0f} "
        f"MiB ({full_bytes / lora_bytes:.0f}x less) on {device}, and an fp16 layer trains with AdamW."
    )
