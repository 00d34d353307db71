"""Checks of training exercises: the precision rule, a first loop, an AMP step, a frozen backbone (lessons 03, 06,
13)."""

from __future__ import annotations

import copy
import itertools

import torch
from torch import nn

from ..capability import COURSE_GPUS, GpuCapability
from ..train import train_epoch
from .core import CheckResult, fail, ok, that
from .timed import best_of


def _precision_cases() -> dict[str, tuple[tuple[int, int], str]]:
    """Each course GPU's compute capability and the format the course's rule (capability.py) gives it."""
    return {name: (cc, GpuCapability(name, cc).precision()[0]) for name, cc in COURSE_GPUS.items()}


def precision_rule(rule: object) -> CheckResult:
    """Check a function ``rule(major, minor) -> "bf16" | "fp16" | "fp32"`` on the GPUs learners meet.

    Taught in lesson 06.
    """
    if not callable(rule):
        return fail("define a function precision_for(major, minor) that returns 'bf16', 'fp16' or 'fp32'.")
    cases = _precision_cases()
    for gpu, ((major, minor), expected) in cases.items():
        try:
            answer = rule(major, minor)
        except Exception as err:  # a learner's bug: show it as a hint, do not crash the notebook
            return fail(f"precision_for({major}, {minor}) raised {type(err).__name__}: {err}")
        if answer != expected:
            return fail(f"precision_for({major}, {minor}) (a {gpu}) returned {answer!r}; expected {expected!r}.")
    return ok(f"right for all {len(cases)} GPUs ({', '.join(cases)}).")


def _fresh_copy(model: nn.Module, device: str | torch.device) -> nn.Module:
    """A copy of ``model`` with newly initialized weights, on ``device`` (training starts from scratch)."""
    clone = copy.deepcopy(model)
    for module in clone.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return clone.to(device)


META_HINTS = (
    (
        ("not on the expected device", "same device"),
        "move each batch to `device` inside the loop: on a GPU "
        "runtime the model's weights are there, the loader's batches "
        "are not.",
    ),
    (
        ("item() cannot be called", "Cannot copy out of meta", "no data", "__format__"),
        "the loop reads a value (.item(), float(), .cpu(), a format): each read makes the CPU wait for the GPU. "
        "Keep the losses as tensors on the device (loss.detach()) and return torch.stack(losses): the caller "
        "reads them once.",
    ),
)


def _meta_dry_run(train_epoch_fn: object, model: nn.Module, batches: list) -> str | None:
    """Run the learner's epoch on the ``meta`` device, where tensors have shapes but no data: mixing devices or
    reading a value fails there as it costs on a GPU. Return a hint, or None when the loop is clean."""
    meta = torch.device("meta")
    meta_model = _fresh_copy(model, "cpu").to(meta)
    optimizer = torch.optim.Adam(meta_model.parameters(), lr=1e-3)
    try:
        losses = train_epoch_fn(meta_model, batches, optimizer, meta)
    except (RuntimeError, NotImplementedError, TypeError) as err:  # TypeError: an f-string of a meta tensor
        hint = next((h for keys, h in META_HINTS if any(k in str(err) for k in keys)), None)
        return hint or f"the loop raised {type(err).__name__}: {str(err).splitlines()[0]}"
    if not isinstance(losses, torch.Tensor) or losses.shape != (len(batches),):
        return (
            f"return the batch losses as one tensor with one loss per batch (torch.stack(losses)); for "
            f"{len(batches)} batches you returned {type(losses).__name__}"
            f"{'' if not isinstance(losses, torch.Tensor) else ' of shape ' + str(tuple(losses.shape))}."
        )
    return None


def _grads_accumulate(train_epoch_fn: object, model: nn.Module, batches: list, device: torch.device) -> bool:
    """With a learning rate of 0 the weights stay put, so after the epoch each gradient must be the last batch's
    alone (or cleared): a sum over the batches means ``zero_grad`` is missing."""
    model = _fresh_copy(model, device)
    train_epoch_fn(model, batches, torch.optim.SGD(model.parameters(), lr=0.0), device)
    left = [p.grad for p in model.parameters()]
    if all(g is None or not g.any() for g in left):
        return False
    model.zero_grad(set_to_none=True)
    inputs, labels = (t.to(device) for t in batches[-1])
    nn.functional.cross_entropy(model(inputs), labels).backward()
    return not all(
        g is not None and torch.allclose(g, p.grad, rtol=1e-3, atol=1e-6)
        for g, p in zip(left, model.parameters(), strict=True)
    )


TIMED_BATCHES = 50  # train_loop times this many batches, three times each way


def train_loop(
    train_epoch_fn: object, model: nn.Module, loader: object, device: str | torch.device, *, factor: float = 3.0
) -> CheckResult:
    """Check a learner's ``train_epoch_fn(model, loader, optimizer, device) -> losses`` (lesson 03).

    First on the ``meta`` device (shapes, no data): batches must be moved to ``device``, no value read per step, one
    loss per batch returned. Then on ``device`` with a learning rate of 0: ``zero_grad`` every step. Then one real
    epoch from fresh weights on this runtime: the loss must fall; then, both warm, the time of three passes
    over the same 50 batches (the best of three) must be at most ``factor`` times ``train_epoch``'s.
    """
    if not callable(train_epoch_fn):
        return fail("define my_train_epoch(model, loader, optimizer, device) and rerun.")
    device = torch.device(device)
    batches = list(itertools.islice(loader, 3))  # enough for the dry run and the zero_grad test
    hint = _meta_dry_run(train_epoch_fn, model, batches)
    if hint:
        return fail(hint)
    if _grads_accumulate(train_epoch_fn, model, batches, device):
        return fail(
            "the gradients add up over the steps: call optimizer.zero_grad() before loss.backward() in every step."
        )
    torch.manual_seed(0)
    yours = _fresh_copy(model, device)
    your_optimizer = torch.optim.Adam(yours.parameters(), lr=1e-3)
    losses = train_epoch_fn(yours, loader, your_optimizer, device).cpu()  # the first epoch: does it learn?
    first, last = losses[0].item(), losses[-5:].mean().item()
    if not last < first:
        return fail(
            f"the loss did not fall ({first:.3f} -> {last:.3f} in {len(losses)} steps). "
            "Is optimizer.step() called every step?"
        )
    helper = _fresh_copy(model, device)
    helper_optimizer = torch.optim.Adam(helper.parameters(), lr=1e-3)
    timed = list(itertools.islice(loader, TIMED_BATCHES))  # the same batches for both, no loader in the timing
    train_epoch(helper, timed, helper_optimizer, device, progress=False)  # both warm now
    seconds, busy = best_of(
        {  # .cpu() and train_epoch's one read wait for the GPU
            "yours": lambda: train_epoch_fn(yours, timed, your_optimizer, device).cpu(),
            "helper": lambda: train_epoch(helper, timed, helper_optimizer, device, progress=False),
        },
        repeat=3,
    )
    summary = (
        f"loss {first:.3f} -> {last:.3f} in {len(losses)} steps; {len(timed)} steps took "
        f"{seconds['yours']:.3f} s, cg.train_epoch {seconds['helper']:.3f} s on {device} (best of 3)."
    )
    return that(
        seconds["yours"] <= factor * seconds["helper"],
        summary,
        f"{summary} Yours is more than {factor:g}x slower: what in the loop waits?" + busy,
    )
