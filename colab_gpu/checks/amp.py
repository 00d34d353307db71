"""The check of lesson 06's AMP training step: float16 autocast, GradScaler and gradient clipping, run beside the
right step with a scale so large that the first steps overflow, each call of the scaler and the optimizer logged."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..hardware.device import checked_device
from ..train.steps import train_step
from .core import CheckResult, fail, that


def _amp_step_reference(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    max_norm: float,
) -> None:
    train_step(model, inputs, labels, optimizer, autocast_dtype=torch.float16, scaler=scaler, max_norm=max_norm)


AMP_HINTS = (
    (
        ("already been called", "after step()"),
        "call scaler.update() at the end of every step: it resets the scaler for the next one (and adapts the scale).",
    ),
    (("unscale_() missing",), "scaler.unscale_(optimizer): it takes the optimizer whose gradients it unscales."),
)
ZERO_GRAD_LATE = (
    "zero_grad() between backward and the step erases the gradients: call it before the forward pass (or right "
    "after the step)."
)
RAISED_IN = {  # the scaler method a step's error came from (the last one it called): what to fix
    "unscale_": "scaler.unscale_(optimizer): it takes the optimizer whose gradients it unscales.",
    "update": "scaler.update() takes nothing: it adapts the scale by itself.",
}


# A large first scale: the first steps' scaled fp16 gradients overflow, and the right step skips them (halving the
# scale each time) before it trains. A step that never scales, or that steps the optimizer itself, then shows.
AMP_CHECK_SCALE = 2.0**22
AMP_CHECK_STEPS = 6


class _LoggedScaler(torch.amp.GradScaler):
    """A GradScaler that logs which of its methods a step calls, in order (the check's hints read it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[str] = []
        self.stepping = False  # inside step(): the optimizer.step() it calls is the scaler's, not the learner's

    def scale(self, outputs):
        self.log.append("scale")
        return super().scale(outputs)

    def unscale_(self, optimizer):
        self.log.append("unscale_")
        return super().unscale_(optimizer)

    def step(self, optimizer, *args, **kwargs):
        self.log.append("scaler.step")
        self.stepping = True
        try:
            return super().step(optimizer, *args, **kwargs)
        finally:
            self.stepping = False

    def update(self, new_scale=None):
        self.log.append("update")
        return super().update(new_scale)


def _logged_optimizer(optimizer: torch.optim.Optimizer, scaler: _LoggedScaler) -> torch.optim.Optimizer:
    """``optimizer`` with its step() and zero_grad() logged in ``scaler``'s log (a step() the scaler makes is not)."""
    step, zero_grad = optimizer.step, optimizer.zero_grad

    def logged_step(*args, **kwargs):
        if not scaler.stepping:
            scaler.log.append("optimizer.step")
        return step(*args, **kwargs)

    def logged_zero_grad(*args, **kwargs):
        scaler.log.append("zero_grad")
        return zero_grad(*args, **kwargs)

    optimizer.step, optimizer.zero_grad = logged_step, logged_zero_grad
    return optimizer


def _order_problem(log: list[str]) -> str | None:
    """The hint for one step's calls in a wrong order or number, else None."""
    if "scale" not in log:
        return (
            "your step never scales the loss: scaler.scale(loss).backward(). Without it small fp16 gradients "
            "underflow to 0, and the scaler cannot skip a step whose gradients overflowed."
        )
    if "optimizer.step" in log:
        return (
            "step through the scaler, scaler.step(optimizer), not optimizer.step(): it skips a step whose "
            "gradients overflowed (inf or NaN), which optimizer.step() would apply."
        )
    return ZERO_GRAD_LATE if _zero_grad_late(log) else None


def _step_problem(log: list[str], formats: list[torch.dtype], returned: object) -> str | None:
    """The hint for one of the learner's steps: its calls (``log``), the format its first layer computed in, and
    what it returned; else None."""
    if formats and formats[-1] != torch.float16:
        found = str(formats[-1]).removeprefix("torch.")
        return (
            f"the forward pass ran in {found}: run it inside torch.autocast(device.type, dtype=torch.float16), the "
            "format the GradScaler is for (a T4 has no fast bf16)."
        )
    problem = _order_problem(log)
    if problem:
        return problem
    if log.count("scaler.step") > 1:
        return "one scaler.step(optimizer) per training step: yours steps more than once."
    if not isinstance(returned, torch.Tensor) or returned.ndim != 0 or not returned.is_floating_point():
        return f"return the step's loss, a one-number tensor (loss.detach()); yours returned {type(returned).__name__}."
    if returned.requires_grad:
        return "the loss you return still holds its graph (the step's activations stay alive): return loss.detach()."
    return None


def _error_hint(err: Exception, log: list[str]) -> str:
    """The hint for an error the learner's step raised, from the scaler calls it made before."""
    if "already been called" in str(err) and log.count("unscale_") > 1:
        return "call scaler.unscale_(optimizer) once per step, after backward and before clipping."
    raised_in = log[-1] if log and isinstance(err, (TypeError, AttributeError)) else None
    hint = ZERO_GRAD_LATE if _zero_grad_late(log) else RAISED_IN.get(raised_in)
    hint = hint or next((h for keys, h in AMP_HINTS if any(k in str(err) for k in keys)), None)
    first_line = (str(err).splitlines() or [""])[0]
    return hint or f"your step raised {type(err).__name__}: {first_line}"


def _zero_grad_late(log: list[str]) -> bool:
    """Whether the step cleared the gradients after scaling the loss (after backward), before stepping."""
    return "scale" in log and "zero_grad" in log[log.index("scale") :]


def amp_step(step: object, device: str | torch.device, *, max_norm: float = 0.1) -> CheckResult:
    """Check a learner's ``step(model, inputs, labels, optimizer, scaler, max_norm)`` (lesson 06): float16 autocast,
    GradScaler and gradient clipping, run for `AMP_CHECK_STEPS` steps on this runtime beside the right step, from
    the same weights and batches, with a first scale so large that the first steps overflow and must be skipped.
    The weights must move alike (within 5% of the right step's change); the hints read which scaler and optimizer
    methods the step called, in which order."""
    device = checked_device(device, "cg.checks.amp_step")
    if not callable(step):
        return fail("define amp_step(model, inputs, labels, optimizer, scaler, max_norm) and rerun.")
    torch.manual_seed(0)
    start = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    shape = (32, 64)
    batches = [
        (torch.randn(shape, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(AMP_CHECK_STEPS)
    ]
    moved = {}
    for name, fn in (("yours", step), ("right", _amp_step_reference)):
        model = copy.deepcopy(start)
        scaler = _LoggedScaler(device.type, init_scale=AMP_CHECK_SCALE)
        optimizer = _logged_optimizer(torch.optim.SGD(model.parameters(), lr=0.1), scaler)
        log, formats = scaler.log, []
        model[0].register_forward_hook(lambda _module, _inputs, output, seen=formats: seen.append(output.dtype))
        try:
            for inputs, labels in batches:
                log.clear()
                returned = fn(model, inputs, labels, optimizer, scaler, max_norm)
                problem = _step_problem(log, formats, returned) if name == "yours" else None
                if problem:
                    return fail(problem)
        except Exception as err:  # the learner's step: any error is a hint, never a crash of the cell
            return fail(_error_hint(err, log))
        moved[name] = torch.cat(
            [(p - q).flatten() for p, q in zip(model.parameters(), start.parameters(), strict=True)]
        ).detach()
    if not torch.isfinite(moved["yours"]).all():
        return fail("your weights became inf or NaN: step through the scaler, scaler.step(optimizer), once per step.")
    change = moved["yours"].norm().item() / moved["right"].norm().item()
    difference = (moved["yours"] - moved["right"]).norm().item() / moved["right"].norm().item()
    summary = f"after {AMP_CHECK_STEPS} steps your weights moved {change:.2f}x as far as the right step's on {device}"
    if change < 0.1:
        return fail(
            f"{summary}: far less. Is clip_grad_norm_ comparing the *scaled* gradients with "
            "max_norm? Call scaler.unscale_(optimizer) before clipping."
        )
    if change > 1.5:
        return fail(f"{summary}: more. Clip the gradients (after scaler.unscale_) so no step exceeds max_norm.")
    return that(
        difference < 0.05,
        f"{summary}, {difference:.1e} apart.",
        f"{summary}, but {difference:.0%} apart: compare your step with section 4's, line by line.",
    )
