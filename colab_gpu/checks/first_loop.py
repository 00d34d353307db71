"""Check a learner's first training loop (lesson 03): where each batch goes, the order of a step's calls, what it
keeps, whether it learns, and how fast.

A CPU runtime hides the GPU bugs (nothing needs moving, a read costs nothing), so the loop runs first on PyTorch's
``meta`` device, where tensors have shapes but no data: mixing devices or reading a value fails there as it costs on
a GPU. The same run records the order of ``zero_grad``, ``backward`` and ``step`` in each step. Then it trains 50
batches from fresh weights beside ``cg.train_epoch`` on the same batches from the same weights, with objects made for
the check (a loop that reads the notebook's ``model`` or ``optimizer`` instead of its arguments trains nothing the
check can see).
"""

from __future__ import annotations

import copy
import itertools

import torch
from torch import nn

from ..hardware.device import checked_device
from ..train.steps import train_epoch
from .core import CheckResult, fail, forwards_of, that
from .timed import best_of


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

ORDER = "each step: optimizer.zero_grad(), loss.backward(), optimizer.step()"
ACCUMULATE = f"the gradients add up over the steps: call optimizer.zero_grad() before loss.backward() ({ORDER})."
GRAPH_KEPT = (
    "the losses you keep still hold their graphs (every step's activations stay in memory, lesson 09's leak): keep "
    "loss.detach()."
)


class _StepOrder:
    """Records "zero_grad", "backward" and "step" as the learner's loop calls them on ``model`` and ``optimizer``."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.events: list[str] = []
        first = next(model.parameters())
        first.register_post_accumulate_grad_hook(lambda _: self.events.append("backward"))
        for owner, name in ((optimizer, "step"), (optimizer, "zero_grad"), (model, "zero_grad")):
            setattr(owner, name, self._recording(getattr(owner, name), name))

    def _recording(self, method, name: str):
        def run(*args, **kwargs):
            self.events.append(name)
            return method(*args, **kwargs)

        return run

    def problem(self, steps: int) -> str | None:
        """The hint for the first step whose calls are missing or out of order, or None."""
        counts = {name: self.events.count(name) for name in ("zero_grad", "backward", "step")}
        if counts["backward"] == 0:
            return f"no gradient was computed: call loss.backward() on each batch's loss ({ORDER})."
        if counts["step"] == 0:
            return f"the weights never change: call optimizer.step() after loss.backward() ({ORDER})."
        if counts["step"] != steps or counts["backward"] != steps:
            return (
                f"{steps} batches gave {counts['backward']} backward() and {counts['step']} step() calls: one of each "
                f"per batch ({ORDER})."
            )
        since_step: list[str] = []
        for number, event in enumerate(self.events):
            if event != "step":
                since_step.append(event)
                continue
            if "backward" not in since_step:
                return (
                    "optimizer.step() comes before loss.backward(): step applies the gradients backward computes, "
                    f"so each step used the previous batch's ({ORDER})."
                )
            last_backward = len(since_step) - 1 - since_step[::-1].index("backward")
            if "zero_grad" in since_step[last_backward:]:
                return (
                    "zero_grad() comes between backward() and step(): it clears the gradients step needs, so the "
                    f"weights never move ({ORDER})."
                )
            first_step = "step" not in self.events[:number]
            if not first_step and "zero_grad" not in since_step[:last_backward]:
                return ACCUMULATE
            since_step = []
        return None


def _meta_dry_run(train_epoch_fn: object, model: nn.Module, batches: list) -> str | None:
    """Run the learner's epoch on the ``meta`` device; return a hint, or None when the loop is clean."""
    meta = torch.device("meta")
    meta_model = _fresh_copy(model, "cpu").to(meta)
    optimizer = torch.optim.Adam(meta_model.parameters(), lr=1e-3)
    order = _StepOrder(meta_model, optimizer)
    meta_model.eval()  # as after an evaluation: the loop must set training mode itself
    try:
        with forwards_of(meta_model) as forwards:
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
    if losses.requires_grad:
        return GRAPH_KEPT
    if not all(training for training, _ in forwards):
        return (
            "the model ran in eval mode: call model.train() at the start of the epoch (an evaluation switches it off)."
        )
    return order.problem(len(batches))


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


@torch.no_grad()
def _fixed_batch_loss(model: nn.Module, batch: tuple, device: torch.device) -> float:
    """The loss on ``batch`` in eval mode (no dropout noise); the model's mode is left as it was."""
    training = model.training
    model.eval()
    inputs, labels = (t.to(device) for t in batch)
    loss = nn.functional.cross_entropy(model(inputs), labels).item()
    model.train(training)
    return loss


TIMED_BATCHES = 50  # train_loop trains and times this many batches, the same ones for yours and the helper


def train_loop(
    train_epoch_fn: object, model: nn.Module, loader: object, device: str | torch.device, *, factor: float = 3.0
) -> CheckResult:
    """Check a learner's ``train_epoch_fn(model, loader, optimizer, device) -> losses`` (lesson 03).

    On the ``meta`` device: batches moved to ``device``, no value read per step, one detached loss per batch, the
    model in training mode, and each step's calls in order (zero_grad, backward, step). On ``device`` with a
    learning rate of 0: no gradients summed over steps. Then, from the same fresh weights on the same 50 batches,
    the learner's epoch and ``train_epoch``: finite losses, the weights moved, and the first batch's loss down by at
    least half as much as the helper's; then, both warm, three passes each (the best of three): at most ``factor``
    times the helper's time.
    """
    device = checked_device(device, "cg.checks.train_loop")
    if not callable(train_epoch_fn):
        return fail("define my_train_epoch(model, loader, optimizer, device) and rerun.")
    batches = list(itertools.islice(loader, TIMED_BATCHES))  # the same batches for both, no loader in the timing
    hint = _meta_dry_run(train_epoch_fn, model, batches[:3])
    if hint:
        return fail(hint)
    if _grads_accumulate(train_epoch_fn, model, batches[:3], device):
        return fail(ACCUMULATE)
    torch.manual_seed(0)
    start = _fresh_copy(model, device)
    yours, helper = copy.deepcopy(start), copy.deepcopy(start)
    your_optimizer = torch.optim.Adam(yours.parameters(), lr=1e-3)
    helper_optimizer = torch.optim.Adam(helper.parameters(), lr=1e-3)
    losses = train_epoch_fn(yours, batches, your_optimizer, device).cpu()
    if not torch.isfinite(losses).all():
        bad = losses[~torch.isfinite(losses)][:3].tolist()
        return fail(f"some losses are not finite ({bad}): print the first few, and the batch that gave them.")
    if all(torch.equal(s, y) for s, y in zip(start.parameters(), yours.parameters(), strict=True)):
        return fail(
            "the model passed in did not change: train the loop's own arguments (model, optimizer), not the "
            f"notebook's, with {ORDER}."
        )
    train_epoch(helper, batches, helper_optimizer, device, progress=False)
    before, mine, right = (_fixed_batch_loss(m, batches[0], device) for m in (start, yours, helper))
    learned = f"the first batch's loss {before:.3f} -> {mine:.3f} in {len(batches)} steps (cg.train_epoch: {right:.3f})"
    if right < before and before - mine < 0.5 * (before - right):
        return fail(
            f"{learned}, from the same weights on the same batches: yours learned less than half as much. "
            f"Check {ORDER}, each on this batch's loss."
        )
    seconds, busy = best_of(
        {  # .cpu() and train_epoch's one read wait for the GPU
            "yours": lambda: train_epoch_fn(yours, batches, your_optimizer, device).cpu(),
            "helper": lambda: train_epoch(helper, batches, helper_optimizer, device, progress=False),
        },
        repeat=3,
    )
    summary = f"{learned}; they took {seconds['yours']:.3f} s, cg.train_epoch {seconds['helper']:.3f} s on {device}."
    return that(
        seconds["yours"] <= factor * seconds["helper"],
        summary,
        f"{summary} Yours is more than {factor:g}x slower (best of 3): what in the loop waits?" + busy,
    )
