"""The check of lesson 15's exercise: a training step made to fit a memory budget, measured with the step's ledger."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from ..hardware.units import MIB
from ..llm.ledger import step_ledger
from .core import CheckResult, fail, ok

#: What cuts each part of the ledger (lesson 15, section 2 and 3), for the part that is largest when a step is over.
LEVERS = {
    "activations": "checkpoint each block (section 2's Checkpointed): autograd then keeps each block's input only, "
    "and recomputes the rest during the backward pass",
    "optimizer state": "an optimizer that keeps less: torch.optim.Adafactor (factored second moment, no first "
    "moment) or bitsandbytes' AdamW8bit (8-bit moments), section 2",
    "gradients": "train fewer weights: freeze the model and train LoRA adapters (section 3)",
    "weights": "store the frozen weights in 4 bits and train LoRA adapters on them (QLoRA, section 3)",
}
SIXTEEN_BIT = (
    "the weights that train are {dtype}: pure 16-bit weights lose the small updates (lesson 06), and a T4 has no "
    "bf16. Keep them in fp32, which the optimizer updates, and save memory elsewhere (section 2)."
)


def _trained(answer: object) -> tuple[nn.Module, torch.optim.Optimizer] | str:
    """(model, optimizer) from ``fit_in_budget``'s answer, or the hint."""
    if not (isinstance(answer, tuple) and len(answer) == 2):
        return f"fit_in_budget(model) should return (model, optimizer); it returned a {type(answer).__name__}."
    model, optimizer = answer
    if not isinstance(model, nn.Module) or not isinstance(optimizer, torch.optim.Optimizer):
        return (
            f"fit_in_budget should return (model, optimizer): an nn.Module and a torch.optim optimizer; got "
            f"({type(model).__name__}, {type(optimizer).__name__})."
        )
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        return "no weight of the model requires a gradient any more: something must train."
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    if not any(id(p) in optimized for p in trainable):
        return "the optimizer holds none of the returned model's weights: build it from model.parameters()."
    sixteen = [p.dtype for p in trainable if p.dtype in (torch.float16, torch.bfloat16)]
    if sixteen:
        return SIXTEEN_BIT.format(dtype=str(sixteen[0]).replace("torch.", ""))
    return model, optimizer


def memory_budget(
    fit_in_budget: Callable[[nn.Module], tuple[nn.Module, torch.optim.Optimizer]],
    make_model: Callable[[], nn.Module],
    loss_of: Callable[[nn.Module], torch.Tensor],
    budget_mib: float,
    steps: int = 20,
) -> CheckResult:
    """Lesson 15's exercise: ``fit_in_budget(make_model())`` returns (model, optimizer) whose training step holds at
    most ``budget_mib`` MiB by the step's ledger (`colab_gpu.llm.ledger.step_ledger`, measured with ``loss_of``),
    computes the same loss as the model it was given, and still trains: over ``steps`` steps the loss falls below 80% of
    its first value. Taught in lesson 15."""
    torch.manual_seed(0)
    given = make_model()
    with torch.no_grad():
        expected = loss_of(copy.deepcopy(given)).item()  # the given model's loss, before any lever
    answer = _trained(fit_in_budget(given))
    if isinstance(answer, str):
        return fail(answer)
    model, optimizer = answer
    kept = {id(p) for p in model.parameters()}
    if not all(id(p) in kept for p in given.parameters()):
        return fail(
            "the returned model does not hold the weights of the model you were given: return that model, changed "
            "(wrapped blocks keep their weights); a new model would start from scratch, not fine-tune the given one."
        )
    ledger = step_ledger(model, optimizer, loss_of)
    if abs(ledger.loss - expected) > 1e-3 * max(1.0, abs(expected)):
        return fail(
            f"the first loss is {ledger.loss:.4f}, the given model's is {expected:.4f}: a lever that saves memory "
            "changes what is stored, not what is computed. Keep the same model and weights (checkpointing "
            "recomputes the same activations; an optimizer changes nothing before its first step)."
        )
    if ledger.total > budget_mib * MIB:
        largest = max(ledger.parts, key=ledger.parts.get)
        return fail(
            f"one step holds {ledger} over a budget of {budget_mib:g} MiB; the largest part is the {largest}: "
            f"{LEVERS[largest]}."
        )
    losses = [ledger.loss]
    for _ in range(steps - 1):
        loss = loss_of(model)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    if not losses[-1] < 0.8 * losses[0]:
        return fail(
            f"the step fits ({ledger.total / MIB:,.2f} MiB) but the model does not learn: loss {losses[0]:.3f} -> "
            f"{losses[-1]:.3f} in {steps} steps (it should fall below 80% of the first). Give the optimizer the "
            "model's weights and a learning rate that trains (section 2's optimizers train with their lr=)."
        )
    return ok(
        f"one step holds {ledger}, within {budget_mib:g} MiB, and the model trains: loss {losses[0]:.3f} -> "
        f"{losses[-1]:.3f} in {steps} steps."
    )
